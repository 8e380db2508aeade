package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/topology"
)

// Codes of the quarantine commands.
const (
	codeQuarantineNotFound = "cli.quarantine.not_found"
	codeQuarantineSource   = "cli.quarantine.source_unknown"
)

// scanVisibility hides the messages a scan has seen, so that the next
// receive returns others; the scan makes them visible again at its end.
const scanVisibility = 60

// SQSAPI is the part of *sqs.Client the quarantine commands use.
type SQSAPI interface {
	GetQueueUrl(ctx context.Context, params *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, params *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, params *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, params *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	GetQueueAttributes(ctx context.Context, params *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// quarantined is one message on the quarantine queue (ids and codes only:
// the body is never printed).
type quarantined struct {
	QuarantineID string `json:"quarantine_id"`
	MessageID    string `json:"message_id"`
	Code         string `json:"code"`
	Source       string `json:"source"`
	SentMS       int64  `json:"sent_ms"`
	BodySHA256   string `json:"body_sha256"`

	body, receipt string
}

// quarantineQueues are the URLs the commands use.
type quarantineQueues struct {
	quarantine string
	sources    map[string]string // Logical name -> URL
}

// resolveQueues finds the queue URLs of the deployment (deploymentPrefix):
// without --prefix the functions' variables, when set, else the topology
// names of the prefix the variables agree on.
func (c *cli) resolveQueues(ctx context.Context, q SQSAPI) (quarantineQueues, error) {
	prefix, err := c.deploymentPrefix(true)
	if err != nil {
		return quarantineQueues{}, err
	}
	topo := topology.New(prefix)
	out := quarantineQueues{sources: map[string]string{}}
	if out.quarantine, err = c.queueURL(ctx, q, contract.EnvQuarantineQueueURL, topo.Quarantine.Name); err != nil {
		return out, err
	}
	for _, src := range []struct{ env, logical, name string }{
		{contract.EnvPollQueueURL, topo.PollQueue.Logical, topo.PollQueue.Name},
		{contract.EnvReleaseQueueURL, topo.RelQueue.Logical, topo.RelQueue.Name},
	} {
		if out.sources[src.logical], err = c.queueURL(ctx, q, src.env, src.name); err != nil {
			return out, err
		}
	}
	return out, nil
}

// queueURL is the URL of a queue of the deployment: without --prefix the
// function's variable envName when set, else GetQueueUrl of queueName.
func (c *cli) queueURL(ctx context.Context, q SQSAPI, envName, queueName string) (string, error) {
	if c.prefix == "" && envName != "" {
		if v := strings.TrimSpace(c.getenv(envName)); v != "" {
			return v, nil
		}
	}
	res, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(queueName)})
	if err != nil {
		return "", core.Wrap(codeRuntime, true, fmt.Errorf("queue %s: %w", queueName, err))
	}
	return aws.ToString(res.QueueUrl), nil
}

// scanQuarantine receives every message of the quarantine queue
// (scanQueue: hidden while the scan runs; the caller settles or unhides
// them).
func scanQuarantine(ctx context.Context, q SQSAPI, url string) ([]quarantined, scanResult, error) {
	res, err := scanQueue(ctx, q, url, []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp})
	out := make([]quarantined, 0, len(res.messages))
	for _, m := range res.messages {
		sent, _ := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
		out = append(out, quarantined{
			QuarantineID: aws.ToString(m.MessageId), MessageID: attr(m, quarantine.AttrMessageID), Code: attr(m, quarantine.AttrCode),
			Source: attr(m, quarantine.AttrSource), SentMS: sent, BodySHA256: core.SHA256Hex([]byte(aws.ToString(m.Body))),
			body: aws.ToString(m.Body), receipt: aws.ToString(m.ReceiptHandle),
		})
	}
	return out, res, err
}

func attr(m types.Message, name string) string {
	if v, ok := m.MessageAttributes[name]; ok {
		return aws.ToString(v.StringValue)
	}
	return ""
}

