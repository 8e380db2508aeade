package main

import (
	"bytes"
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
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health/healthtest"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

const base = int64(1_764_460_800_000)

type result struct {
	code     int
	out, err string
}

func runCLI(env map[string]string, args ...string) result {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func TestUsageErrors(t *testing.T) {
	env := map[string]string{"LOCALEFLOW_MONITOR_TABLE": "m", "LOCALEFLOW_RELEASE_TABLE": "r"}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no command", env, nil, "usage:"},
		{"unknown command", env, []string{"frob"}, `unknown command "frob"`},
		{"status without id", env, []string{"status"}, "exactly one EVENT_ID"},
		{"status with two ids", env, []string{"status", "a", "b"}, "exactly one EVENT_ID"},
		{"id not a token", env, []string{"requeue", "evt 1"}, "EVENT_ID must match"},
		{"health with an argument", env, []string{"health", "x"}, "takes no arguments"},
		{"unknown flag", env, []string{"health", "--frob"}, "flag provided but not defined"},
		{"bad kind", env, []string{"list", "--kind", "job"}, "--kind must be"},
		{"bad state", env, []string{"list", "--kind", "evidence", "--state", "watching"}, "--state must be one of"},
		{"bad segments", env, []string{"audit", "--segments", "0"}, "--segments must be 1..64"},
		{"no tables", map[string]string{}, []string{"health"}, "set the tables"},
		{"bad prefix", map[string]string{}, []string{"--prefix", "UPPER CASE", "health"}, "--prefix"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(tc.env, tc.args...)
			if r.code != exitUsage || !strings.Contains(r.err+r.out, tc.want) {
				t.Fatalf("exit %d, stderr %q, stdout %q; want 2 and %q", r.code, r.err, r.out, tc.want)
			}
		})
	}
	if r := runCLI(env, "--help"); r.code != exitOK || !strings.Contains(r.out, "exit codes") {
		t.Fatalf("--help: %+v", r)
	}
}

// TestCommandHelpAndVersion: `localeflow status --help` was a usage error
// (exit 2, "flag: help requested"); each command now prints its own help
// and exits 0, and --version prints the build's version.
func TestCommandHelpAndVersion(t *testing.T) {
	for cmd := range commandFlags {
		r := runCLI(map[string]string{}, cmd, "--help")
		if r.code != exitOK || !strings.Contains(r.out, "usage: localeflow [global flags] "+cmd) {
			t.Errorf("%s --help: %+v", cmd, r)
		}
		if r := runCLI(map[string]string{}, "help", cmd); r.code != exitOK || !strings.Contains(r.out, "localeflow [global flags] "+cmd) {
			t.Errorf("help %s: %+v", cmd, r)
		}
	}
	if r := runCLI(map[string]string{}, "ack", "-h"); r.code != exitOK || !strings.Contains(r.out, "--reason TEXT") {
		t.Errorf("ack -h: %+v", r)
	}
	if r := runCLI(map[string]string{}, "--version"); r.code != exitOK || !strings.HasPrefix(r.out, "localeflow ") {
		t.Errorf("--version: %+v", r)
	}
}

// TestFlagsBelongToTheirCommand: every flag was accepted by every command
// (`status --segments 3` ran status and ignored it); a flag of another
// command is now a usage error that names it.
func TestFlagsBelongToTheirCommand(t *testing.T) {
	env := map[string]string{"LOCALEFLOW_MONITOR_TABLE": "m", "LOCALEFLOW_RELEASE_TABLE": "r"}
	for _, args := range [][]string{
		{"status", "evt-1", "--segments", "3"}, {"health", "--reason", "x"}, {"audit", "--state", "failed"},
		{"requeue", "evt-1", "--all"}, {"ack", "evt-1", "--reason", "r", "--kind", "monitor"},
	} {
		r := runCLI(env, args...)
		if r.code != exitUsage || !strings.Contains(r.err, "is not a flag of "+args[0]) {
			t.Errorf("%v: %+v", args, r)
		}
	}
}

