package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/topology"
)

// Codes of the dlq commands.
const (
	// codeDLQTarget: an event DLQ message names a target that is not a
	// queue of this deployment or one of its functions; it is kept.
	codeDLQTarget = "cli.dlq.target_unknown"
)

// EventBridge's attributes on a message it sends to a target's DLQ.
const (
	ebAttrRule      = "RULE_ARN"
	ebAttrTarget    = "TARGET_ARN"
	ebAttrErrorCode = "ERROR_CODE"
)

// dlqNames are the QUEUE arguments of `localeflow dlq`.
var dlqNames = []string{"poll", "release", "event"}

// dlqMessage is one message of a dead-letter queue: ids, counts, codes and
// the body's hash (never the body).
type dlqMessage struct {
	MessageID  string `json:"message_id"`
	SentMS     int64  `json:"sent_ms"`
	Receives   int    `json:"receives"`
	DetailType string `json:"detail_type,omitempty"`
	BusEventID string `json:"bus_event_id,omitempty"`
	EventID    string `json:"event_id,omitempty"`
	Rule       string `json:"rule,omitempty"`
	Target     string `json:"target,omitempty"`
	ErrorCode  string `json:"error_code,omitempty"`
	BodySHA256 string `json:"body_sha256"`

	body, receipt string
}

// dlqQueues are the URLs one dlq command uses: the DLQ, and the queues a
// message may go back to (by queue name).
type dlqQueues struct {
	dlq string
	// back is the source queue of the poll and release DLQs ("" for the
	// event DLQ: each message names its own target).
	back string
	// byName are this deployment's work queues (name → URL).
	byName map[string]string
	// functions are this deployment's function names (schedule targets).
	functions map[string]bool
}

// resolveDLQ finds the queues of `dlq QUEUE` of the deployment
// (deploymentPrefix): the DLQs by their topology names, the work queues
// from the functions' variables without --prefix (when set), else by name.
func (c *cli) resolveDLQ(ctx context.Context, q SQSAPI, name string) (dlqQueues, error) {
	prefix, err := c.deploymentPrefix(true)
	if err != nil {
		return dlqQueues{}, err
	}
	topo := topology.New(prefix)
	out := dlqQueues{byName: map[string]string{}, functions: map[string]bool{}}
	for _, fn := range topo.Functions {
		out.functions[fn.Name] = true
	}
	for _, wq := range []struct {
		env string
		q   topology.Queue
	}{{contract.EnvPollQueueURL, topo.PollQueue}, {contract.EnvReleaseQueueURL, topo.RelQueue}} {
		if out.byName[wq.q.Name], err = c.queueURL(ctx, q, wq.env, wq.q.Name); err != nil {
			return out, err
		}
	}
	switch name {
	case "poll":
		out.back = out.byName[topo.PollQueue.Name]
		out.dlq, err = c.queueURL(ctx, q, "", topo.PollQueue.DLQName)
	case "release":
		out.back = out.byName[topo.RelQueue.Name]
		out.dlq, err = c.queueURL(ctx, q, "", topo.RelQueue.DLQName)
	default:
		out.dlq, err = c.queueURL(ctx, q, "", topo.EventDLQ.Name)
	}
	return out, err
}

// scanDLQ receives every message of url (scanQueue: hidden while the scan
// runs; the caller settles or unhides them).
func scanDLQ(ctx context.Context, q SQSAPI, url string) ([]dlqMessage, scanResult, error) {
	res, err := scanQueue(ctx, q, url, []types.MessageSystemAttributeName{
		types.MessageSystemAttributeNameSentTimestamp, types.MessageSystemAttributeNameApproximateReceiveCount,
	})
	out := make([]dlqMessage, 0, len(res.messages))
	for _, m := range res.messages {
		out = append(out, describeDLQMessage(m))
	}
	return out, res, err
}

