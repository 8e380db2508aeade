package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/internal/emf"
	"github.com/localeflow/localeflow/internal/lambdalog"
	"github.com/localeflow/localeflow/internal/remotecall"
)

// countingWriter counts the bytes and lines written to it.
type countingWriter struct {
	mu           sync.Mutex
	bytes, lines int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes += int64(len(p))
	c.lines += int64(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

func (c *countingWriter) take() (int64, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, l := c.bytes, c.lines
	c.bytes, c.lines = 0, 0
	return b, l
}

// BenchmarkLogBytesPerThousandPolls measures the log bytes the poller
// writes per 1,000 polls on the path Lambda runs: the Lambda entry point
// (Handle, wrapped in remotecall.Wrap as main.go does) with the function's
// log (lambdalog at Info) and EMF writer, over adapters/monitordb on
// DynamoDB Local, the signed test CMS answering "processing". sqs: 100
// invocations of 10 due poll messages; sweep: one scheduled invocation
// over 1,000 due changes. Reported: EMF bytes and documents, and all log
// bytes and lines (EMF, remote-call documents, the function's log), per
// 1,000 polls.
func BenchmarkLogBytesPerThousandPolls(b *testing.B) {
	const items = 1000
	for _, path := range []string{"sqs", "sweep"} {
		b.Run(path, func(b *testing.B) {
			e := realPathSetup(b)
			metrics, all := &countingWriter{}, &countingWriter{}
			both := &teeWriter{a: metrics, b: all}
			h, err := handler.New(handler.Config{Monitor: e.svc, Reader: e.reader, Clock: e.clock,
				Queue: delayqueue.New(e.sqs, "https://sqs.local/poll"), Bus: eventbus.New(&fakeBus{}, "bus"),
				Log: lambdalog.New(all, slog.LevelInfo), Metrics: emf.NewWriter(both, "localeflow", nil)})
			if err != nil {
				b.Fatal(err)
			}
			invoke := remotecall.Wrap(h.Handle, all, "localeflow")
			var polls, emfBytes, emfLines, logBytes, logLines int64
			for round := 0; b.Loop(); round++ {
				b.StopTimer()
				ids := e.register(b, fmt.Sprintf("evt-log-%s-r%d", path, round), items, "processing")
				var payloads []json.RawMessage
				if path == "sqs" {
					for _, ev := range e.batches(b, ids) {
						p, err := json.Marshal(ev)
						if err != nil {
							b.Fatal(err)
						}
						payloads = append(payloads, p)
					}
				} else {
					payloads = append(payloads, json.RawMessage(fmt.Sprintf(
						`{"id":"sweep-%d","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`, round)))
				}
				e.clock.Advance(time.Second)
				metrics.take()
				all.take()
				b.StartTimer()
				polled := 0
				for _, p := range payloads {
					out, err := invoke(context.Background(), p)
					if err != nil {
						b.Fatalf("invoke: %v", err)
					}
					switch r := out.(type) {
					case events.SQSEventResponse:
						if len(r.BatchItemFailures) != 0 {
							b.Fatalf("batch item failures %+v", r.BatchItemFailures)
						}
						polled += len(ids) / len(payloads)
					case handler.SweepResult:
						if r.Errors != 0 {
							b.Fatalf("sweep %+v", r)
						}
						polled += r.Polled
					}
				}
				if polled != items {
					b.Fatalf("polled %d of %d", polled, items)
				}
				b.StopTimer()
				mb, ml := metrics.take()
				ab, al := all.take()
				emfBytes, emfLines, logBytes, logLines = emfBytes+mb, emfLines+ml, logBytes+ab, logLines+al
				polls += items
				b.StartTimer()
			}
			k := float64(polls) / 1000
			b.ReportMetric(float64(emfBytes)/k, "emf-bytes/1kpolls")
			b.ReportMetric(float64(emfLines)/k, "emf-docs/1kpolls")
			b.ReportMetric(float64(logBytes)/k, "log-bytes/1kpolls")
			b.ReportMetric(float64(logLines)/k, "log-lines/1kpolls")
		})
	}
}

// teeWriter writes to a and b.
type teeWriter struct{ a, b *countingWriter }

func (t *teeWriter) Write(p []byte) (int, error) {
	_, _ = t.a.Write(p)
	return t.b.Write(p)
}