// TestErrorPrintsItsCodeOnce: an error printed its code twice
// ("localeflow: cli.usage: ..." and again inside the message).
func TestErrorPrintsItsCodeOnce(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:9")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	r := runCLI(map[string]string{}, "--prefix=localeflow", "health")
	if strings.Count(r.err, "health.unavailable") != 1 {
		t.Fatalf("stderr %q names the code %d times", r.err, strings.Count(r.err, "health.unavailable"))
	}
}

// TestCommandsOnLocalStack drives every command against DynamoDB Local.
func TestCommandsOnLocalStack(t *testing.T) {
	localtest.Require(t)
	topo := localtest.Topology(t)
	db := localtest.DynamoDB(t)
	ctx := context.Background()
	store, err := monitordb.New(db, topo.Monitor.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ id, variant string }{
		{"evt-failed", healthtest.Failed}, {"evt-watching", healthtest.Watching}, {"evt-tampered", healthtest.Watching},
		{"evt-done", healthtest.Terminal},
	} {
		if _, _, err := store.Create(ctx, healthtest.MonitorRecord(r.id, r.variant, base)); err != nil {
			t.Fatal(err)
		}
	}
	rel := releasedb.New(db, topo.Release.Name)
	if err := rel.Put(ctx, healthtest.Evidence("evt-watching", "req-1", "retry_wait", base), 0); err != nil {
		t.Fatal(err)
	}
	_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(topo.Monitor.Name), Key: map[string]types.AttributeValue{topology.AttrEventID: &types.AttributeValueMemberS{Value: "evt-tampered"}},
		UpdateExpression: aws.String("SET job_count = :n"), ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: "3"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	p := "--prefix=" + topo.Prefix

	r := runCLI(env, p, "health")
	if r.code != exitBad || !strings.Contains(r.out, "health: blocked") || !strings.Contains(r.out, "lifecycle_monitor.state_invalid") ||
		!strings.Contains(r.out, "evt-tampered") || !strings.Contains(r.out, "evt-failed") {
		t.Fatalf("health: %+v", r)
	}
	t.Logf("localeflow health:\n%s", r.out)
	r = runCLI(env, "health", "--json", p)
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil || r.code != exitBad || len(doc) != 7 || string(doc["status"]) != `"blocked"` ||
		!strings.Contains(string(doc["reasons"]), "lifecycle_monitor.state_invalid") || !strings.Contains(string(doc["attention"]), "evt-failed") {
		t.Fatalf("health --json: %+v (%v)", r, err)
	}

	r = runCLI(env, p, "list", "--state", "failed")
	if r.code != exitOK || !strings.Contains(r.out, "evt-failed") || !strings.Contains(r.out, "cms.http_503") ||
		!strings.Contains(r.out, "evt-tampered") || strings.Contains(r.out, "evt-watching") {
		t.Fatalf("list --state failed: %+v", r)
	}
	r = runCLI(env, p, "list", "--kind", "evidence", "--json")
	var items []map[string]any
	if err := json.Unmarshal([]byte(r.out), &items); err != nil || len(items) != 1 || items[0]["state"] != "retry_wait" {
		t.Fatalf("list --kind evidence: %+v", r)
	}

	r = runCLI(env, p, "status", "evt-watching")
	if r.code != exitOK || !strings.Contains(r.out, "watching") || !strings.Contains(r.out, "req-1") || !strings.Contains(r.out, "evidence.http_503") {
		t.Fatalf("status: %+v", r)
	}
	if r = runCLI(env, p, "status", "evt-none"); r.code != exitBad || !strings.Contains(r.err, "lifecycle_monitor.event_missing") {
		t.Fatalf("status of a missing event: %+v", r)
	}
	if r = runCLI(env, p, "status", "evt-tampered"); r.code != exitBad || !strings.Contains(r.err, "lifecycle_monitor.state_invalid") {
		t.Fatalf("status of a tampered record: %+v", r)
	}

	r = runCLI(env, p, "requeue", "evt-failed")
	if r.code != exitOK || !strings.Contains(r.out, "requeued evt-failed: failed") || !strings.Contains(r.out, "retry_wait") {
		t.Fatalf("requeue: %+v", r)
	}
	if r = runCLI(env, p, "requeue", "evt-failed", "--json"); r.code != exitBad || !strings.Contains(r.out, `"code":"operator.requeue.not_failed"`) {
		t.Fatalf("second requeue: %+v", r)
	}
	r = runCLI(env, p, "status", "evt-failed", "--json")
	var st struct {
		Monitor  struct{ State string } `json:"monitor"`
		Requeues struct {
			RequeuedCount int `json:"requeued_count"`
		} `json:"requeues"`
	}
	if err := json.Unmarshal([]byte(r.out), &st); err != nil || r.code != exitOK || st.Monitor.State != "retry_wait" || st.Requeues.RequeuedCount != 1 {
		t.Fatalf("status after requeue: %+v", r)
	}

	t.Logf("localeflow status evt-failed --json:\n%s", r.out)
	r = runCLI(env, p, "audit")
	if r.code != exitBad || !strings.Contains(r.out, "1 invalid") || !strings.Contains(r.out, "evt-tampered") ||
		!strings.Contains(r.out, "lifecycle_monitor.state_invalid") || !strings.Contains(r.out, "4 monitor records, 1 requeue journal items, 1 release items") {
		t.Fatalf("audit: %+v", r)
	}
}