// describeDLQMessage reads the content-free facts of m: EventBridge's
// attributes (rule, target, error code), the envelope's detail-type and
// id, or a delayed envelope's event_id.
func describeDLQMessage(m types.Message) dlqMessage {
	body := aws.ToString(m.Body)
	sent, _ := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
	receives, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	d := dlqMessage{
		MessageID: aws.ToString(m.MessageId), SentMS: sent, Receives: receives,
		Rule: arnName(attr(m, ebAttrRule)), Target: arnName(attr(m, ebAttrTarget)), ErrorCode: attr(m, ebAttrErrorCode),
		BodySHA256: core.SHA256Hex([]byte(body)), body: body, receipt: aws.ToString(m.ReceiptHandle),
	}
	var shape struct {
		ID         string `json:"id"`
		DetailType string `json:"detail-type"`
		EventID    string `json:"event_id"`
	}
	if json.Unmarshal([]byte(body), &shape) == nil {
		// Only tokens are printed: the body comes from outside.
		if core.ValidToken(shape.ID) {
			d.BusEventID = shape.ID
		}
		if core.ValidToken(shape.DetailType) {
			d.DetailType = shape.DetailType
		}
		if core.ValidToken(shape.EventID) {
			d.EventID = shape.EventID
		}
	}
	if !core.ValidErrorCode(d.ErrorCode) && !core.ValidToken(d.ErrorCode) {
		d.ErrorCode = ""
	}
	return d
}

// arnName is the last path segment of an ARN (a queue's, rule's or
// function's name); "" when it is not a token.
func arnName(arn string) string {
	name := arn
	if i := strings.LastIndexAny(arn, ":/"); i >= 0 {
		name = arn[i+1:]
	}
	if !core.ValidToken(name) {
		return ""
	}
	return name
}

func (c *cli) dlqCommand(ctx context.Context, rest []string) error {
	if len(rest) != 2 || (rest[0] != "list" && rest[0] != "redrive") || !slices.Contains(dlqNames, rest[1]) {
		return usagef("dlq: list QUEUE or redrive QUEUE (QUEUE: %s)", strings.Join(dlqNames, ", "))
	}
	if _, err := c.deploymentPrefix(true); err != nil {
		return err
	}
	q, err := newSQSAPI(ctx)
	if err != nil {
		return err
	}
	urls, err := c.resolveDLQ(ctx, q, rest[1])
	if err != nil {
		return err
	}
	msgs, scan, err := scanDLQ(ctx, q, urls.dlq)
	if err != nil {
		_ = unhideDLQ(ctx, q, urls.dlq, msgs)
		return err
	}
	if rest[0] == "list" {
		return c.dlqList(ctx, q, urls, rest[1], msgs, scan)
	}
	return c.dlqRedrive(ctx, q, urls, rest[1], msgs, scan)
}

// dlqListView is `dlq list --json`.
type dlqListView struct {
	Queue string `json:"queue"`
	scanView
	Messages []dlqMessage `json:"messages"`
}

func (c *cli) dlqList(ctx context.Context, q SQSAPI, urls dlqQueues, queue string, msgs []dlqMessage, scan scanResult) error {
	failure := firstError(scan.incomplete(urls.dlq), unhideDLQ(ctx, q, urls.dlq, msgs))
	if c.jsonOut {
		if err := c.printJSON(dlqListView{Queue: queue, scanView: viewOf(scan), Messages: msgs}); err != nil {
			return err
		}
		return jsonReported(failure)
	}
	w := c.table()
	fmt.Fprintln(w, "MESSAGE_ID\tSENT\tRECEIVES\tDETAIL_TYPE\tEVENT_ID\tRULE\tTARGET\tERROR_CODE\tBODY_SHA256")
	for _, m := range msgs {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", m.MessageID, ts(m.SentMS), m.Receives, dash(m.DetailType),
			dash(m.EventID), dash(m.Rule), dash(m.Target), dash(m.ErrorCode), m.BodySHA256)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.out, "%d in the DLQ (%s)\n", len(msgs), scanLine(scan))
	return failure
}

