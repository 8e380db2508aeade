package sim

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"time"
)

// HandleFunc is a function's Lambda entry point (Handler.Handle).
type HandleFunc func(ctx context.Context, payload json.RawMessage) (any, error)

// Function is one Lambda function: its warm instances, its timeout, and
// the event source mapping that drains its queue.
type Function struct {
	w         *World
	name      string
	timeout   time.Duration
	queue     *Queue
	instances []instance
	esmActive int
	// observe, when set, sees each batch the mapping hands to an
	// invocation (its id) before it runs.
	observe func(inv int, batch []*message)
}

// instance is one warm container: its entry point and its clock.
type instance struct {
	handle HandleFunc
	clock  skewClock
}

// instance is the warm container an invocation lands on. A function
// with none (no deployment of it ever started) fails each invocation as
// a failed cold start: recorded in the trace, the invocation ends with an
// error (an SQS batch returns to its queue), the process goes on.
func (f *Function) instance() instance {
	if len(f.instances) == 0 {
		// Recorded here, on the scheduler's goroutine: the trace order
		// depends on the seed only.
		f.w.Stats.FailedColdStarts++
		f.w.record(nil, "COLD START "+f.name, "failed: no instance deployed")
		return instance{handle: failedColdStart, clock: skewClock{offset: &atomic.Int64{}}}
	}
	return f.instances[f.w.rng.IntN(len(f.instances))]
}

// errColdStart is the error of an invocation without an instance.
var errColdStart = errors.New("sim: cold start failed: no instance deployed")

func failedColdStart(context.Context, json.RawMessage) (any, error) { return nil, errColdStart }

var scheduledEvent = json.RawMessage(`{"version":"0","id":"sched","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`)

// schedule fires the function's schedule.
func (f *Function) schedule() {
	h := f.instance()
	f.w.invoke(f.name, "schedule sweep", f.timeout, h.clock, func(ctx context.Context) (any, error) {
		return h.handle(ctx, scheduledEvent)
	}, nil)
}

// poll runs the event source mapping: up to the seed's concurrency, one
// batch per invocation; true when it started one.
func (f *Function) poll(now time.Time) bool {
	started := false
	for f.esmActive < f.w.Faults.Concurrency {
		batch := f.queue.receive(now)
		if batch == nil {
			break
		}
		payload, _ := json.Marshal(sqsEvent(batch))
		h := f.instance()
		f.esmActive++
		ids := make([]string, 0, len(batch))
		for _, b := range batch {
			ids = append(ids, b.id)
		}
		f.w.invoke(f.name, "sqs "+strings.Join(ids, ","), f.timeout, h.clock, func(ctx context.Context) (any, error) {
			return h.handle(ctx, payload)
		}, func(resp any, err error, crashed, faulted bool) {
			f.esmActive--
			f.queue.settle(batch, resp, err, crashed, faulted)
		})
		if f.observe != nil {
			f.observe(f.w.nextInv, batch)
		}
		started = true
	}
	return started
}