// TestRuntimeErrorExit3: an unreachable endpoint is a runtime error.
func TestRuntimeErrorExit3(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:9")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	r := runCLI(map[string]string{}, "--prefix=localeflow", "health")
	if r.code != exitRuntime || !strings.Contains(r.err, "health.unavailable") {
		t.Fatalf("unreachable: %+v", r)
	}
}

// TestAckOnLocalStack: after a remote failure health stayed blocked for
// good, with no way to acknowledge it. `ack` takes a publication_blocked
// change out of the attention index (health goes from blocked to ok), a
// second ack is a no-op, an unknown id exits 1 with its code, and the
// acknowledgement stays visible in status and audit.
func TestAckOnLocalStack(t *testing.T) {
	localtest.Require(t)
	topo := localtest.Topology(t)
	db := localtest.DynamoDB(t)
	ctx := context.Background()
	// Records of an hour ago: the open ones within health's age limits
	// (the CLI checks at the real time).
	base := core.Millis(time.Now().Add(-time.Hour))
	store, err := monitordb.New(db, topo.Monitor.Name)
	if err != nil {
		t.Fatal(err)
	}
	blocked := healthtest.MonitorRecord("evt-blocked", healthtest.PublicationBlocked, base)
	blocked.Timeline = []monitor.TimelineEntry{
		{AtMS: base, State: monitor.StateRetryWait, Code: "cms.http_503"},
		{AtMS: base + 1, State: monitor.StateTerminal, RemoteStatus: "publication_blocked"},
	}
	if _, _, err := store.Create(ctx, blocked); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Create(ctx, healthtest.MonitorRecord("evt-open", healthtest.Watching, base)); err != nil {
		t.Fatal(err)
	}
	// The caller's identity comes from STS GetCallerIdentity (kumo's on the
	// local stack: AWS_ENDPOINT_URL_STS).
	env := map[string]string{}
	p := "--prefix=" + topo.Prefix

	r := runCLI(env, p, "health")
	if r.code != exitBad || !strings.Contains(r.out, "health: blocked") || !strings.Contains(r.out, "publication_blocked") {
		t.Fatalf("health before ack: %+v", r)
	}
	r = runCLI(env, p, "list", "--attention", "--json")
	var items []map[string]any
	if err := json.Unmarshal([]byte(r.out), &items); err != nil || len(items) != 1 || items[0]["event_id"] != "evt-blocked" {
		t.Fatalf("list --attention before ack: %+v", r)
	}
	if r = runCLI(env, p, "ack", "evt-blocked"); r.code != exitUsage || !strings.Contains(r.err, "--reason") {
		t.Fatalf("ack without a reason: %+v", r)
	}
	r = runCLI(env, p, "ack", "evt-blocked", "--reason", "CMS team unblocked it by hand (TICKET-42)")
	if r.code != exitOK || !strings.Contains(r.out, "acknowledged evt-blocked (terminal, publication_blocked) by arn:") {
		t.Fatalf("ack: %+v", r)
	}
	t.Logf("localeflow ack:\n%s", r.out)
	r = runCLI(env, p, "health", "--json")
	var doc struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil || r.code != exitOK || doc.Status != "ok" {
		t.Fatalf("health after ack: %+v", r)
	}
	r = runCLI(env, p, "list", "--attention")
	if r.code != exitOK || strings.Contains(r.out, "evt-blocked") {
		t.Fatalf("list --attention after ack: %+v", r)
	}
	r = runCLI(env, p, "ack", "evt-blocked", "--reason", "again")
	if r.code != exitOK || !strings.Contains(r.out, "already acknowledged") || !strings.Contains(r.out, "nothing written") {
		t.Fatalf("second ack: %+v", r)
	}
	r = runCLI(env, p, "status", "evt-blocked", "--json")
	var st struct {
		Monitor struct {
			State, RemoteStatus string
			Timeline            []monitor.TimelineEntry `json:"timeline"`
		} `json:"monitor"`
		Acknowledged struct {
			Count  int    `json:"ack_count"`
			By     string `json:"by"`
			Reason string `json:"reason"`
		} `json:"acknowledged"`
	}
	if err := json.Unmarshal([]byte(r.out), &st); err != nil || r.code != exitOK || st.Monitor.State != "terminal" ||
		len(st.Monitor.Timeline) != 2 || st.Monitor.Timeline[0].Code != "cms.http_503" ||
		st.Acknowledged.Count != 1 || !strings.HasPrefix(st.Acknowledged.By, "arn:") || !strings.Contains(st.Acknowledged.Reason, "TICKET-42") {
		t.Fatalf("status after ack: %+v (%v)", r, err)
	}
	if r = runCLI(env, p, "status", "evt-blocked"); r.code != exitOK || !strings.Contains(r.out, "recent transitions") ||
		!strings.Contains(r.out, "terminal  publication_blocked") || !strings.Contains(r.out, "acknowledged") {
		t.Fatalf("status text after ack: %+v", r)
	}
	if r = runCLI(env, p, "ack", "evt-unknown", "--reason", "typo", "--json"); r.code != exitBad ||
		!strings.Contains(r.out, `"code":"lifecycle_monitor.event_missing"`) || strings.Count(r.err, "lifecycle_monitor.event_missing") != 1 {
		t.Fatalf("ack of an unknown id: %+v", r)
	}
	if r = runCLI(env, p, "ack", "evt-open", "--reason", "nothing to see"); r.code != exitBad || !strings.Contains(r.err, opsdb.CodeAckNotNeeded) {
		t.Fatalf("ack of an open change: %+v", r)
	}
	r = runCLI(env, p, "audit", "--json")
	var rep opsdb.AuditReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil || r.code != exitOK || rep.AckItems != 1 || rep.MonitorRecords != 2 {
		t.Fatalf("audit after ack: %+v (%v)", r, err)
	}
}

