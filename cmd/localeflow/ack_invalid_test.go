package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health/healthtest"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

// TestAckInvalidOnLocalStack: a record altered by hand was marked
// state_invalid and stayed so: ack and requeue refused it with that code
// and health stayed blocked for good (the health alarm, stuck in ALARM,
// raised nothing for later incidents). `ack --invalid` acknowledges it,
// audited (who, when, why and the code in the journal; status shows it):
// once its owed state_invalid outcome is announced (the poller's sweep,
// here the store's Announced), health is ok again. Plain ack names
// --invalid; --invalid refuses a valid record and --release; a second
// --invalid is a no-op; audit still lists the record.
func TestAckInvalidOnLocalStack(t *testing.T) {
	localtest.Require(t)
	topo := localtest.Topology(t)
	db := localtest.DynamoDB(t)
	ctx := context.Background()
	// Records of an hour ago: the open ones within health's age limits
	// (health checks at the real time).
	base := core.Millis(time.Now().Add(-time.Hour))
	store, err := monitordb.New(db, topo.Monitor.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"evt-tampered", "evt-open"} {
		if _, _, err := store.Create(ctx, healthtest.MonitorRecord(id, healthtest.Watching, base)); err != nil {
			t.Fatal(err)
		}
	}
	// Altered by hand: the binding hash no longer matches.
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(topo.Monitor.Name), Key: map[string]types.AttributeValue{topology.AttrEventID: &types.AttributeValueMemberS{Value: "evt-tampered"}},
		UpdateExpression: aws.String("SET job_count = :n"), ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: "3"}},
	}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	p := "--prefix=" + topo.Prefix
	if r := runCLI(env, p, "health"); r.code != exitBad || !strings.Contains(r.out, monitor.CodeStateInvalid) {
		t.Fatalf("health before: %+v", r)
	}
	// What a reader (the poller's sweep, status) does first: mark it.
	if r := runCLI(env, p, "status", "evt-tampered"); r.code != exitBad {
		t.Fatalf("status: %+v", r)
	}
	if r := runCLI(env, p, "requeue", "evt-tampered"); r.code != exitBad || !strings.Contains(r.err, monitor.CodeStateInvalid) {
		t.Fatalf("requeue: %+v", r)
	}
	if r := runCLI(env, p, "ack", "evt-tampered", "--reason", "x"); r.code != exitBad || !strings.Contains(r.err, monitor.CodeStateInvalid) || !strings.Contains(r.err, "ack --invalid") {
		t.Fatalf("plain ack: %+v", r)
	}
	for _, args := range [][]string{
		{"ack", "evt-tampered", "--invalid", "--release", "--reason", "x"},
		{"ack", "evt-tampered", "--invalid"},
	} {
		if r := runCLI(env, append([]string{p}, args...)...); r.code != exitUsage {
			t.Errorf("%v: %+v", args, r)
		}
	}
	if r := runCLI(env, p, "ack", "evt-open", "--invalid", "--reason", "x"); r.code != exitBad || !strings.Contains(r.err, opsdb.CodeAckNotInvalid) {
		t.Fatalf("ack --invalid of a valid record: %+v", r)
	}

	r := runCLI(env, p, "ack", "evt-tampered", "--invalid", "--reason", "job_count edited by hand in the console (TICKET-9)")
	if r.code != exitOK || !strings.Contains(r.out, "acknowledged evt-tampered (failed, lifecycle_monitor.state_invalid) by arn:") ||
		!strings.Contains(r.out, "until its outcome is announced") {
		t.Fatalf("ack --invalid: %+v", r)
	}
	rec, err := store.Get(ctx, "evt-tampered")
	if err != nil || !monitor.MarkedInvalid(rec) || rec.AcknowledgedMS == 0 || rec.OutboxMS == 0 {
		t.Fatalf("record after ack --invalid: %+v %v", rec, err)
	}
	if err := store.Announced(ctx, "evt-tampered", rec.OutboxMS); err != nil {
		t.Fatal(err)
	}
	r = runCLI(env, p, "health", "--json")
	var doc struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil || r.code != exitOK || doc.Status != "ok" {
		t.Fatalf("health after ack --invalid and the announcement: %+v", r)
	}
	if r := runCLI(env, p, "ack", "evt-tampered", "--invalid", "--reason", "again"); r.code != exitOK || !strings.Contains(r.out, "already acknowledged") {
		t.Fatalf("second ack --invalid: %+v", r)
	}
	r = runCLI(env, p, "ack", "evt-tampered", "--invalid", "--reason", "again", "--json")
	var acked struct {
		Already bool             `json:"already_acknowledged"`
		Journal opsdb.AckJournal `json:"acknowledgement"`
	}
	if err := json.Unmarshal([]byte(r.out), &acked); err != nil || r.code != exitOK || !acked.Already || acked.Journal.Count != 1 ||
		acked.Journal.ErrorCode != monitor.CodeStateInvalid || acked.Journal.State != "failed" || !strings.Contains(acked.Journal.Reason, "TICKET-9") ||
		!strings.HasPrefix(acked.Journal.By, "arn:") {
		t.Fatalf("ack --invalid --json: %+v (%v)", r, err)
	}
	if r := runCLI(env, p, "audit"); r.code != exitBad || !strings.Contains(r.out, "evt-tampered") {
		t.Fatalf("audit still lists the record: %+v", r)
	}

	// An item that no longer decodes (a number replaced by a string) yields
	// no updated_ms: the acknowledgement is conditional on the marking, and
	// the journal names the marking's time.
	if _, _, err := store.Create(ctx, healthtest.MonitorRecord("evt-garbled", healthtest.Watching, base)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(topo.Monitor.Name), Key: map[string]types.AttributeValue{topology.AttrEventID: &types.AttributeValueMemberS{Value: "evt-garbled"}},
		UpdateExpression: aws.String("SET job_count = :s"), ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: "three"}},
	}); err != nil {
		t.Fatal(err)
	}
	r = runCLI(env, p, "--json", "ack", "evt-garbled", "--invalid", "--reason", "garbled by a script (TICKET-10)")
	acked.Already = true
	if err := json.Unmarshal([]byte(r.out), &acked); err != nil || r.code != exitOK || acked.Already || acked.Journal.ErrorCode != monitor.CodeStateInvalid || acked.Journal.UpdatedMS <= 0 {
		t.Fatalf("ack --invalid of an item that does not decode: %+v (%v)", r, err)
	}
	rec, err = store.Get(ctx, "evt-garbled")
	if err != nil || !rec.Corrupt || !monitor.MarkedInvalid(rec) {
		t.Fatalf("garbled record: %+v %v", rec, err)
	}
	if err := store.Announced(ctx, "evt-garbled", rec.OutboxMS); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(env, p, "health"); r.code != exitOK {
		t.Fatalf("health after the garbled record's ack: %+v", r)
	}
}
