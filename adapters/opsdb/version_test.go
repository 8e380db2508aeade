package opsdb_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health/healthtest"
	"github.com/localeflow/localeflow/core/monitor"
)

func (b *bundle) raw(t *testing.T, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := b.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(b.topo.Monitor.Name), Key: monitorKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func (b *bundle) putRaw(t *testing.T, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := b.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(b.topo.Monitor.Name), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// TestJournalsCarryTheSchemaVersion: on DynamoDB Local, a requeue and an
// acknowledgement write their journal items with schema_version 1.
func TestJournalsCarryTheSchemaVersion(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.putMonitor(t, healthtest.MonitorRecord("evt-1", healthtest.Failed, base), healthtest.MonitorRecord("evt-2", healthtest.Failed, base))
	if _, err := b.requeuer.Requeue(ctx, "evt-1", base+60_000); err != nil {
		t.Fatal(err)
	}
	if _, err := b.requeuer.Acknowledge(ctx, "evt-2", "arn:aws:iam::000000000000:user/ops", "looked at it", base+60_000); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{opsdb.JournalPrefix + "evt-1", opsdb.AckJournalPrefix + "evt-2", "evt-1", "evt-2"} {
		if v, ok := b.raw(t, id)["schema_version"].(*types.AttributeValueMemberN); !ok || v.Value != "1" {
			t.Errorf("%s: schema_version %v", id, b.raw(t, id)["schema_version"])
		}
	}
}

// TestOperatorWritesRefuseOtherSchemaVersions: on DynamoDB Local, a
// journal item or a record of schema version 2, or without a version, is
// refused by the operator's reads and writes (requeue, acknowledgement,
// their histories) with lifecycle_monitor.schema_altered, the audit names
// each, and neither a record nor a journal item changes.
func TestOperatorWritesRefuseOtherSchemaVersions(t *testing.T) {
	for name, edit := range map[string]func(map[string]types.AttributeValue){
		"version 2": func(av map[string]types.AttributeValue) {
			av["schema_version"] = &types.AttributeValueMemberN{Value: "2"}
		},
		"no version": func(av map[string]types.AttributeValue) { delete(av, "schema_version") },
	} {
		t.Run(name, func(t *testing.T) { operatorWritesRefuse(t, edit) })
	}
}

func operatorWritesRefuse(t *testing.T, edit func(map[string]types.AttributeValue)) {
	b := setup(t)
	ctx := context.Background()
	const by, reason = "arn:aws:iam::000000000000:user/ops", "looked at it"
	b.putMonitor(t, healthtest.MonitorRecord("evt-j", healthtest.Failed, base), healthtest.MonitorRecord("evt-a", healthtest.Failed, base),
		healthtest.MonitorRecord("evt-r", healthtest.Failed, base))
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	journals := []map[string]types.AttributeValue{
		{"event_id": s(opsdb.JournalPrefix + "evt-j"), "schema_version": n("1"), "requeued_count": n("1"), "requeued_ms": n("1764417600000"),
			"last_failed_code": s("cms.http_503"), "last_failed_ms": n("1764417500000"), "last_failed_failures": n("5")},
		{"event_id": s(opsdb.AckJournalPrefix + "evt-a"), "schema_version": n("1"), "ack_count": n("1"), "ack_by": s(by),
			"ack_ms": n("1764417600000"), "ack_reason": s(reason), "acked_state": s("failed"),
			"acked_error_code": s("cms.http_503"), "acked_updated_ms": n("1764417500000")},
	}
	for _, j := range journals {
		edit(j)
		b.putRaw(t, j)
	}
	rec := b.raw(t, "evt-r")
	edit(rec)
	b.putRaw(t, rec)
	keys := []string{"evt-j", "evt-a", "evt-r", opsdb.JournalPrefix + "evt-j", opsdb.AckJournalPrefix + "evt-a"}
	planted := map[string]map[string]types.AttributeValue{}
	for _, k := range keys {
		planted[k] = b.raw(t, k)
	}
	_, err := b.requeuer.Requeue(ctx, "evt-j", base+60_000)
	wantSchemaAltered(t, "Requeue under a journal of another version", err)
	_, _, err = b.requeuer.History(ctx, "evt-j")
	wantSchemaAltered(t, "History", err)
	_, err = b.requeuer.Acknowledge(ctx, "evt-a", by, reason, base+60_000)
	wantSchemaAltered(t, "Acknowledge under a journal of another version", err)
	_, _, err = b.requeuer.AckHistory(ctx, "evt-a")
	wantSchemaAltered(t, "AckHistory", err)
	_, err = b.requeuer.Requeue(ctx, "evt-r", base+60_000)
	wantSchemaAltered(t, "Requeue of a record of another version", err)
	_, err = b.requeuer.Acknowledge(ctx, "evt-r", by, reason, base+60_000)
	wantSchemaAltered(t, "Acknowledge of a record of another version", err)
	for _, k := range keys {
		if got := b.raw(t, k); !reflect.DeepEqual(got, planted[k]) {
			t.Errorf("%s changed:\n got %v\nwant %v", k, got, planted[k])
		}
	}
	rep, err := b.auditor.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, f := range rep.Invalid {
		found[f.EventID] = f.Code
	}
	for _, k := range []string{"evt-r", opsdb.JournalPrefix + "evt-j", opsdb.AckJournalPrefix + "evt-a"} {
		if found[k] != monitor.CodeSchemaAltered {
			t.Errorf("audit finding of %s: %q, want %s (%+v)", k, found[k], monitor.CodeSchemaAltered, rep.Invalid)
		}
	}
}

func wantSchemaAltered(t *testing.T, what string, err error) {
	t.Helper()
	if !core.HasCode(err, monitor.CodeSchemaAltered) {
		t.Errorf("%s = %v, want %s", what, err, monitor.CodeSchemaAltered)
	}
}
