package sim

import (
	"context"
	"encoding/json"
	"strings"
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
	instances []HandleFunc
	esmActive int
}

// instance is the warm container an invocation lands on.
func (f *Function) instance() HandleFunc { return f.instances[f.w.rng.IntN(len(f.instances))] }

var scheduledEvent = json.RawMessage(`{"version":"0","id":"sched","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`)

// schedule fires the function's schedule.
func (f *Function) schedule() {
	h := f.instance()
	f.w.invoke(f.name, "schedule sweep", f.timeout, func(ctx context.Context) (any, error) {
		return h(ctx, scheduledEvent)
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
		f.w.invoke(f.name, "sqs "+strings.Join(ids, ","), f.timeout, func(ctx context.Context) (any, error) {
			return h(ctx, payload)
		}, func(resp any, err error, crashed bool) {
			f.esmActive--
			f.queue.settle(batch, resp, err, crashed)
		})
		started = true
	}
	return started
}
