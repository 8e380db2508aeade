package monitordb

import (
	"context"
	"encoding/base64"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/monitortest"
)

func newStore(t *testing.T) (*Store, *dynamodb.Client, string) {
	t.Helper()
	db, table := newTable(t)
	s, err := New(db, table)
	if err != nil {
		t.Fatal(err)
	}
	return s, db, table
}

// putRaw overwrites an item bypassing every condition.
func putRaw(t *testing.T, db *dynamodb.Client, table string, av map[string]types.AttributeValue) {
	t.Helper()
	if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: av}); err != nil {
		t.Fatalf("put raw: %v", err)
	}
}

func getRaw(t *testing.T, db *dynamodb.Client, table, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(id), ConsistentRead: aws.Bool(true)})
	if err != nil || len(out.Item) == 0 {
		t.Fatalf("get raw %s: %v", id, err)
	}
	return out.Item
}

func TestStoreConformance(t *testing.T) {
	monitortest.RunStoreSuite(t, monitortest.Harness{
		New: func(t *testing.T) monitor.Store {
			s, _, _ := newStore(t)
			return s
		},
		Tamper: func(t *testing.T, st monitor.Store, id string, edit func(*monitor.Record)) {
			s := st.(*Store)
			db := s.db.(*dynamodb.Client)
			rec := decode(getRaw(t, db, s.table, id))
			edit(&rec)
			av, err := encode(rec)
			if err != nil {
				t.Fatal(err)
			}
			putRaw(t, db, s.table, av)
		},
		NotAtomic: notAtomic(),
	})
}

// notAtomic is monitortest.Harness.NotAtomic for the implementation the
// tests run on (with-stack.sh sets LOCALEFLOW_EMULATOR).
func notAtomic() string {
	if os.Getenv("LOCALEFLOW_EMULATOR") == "moto" {
		return "moto_server evaluates a conditional write's condition and applies it without a lock: two concurrent requests both succeed (docs/design.md, \"Two emulators\")"
	}
	return ""
}

// TestRawItemTampering plants items that only a DynamoDB table can hold
// (wrong attribute types, unknown attributes, index keys that disagree):
// each is state_invalid, gets marked failed, and never panics.
func TestRawItemTampering(t *testing.T) {
	ctx := context.Background()
	s, db, table := newStore(t)
	svc, err := monitor.NewService(s, core.ClockFunc(func() time.Time { return core.FromMillis(monitortest.T0 + 10) }), nil, monitor.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(av map[string]types.AttributeValue)
	}{
		{"state is a number", func(av map[string]types.AttributeValue) { av[attrState] = &types.AttributeValueMemberN{Value: "1"} }},
		{"job count is a string", func(av map[string]types.AttributeValue) { av[attrJobCount] = &types.AttributeValueMemberS{Value: "2"} }},
		{"fractional ms", func(av map[string]types.AttributeValue) {
			av[attrNextPollMS] = &types.AttributeValueMemberN{Value: "1.5"}
		}},
		{"text attribute", func(av map[string]types.AttributeValue) {
			av["source_text"] = &types.AttributeValueMemberS{Value: "Hallo Welt"}
		}},
		{"wake key missing", func(av map[string]types.AttributeValue) { delete(av, attrWakeMS) }},
		{"wake key wrong", func(av map[string]types.AttributeValue) { av[attrWakeMS] = &types.AttributeValueMemberN{Value: "1"} }},
		{"attention on a pending item", func(av map[string]types.AttributeValue) {
			av[attrAttentionShard] = &types.AttributeValueMemberN{Value: "0"}
			av[attrAttentionMS] = &types.AttributeValueMemberN{Value: "1"}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "evt-raw-" + string(rune('a'+i))
			rec := monitortest.NewRecord(id, monitortest.T0)
			if _, _, err := s.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			av := getRaw(t, db, table, id)
			tt.edit(av)
			putRaw(t, db, table, av)
			_, err := svc.Status(ctx, id)
			if !core.HasCode(err, monitor.CodeStateInvalid) {
				t.Fatalf("Status = %v", err)
			}
			after := getRaw(t, db, table, id)
			if v, ok := after[attrState].(*types.AttributeValueMemberS); !ok || v.Value != string(monitor.StateFailed) {
				t.Fatalf("not marked failed: %v", after[attrState])
			}
			// Its owed outcome is listed by the wake index at its outbox key.
			if w, o := after[attrWakeMS], after[attrOutboxMS]; w == nil || o == nil ||
				w.(*types.AttributeValueMemberN).Value != o.(*types.AttributeValueMemberN).Value {
				t.Fatalf("failed item: wake key %v, outbox key %v", w, o)
			}
			if _, ok := after[attrAttentionShard]; !ok {
				t.Fatal("failed item not in the attention index")
			}
		})
	}
	h, err := svc.Health(ctx)
	if err != nil || h.Status != monitor.HealthBlocked || h.Failed != len(tests) {
		t.Fatalf("health = %+v, %v", h, err)
	}
}

