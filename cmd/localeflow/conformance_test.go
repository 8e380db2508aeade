package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/signing"
)

const confKeyHex = "6c6f63616c65666c6f772d6576656e742d746573742d6b65792d303030303031" // "localeflow-event-test-key-000001"

var confNow = time.Unix(1764460800, 0)

// docDispatch builds a signed dispatch the way docs/integrating.md
// "Producing events" describes it, with the standard library only (a
// hand-written JCS form and HMAC), not with localeflow's signing code: a
// reader of the guide alone can produce a valid event.
func docDispatch(t *testing.T, key []byte, ts string, edit func(change string) string) []byte {
	t.Helper()
	// change in JCS form: members sorted, no white space.
	change := `{"event_id":"evt-doc-1","site_id":"site-berlin","source_sequence":7,"title":"Welcome","website_version":"v2026.11.29"}`
	sum := sha256.Sum256([]byte(change))
	if edit != nil {
		change = edit(change)
	}
	payload := `{"change":` + change + `,"dispatch":{"event_id":"evt-doc-1","payload_sha256":"` + hex.EncodeToString(sum[:]) +
		`","status":"succeeded","remote_plan_id":"plan-42","remote_job_count":2,"remote_status":"enqueued","response_sha256":"` +
		strings.Repeat("0", 64) + `"}}`
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("localeflow.event.v2\n" + contract.DetailChangeDispatched + "\n" + ts + "\n" + payload))
	detail, err := json.Marshal(map[string]string{"payload": payload, "timestamp": ts, "signature": "v2=" + hex.EncodeToString(mac.Sum(nil))})
	if err != nil {
		t.Fatal(err)
	}
	return detail
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func confKey(t *testing.T) []byte {
	k, err := hex.DecodeString(confKeyHex)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var nowFlag = "--now=" + strconv.FormatInt(confNow.Unix(), 10)

func TestConformanceEventDocExample(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "dispatch.json", docDispatch(t, confKey(t), "1764460700", nil))
	r := runCLI(nil, "conformance", "event", "--detail-type", contract.DetailChangeDispatched, "--key-hex", confKeyHex, nowFlag, f)
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
	}
	for _, want := range []string{"PASS  " + f + "  read", "PASS  " + f + "  event", "PASS  " + f + "  envelope", "PASS  " + f + "  payload", "1 of 1 files pass"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("missing %q in\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "WARN") {
		t.Errorf("a v2 event warns:\n%s", r.out)
	}
}

