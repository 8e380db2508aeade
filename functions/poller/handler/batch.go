package handler

import (
	"context"
	"sync"
	"time"

	"github.com/localeflow/localeflow/adapters/delayqueue"
)

// sendBatch collects the delayed messages one invocation sends and sends
// them with SendMessageBatch (delayqueue.Queue.SendBatch), up to
// delayqueue.MaxBatch per request. A message whose entry failed is
// reported to done with the error a failed single send returns, and its
// owner is treated exactly as if that send had failed.
type sendBatch struct {
	h *Handler
	// auto sends each batch as soon as it is full (the sweep); otherwise
	// everything waits for flush (an SQS batch: at most one message per
	// record).
	auto bool
	// done receives each failed send: its owner (the SQS record's index,
	// or -1) and the error.
	done func(owner int, eventID string, err error)

	mu      sync.Mutex
	pending []queued
}

type queued struct {
	owner int
	env   delayqueue.Envelope
}

type batchKey struct{}

// slot is where a send made under a context goes.
type slot struct {
	b     *sendBatch
	owner int
}

// withBatch returns ctx whose sends (Handler.schedule) join b for owner.
func withBatch(ctx context.Context, b *sendBatch, owner int) context.Context {
	return context.WithValue(ctx, batchKey{}, slot{b: b, owner: owner})
}

// schedule sends e: into the invocation's batch when ctx carries one (the
// result comes with the batch), else at once.
func (h *Handler) schedule(ctx context.Context, e delayqueue.Envelope) error {
	if s, ok := ctx.Value(batchKey{}).(slot); ok {
		s.b.add(ctx, s.owner, e)
		return nil
	}
	return h.queue.Resend(ctx, e, h.clock.Now())
}

// scheduleAt schedules kind for eventID at `at`.
func (h *Handler) scheduleAt(ctx context.Context, kind, eventID string, at time.Time) error {
	e, err := delayqueue.NewEnvelope(kind, eventID, "", at)
	if err != nil {
		return err
	}
	return h.schedule(ctx, e)
}

func (b *sendBatch) add(ctx context.Context, owner int, e delayqueue.Envelope) {
	b.mu.Lock()
	b.pending = append(b.pending, queued{owner: owner, env: e})
	var full []queued
	if b.auto && len(b.pending) >= delayqueue.MaxBatch {
		full, b.pending = b.pending, nil
	}
	b.mu.Unlock()
	if full != nil {
		b.send(ctx, full)
	}
}

// flush sends what is pending.
func (b *sendBatch) flush(ctx context.Context) {
	b.mu.Lock()
	rest := b.pending
	b.pending = nil
	b.mu.Unlock()
	b.send(ctx, rest)
}

func (b *sendBatch) send(ctx context.Context, qs []queued) {
	if len(qs) == 0 {
		return
	}
	envs := make([]delayqueue.Envelope, len(qs))
	for i, q := range qs {
		envs[i] = q.env
	}
	for i, err := range b.h.queue.SendBatch(ctx, envs, b.h.clock.Now()) {
		if err != nil {
			b.done(qs[i].owner, qs[i].env.EventID, err)
		}
	}
}
