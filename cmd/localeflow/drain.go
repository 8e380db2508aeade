package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/core"
)

// codeScanIncomplete: a queue scan stopped at its bound while the queue
// still reported visible messages; what it saw was handled, the rest is
// still queued (run the command again).
const codeScanIncomplete = "cli.queue.scan_incomplete"

// Bounds of one queue scan.
const (
	// scanMaxReceives bounds the receives of one scan (10 messages each).
	scanMaxReceives = 500
	// scanEmptyReceives: consecutive receives that bring no message the
	// scan has not seen, while the queue still reports visible ones,
	// before the scan gives up (SQS samples a subset of its servers, so a
	// receive may come back empty while messages are queued).
	scanEmptyReceives = 10
	// scanConfirmEmpty: consecutive empty receives a scan needs, besides
	// the queue reporting 0 visible messages, to call itself complete (the
	// count is approximate and lags: kumo's, for one, still counts
	// messages made visible again as not visible).
	scanConfirmEmpty = 2
	// scanWaitSeconds makes each receive a long poll, which asks every
	// server rather than a sample.
	scanWaitSeconds = 1
)

// scanResult is what one scan saw: every message it received once (the
// latest receipt handle of each), and whether the queue reported no
// visible message left when it stopped.
type scanResult struct {
	messages []types.Message
	// receives and emptyReceives count the ReceiveMessage calls and those
	// that brought nothing new.
	receives, emptyReceives int
	// complete: the queue reported 0 visible messages after the scan's
	// last empty receive; remaining is its last report otherwise.
	complete  bool
	remaining int
}

// incomplete is the error of a scan that stopped at its bounds.
func (r scanResult) incomplete(url string) error {
	if r.complete {
		return nil
	}
	return core.Wrap(codeScanIncomplete, true, fmt.Errorf("%s still reports %d visible messages after %d receives (%d seen): run the command again",
		url, r.remaining, r.receives, len(r.messages)))
}

// scanQueue receives every message of url, hiding each for scanVisibility
// seconds (the caller settles or unhides them). An empty receive does not
// end it: it ends complete after scanConfirmEmpty receives in a row that
// brought nothing new with the queue's ApproximateNumberOfMessages at 0
// after the last; it ends not complete after scanEmptyReceives such
// receives in a row while the queue still reports visible messages, or
// after scanMaxReceives receives (the result says how many the queue
// still reported).
func scanQueue(ctx context.Context, q SQSAPI, url string, systemAttrs []types.MessageSystemAttributeName) (scanResult, error) {
	var r scanResult
	index := map[string]int{}
	streak := 0
	for r.receives < scanMaxReceives {
		res, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: scanVisibility,
			WaitTimeSeconds: scanWaitSeconds, MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: systemAttrs,
		})
		if err != nil {
			return r, core.Wrap(codeRuntime, true, fmt.Errorf("receive %s: %w", url, err))
		}
		r.receives++
		fresh := 0
		for _, m := range res.Messages {
			id := aws.ToString(m.MessageId)
			if i, ok := index[id]; ok {
				// Seen before and visible again (the scan outlasted its
				// visibility): only the newest receipt handle works.
				r.messages[i].ReceiptHandle = m.ReceiptHandle
				continue
			}
			index[id] = len(r.messages)
			r.messages = append(r.messages, m)
			fresh++
		}
		if fresh > 0 {
			streak = 0
			continue
		}
		r.emptyReceives++
		visible, err := visibleMessages(ctx, q, url)
		if err != nil {
			return r, err
		}
		streak++
		if visible == 0 && streak >= scanConfirmEmpty {
			r.complete, r.remaining = true, 0
			return r, nil
		}
		r.remaining = visible
		if streak >= scanEmptyReceives {
			break
		}
	}
	return r, nil
}

// visibleMessages is the queue's ApproximateNumberOfMessages (messages
// available to a receive; those the scan hides are not counted).
func visibleMessages(ctx context.Context, q SQSAPI, url string) (int, error) {
	out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		return 0, core.Wrap(codeRuntime, true, fmt.Errorf("queue attributes %s: %w", url, err))
	}
	n, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	if err != nil || n < 0 {
		return 0, core.Wrap(codeRuntime, true, fmt.Errorf("queue attributes %s: no ApproximateNumberOfMessages", url))
	}
	return n, nil
}