func TestConformanceEventBrokenInputs(t *testing.T) {
	dir := t.TempDir()
	key := confKey(t)
	fx := releasetest.NewFixture()
	plan := releasetest.NewPlan("evt-c", "de-DE")
	planV2, _ := signing.EventDetailV2(key, contract.DetailPlanAccepted, confNow, plan.PlanPayload())
	envelope, _ := json.Marshal(map[string]any{"version": "0", "id": "x", "source": "localeflow", "detail-type": contract.DetailPlanAccepted,
		"time": "2026-11-30T00:00:00Z", "detail": json.RawMessage(planV2)})
	v1, _ := json.Marshal(contract.SignedDetail{Payload: string(plan.PlanPayload()), Signature: signing.SignEvent(key, plan.PlanPayload())})
	_ = fx
	cases := []struct {
		name   string
		body   []byte
		args   []string
		exit   int
		expect []string
	}{
		{"another key", docDispatch(t, []byte("another-event-key-0000000000000"), "1764460700", nil), []string{"--detail-type", contract.DetailChangeDispatched},
			exitBad, []string{"FAIL  %s  envelope  poller.dispatch.signature_invalid", "SKIP  %s  payload"}},
		{"older than the default window", docDispatch(t, key, strconv.FormatInt(confNow.Add(-signing.DefaultEventMaxAge-time.Second).Unix(), 10), nil), []string{"--detail-type", contract.DetailChangeDispatched},
			exitBad, []string{"FAIL  %s  envelope  poller.dispatch.stale"}},
		{"older than --max-age", docDispatch(t, key, strconv.FormatInt(confNow.Add(-2*time.Hour).Unix(), 10), nil), []string{"--detail-type", contract.DetailChangeDispatched, "--max-age", "1h"},
			exitBad, []string{"FAIL  %s  envelope  poller.dispatch.stale"}},
		{"within --max-age", docDispatch(t, key, strconv.FormatInt(confNow.Add(-2*time.Hour).Unix(), 10), nil), []string{"--detail-type", contract.DetailChangeDispatched, "--max-age", "3h"},
			exitOK, []string{"PASS  %s  envelope"}},
		{"more than 5 min ahead", docDispatch(t, key, strconv.FormatInt(confNow.Add(6*time.Minute).Unix(), 10), nil), []string{"--detail-type", contract.DetailChangeDispatched},
			exitBad, []string{"FAIL  %s  envelope  poller.dispatch.stale"}},
		{"hash does not match the change", docDispatch(t, key, "1764460700", func(c string) string { return strings.Replace(c, "Welcome", "Hello", 1) }), []string{"--detail-type", contract.DetailChangeDispatched},
			exitBad, []string{"PASS  %s  envelope", "FAIL  %s  payload  lifecycle_monitor.dispatch_invalid"}},
		{"signed as a plan, checked as a dispatch", planV2, []string{"--detail-type", contract.DetailChangeDispatched},
			exitBad, []string{"FAIL  %s  envelope  poller.dispatch.signature_invalid"}},
		{"a plan's payload problem", mustDetail(t, key, contract.DetailPlanAccepted, []byte(`{"event":{"event_id":"e","site_id":"s"},"plan":{"plan_id":"p","jobs":[]}}`)), []string{"--detail-type", contract.DetailPlanAccepted},
			exitBad, []string{"PASS  %s  envelope", "FAIL  %s  payload  coordinator.plan.jobs_invalid"}},
		{"unsigned payload", plan.PlanPayload(), []string{"--detail-type", contract.DetailPlanAccepted},
			exitBad, []string{"FAIL  %s  envelope  coordinator.event.invalid"}},
		{"not JSON", []byte("payload=1"), []string{"--detail-type", contract.DetailPlanAccepted},
			exitBad, []string{"FAIL  %s  event  cli.conformance.not_an_event", "SKIP  %s  envelope"}},
		{"bare detail without --detail-type", planV2, nil,
			exitBad, []string{"FAIL  %s  event  cli.conformance.not_an_event  (a bare detail: give --detail-type)"}},
		{"EventBridge event", envelope, nil, exitOK, []string{"PASS  %s  event  (" + contract.DetailPlanAccepted + ")", "PASS  %s  payload"}},
		{"EventBridge event, other --detail-type", envelope, []string{"--detail-type", contract.DetailJobCompleted}, exitBad, []string{"FAIL  %s  event"}},
		// The deployed functions refuse v1 by default (LOCALEFLOW_EVENT_V1
		// unset): so does the check, unless told the deployment accepts it.
		{"v1 refused by default", v1, []string{"--detail-type", contract.DetailPlanAccepted}, exitBad, []string{"FAIL  %s  envelope  coordinator.event.signature_invalid"}},
		{"v1 accepted with --accept-v1 warns", v1, []string{"--detail-type", contract.DetailPlanAccepted, "--accept-v1"}, exitOK, []string{"PASS  %s  envelope  (v1 signature verifies)", "WARN  %s  v2"}},
		{"hint", []byte(`{"event_id":"evt-1","site_id":"site-1"}`), []string{"--detail-type", contract.DetailChangeHint}, exitOK, []string{"SKIP  %s  envelope", "PASS  %s  payload"}},
		{"hint with a status", []byte(`{"event_id":"evt-1","site_id":"site-1","status":"published"}`), []string{"--detail-type", contract.DetailChangeHint}, exitBad, []string{"FAIL  %s  payload  lifecycle_monitor.hint_invalid"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := writeFile(t, dir, strconv.Itoa(i)+".json", c.body)
			args := append([]string{"conformance", "event", "--key-hex", confKeyHex, nowFlag}, c.args...)
			r := runCLI(nil, append(args, f)...)
			if r.code != c.exit {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, c.exit, r.out, r.err)
			}
			for _, e := range c.expect {
				if want := strings.ReplaceAll(e, "%s", f); !strings.Contains(r.out, want) {
					t.Errorf("missing %q in\n%s", want, r.out)
				}
			}
		})
	}
}

