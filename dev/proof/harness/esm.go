package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/dev/esm"
)

// HandlerFunc is a function's entry point: the Lambda payload in, the
// response out (both handlers' Handle methods).
type HandlerFunc func(ctx context.Context, payload json.RawMessage) (any, error)

// Chaos disturbs the delivery of queue messages the way SQS may.
type Chaos struct {
	// Duplicate is the probability that a handled message is delivered
	// again (sent again with the same body).
	Duplicate float64
	// HoldBack is the probability that a received message is held back
	// and delivered only HoldRounds receives later (a late message).
	HoldBack   float64
	HoldRounds int
	// Reorder shuffles every batch.
	Reorder bool
	Seed    uint64
}

// ESM plays the SQS event source mapping of one function with package esm
// (receive a batch, invoke the handler with the aws:sqs event, delete every
// message not reported in batchItemFailures, none when the invocation
// failed), disturbed by Chaos, with the scheduled sweep beside it.
type ESM struct {
	SQS      *sqs.Client
	QueueURL string
	Handle   HandlerFunc
	// BatchSize (default 10), Visibility seconds of a received batch
	// (default 2: failed messages come back quickly), Timeout of one
	// invocation (the function's configured timeout; default 60 s).
	BatchSize  int32
	Visibility int32
	Timeout    time.Duration
	Chaos      Chaos
	// Sweep, when set, runs every SweepEvery (the scheduled sweep).
	Sweep      func(ctx context.Context) error
	SweepEvery time.Duration

	mu    sync.Mutex
	rng   *rand.Rand
	held  []heldMessage
	round int
	stats ESMStats
}

type heldMessage struct {
	body    string
	release int
}

// ESMStats counts what the mapping did.
type ESMStats struct {
	Invocations   int
	Messages      int
	ItemFailures  int
	BatchFailures int
	Duplicated    int
	HeldBack      int
	Sweeps        int
	SweepErrors   int
	// Receives counts ReceiveMessage calls, EmptyReceives those that
	// returned nothing (this player short-polls; Lambda's mapping long
	// polls, so its empty receives are a fixed cost per queue instead).
	Receives      int
	EmptyReceives int
	// StaleDeletes counts deletes refused because the receipt handle was
	// no longer the message's latest (its visibility ran out during the
	// invocation and it was received again): on AWS such a delete
	// succeeds without deleting, so it is not an error; the message is
	// handled again when it comes back.
	StaleDeletes int
	// Durations of every invocation (Lambda billed duration stand-in).
	Durations []time.Duration
}

// Stats returns a copy of the counts.
func (e *ESM) Stats() ESMStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Durations = append([]time.Duration(nil), e.stats.Durations...)
	return s
}

func (e *ESM) init() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rng == nil {
		e.rng = rand.New(rand.NewPCG(e.Chaos.Seed, 0x5eed))
	}
	if e.BatchSize == 0 {
		e.BatchSize = 10
	}
	if e.Visibility == 0 {
		e.Visibility = 2
	}
	if e.Timeout == 0 {
		e.Timeout = 60 * time.Second
	}
}

func (e *ESM) chance(p float64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return p > 0 && e.rng.Float64() < p
}

// Run feeds batches to the handler until done() holds while the queue has
// been empty for quiet consecutive receives, or timeout passes (an error).
func (e *ESM) Run(ctx context.Context, timeout time.Duration, done func() bool) error {
	e.init()
	deadline := time.Now().Add(timeout)
	lastSweep := time.Now()
	quiet := 0
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.Sweep != nil && e.SweepEvery > 0 && time.Since(lastSweep) >= e.SweepEvery {
			lastSweep = time.Now()
			// A failed sweep is a failed scheduled invocation: the next
			// tick runs it again.
			err := e.Sweep(ctx)
			e.mu.Lock()
			e.stats.Sweeps++
			if err != nil {
				e.stats.SweepErrors++
			}
			e.mu.Unlock()
		}
		if err := e.releaseHeld(ctx, false); err != nil {
			return err
		}
		n, err := e.Once(ctx)
		if err != nil {
			return err
		}
		if n > 0 {
			quiet = 0
			continue
		}
		quiet++
		e.mu.Lock()
		held := len(e.held)
		e.mu.Unlock()
		if held > 0 && quiet > 3 {
			if err := e.releaseHeld(ctx, true); err != nil {
				return err
			}
			continue
		}
		if quiet >= 3 && done() {
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("esm: not done after %s", timeout)
}

func (e *ESM) releaseHeld(ctx context.Context, all bool) error {
	e.mu.Lock()
	var due []string
	keep := e.held[:0]
	for _, h := range e.held {
		if all || h.release <= e.round {
			due = append(due, h.body)
		} else {
			keep = append(keep, h)
		}
	}
	e.held = keep
	e.mu.Unlock()
	for _, body := range due {
		if _, err := e.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.QueueURL), MessageBody: aws.String(body)}); err != nil {
			return fmt.Errorf("esm: re-send held message: %w", err)
		}
	}
	return nil
}

