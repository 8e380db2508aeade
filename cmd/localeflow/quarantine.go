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

// quarantineRounds bounds one scan (10 messages per receive).
const quarantineRounds = 100

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

// resolveQueues finds the queue URLs: the environment variables of the
// functions, or the topology names of --prefix.
func (c *cli) resolveQueues(ctx context.Context, q SQSAPI) (quarantineQueues, error) {
	topo := topology.New(firstNonEmpty(c.prefix, topology.DefaultPrefix))
	out := quarantineQueues{sources: map[string]string{}}
	lookup := func(envName, queueName string) (string, error) {
		if c.prefix == "" {
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
	var err error
	if out.quarantine, err = lookup(contract.EnvQuarantineQueueURL, topo.Quarantine.Name); err != nil {
		return out, err
	}
	for _, src := range []struct{ env, logical, name string }{
		{contract.EnvPollQueueURL, topo.PollQueue.Logical, topo.PollQueue.Name},
		{contract.EnvReleaseQueueURL, topo.RelQueue.Logical, topo.RelQueue.Name},
	} {
		if out.sources[src.logical], err = lookup(src.env, src.name); err != nil {
			return out, err
		}
	}
	return out, nil
}

// scanQuarantine receives every message of the quarantine queue (hiding
// each for scanVisibility seconds while the scan runs) and hands them to
// done, which must settle them; whatever done leaves is made visible again.
func scanQuarantine(ctx context.Context, q SQSAPI, url string) ([]quarantined, error) {
	var out []quarantined
	seen := map[string]bool{}
	for range quarantineRounds {
		res, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: scanVisibility,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameSentTimestamp},
		})
		if err != nil {
			return out, core.Wrap(codeRuntime, true, fmt.Errorf("receive quarantine: %w", err))
		}
		fresh := 0
		for _, m := range res.Messages {
			id := aws.ToString(m.MessageId)
			if seen[id] {
				continue
			}
			seen[id], fresh = true, fresh+1
			sent, _ := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
			out = append(out, quarantined{
				QuarantineID: id, MessageID: attr(m, quarantine.AttrMessageID), Code: attr(m, quarantine.AttrCode),
				Source: attr(m, quarantine.AttrSource), SentMS: sent, BodySHA256: core.SHA256Hex([]byte(aws.ToString(m.Body))),
				body: aws.ToString(m.Body), receipt: aws.ToString(m.ReceiptHandle),
			})
		}
		if fresh == 0 {
			break
		}
	}
	return out, nil
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

// quarantineList prints the quarantined messages: ids, code, source and
// the body's hash (never the body).
func (c *cli) quarantineList(ctx context.Context) error {
	q, err := newSQSAPI(ctx)
	if err != nil {
		return err
	}
	urls, err := c.resolveQueues(ctx, q)
	if err != nil {
		return err
	}
	msgs, err := scanQuarantine(ctx, q, urls.quarantine)
	relErr := unhide(ctx, q, urls.quarantine, msgs)
	if err != nil {
		return err
	}
	if c.jsonOut {
		if msgs == nil {
			msgs = []quarantined{}
		}
		if err := c.printJSON(msgs); err != nil {
			return err
		}
		return relErr
	}
	w := c.table()
	fmt.Fprintln(w, "MESSAGE_ID\tCODE\tSOURCE\tQUARANTINED\tQUARANTINE_ID")
	for _, m := range msgs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", dash(m.MessageID), dash(m.Code), dash(m.Source), ts(m.SentMS), m.QuarantineID)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%d quarantined\n", len(msgs))
	return relErr
}

// quarantineReplay sends the selected messages (by message id or
// quarantine id; every one with --all) back to their source queue and
// deletes them from the quarantine queue.
func (c *cli) quarantineReplay(ctx context.Context, ids []string) error {
	q, err := newSQSAPI(ctx)
	if err != nil {
		return err
	}
	urls, err := c.resolveQueues(ctx, q)
	if err != nil {
		return err
	}
	msgs, err := scanQuarantine(ctx, q, urls.quarantine)
	if err != nil {
		_ = unhide(ctx, q, urls.quarantine, msgs)
		return err
	}
	var keep []quarantined
	replayed, found := 0, map[string]bool{}
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
		replayed++
		fmt.Fprintf(c.out, "replayed %s (%s) to %s\n", dash(m.MessageID), m.Code, m.Source)
	}
	if err := unhide(ctx, q, urls.quarantine, keep); err != nil {
		failures = append(failures, err)
	}
	fmt.Fprintf(c.out, "%d replayed\n", replayed)
	for _, id := range ids {
		if !found[id] {
			failures = append(failures, core.Wrap(codeQuarantineNotFound, false, fmt.Errorf("%s is not on the quarantine queue", id)))
		}
	}
	if len(failures) > 0 {
		return failures[0]
	}
	return nil
}
