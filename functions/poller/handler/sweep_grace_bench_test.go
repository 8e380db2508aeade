package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/localeflow/localeflow/core/monitor"
)

// graceEnvList reads a comma-separated list of Go durations or counts.
func graceEnvList[T any](b *testing.B, name, def string, parse func(string) (T, error)) []T {
	raw := os.Getenv(name)
	if raw == "" {
		raw = def
	}
	var out []T
	for _, f := range strings.Split(raw, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			b.Fatalf("%s=%q: %v", name, raw, err)
		}
		out = append(out, v)
	}
	return out
}

// queued is a poll message on its way: delivered at `at` (virtual time).
type queued struct {
	at   time.Time
	id   string
	body string
}

// BenchmarkSweepGraceRefusedClaims drives the poll queue and the
// scheduled sweep through the handler on DynamoDB Local on a virtual
// clock: N watched changes (LOCALEFLOW_GRACE_WATCHED, default 1,000)
// answered "processing", registered one second apart in 30 cohorts (wake
// times spread over the 30 s poll interval), each poll message delivered
// DelaySeconds after its send plus a delivery latency spread evenly over
// [0, 2 s) (the mapping's receive: docs/design.md "The sweep's grace
// period"), in batches of 10 (Handler.HandleSQS), and a sweep
// (Handler.Sweep) every 60 s, for LOCALEFLOW_GRACE_SWEEPS sweeps (default
// 3). Sub-benchmarks by sweep grace (LOCALEFLOW_GRACE_GRACES, default 1 ms
// — no grace, as before issue 29 — and the 30 s default). It reports the
// refused conditional writes (claims that found the change rescheduled or
// leased: billed, doing nothing) per poll; issue 29's target is ≤ 1 %
// with the default grace. Polls are counted from the records
// (poll_attempts), refused writes by dev/proof/meter.
func BenchmarkSweepGraceRefusedClaims(b *testing.B) {
	counts := graceEnvList(b, "LOCALEFLOW_GRACE_WATCHED", "1000", strconv.Atoi)
	graces := graceEnvList(b, "LOCALEFLOW_GRACE_GRACES", "1ms,30s", time.ParseDuration)
	sweepsWanted := graceEnvList(b, "LOCALEFLOW_GRACE_SWEEPS", "3", strconv.Atoi)[0]
	const (
		interval    = monitor.DefaultPollInterval
		sweepPeriod = time.Minute
		step        = 100 * time.Millisecond
		latency     = 2 * time.Second
	)
	for _, n := range counts {
		for _, grace := range graces {
			b.Run(fmt.Sprintf("watched=%d/grace=%s", n, grace), func(b *testing.B) {
				var refused, sweepRefused, polls, sweepPolls int64
				for round := 0; b.Loop(); round++ {
					b.StopTimer()
					e := realPathSetupWith(b, monitor.Config{WorkerID: "bench", SweepGrace: grace})
					var pending []queued
					sent := 0
					seq := 0
					// take moves the handler's new sends onto the queue.
					take := func() {
						all := e.sqs.Sent()
						for _, m := range all[sent:] {
							var env struct {
								EventID string `json:"event_id"`
							}
							if err := json.Unmarshal([]byte(aws.ToString(m.MessageBody)), &env); err != nil {
								b.Fatal(err)
							}
							seq++
							spread := time.Duration(seq*7919%2000) * time.Millisecond * latency / (2 * time.Second)
							pending = append(pending, queued{at: e.clock.Now().Add(time.Duration(m.DelaySeconds)*time.Second + spread),
								id: env.EventID, body: aws.ToString(m.MessageBody)})
						}
						sent = len(all)
					}
					start := e.clock.Now()
					var ids []string
					cohort := (n + 29) / 30
					// register enrols cohort c (at start + c s) with its
					// first poll message, delivered at once.
					register := func(c int) {
						cids := e.register(b, fmt.Sprintf("evt-grace-r%d-c%02d", round, c), min(cohort, n-c*cohort), "processing")
						for _, env := range e.batches(b, cids) {
							for _, r := range env.Records {
								var m struct {
									EventID string `json:"event_id"`
								}
								_ = json.Unmarshal([]byte(r.Body), &m)
								pending = append(pending, queued{at: e.clock.Now(), id: m.EventID, body: r.Body})
							}
						}
						ids = append(ids, cids...)
					}
					cohorts := 0
					e.meter.Reset()
					// Past the last sweep by the latency: the messages its polls
					// overtook are delivered (and refused) before the end.
					end := start.Add(time.Duration(sweepsWanted)*sweepPeriod + latency + 2*step)
					nextSweep := start.Add(sweepPeriod)
					b.StartTimer()
					for now := e.clock.Now(); now.Before(end); now = e.clock.Now() {
						if cohorts*cohort < n && !now.Before(start.Add(time.Duration(cohorts)*time.Second)) {
							b.StopTimer()
							before := e.meter.Snapshot().ConditionFailures
							register(cohorts)
							if d := e.meter.Snapshot().ConditionFailures - before; d != 0 {
								b.Fatalf("%d refused writes registering", d)
							}
							cohorts++
							b.StartTimer()
						}
						sort.SliceStable(pending, func(i, j int) bool { return pending[i].at.Before(pending[j].at) })
						k := sort.Search(len(pending), func(i int) bool { return pending[i].at.After(now) })
						ready := pending[:k]
						pending = append([]queued(nil), pending[k:]...)
						var wg sync.WaitGroup
						sem := make(chan struct{}, 4)
						for start := 0; start < len(ready); start += 10 {
							var ev events.SQSEvent
							for _, q := range ready[start:min(start+10, len(ready))] {
								ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m-%d-%s", start, q.id), Body: q.body,
									Attributes: map[string]string{"ApproximateReceiveCount": "1"}, EventSource: "aws:sqs"})
							}
							wg.Add(1)
							sem <- struct{}{}
							go func() {
								defer wg.Done()
								defer func() { <-sem }()
								if resp := e.h.HandleSQS(context.Background(), ev); len(resp.BatchItemFailures) != 0 {
									b.Errorf("batch item failures %+v", resp.BatchItemFailures)
								}
							}()
						}
						wg.Wait()
						take()
						if !now.Before(nextSweep) {
							before := e.meter.Snapshot().ConditionFailures
							res, err := e.h.Sweep(context.Background())
							if err != nil || res.Errors != 0 {
								b.Fatalf("sweep %+v: %v", res, err)
							}
							sweepRefused += e.meter.Snapshot().ConditionFailures - before
							sweepPolls += int64(res.Polled)
							b.Logf("sweep at %s: listed %d polled %d skipped %d", now.Sub(start), res.Listed, res.Polled, res.Skipped)
							take()
							nextSweep = nextSweep.Add(sweepPeriod)
						}
						e.clock.Advance(step)
					}
					b.StopTimer()
					refused += e.meter.Snapshot().ConditionFailures
					for _, id := range ids {
						st, err := e.svc.Status(context.Background(), id)
						if err != nil || st.State != monitor.StateWatching {
							b.Fatalf("%s: %s, %v", id, st.State, err)
						}
						polls += int64(st.PollAttempts)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(refused)/float64(polls), "refused/poll")
				b.ReportMetric(float64(refused)/float64(b.N), "refused/run")
				b.ReportMetric(float64(sweepRefused)/float64(b.N), "sweep-refused/run")
				b.ReportMetric(float64(polls)/float64(b.N), "polls/run")
				b.ReportMetric(float64(sweepPolls)/float64(b.N), "sweep-polls/run")
				b.Logf("watched %d, grace %s, interval %s, %d sweeps: polls %d (sweep %d), refused %d (by the sweep %d); load %s",
					n, grace, interval, sweepsWanted, polls, sweepPolls, refused, sweepRefused, loadAverage())
			})
		}
	}
}