// TestConformanceEventV1FollowsTheDeploymentsVariable: a v1-signed event
// passed (exit 0) while the deployed functions refuse v1 by default; the
// check follows $LOCALEFLOW_EVENT_V1 as they do (accept, refuse, unset =
// refuse) and a value the functions refuse is a usage error.
func TestConformanceEventV1FollowsTheDeploymentsVariable(t *testing.T) {
	key := confKey(t)
	plan := releasetest.NewPlan("evt-c1", "de-DE")
	v1, _ := json.Marshal(contract.SignedDetail{Payload: string(plan.PlanPayload()), Signature: signing.SignEvent(key, plan.PlanPayload())})
	f := writeFile(t, t.TempDir(), "v1.json", v1)
	args := []string{"conformance", "event", "--key-hex", confKeyHex, nowFlag, "--detail-type", contract.DetailPlanAccepted, f}
	for _, c := range []struct {
		env  string
		exit int
	}{{"", exitBad}, {"refuse", exitBad}, {"accept", exitOK}, {"yes", exitUsage}} {
		if r := runCLI(map[string]string{contract.EnvEventV1: c.env}, args...); r.code != c.exit {
			t.Errorf("%s=%q: exit %d, want %d\n%s%s", contract.EnvEventV1, c.env, r.code, c.exit, r.out, r.err)
		}
	}
}

func mustDetail(t *testing.T, key []byte, dt string, payload []byte) []byte {
	t.Helper()
	d, err := signing.EventDetailV2(key, dt, confNow, payload)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestConformanceEventFilesAndJSON(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.json", docDispatch(t, confKey(t), "1764460700", nil))
	missing := filepath.Join(dir, "missing.json")
	r := runCLI(map[string]string{envEventKeyHex: confKeyHex}, "conformance", "event", "--json", "--detail-type", contract.DetailChangeDispatched, nowFlag, good, missing)
	if r.code != exitBad {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.err)
	}
	var report []conformanceFile
	if err := json.Unmarshal([]byte(r.out), &report); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	if len(report) != 2 || !report[0].Pass || report[1].Pass || report[1].Checks[0].Code != codeConformanceRead {
		t.Fatalf("report %+v", report)
	}
	// No key: the signed event cannot be checked.
	r = runCLI(nil, "conformance", "event", "--detail-type", contract.DetailChangeDispatched, nowFlag, good)
	if r.code != exitBad || !strings.Contains(r.out, "FAIL  "+good+"  envelope  cli.conformance.key_missing") {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
}

func TestConformanceUsage(t *testing.T) {
	for _, args := range [][]string{
		{"conformance"},
		{"conformance", "cms"},
		{"conformance", "event"},
		{"conformance", "event", "--detail-type", "localeflow.change.terminal", "x.json"},
		{"conformance", "event", "--key-hex", "00", "x.json"},
		{"conformance", "event", "--now", "yesterday", "x.json"},
		{"conformance", "event", "--max-age", "-1h", "x.json"},
		{"conformance", "event", "--reason", "x", "x.json"},
	} {
		if r := runCLI(nil, args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d\n%s%s", args, r.code, exitUsage, r.out, r.err)
		}
	}
	if r := runCLI(nil, "conformance", "--help"); r.code != exitOK || !strings.Contains(r.out, "conformance event") {
		t.Fatalf("help: %d %s", r.code, r.out)
	}
}
