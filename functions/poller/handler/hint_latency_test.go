package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/functions/poller/handler"
)

// terminalClock forwards to the real bus and notes when each change's
// localeflow.change.terminal was published.
type terminalClock struct {
	real *eventbridge.Client
	mu   sync.Mutex
	at   map[string]time.Time
}

func (b *terminalClock) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	out, err := b.real.PutEvents(ctx, in, opts...)
	if err == nil && out.FailedEntryCount == 0 {
		now := time.Now()
		b.mu.Lock()
		for _, e := range in.Entries {
			var d struct {
				EventID string `json:"event_id"`
			}
			if aws.ToString(e.DetailType) == contract.DetailChangeTerminal && json.Unmarshal([]byte(aws.ToString(e.Detail)), &d) == nil {
				if _, seen := b.at[d.EventID]; !seen {
					b.at[d.EventID] = now
				}
			}
		}
		b.mu.Unlock()
	}
	return out, err
}

func (b *terminalClock) get(id string) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.at[id]
	return at, ok
}

// latencyArm is one configuration measured on its own stack.
type latencyArm struct {
	name     string
	interval time.Duration
	hints    bool
}

type armResult struct {
	arm       latencyArm
	latencies []time.Duration
	polls     []int
	// offsets: when each change's status changed, after the first polls
	// were queued.
	offsets []time.Duration
	// redelivered counts messages the handler reported as failed (SQS
	// shows them again after the 30 s visibility timeout).
	redelivered int64
}

// TestIntegrationHintLatency measures, on the local stack (DynamoDB Local +
// kumo: real table, queue with DelaySeconds, bus and rule), the time from a
// CMS status change to localeflow.change.terminal and the CMS requests per
// change, for two arms run side by side: a 5-minute poll interval with
// hints, and a 30-second interval without. Each change turns published at
// a random time 5..65 s after registration. The handler is the real one;
// the test plays the event source mapping (4 receivers, batches of 10).
// It runs only with LOCALEFLOW_HINT_LATENCY=<changes per arm> (≥ 1); see
// docs/performance.md.
func TestIntegrationHintLatency(t *testing.T) {
	n := 0
	if _, err := fmt.Sscan(os.Getenv("LOCALEFLOW_HINT_LATENCY"), &n); err != nil || n < 1 {
		t.Skip("set LOCALEFLOW_HINT_LATENCY=<changes per arm> to measure")
	}
	localtest.Require(t)
	load := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:3], " ")
	}
	t.Logf("load before: %s", load())
	arms := []latencyArm{
		{"5min+hints", 5 * time.Minute, true},
		{"30s-no-hints", 30 * time.Second, false},
	}
	results := make([]armResult, len(arms))
	t.Run("arms", func(t *testing.T) {
		for i, arm := range arms {
			t.Run(arm.name, func(t *testing.T) {
				t.Parallel()
				results[i] = runLatencyArm(t, arm, n, uint64(i+1))
			})
		}
	})
	t.Logf("load after: %s", load())
	for _, r := range results {
		if len(r.latencies) != n {
			t.Fatalf("%s: %d of %d changes ended", r.arm.name, len(r.latencies), n)
		}
		lat := slices.Clone(r.latencies)
		slices.Sort(lat)
		total := 0
		for _, p := range r.polls {
			total += p
		}
		single := 0
		for _, p := range r.polls {
			if p == 1 {
				single++
			}
		}
		t.Logf("RESULT arm=%s changes=%d median=%v p99=%v max=%v polls_per_change=%.2f single_poll_changes=%d redelivered=%d",
			r.arm.name, n, lat[(n-1)/2].Round(time.Millisecond), lat[(99*n+99)/100-1].Round(time.Millisecond),
			lat[n-1].Round(time.Millisecond), float64(total)/float64(n), single, r.redelivered)
		// The slowest changes and their CMS requests, to explain the tail.
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return int(r.latencies[b] - r.latencies[a]) })
		for _, i := range order[:min(3, n)] {
			t.Logf("SLOW arm=%s latency=%v polls=%d changed_at=+%v", r.arm.name, r.latencies[i].Round(time.Millisecond), r.polls[i],
				r.offsets[i].Round(time.Millisecond))
		}
	}
}

