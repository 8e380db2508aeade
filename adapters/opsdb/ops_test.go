package opsdb_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/health/healthtest"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/topology"
)

// TestRequeueFailedRecord: a failed record goes back to due with a fresh
// failure budget, the monitor validates and claims it, health turns ok,
// and the journal counts the requeue.
func TestRequeueFailedRecord(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.putMonitor(t, healthtest.MonitorRecord("evt-1", healthtest.Failed, base))
	b.putMonitor(t, healthtest.MonitorRecord("evt-2", healthtest.Watching, base))
	now := base + 60_000 // evt-2 is due again too (watching, next poll at base+1+30000)
	got, err := b.requeuer.Requeue(ctx, "evt-1", now)
	if err != nil {
		t.Fatal(err)
	}
	a := got.After
	if a.State != monitor.StateRetryWait || a.ConsecutiveFailures != 0 || a.NextPollMS != now || a.UpdatedMS != now ||
		a.LastErrorCode != opsdb.RequeuedErrorCode || a.PollAttempts != got.Before.PollAttempts {
		t.Fatalf("after = %+v", a)
	}
	want := opsdb.Journal{EventID: "evt-1", RequeuedCount: 1, RequeuedMS: now, LastFailedCode: "cms.http_503", LastFailedMS: base + 1, LastFailedFailures: 5}
	if got.Journal != want {
		t.Fatalf("journal = %+v, want %+v", got.Journal, want)
	}
	// The monitor accepts the record: status validates, it is due, and a
	// worker can claim it.
	b.clock.ms.Store(now + 1)
	svc, err := monitor.NewService(b.monitor, b.clock, nil, monitor.Config{WorkerID: "w1"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := svc.Status(ctx, "evt-1")
	if err != nil || st.State != monitor.StateRetryWait {
		t.Fatalf("status = %+v, %v", st, err)
	}
	r := b.check(t, func(r health.Report) bool { return r.Status == health.StatusOK && r.Monitor.Due == 2 })
	if r.Status != health.StatusOK || r.Monitor.Due != 2 || r.Monitor.Failed != 0 || r.Monitor.Counts["retry_wait"] != 1 {
		t.Fatalf("health after requeue = %+v %v", r.Monitor, r.Reasons)
	}
	c, ok, err := svc.Claim(ctx, "evt-1")
	if err != nil || !ok || c.ConsecutiveFailures != 0 || c.Attempt != got.Before.PollAttempts+1 {
		t.Fatalf("claim after requeue = %+v %v %v", c, ok, err)
	}
	// Not failed any more: refused, nothing written.
	if _, err := b.requeuer.Requeue(ctx, "evt-1", now+2); !core.HasCode(err, opsdb.CodeRequeueNotFailed) {
		t.Fatalf("requeue of a leased record: %v", err)
	}
	if _, err := b.requeuer.Requeue(ctx, "evt-2", now+2); !core.HasCode(err, opsdb.CodeRequeueNotFailed) {
		t.Fatalf("requeue of a watching record: %v", err)
	}
	if _, err := b.requeuer.Requeue(ctx, "evt-none", now+2); !core.HasCode(err, monitor.CodeEventMissing) {
		t.Fatalf("requeue of a missing record: %v", err)
	}
	if _, err := b.requeuer.Requeue(ctx, "evt <1>", now+2); !core.HasCode(err, monitor.CodeEventInvalid) {
		t.Fatalf("requeue of a bad id: %v", err)
	}
	// Failing again and a second requeue count up in the journal.
	if _, err := svc.Fail(ctx, c, "cms.http_404"); err != nil {
		t.Fatal(err)
	}
	again, err := b.requeuer.Requeue(ctx, "evt-1", now+5)
	if err != nil {
		t.Fatal(err)
	}
	want = opsdb.Journal{EventID: "evt-1", RequeuedCount: 2, RequeuedMS: now + 5, LastFailedCode: "cms.http_404", LastFailedMS: now + 1, LastFailedFailures: 1}
	if again.Journal != want {
		t.Fatalf("journal = %+v, want %+v", again.Journal, want)
	}
}

// TestRequeueRefusesInvalidAndClockRegressed covers the refusals that
// need stored data.
func TestRequeueRefusesInvalidAndClockRegressed(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.putMonitor(t, healthtest.MonitorRecord("evt-1", healthtest.Failed, base), healthtest.MonitorRecord("evt-2", healthtest.Failed, base))
	b.tamper(t, b.topo.Monitor.Name, monitorKey("evt-1"), "SET plan_id = :v", map[string]types.AttributeValue{":v": s("plan-other")})
	if _, err := b.requeuer.Requeue(ctx, "evt-1", base+10); !core.HasCode(err, monitor.CodeStateInvalid) {
		t.Fatalf("requeue of a tampered record: %v", err)
	}
	if _, err := b.requeuer.Requeue(ctx, "evt-2", base); !core.HasCode(err, monitor.CodeClockRegressed) {
		t.Fatalf("requeue before updated_ms: %v", err)
	}
	if _, ok, err := b.requeuer.History(ctx, "evt-1"); ok || err != nil {
		t.Fatalf("journal written by a refused requeue: %v %v", ok, err)
	}
}

// TestAuditNamesEveryInvalidRecord: the parallel Scan finds exactly the
// tampered records of both tables, and health names the monitor one too.
func TestAuditNamesEveryInvalidRecord(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	for i := range 30 {
		b.putMonitor(t, healthtest.MonitorRecord(fmt.Sprintf("evt-%02d", i), healthtest.Terminal, base))
	}
	b.putMonitor(t, healthtest.MonitorRecord("evt-failed", healthtest.Failed, base))
	b.putRelease(t, healthtest.Evidence("evt-01", "req-1", "pending", base), healthtest.Delivery("evt-01", "succeeded", base))
	if _, err := b.requeuer.Requeue(ctx, "evt-failed", base+10); err != nil {
		t.Fatal(err)
	}
	// Tamper: a terminal monitor record (never read by health), a journal,
	// an evidence record and a delivery record.
	b.tamper(t, b.topo.Monitor.Name, monitorKey("evt-17"), "SET poll_attempts = :v", map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: "-1"}})
	b.tamper(t, b.topo.Monitor.Name, monitorKey(opsdb.JournalPrefix+"evt-failed"), "SET requeued_count = :v", map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: "0"}})
	b.tamper(t, b.topo.Release.Name, map[string]types.AttributeValue{topology.AttrPK: s("event#evt-01"), topology.AttrSK: s("evidence#req-1")},
		"SET result_sha256 = :v", map[string]types.AttributeValue{":v": s("not-a-hash")})
	b.tamper(t, b.topo.Release.Name, map[string]types.AttributeValue{topology.AttrPK: s("event#evt-01"), topology.AttrSK: s("delivery")},
		"SET wake_shard = :v", map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: "1"}})
	rep, err := b.auditor.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []opsdb.Finding{
		{Table: b.topo.Monitor.Name, Kind: "monitor", EventID: "evt-17", Code: monitor.CodeStateInvalid},
		{Table: b.topo.Monitor.Name, Kind: "journal", EventID: opsdb.JournalPrefix + "evt-failed", Code: opsdb.CodeJournalInvalid},
		{Table: b.topo.Release.Name, Kind: "delivery", EventID: "evt-01", Key: "delivery", Code: health.CodeDeliveryInvalid},
		{Table: b.topo.Release.Name, Kind: "evidence", EventID: "evt-01", Key: "evidence#req-1", Code: health.CodeEvidenceInvalid},
	}
	if !reflect.DeepEqual(rep.Invalid, want) || rep.MonitorRecords != 31 || rep.JournalItems != 1 || rep.ReleaseItems != 2 {
		t.Fatalf("audit = %+v\nwant invalid %+v", rep, want)
	}
}

