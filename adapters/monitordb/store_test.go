package monitordb

import (
	"context"
	"encoding/base64"
	"math/rand/v2"
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
	})
}

// TestStoreConformanceOutboxLayout: the port's suite on a store writing
// owed outcomes in the earlier layout (monitor.OwedInOutbox, the first
// deploy over older code; docs/design.md "Owed outcomes in the wake
// index").
func TestStoreConformanceOutboxLayout(t *testing.T) {
	monitortest.RunStoreSuite(t, monitortest.Harness{
		New: func(t *testing.T) monitor.Store {
			s, _, _ := newStore(t)
			return s.WithOwedLayout(monitor.OwedInOutbox)
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
	})
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
		{"schema version missing", func(av map[string]types.AttributeValue) { delete(av, attrSchemaVersion) }},
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
			if _, ok := after[attrWakeMS]; ok {
				t.Fatal("failed item still in the wake index")
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

func TestOtherSchemaVersionIsLeftAlone(t *testing.T) {
	ctx := context.Background()
	s, db, table := newStore(t)
	svc, _ := monitor.NewService(s, core.ClockFunc(func() time.Time { return core.FromMillis(monitortest.T0) }), nil, monitor.Config{})
	if _, _, err := s.Create(ctx, monitortest.NewRecord("evt-v2", monitortest.T0)); err != nil {
		t.Fatal(err)
	}
	av := getRaw(t, db, table, "evt-v2")
	av[attrSchemaVersion] = &types.AttributeValueMemberN{Value: "2"}
	putRaw(t, db, table, av)
	_, err := svc.Status(ctx, "evt-v2")
	if !core.HasCode(err, monitor.CodeSchemaAltered) {
		t.Fatalf("Status = %v", err)
	}
	if v := getRaw(t, db, table, "evt-v2")[attrState].(*types.AttributeValueMemberS).Value; v != string(monitor.StatePending) {
		t.Fatalf("record of another version rewritten: %s", v)
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

// An item written before the compact snapshot holds the canonical JSON as
// a string: it reads and validates as it is, a claim keeps it, and the
// next finishing write with an answer stores the compact form.
func TestStringSnapshotItemIsPolledAndRewrittenCompact(t *testing.T) {
	ctx := context.Background()
	s, db, table := newStore(t)
	rec := watchedRecord("evt-old-snapshot", "processing")
	av, err := encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	av[attrLifecycle] = &types.AttributeValueMemberS{Value: string(rec.Lifecycle)}
	putRaw(t, db, table, av)
	got, err := s.Get(ctx, rec.EventID)
	if err != nil || got.Corrupt || string(got.Lifecycle) != string(rec.Lifecycle) {
		t.Fatalf("Get = corrupt %v lifecycle %q, %v", got.Corrupt, got.Lifecycle, err)
	}
	if _, err := monitor.Validate(got); err != nil {
		t.Fatal(err)
	}
	now := rec.NextPollMS
	held, ok, err := s.Claim(ctx, rec.EventID, monitor.Lease{Owner: "w", Token: "tok-old", NowMS: now, ExpiresMS: now + 60_000})
	if err != nil || !ok || string(held.Lifecycle) != string(rec.Lifecycle) {
		t.Fatalf("claim = %v, %v (lifecycle %q)", ok, err, held.Lifecycle)
	}
	if _, isString := getRaw(t, db, table, rec.EventID)[attrLifecycle].(*types.AttributeValueMemberS); !isString {
		t.Fatal("the claim rewrote the snapshot")
	}
	snap := monitortest.Snapshot(rec, "publishing")
	done, err := s.Transition(ctx, monitor.FenceOf(held, now+1), monitor.Update{State: monitor.StateWatching, NextPollMS: now + 30_000,
		SetSnapshot: true, RemoteStatus: snap.Status, LifecycleSHA256: snap.SHA256, Lifecycle: snap.Canonical, UpdatedMS: now + 1})
	if err != nil || string(done.Lifecycle) != string(snap.Canonical) {
		t.Fatalf("transition = %v (lifecycle %q)", err, done.Lifecycle)
	}
	if _, compact := getRaw(t, db, table, rec.EventID)[attrLifecycle].(*types.AttributeValueMemberB); !compact {
		t.Fatal("the finishing write did not store the compact snapshot")
	}
	if _, err := monitor.Validate(done); err != nil {
		t.Fatal(err)
	}
}