// unhide makes the messages visible again.
func unhide(ctx context.Context, q SQSAPI, url string, msgs []quarantined) error {
	held := make([]heldMessage, len(msgs))
	for i, m := range msgs {
		held[i] = heldMessage{id: m.QuarantineID, receipt: m.receipt}
	}
	return unhideHeld(ctx, q, url, held)
}

// heldMessage is a message a scan keeps hidden: its id (for the error)
// and its receipt handle.
type heldMessage struct{ id, receipt string }

// unhideHeld makes the messages visible again; the ids of those that stay
// hidden (for scanVisibility) are in the error.
func unhideHeld(ctx context.Context, q SQSAPI, url string, msgs []heldMessage) error {
	var errs []string
	for _, m := range msgs {
		if _, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(url), ReceiptHandle: aws.String(m.receipt), VisibilityTimeout: 0,
		}); err != nil {
			errs = append(errs, m.id)
		}
	}
	if len(errs) > 0 {
		return core.Wrap(codeRuntime, true, fmt.Errorf("messages stay hidden for %d s: %s", scanVisibility, strings.Join(errs, ", ")))
	}
	return nil
}

// newSQSAPI returns the SQS client of the quarantine commands (tests
// replace it).
var newSQSAPI = func(ctx context.Context) (SQSAPI, error) {
	cfg, err := loadAWSFromContext(ctx)
	if err != nil {
		return nil, err
	}
	return awsclient.SQS(cfg), nil
}

// scanView is what a queue command's JSON says about its scan: how many
// messages it saw and whether it saw them all.
type scanView struct {
	Seen     int  `json:"seen"`
	Complete bool `json:"complete"`
	// Remaining is the queue's last ApproximateNumberOfMessages of an
	// incomplete scan (0 when complete).
	Remaining int `json:"remaining"`
	Receives  int `json:"receives"`
}

func viewOf(r scanResult) scanView {
	return scanView{Seen: len(r.messages), Complete: r.complete, Remaining: r.remaining, Receives: r.receives}
}

// scanLine is the text report of a scan.
func scanLine(r scanResult) string {
	if r.complete {
		return fmt.Sprintf("scanned %d receives: the queue reports no other visible message", r.receives)
	}
	return fmt.Sprintf("scan INCOMPLETE after %d receives: the queue still reports %d visible messages", r.receives, r.remaining)
}

// errorView is one failure in a JSON report.
type errorView struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}

func errorViews(errs []error) []errorView {
	out := []errorView{}
	for _, err := range errs {
		out = append(out, errorView{Code: firstNonEmpty(core.CodeOf(err), codeRuntime), Error: err.Error()})
	}
	return out
}

// quarantineListView is `quarantine list --json`.
type quarantineListView struct {
	scanView
	Messages []quarantined `json:"messages"`
}

// quarantineList prints the quarantined messages: ids, code, source and
// the body's hash (never the body), and how many the scan saw.
func (c *cli) quarantineList(ctx context.Context) error {
	q, err := newSQSAPI(ctx)
	if err != nil {
		return err
	}
	urls, err := c.resolveQueues(ctx, q)
	if err != nil {
		return err
	}
	msgs, scan, err := scanQuarantine(ctx, q, urls.quarantine)
	relErr := unhide(ctx, q, urls.quarantine, msgs)
	if err != nil {
		return err
	}
	failure := firstError(scan.incomplete(urls.quarantine), relErr)
	if c.jsonOut {
		if err := c.printJSON(quarantineListView{scanView: viewOf(scan), Messages: msgs}); err != nil {
			return err
		}
		return jsonReported(failure)
	}
	w := c.table()
	fmt.Fprintln(w, "MESSAGE_ID\tCODE\tSOURCE\tQUARANTINED\tQUARANTINE_ID")
	for _, m := range msgs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", dash(m.MessageID), dash(m.Code), dash(m.Source), ts(m.SentMS), m.QuarantineID)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%d quarantined (%s)\n", len(msgs), scanLine(scan))
	return failure
}

