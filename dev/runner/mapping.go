package runner

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/localeflow/localeflow/dev/esm"
)

// SQSAPI is the part of *sqs.Client a mapping uses.
type SQSAPI = esm.API

// Limits of the mapping.
const (
	// MaxBatchSize is the Lambda limit for a standard queue.
	MaxBatchSize = esm.MaxBatchSize
	// DefaultIdle is the sleep after an empty receive.
	DefaultIdle = 200 * time.Millisecond
	// DefaultTimeout is the function timeout when none is set.
	DefaultTimeout = esm.DefaultTimeout
)

// Mapping is one SQS event source mapping (standard queue,
// ReportBatchItemFailures), played by package esm in a loop.
type Mapping struct {
	// Function names the target in logs.
	Function string
	SQS      SQSAPI
	QueueURL string
	QueueARN string
	Region   string
	// BatchSize is the maximum number of messages per invocation (1..10,000).
	BatchSize int
	// Timeout is the function timeout: an invocation still running after it
	// fails the whole batch.
	Timeout time.Duration
	// VisibilityTimeout, when non-zero, is passed on ReceiveMessage instead
	// of the queue's own (whole seconds). AWS uses the queue's: leave it 0
	// unless a demo or test needs failed messages back sooner.
	VisibilityTimeout time.Duration
	// Idle is the sleep after an empty receive (default 200 ms).
	Idle    time.Duration
	Invoker Invoker
	Log     *slog.Logger
	// OnBatch, if set, is called after every invocation.
	OnBatch func(BatchResult)

	stats Stats
}

// BatchResult is what one invocation did.
type BatchResult struct {
	Function  string
	Messages  int
	Deleted   int
	Failed    int
	FailedIDs []string
	// Err is the reason the whole batch failed (function error, timeout,
	// invalid response), nil otherwise.
	Err error
}

// Stats are a mapping's running totals.
type Stats struct {
	Batches, Messages, Deleted, Failed, BatchErrors atomic.Int64
}

// Stats returns the running totals.
func (m *Mapping) Stats() *Stats { return &m.stats }

func (m *Mapping) player() *esm.Player {
	return &esm.Player{
		SQS: m.SQS, QueueURL: m.QueueURL, QueueARN: m.QueueARN, Region: m.Region,
		BatchSize: m.BatchSize, Timeout: m.Timeout, VisibilityTimeout: m.VisibilityTimeout, Invoker: m.Invoker,
	}
}

func (m *Mapping) log() *slog.Logger {
	if m.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Log
}

// Run polls the queue until ctx ends. Receive errors are logged and
// retried after the idle sleep.
func (m *Mapping) Run(ctx context.Context) error {
	if err := m.player().Validate(); err != nil {
		return err
	}
	idle := m.Idle
	if idle <= 0 {
		idle = DefaultIdle
	}
	for ctx.Err() == nil {
		res, err := m.PollOnce(ctx)
		if err != nil && ctx.Err() == nil {
			m.log().Warn("runner receive failed", "function", m.Function, "error", err.Error())
		}
		if err != nil || res.Messages == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(idle):
			}
		}
	}
	return nil
}

// PollOnce receives up to BatchSize visible messages and, if there are
// any, invokes the function once and settles the batch. It returns a zero
// result when the queue had nothing visible.
func (m *Mapping) PollOnce(ctx context.Context) (BatchResult, error) {
	b, err := m.player().PollOnce(ctx)
	if err != nil || b.Received == 0 {
		return BatchResult{Function: m.Function}, err
	}
	res := BatchResult{Function: m.Function, Messages: b.Received, Deleted: b.Deleted, Failed: len(b.FailedIDs), FailedIDs: b.FailedIDs, Err: b.Err}
	if b.Err != nil {
		m.log().Warn("runner batch failed", "function", m.Function, "messages", b.Received, "error", b.Err.Error())
	}
	if b.DeleteErr != nil {
		m.log().Warn("runner delete failed", "function", m.Function, "error", b.DeleteErr.Error())
	}
	m.record(res)
	return res, nil
}

func (m *Mapping) record(res BatchResult) {
	m.stats.Batches.Add(1)
	m.stats.Messages.Add(int64(res.Messages))
	m.stats.Deleted.Add(int64(res.Deleted))
	m.stats.Failed.Add(int64(res.Failed))
	if res.Err != nil {
		m.stats.BatchErrors.Add(1)
	}
	if m.OnBatch != nil {
		m.OnBatch(res)
	}
}