// Once receives one batch and invokes the handler with it; it returns the
// number of messages received.
func (e *ESM) Once(ctx context.Context) (int, error) {
	e.init()
	e.mu.Lock()
	// One receive per poll (BatchSize <= 10): this receive's round.
	e.round++
	e.mu.Unlock()
	p := &esm.Player{
		SQS: e.SQS, QueueURL: e.QueueURL, QueueARN: "arn:aws:sqs:us-east-1:000000000000:proof", Region: "us-east-1",
		BatchSize: int(e.BatchSize), Timeout: e.Timeout, VisibilityTimeout: time.Duration(e.Visibility) * time.Second,
		Invoker: handlerInvoker(e.Handle), DeleteEach: true, Select: e.disturb,
	}
	b, err := p.PollOnce(ctx)
	e.mu.Lock()
	e.stats.Receives += b.Receives
	if b.Receives > 0 && b.Received == 0 && err == nil {
		e.stats.EmptyReceives++
	}
	e.stats.StaleDeletes += b.StaleDeletes
	if len(b.Records) > 0 {
		e.stats.Invocations++
		e.stats.Messages += len(b.Records)
		e.stats.Durations = append(e.stats.Durations, b.Duration)
		if b.Err != nil {
			e.stats.BatchFailures++
		} else {
			e.stats.ItemFailures += len(b.FailedIDs)
		}
	}
	e.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("esm: %w", err)
	}
	if b.DeleteErr != nil {
		return 0, fmt.Errorf("esm: %w", b.DeleteErr)
	}
	// A failed invocation settles nothing: the whole batch comes back after
	// its visibility timeout.
	for _, m := range b.Settled {
		if e.chance(e.Chaos.Duplicate) {
			if _, err := e.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.QueueURL), MessageBody: aws.String(m.Body)}); err != nil {
				return 0, fmt.Errorf("esm: duplicate: %w", err)
			}
			e.mu.Lock()
			e.stats.Duplicated++
			e.mu.Unlock()
		}
	}
	return b.Received, nil
}

// disturb holds messages back (deleted now, sent again HoldRounds receives
// later) and reorders the batch, as Chaos asks.
func (e *ESM) disturb(ctx context.Context, msgs []sqstypes.Message) ([]sqstypes.Message, error) {
	var keep []sqstypes.Message
	for _, m := range msgs {
		if e.Chaos.HoldRounds > 0 && e.chance(e.Chaos.HoldBack) {
			if err := e.delete(ctx, m.ReceiptHandle); err != nil {
				return nil, err
			}
			e.mu.Lock()
			e.held = append(e.held, heldMessage{body: aws.ToString(m.Body), release: e.round + e.Chaos.HoldRounds})
			e.stats.HeldBack++
			e.mu.Unlock()
			continue
		}
		keep = append(keep, m)
	}
	if e.Chaos.Reorder {
		e.mu.Lock()
		e.rng.Shuffle(len(keep), func(i, j int) { keep[i], keep[j] = keep[j], keep[i] })
		e.mu.Unlock()
	}
	return keep, nil
}

// handlerInvoker invokes an in-process handler with the event payload and
// returns its response as JSON, as the Lambda runtime does.
type handlerInvoker HandlerFunc

func (h handlerInvoker) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	res, err := h(ctx, payload)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// delete deletes a message held back (a stale handle is counted, not an
// error: see esm.Delete).
func (e *ESM) delete(ctx context.Context, handle *string) error {
	stale, err := esm.Delete(ctx, e.SQS, e.QueueURL, aws.ToString(handle))
	if err != nil {
		return fmt.Errorf("esm: %w", err)
	}
	if stale {
		e.mu.Lock()
		e.stats.StaleDeletes++
		e.mu.Unlock()
	}
	return nil
}