// racingClient changes the record (as a concurrent requeue or worker
// would) just before the requeue transaction is sent.
type racingClient struct {
	*dynamodb.Client
	race func()
}

func (c racingClient) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.race()
	return c.Client.TransactWriteItems(ctx, in, opts...)
}

// TestRequeueLostRace: a record that changed between the read and the
// write is not requeued, and the journal is untouched (one transaction).
func TestRequeueLostRace(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.putMonitor(t, healthtest.MonitorRecord("evt-1", healthtest.Failed, base))
	raced := racingClient{Client: b.db, race: func() {
		b.tamper(t, b.topo.Monitor.Name, monitorKey("evt-1"), "SET updated_ms = :v", map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: fmt.Sprint(base + 7)}})
	}}
	q, err := opsdb.NewRequeuer(b.monitor, raced, b.topo.Monitor.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Requeue(ctx, "evt-1", base+10); !core.HasCode(err, opsdb.CodeRequeueLost) || core.IsRetryable(err) {
		t.Fatalf("requeue across a concurrent change: %v", err)
	}
	rec, err := b.monitor.Get(ctx, "evt-1")
	if err != nil || rec.State != monitor.StateFailed || rec.UpdatedMS != base+7 {
		t.Fatalf("record = %+v, %v", rec, err)
	}
	if _, ok, err := b.requeuer.History(ctx, "evt-1"); ok || err != nil {
		t.Fatalf("journal written by a lost requeue: %v %v", ok, err)
	}
}
