package handler_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/functions/poller/handler"
)

// stallingReader is the CMS client whose next stalls reads each take
// longer than the lease: stall runs after the answer came back and before
// the finishing write (a starved process, a long GC pause).
type stallingReader struct {
	monitor.LifecycleReader
	stalls *atomic.Int32
	stall  func()
}

func (r stallingReader) ReadLifecycle(ctx context.Context, target lifecycle.Target) (lifecycle.Response, error) {
	resp, err := r.LifecycleReader.ReadLifecycle(ctx, target)
	if r.stalls.Add(-1) >= 0 {
		r.stall()
	}
	return resp, err
}

// deliverAll follows the chain of scheduled messages (each one delivered
// when due, as SQS would) until a delivery schedules nothing more.
func (e *env) deliverAll() {
	e.t.Helper()
	for delivered := 0; len(e.sqs.Sent()) > delivered; {
		if delivered > 20 {
			e.t.Fatalf("more than 20 messages for one change: %d", len(e.sqs.Sent()))
		}
		delivered = len(e.sqs.Sent())
		e.follow()
	}
}

// A poll whose finishing write comes after its lease ran out (the write is
// refused, lifecycle_monitor.lease_expired) used to make the poller
// quarantine and acknowledge its message with nothing scheduled: the
// record kept the expired lease until a sweep reclaimed it, and where no
// sweep ran (the cost benchmark under load) the change never ended. The
// poller now schedules a poll at once; its delivery reclaims the lease and
// schedules the retry, which polls the change to its end.
func TestPollThatOutlivesItsLeaseIsNotStranded(t *testing.T) {
	stalls := &atomic.Int32{}
	stalls.Store(1)
	var e *env
	e = setup(t, func(c *handler.Config) {
		c.Reader = stallingReader{LifecycleReader: c.Reader, stalls: stalls, stall: func() {
			e.clock.Advance(e.svc.Config().Lease + time.Second)
		}}
	})
	const id = "evt-poller-0001"
	e.cms.Script(id, cmstest.StatusStep("processing"), cmstest.StatusStep("published"))
	e.intake()
	e.deliverAll()

	st := e.status(id)
	if st.State != monitor.StateTerminal || st.RemoteStatus != "published" {
		t.Fatalf("change stranded after a poll outlived its lease: state %s (lease expires %v, now %v), %d messages sent",
			st.State, st.LeaseExpires, e.clock.Now(), len(e.sqs.Sent()))
	}
	if stalls.Load() > 0 {
		t.Fatal("the stall never happened")
	}
	// The stalled poll's answer (processing) was not stored; the retry
	// after the reclaim read the next one (published).
	if n := len(e.cms.RequestsFor(id)); n != 2 {
		t.Fatalf("CMS reads: %d, want 2 (the stalled one, then the retry)", n)
	}
	got := 0
	for _, d := range e.bus.Details() {
		if d["event_id"] == id {
			got++
		}
	}
	if got != 1 {
		t.Fatalf("terminal events of %s: %d, want 1", id, got)
	}
	logs := e.logs.String()
	if strings.Contains(logs, "poller message dropped") || !strings.Contains(logs, monitor.CodeLeaseExpired) {
		t.Fatalf("a poll that outlived its lease must be logged with %s and not quarantined:\n%s", monitor.CodeLeaseExpired, logs)
	}
}

// A poll message delivered for the first time whose claim finds an expired
// lease reclaims it (retry_wait, a failure counted): that write sets the
// next poll, so the poller must send the message for it. It used to send
// nothing (not polled, not a redelivery), leaving the change to the sweep.
func TestFirstDeliveryThatReclaimsAnExpiredLeaseSchedulesTheRetry(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	const id = "evt-poller-0001"
	e.cms.Script(id, cmstest.StatusStep("published"))
	e.intake()
	// Another worker claims the change and never finishes (it died with a
	// sweep's lease, or its write was refused).
	other, err := monitor.NewService(e.store, e.clock, nil, monitor.Config{WorkerID: "poller-other"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := other.Claim(ctx, id); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	e.clock.Advance(e.svc.Config().Lease + time.Second)

	before := len(e.sqs.Sent())
	resp := e.invokeSQS(batchOf(t, 1, pollBody(t, id, t0)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %+v", resp.BatchItemFailures)
	}
	st := e.status(id)
	if st.State != monitor.StateRetryWait || st.LastErrorCode != monitor.ReclaimErrorCode {
		t.Fatalf("after the reclaim: %+v", st)
	}
	sent := e.sqs.Sent()
	if len(sent) != before+1 {
		t.Fatalf("the reclaim scheduled %d messages, want 1 (at its next poll): stranded in retry_wait", len(sent)-before)
	}
	if want := delayqueue.Delay(st.NextPoll, e.clock.Now()); sent[len(sent)-1].DelaySeconds != want {
		t.Fatalf("retry delay %d s, want %d s", sent[len(sent)-1].DelaySeconds, want)
	}
	e.deliverAll()
	if st := e.status(id); st.State != monitor.StateTerminal || st.RemoteStatus != "published" {
		t.Fatalf("after the retry: %+v", st)
	}
}

// lostAnswerStore applies the first lose finishing writes and then answers
// as if the fence had refused them (claim_lost): the write's answer was
// lost and its retry found the record already moved, as DynamoDB can.
type lostAnswerStore struct {
	monitor.Store
	lose *atomic.Int32
}

func (s lostAnswerStore) Transition(ctx context.Context, f monitor.Fence, u monitor.Update) (monitor.Record, error) {
	rec, err := s.Store.Transition(ctx, f, u)
	if err == nil && s.lose.Add(-1) >= 0 {
		return monitor.Record{}, core.Fail(monitor.CodeClaimLost)
	}
	return rec, err
}

// A finishing write that was applied although it was reported refused
// leaves the record watching with its next poll ahead and nobody owing the
// message for it. The poller reads the record after a refused write and
// sends the poll for its next due time, so the change still ends without
// a sweep.
func TestRefusedWriteThatWasAppliedStillSchedulesTheNextPoll(t *testing.T) {
	e := setup(t)
	lose := &atomic.Int32{}
	lose.Store(1)
	svc, err := monitor.NewService(lostAnswerStore{Store: e.store, lose: lose}, e.clock, nil, monitor.Config{WorkerID: "poller-test"})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Monitor = svc
	if e.h, err = handler.New(e.cfg); err != nil {
		t.Fatal(err)
	}
	e.lambda = lambda.NewHandler(e.h.Handle)
	const id = "evt-poller-0001"
	e.cms.Script(id, cmstest.StatusStep("processing"), cmstest.StatusStep("published"))
	e.intake()
	e.deliverAll()
	if lose.Load() > 0 {
		t.Fatal("no write answer was lost")
	}
	if st := e.status(id); st.State != monitor.StateTerminal || st.RemoteStatus != "published" || st.PollAttempts != 2 {
		t.Fatalf("change stranded after a refused write that was applied: %+v", st)
	}
}