// replayedView is one message `quarantine replay` sent back.
type replayedView struct {
	QuarantineID string `json:"quarantine_id"`
	MessageID    string `json:"message_id"`
	Code         string `json:"code"`
	Source       string `json:"source"`
}

// quarantineReplayView is `quarantine replay --json`.
type quarantineReplayView struct {
	scanView
	Replayed []replayedView `json:"replayed"`
	// NotFound are the ids asked for that a complete scan did not see.
	NotFound []string    `json:"not_found"`
	Errors   []errorView `json:"errors"`
}

// quarantineReplay sends the selected messages (by message id or
// quarantine id; every one with --all) back to their source queue and
// deletes them from the quarantine queue. An id the scan did not see is
// not found only when the scan was complete.
func (c *cli) quarantineReplay(ctx context.Context, ids []string) error {
	q, err := newSQSAPI(ctx)
	if err != nil {
		return err
	}
	urls, err := c.resolveQueues(ctx, q)
	if err != nil {
		return err
	}
	msgs, scan, err := scanQuarantine(ctx, q, urls.quarantine)
	if err != nil {
		_ = unhide(ctx, q, urls.quarantine, msgs)
		return err
	}
	var keep []quarantined
	found := map[string]bool{}
	view := quarantineReplayView{scanView: viewOf(scan), Replayed: []replayedView{}, NotFound: []string{}}
	var failures []error
	for _, m := range msgs {
		if !c.all && !slices.Contains(ids, m.MessageID) && !slices.Contains(ids, m.QuarantineID) {
			keep = append(keep, m)
			continue
		}
		found[m.MessageID], found[m.QuarantineID] = true, true
		target, ok := urls.sources[m.Source]
		if !ok {
			keep = append(keep, m)
			failures = append(failures, core.Wrap(codeQuarantineSource, false, fmt.Errorf("%s: source %q is not a localeflow queue", m.QuarantineID, m.Source)))
			continue
		}
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(target), MessageBody: aws.String(m.body)}); err != nil {
			keep = append(keep, m)
			failures = append(failures, core.Wrap(codeRuntime, true, fmt.Errorf("replay %s: %w", m.QuarantineID, err)))
			continue
		}
		if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(urls.quarantine), ReceiptHandle: aws.String(m.receipt)}); err != nil {
			failures = append(failures, core.Wrap(codeRuntime, true, fmt.Errorf("replayed %s but could not delete it: %w", m.QuarantineID, err)))
		}
		view.Replayed = append(view.Replayed, replayedView{QuarantineID: m.QuarantineID, MessageID: m.MessageID, Code: m.Code, Source: m.Source})
		if !c.jsonOut {
			fmt.Fprintf(c.out, "replayed %s (%s) to %s\n", dash(m.MessageID), m.Code, m.Source)
		}
	}
	if err := unhide(ctx, q, urls.quarantine, keep); err != nil {
		failures = append(failures, err)
	}
	missing := 0
	for _, id := range ids {
		if found[id] {
			continue
		}
		missing++
		if scan.complete {
			view.NotFound = append(view.NotFound, id)
			failures = append(failures, core.Wrap(codeQuarantineNotFound, false, fmt.Errorf("%s is not on the quarantine queue", id)))
		}
	}
	if err := scan.incomplete(urls.quarantine); err != nil && (c.all || missing > 0) {
		// The messages the scan did not reach may be among those asked for.
		failures = append(failures, err)
	}
	view.Errors = errorViews(failures)
	failure := firstError(failures...)
	if c.jsonOut {
		if err := c.printJSON(view); err != nil {
			return err
		}
		return jsonReported(failure)
	}
	fmt.Fprintf(c.out, "%d replayed of %d seen (%s)\n", len(view.Replayed), len(msgs), scanLine(scan))
	return failure
}

// firstError is the first non-nil error.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