// redriveView is one message `dlq redrive` handled.
type redriveView struct {
	MessageID  string `json:"message_id"`
	DetailType string `json:"detail_type,omitempty"`
	EventID    string `json:"event_id,omitempty"`
	Target     string `json:"target,omitempty"`
}

// dlqRedriveView is `dlq redrive --json`.
type dlqRedriveView struct {
	Queue string `json:"queue"`
	scanView
	Redriven []redriveView `json:"redriven"`
	// Dropped are schedule ticks (the next tick redoes their sweep).
	Dropped []redriveView `json:"dropped"`
	// Kept stay on the DLQ (their target is unknown, or a send failed).
	Kept   []redriveView `json:"kept"`
	Errors []errorView   `json:"errors"`
}

// dlqRedrive sends every message back (the poll and release DLQs: to their
// source queue; the event DLQ: to the queue EventBridge could not deliver
// it to, the body unchanged) and deletes it only after the send. A
// schedule's tick (target: a function of this deployment) is deleted
// without a send: the next tick does the same sweep. A message whose
// target is unknown is kept. A scan that did not see every message fails
// the command (cli.queue.scan_incomplete) after redriving what it saw.
func (c *cli) dlqRedrive(ctx context.Context, q SQSAPI, urls dlqQueues, queue string, msgs []dlqMessage, scan scanResult) error {
	var keep []dlqMessage
	var failures []error
	view := dlqRedriveView{Queue: queue, scanView: viewOf(scan), Redriven: []redriveView{}, Dropped: []redriveView{}, Kept: []redriveView{}}
	for _, m := range msgs {
		mv := redriveView{MessageID: m.MessageID, DetailType: m.DetailType, EventID: firstNonEmpty(m.EventID, m.BusEventID), Target: m.Target}
		target := urls.back
		if target == "" {
			switch {
			case urls.byName[m.Target] != "":
				target = urls.byName[m.Target]
			case urls.functions[m.Target]:
				target = ""
			default:
				keep, view.Kept = append(keep, m), append(view.Kept, mv)
				failures = append(failures, core.Wrap(codeDLQTarget, false, fmt.Errorf("%s: target %q is not a queue or function of this deployment", m.MessageID, m.Target)))
				continue
			}
		}
		if target != "" {
			if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(target), MessageBody: aws.String(m.body)}); err != nil {
				keep, view.Kept = append(keep, m), append(view.Kept, mv)
				failures = append(failures, core.Wrap(codeRuntime, true, fmt.Errorf("redrive %s: %w", m.MessageID, err)))
				continue
			}
		}
		if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(urls.dlq), ReceiptHandle: aws.String(m.receipt)}); err != nil {
			failures = append(failures, core.Wrap(codeRuntime, true, fmt.Errorf("redrove %s but could not delete it: %w", m.MessageID, err)))
		}
		if target == "" {
			view.Dropped = append(view.Dropped, mv)
			if !c.jsonOut {
				fmt.Fprintf(c.out, "dropped %s (schedule tick for %s: the next tick redoes it)\n", m.MessageID, m.Target)
			}
			continue
		}
		view.Redriven = append(view.Redriven, mv)
		if !c.jsonOut {
			fmt.Fprintf(c.out, "redrove %s (%s)\n", m.MessageID, dash(m.DetailType))
		}
	}
	if err := unhideDLQ(ctx, q, urls.dlq, keep); err != nil {
		failures = append(failures, err)
	}
	if err := scan.incomplete(urls.dlq); err != nil {
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
	fmt.Fprintf(c.out, "%d redriven, %d schedule ticks dropped, %d kept of %d seen (%s)\n",
		len(view.Redriven), len(view.Dropped), len(view.Kept), len(msgs), scanLine(scan))
	return failure
}

// unhideDLQ makes the messages visible again.
func unhideDLQ(ctx context.Context, q SQSAPI, url string, msgs []dlqMessage) error {
	held := make([]heldMessage, len(msgs))
	for i, m := range msgs {
		held[i] = heldMessage{id: m.MessageID, receipt: m.receipt}
	}
	return unhideHeld(ctx, q, url, held)
}