// TestOtherSchemaVersionIsLeftAlone plants, on DynamoDB Local, items of
// schema version 2 and items without schema_version — due, watching and
// final with an owed outcome — and runs every path that reads or writes
// them: Status, a poll (the claim), a due claim as the sweep makes, a
// hint, a finishing write on a held lease, marking invalid, the owed
// listing and its announcement. Each is refused with
// lifecycle_monitor.schema_altered or passes the item by, and no item
// changes by one byte.
func TestOtherSchemaVersionIsLeftAlone(t *testing.T) {
	for name, edit := range map[string]func(map[string]types.AttributeValue){
		"version 2": func(av map[string]types.AttributeValue) {
			av[attrSchemaVersion] = &types.AttributeValueMemberN{Value: "2"}
		},
		"no version": func(av map[string]types.AttributeValue) { delete(av, attrSchemaVersion) },
	} {
		t.Run(name, func(t *testing.T) { otherSchemaVersionIsLeftAlone(t, edit) })
	}
}

func otherSchemaVersionIsLeftAlone(t *testing.T, edit func(map[string]types.AttributeValue)) {
	ctx := context.Background()
	s, db, table := newStore(t)
	now := monitortest.T0 + 10*time.Minute.Milliseconds()
	svc, err := monitor.NewService(s, core.ClockFunc(func() time.Time { return core.FromMillis(now) }), nil, monitor.Config{WorkerID: "worker-1"})
	if err != nil {
		t.Fatal(err)
	}
	due := monitortest.NewRecord("evt-due", monitortest.T0)
	watching := watchedRecord("evt-watching", "processing")
	watching.NextPollMS = now + time.Hour.Milliseconds()
	owed := monitortest.NewRecord("evt-owed", monitortest.T0)
	owed.State, owed.RemoteStatus, owed.OutboxMS = monitor.StateTerminal, "cancelled", monitortest.T0
	held := monitortest.NewRecord("evt-held", monitortest.T0)
	planted := map[string]map[string]types.AttributeValue{}
	for _, rec := range []monitor.Record{due, watching, owed, held} {
		av, err := encode(rec)
		if err != nil {
			t.Fatal(err)
		}
		putRaw(t, db, table, av)
	}
	lease, ok, err := s.Claim(ctx, "evt-held", monitor.Lease{Owner: "worker-1", Token: "tok-1", NowMS: now, ExpiresMS: now + 60_000})
	if err != nil || !ok {
		t.Fatalf("claim = %v, %v", ok, err)
	}
	for _, id := range []string{"evt-due", "evt-watching", "evt-owed", "evt-held"} {
		av := getRaw(t, db, table, id)
		edit(av)
		putRaw(t, db, table, av)
		planted[id] = getRaw(t, db, table, id)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !core.HasCode(err, monitor.CodeSchemaAltered) {
			t.Errorf("%s = %v, want %s", what, err, monitor.CodeSchemaAltered)
		}
	}
	for id := range planted {
		_, err := svc.Status(ctx, id)
		refused("Status("+id+")", err)
	}
	_, err = svc.PollOnce(ctx, "evt-due", fixedReader{status: "published"})
	refused("PollOnce", err)
	claims, err := svc.ClaimDue(ctx, 10)
	if len(claims) != 0 {
		t.Errorf("ClaimDue claimed %+v (%v)", claims, err)
	}
	ids, next, err := svc.SweepPage(ctx, 100, monitor.DueCursor{})
	if err != nil {
		t.Fatal(err)
	}
	for len(ids) > 0 {
		for _, id := range ids {
			if _, err := svc.PollOnce(ctx, id, fixedReader{status: "published"}); !core.HasCode(err, monitor.CodeSchemaAltered) {
				t.Errorf("sweep poll of %s = %v", id, err)
			}
		}
		if ids, next, err = svc.SweepPage(ctx, 100, next); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := svc.Hint(ctx, monitor.HintDetail{EventID: "evt-watching", SiteID: watching.SiteID}); res.Advanced {
		t.Errorf("hint advanced a record of another version: %+v, %v", res, err)
	}
	_, err = s.Transition(ctx, monitor.FenceOf(lease, now+1), monitor.Update{State: monitor.StateFailed, ConsecutiveFailures: 1,
		LastErrorCode: "cms.http_404", NextPollMS: now + 1, UpdatedMS: now + 1})
	refused("Transition", err)
	for id := range planted {
		if err := s.MarkInvalid(ctx, id, now+2); err != nil {
			t.Errorf("MarkInvalid(%s) = %v", id, err)
		}
	}
	if err := s.Announced(ctx, "evt-owed", owed.OutboxMS); err != nil {
		t.Error(err)
	}
	if got, err := svc.OwedOutcomes(ctx, 10); err != nil || len(got) != 0 {
		t.Errorf("OwedOutcomes = %v, %v", got, err)
	}
	for id, want := range planted {
		if got := getRaw(t, db, table, id); !reflect.DeepEqual(got, want) {
			t.Errorf("%s changed:\n got %v\nwant %v", id, got, want)
		}
	}
	recs, err := s.Census(ctx)
	if err != nil || len(recs) != len(planted) {
		t.Fatalf("Census = %d records, %v; want every planted one reported", len(recs), err)
	}
}

func TestStoreErrorsAreCoreErrors(t *testing.T) {
	s, _, _ := newStore(t)
	bad, _ := New(s.db, "no-such-table")
	ctx := context.Background()
	_, err := bad.Get(ctx, "evt-1")
	if !core.HasCode(err, monitor.CodeStoreUnavailable) || !core.IsRetryable(err) {
		t.Fatalf("Get on a missing table = %v", err)
	}
	if _, err := bad.Due(ctx, 1, 10); !core.HasCode(err, monitor.CodeStoreUnavailable) {
		t.Fatalf("Due on a missing table = %v", err)
	}
}

// DynamoDB refuses an item above 400 KB with a ValidationException: that is
// store_rejected, not retryable (retrying would loop through lease
// expiries), and nothing is written.
func TestOversizeItemIsRejectedNotRetried(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newStore(t)
	if _, _, err := s.Create(ctx, monitortest.NewRecord("evt-big", monitortest.T0)); err != nil {
		t.Fatal(err)
	}
	l := monitor.Lease{Owner: "w", Token: "tok-big", NowMS: monitortest.T0 + 1, ExpiresMS: monitortest.T0 + 60_000}
	held, ok, err := s.Claim(ctx, "evt-big", l)
	if err != nil || !ok {
		t.Fatalf("claim = %v, %v", ok, err)
	}
	// Random base64 (6 bits a character): above 400 KB even compressed.
	noise := make([]byte, 450_000)
	for i := range noise {
		noise[i] = byte(rand.IntN(256))
	}
	big := []byte(`{"x":"` + base64.StdEncoding.EncodeToString(noise) + `"}`)
	u := monitor.Update{State: monitor.StateWatching, NextPollMS: monitortest.T0 + 30_000, SetSnapshot: true,
		RemoteStatus: "processing", LifecycleSHA256: core.SHA256Hex(big), Lifecycle: big, UpdatedMS: monitortest.T0 + 2}
	_, err = s.Transition(ctx, monitor.FenceOf(held, monitortest.T0+2), u)
	if !core.HasCode(err, monitor.CodeStoreRejected) || core.IsRetryable(err) {
		t.Fatalf("oversize write = %v (retryable %v), want %s not retryable", err, core.IsRetryable(err), monitor.CodeStoreRejected)
	}
	read, err := s.Get(ctx, "evt-big")
	if err != nil || read.State != monitor.StateLeased || read.Lifecycle != nil {
		t.Fatalf("record after the refused write = %+v, %v", read, err)
	}
}