func runLatencyArm(t *testing.T, arm latencyArm, n int, seed uint64) armResult {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, res := localtest.Stack(t)
	ddb, sq, eb := localtest.DynamoDB(t), localtest.SQS(t), localtest.EventBridge(t)
	store, err := monitordb.New(ddb, res.MonitorTable)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := monitor.NewService(store, core.SystemClock{}, nil, monitor.Config{WorkerID: "poller-" + strings.ReplaceAll(arm.name, "+", "-"), PollInterval: arm.interval, Lease: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cmsServer := cmstest.New(testKey)
	cmsServer.SetLatency(40 * time.Millisecond)
	srv := cmsServer.Start()
	defer srv.Close()
	reader, err := cms.New(cms.Config{BaseURL: srv.URL, Key: testKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	terminal := &terminalClock{real: eb, at: map[string]time.Time{}}
	queue := delayqueue.New(sq, res.PollQueue.URL)
	h, err := handler.New(handler.Config{Monitor: svc, Reader: reader, Clock: core.SystemClock{}, Queue: queue,
		Bus: eventbus.New(terminal, res.BusName), Concurrency: 16})
	if err != nil {
		t.Fatal(err)
	}
	invoke := lambda.NewHandler(h.Handle)

	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt-lat-%04d", i)
		registerDirect(t, svc, ids[i], "site-berlin", 1)
		cmsServer.Put(cmstest.Change{EventID: ids[i], SiteID: "site-berlin", PlanID: "plan-" + ids[i], WebsiteVersion: "v1",
			SourceSequence: 1, RequiredLocales: []string{"de-DE"}})
		if err := queue.Send(ctx, handler.KindPoll, ids[i], time.Now(), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	// The event source mapping: 4 receivers, batches of 10.
	var redelivered atomic.Int64
	for range 4 {
		go esm(ctx, sq, res.PollQueue.URL, invoke, &redelivered)
	}
	// The CMS: each change turns published at a random time, and says so
	// with a hint in the hints arm.
	hinter := eventbus.New(eb, res.BusName)
	rng := rand.New(rand.NewPCG(seed, 16))
	changed := make([]time.Time, n)
	var mu sync.Mutex
	start := time.Now()
	var wg sync.WaitGroup
	for i, id := range ids {
		at := start.Add(5*time.Second + time.Duration(rng.Int64N(int64(60*time.Second))))
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(at))
			cmsServer.Script(id, cmstest.StatusStep("published"))
			mu.Lock()
			changed[i] = time.Now()
			mu.Unlock()
			if arm.hints {
				if err := hinter.Hint(ctx, id, "site-berlin"); err != nil {
					t.Errorf("hint %s: %v", id, err)
				}
			}
		}()
	}
	wg.Wait()
	out := armResult{arm: arm}
	for i, id := range ids {
		for {
			if at, ok := terminal.get(id); ok {
				mu.Lock()
				out.latencies = append(out.latencies, at.Sub(changed[i]))
				out.offsets = append(out.offsets, changed[i].Sub(start))
				mu.Unlock()
				out.polls = append(out.polls, len(cmsServer.RequestsFor(id)))
				break
			}
			if ctx.Err() != nil {
				out.redelivered = redelivered.Load()
				return out
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	out.redelivered = redelivered.Load()
	return out
}

// esm receives batches and invokes the handler until ctx ends, deleting
// what the handler acknowledged.
func esm(ctx context.Context, sq *sqs.Client, url string, invoke lambda.Handler, redelivered *atomic.Int64) {
	for ctx.Err() == nil {
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 30,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil || len(out.Messages) == 0 {
			continue
		}
		var ev events.SQSEvent
		for _, m := range out.Messages {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId),
				ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs"})
		}
		payload, _ := json.Marshal(ev)
		raw, err := invoke.Invoke(ctx, payload)
		if err != nil {
			redelivered.Add(int64(len(ev.Records)))
			continue
		}
		var resp events.SQSEventResponse
		_ = json.Unmarshal(raw, &resp)
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		redelivered.Add(int64(len(failed)))
		for _, m := range ev.Records {
			if !failed[m.MessageId] {
				_, _ = sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(m.ReceiptHandle)})
			}
		}
	}
}
