package fault

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/proof/harness"
	"github.com/localeflow/localeflow/dev/proof/invariant"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/topology"
)

// owed lists the outcomes still owed, read with the clean client.
func (e *monitorEnv) owed(t *testing.T) []string {
	t.Helper()
	store, err := monitordb.New(e.stack.Audit, e.stack.Resources.MonitorTable)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := store.Owed(context.Background(), 1<<62, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestOutcomesAnnouncedWhateverEndsTheChange: changes end published, or
// failed when the sweep reclaims their expired lease at the failure limit
// (1 for these, registered by a poller configured so), while DynamoDB throttles and fails a fifth of the calls (so
// some outbox clears fail after their event was published). Every outcome
// is announced and cleared from the outbox in the end: nothing is owed,
// and at least one localeflow.change.terminal was put per change.
func TestOutcomesAnnouncedWhateverEndsTheChange(t *testing.T) {
	e := newMonitorEnv(t, 7, 10)
	ctx := context.Background()
	published := ids("evt-outcome-pub", 6)
	for _, id := range published {
		e.life.PutChange(id, script("processing", "published")...)
		if err := e.stack.Dispatch(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	reclaimed := ids("evt-outcome-lease", 4)
	crashed := e.stack.NewPoller(t, e.life, e.clock, harness.FastMonitor("poller-crashed", 200*time.Millisecond, 1), nil)
	for _, id := range reclaimed {
		e.life.PutChange(id, script("processing")...)
		if err := crashed.Register(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := crashed.Service.Claim(ctx, id); err != nil || !ok {
			t.Fatalf("claim %s: %v %v", id, ok, err)
		}
	}
	all := append(append([]string(nil), published...), reclaimed...)
	e.stack.Meter.Reset()
	e.stack.Faults.Fraction = 0.2
	e.stack.Faults.Enable(true)
	err := e.p.ESM.Run(ctx, 120*time.Second, func() bool {
		return e.stack.AllFinal(ctx, all) && len(e.owed(t)) == 0
	})
	e.stack.Faults.Enable(false)
	if err != nil {
		t.Fatalf("%v (owed %v)", err, e.owed(t))
	}
	_, injected := e.stack.Faults.Stats()
	if injected["total"] == 0 {
		t.Fatal("no fault was injected")
	}
	e.wantFinal(t, published, monitor.StateTerminal, "published", 0, 0)
	e.wantFinal(t, reclaimed, monitor.StateFailed, monitor.ReclaimErrorCode, 1, 0)
	if ev := e.stack.Meter.Snapshot().Events; ev < int64(len(all)) {
		t.Fatalf("%d events put for %d finished changes", ev, len(all))
	}
	e.stack.Check(t, invariant.Options{Texts: texts(all), OutcomesAnnounced: true})
}

// TestSchemaAlteredRecordIsLeftAsItWas: a record another schema version
// wrote is never leased nor changed by one byte (every sweep's claim of
// it is refused), it blocks health, and the changes around it finish.
func TestSchemaAlteredRecordIsLeftAsItWas(t *testing.T) {
	e := newMonitorEnv(t, 8, 5)
	ctx := context.Background()
	list := ids("evt-schema-ok", 3)
	for _, id := range list {
		e.life.PutChange(id, script("published")...)
		if err := e.p.Register(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	const altered = "evt-schema-v2"
	e.life.PutChange(altered, script("published")...)
	if err := e.p.Register(ctx, altered); err != nil {
		t.Fatal(err)
	}
	if _, err := e.stack.Audit.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(e.stack.Resources.MonitorTable),
		Key:                       map[string]types.AttributeValue{topology.AttrEventID: &types.AttributeValueMemberS{Value: altered}},
		UpdateExpression:          aws.String("SET schema_version = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: strconv.Itoa(monitor.SchemaVersion + 1)}},
	}); err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{topology.AttrEventID: &types.AttributeValueMemberS{Value: altered}}
	planted, err := e.stack.Audit.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.stack.Resources.MonitorTable), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	e.run(t, list, 60*time.Second)
	// A few more sweeps: each meets the altered record in the wake index
	// and its claim is refused.
	for range 3 {
		if _, err := e.p.Handler.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	e.wantFinal(t, list, monitor.StateTerminal, "published", 1, 1)
	out, err := e.stack.Audit.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.stack.Resources.MonitorTable),
		Key: map[string]types.AttributeValue{topology.AttrEventID: &types.AttributeValueMemberS{Value: altered}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out.Item, planted.Item) {
		t.Fatalf("record of another schema version was changed:\n got %v\nwant %v", out.Item, planted.Item)
	}
	if n := len(e.life.RequestsFor(altered)); n != 0 {
		t.Fatalf("CMS polled for the altered record %d times", n)
	}
	h, err := e.p.Service.Health(ctx)
	if err != nil || h.Status != monitor.HealthBlocked || h.Failed != 1 || h.ExpiredLeases != 0 {
		t.Fatalf("health = %+v, %v", h, err)
	}
}

// TestSweepPagesPastUnclaimableHeadOnDynamoDB: more unclaimable due
// entries than a page holds sit at the head of the wake index (updated in
// the future, as a clock stepped back leaves them); a sweep with a page of
// 2 still polls the changes behind them.
func TestSweepPagesPastUnclaimableHeadOnDynamoDB(t *testing.T) {
	e := newMonitorEnv(t, 9, 5)
	ctx := context.Background()
	stuck := ids("evt-head-stuck", 6)
	for _, id := range stuck {
		e.life.PutChange(id, script("published")...)
		if err := e.p.Register(ctx, id); err != nil {
			t.Fatal(err)
		}
		future := e.clock.Now().Add(time.Hour).UnixMilli()
		if _, err := e.stack.Audit.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(e.stack.Resources.MonitorTable),
			Key:                       map[string]types.AttributeValue{topology.AttrEventID: &types.AttributeValueMemberS{Value: id}},
			UpdateExpression:          aws.String("SET updated_ms = :u"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": &types.AttributeValueMemberN{Value: strconv.FormatInt(future, 10)}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	behind := ids("evt-head-behind", 3)
	for _, id := range behind {
		e.life.PutChange(id, script("published")...)
		if err := e.p.Register(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	h, err := handler.New(handler.Config{Monitor: e.p.Service, Reader: e.p.Reader, Clock: e.clock,
		Queue: noQueue{}, Bus: noBus{}, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	// The index is eventually consistent, and the sweep lists a change
	// once it has been due for the sweep grace: give it a moment.
	if !harness.Eventually(ctx, 10*time.Second, func() bool {
		ids, _, err := e.p.Service.SweepPage(ctx, 100, monitor.DueCursor{})
		return err == nil && len(ids) == len(stuck)+len(behind)
	}) {
		t.Fatal("registered changes never became due past the sweep grace")
	}
	res, err := h.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Polled != len(behind) || res.Skipped != len(stuck) || res.Stopped != handler.StopDrained {
		t.Fatalf("sweep %+v", res)
	}
	e.wantFinal(t, behind, monitor.StateTerminal, "published", 1, 1)
}

type noQueue struct{}

func (noQueue) Send(context.Context, string, string, time.Time, time.Time) error { return nil }
func (noQueue) Resend(context.Context, delayqueue.Envelope, time.Time) error     { return nil }
func (noQueue) SendBatch(_ context.Context, envs []delayqueue.Envelope, _ time.Time) []error {
	return make([]error, len(envs))
}

type noBus struct{}

func (noBus) Publish(context.Context, string, any) error { return nil }