// TestAckReleaseOnLocalStack: a failed evidence or delivery record kept
// health blocked for good (only monitor records could be acknowledged).
// `ack EVENT_ID --release` acknowledges them: health goes from blocked to
// ok, --attention lists nothing, a second ack is a no-op, unknown ids and
// keys exit 1 with a code, and status and audit still show the records.
func TestAckReleaseOnLocalStack(t *testing.T) {
	localtest.Require(t)
	topo := localtest.Topology(t)
	db := localtest.DynamoDB(t)
	ctx := context.Background()
	// Records of an hour ago: the open ones within health's age limits
	// (the CLI checks at the real time).
	base := core.Millis(time.Now().Add(-time.Hour))
	rel := releasedb.New(db, topo.Release.Name)
	if err := rel.Put(ctx, healthtest.Evidence("evt-rel", "req-bad", "failed", base), 0); err != nil {
		t.Fatal(err)
	}
	if err := rel.Put(ctx, healthtest.Delivery("evt-rel", "failed", base), 0); err != nil {
		t.Fatal(err)
	}
	if err := rel.Put(ctx, healthtest.Evidence("evt-rel-open", "req-open", "retry_wait", base), 0); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	p := "--prefix=" + topo.Prefix
	r := runCLI(env, p, "health")
	if r.code != exitBad || !strings.Contains(r.out, "health: blocked") || !strings.Contains(r.out, "req-bad") {
		t.Fatalf("health before ack: %+v", r)
	}
	if r = runCLI(env, p, "ack", "evt-rel", "--key", "req-bad", "--reason", "x"); r.code != exitUsage || !strings.Contains(r.err, "--release") {
		t.Fatalf("--key without --release: %+v", r)
	}
	if r = runCLI(env, p, "ack", "evt-rel", "--release", "--key", "req-nope", "--reason", "typo"); r.code != exitBad ||
		!strings.Contains(r.err, release.CodeAckRecordMissing) {
		t.Fatalf("ack of an unknown key: %+v", r)
	}
	if r = runCLI(env, p, "ack", "evt-unknown", "--release", "--reason", "typo", "--json"); r.code != exitBad ||
		!strings.Contains(r.out, `"code":"`+release.CodeAckRecordMissing+`"`) || strings.Count(r.err, release.CodeAckRecordMissing) != 1 {
		t.Fatalf("ack of an unknown id: %+v", r)
	}
	if r = runCLI(env, p, "ack", "evt-rel-open", "--release", "--reason", "nothing to see"); r.code != exitBad ||
		!strings.Contains(r.err, release.CodeAckNotNeeded) {
		t.Fatalf("ack of an open release: %+v", r)
	}
	r = runCLI(env, p, "ack", "evt-rel", "--release", "--key", "req-bad", "--reason", "evidence service outage (TICKET-7)")
	if r.code != exitOK || !strings.Contains(r.out, "acknowledged evt-rel evidence evidence#req-bad (failed, ") {
		t.Fatalf("ack of the evidence record: %+v", r)
	}
	if r = runCLI(env, p, "health"); r.code != exitBad || strings.Contains(r.out, "req-bad") || !strings.Contains(r.out, "health.delivery.failed") {
		t.Fatalf("health with the delivery still failed: %+v", r)
	}
	r = runCLI(env, p, "ack", "evt-rel", "--release", "--reason", "evidence service outage (TICKET-7)")
	if r.code != exitOK || !strings.Contains(r.out, "acknowledged evt-rel delivery delivery (failed, cms.http_503)") ||
		!strings.Contains(r.out, "evidence#req-bad was already acknowledged") {
		t.Fatalf("ack of the release: %+v", r)
	}
	var doc struct {
		Status string `json:"status"`
	}
	if r = runCLI(env, p, "health", "--json"); json.Unmarshal([]byte(r.out), &doc) != nil || r.code != exitOK || doc.Status != "ok" {
		t.Fatalf("health after ack: %+v", r)
	}
	if r = runCLI(env, p, "list", "--attention"); r.code != exitOK || strings.Contains(r.out, "evt-rel ") {
		t.Fatalf("list --attention after ack: %+v", r)
	}
	if r = runCLI(env, p, "ack", "evt-rel", "--release", "--reason", "again"); r.code != exitOK || strings.Count(r.out, "nothing written") != 2 {
		t.Fatalf("second ack: %+v", r)
	}
	r = runCLI(env, p, "status", "evt-rel", "--json")
	var st struct {
		Release []struct {
			Kind           string `json:"kind"`
			Status         string `json:"status"`
			AcknowledgedMS int64  `json:"acknowledged_ms"`
		} `json:"release"`
		Acks []release.AckRecord `json:"release_acknowledgements"`
	}
	if err := json.Unmarshal([]byte(r.out), &st); err != nil || r.code != exitOK || len(st.Release) != 2 || len(st.Acks) != 2 {
		t.Fatalf("status after ack: %+v (%v)", r, err)
	}
	for _, v := range st.Release {
		if v.Status != "failed" || v.AcknowledgedMS == 0 {
			t.Errorf("status of %s after ack: %+v", v.Kind, v)
		}
	}
	for _, a := range st.Acks {
		if !strings.HasPrefix(a.By, "arn:") || !strings.Contains(a.Reason, "TICKET-7") || a.Count != 1 {
			t.Errorf("acknowledgement %+v", a)
		}
	}
	if r = runCLI(env, p, "audit"); r.code != exitOK {
		t.Fatalf("audit after ack: %+v", r)
	}
}
