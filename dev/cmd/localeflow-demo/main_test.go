package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/monitor/memstore"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/reference"
)

// The scenario's events must pass the real parsers: a demo that publishes
// events localeflow rejects would prove nothing.
func TestScenarioEventsPassTheRealParsers(t *testing.T) {
	key := []byte("demo-event-key-0123456789abcdef")
	changes := scenario("t1")
	kinds := map[string]int{}
	for _, c := range changes {
		kinds[c.Expect]++
		t.Run(c.EventID, func(t *testing.T) {
			detail, err := c.dispatchedDetail()
			if err != nil {
				t.Fatal(err)
			}
			d, err := monitor.ParseDispatched(detail)
			if err != nil {
				t.Fatalf("dispatch rejected: %v", err)
			}
			svc, err := monitor.NewService(memstore.New(), core.SystemClock{}, nil, monitor.Config{})
			if err != nil {
				t.Fatal(err)
			}
			st, err := svc.Register(context.Background(), d)
			if err != nil {
				t.Fatalf("registration refused: %v", err)
			}
			wantState := monitor.StatePending
			if c.Expect == expectSuperseded {
				wantState = monitor.StateTerminal
			}
			if st.EventID != c.EventID || st.State != wantState || st.JobCount != len(c.Jobs) || st.PlanID != c.PlanID() {
				t.Fatalf("registered %+v", st)
			}
			spec := c.cmsSpec()
			if _, err := reference.NewCMS(reference.CMSConfig{}); err == nil {
				t.Fatal("empty CMS config accepted")
			}
			if spec.PlanID != c.PlanID() || len(spec.Locales) != len(c.Jobs) {
				t.Fatalf("cms spec %+v", spec)
			}
			if c.Expect == expectSuperseded {
				return
			}
			plan, err := c.planPayload()
			if err != nil {
				t.Fatal(err)
			}
			sd, err := signedDetail(key, contract.DetailPlanAccepted, plan)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := release.ParseSignedEvent(key, contract.DetailPlanAccepted, sd); err != nil {
				t.Fatalf("plan rejected: %v", err)
			}
			if _, err := release.ParseSignedEvent([]byte("another-key-0123456789abcdef"), contract.DetailPlanAccepted, sd); err == nil {
				t.Fatal("plan verified with the wrong key")
			}
			for _, j := range c.Jobs {
				p, err := c.jobPayload(j)
				if err != nil {
					t.Fatal(err)
				}
				sd, err := signedDetail(key, contract.DetailJobCompleted, p)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := release.ParseSignedEvent(key, contract.DetailJobCompleted, sd); err != nil {
					t.Fatalf("job %s rejected: %v", j.Locale, err)
				}
			}
		})
	}
	if kinds[expectPublished] < 3 || kinds[expectSuperseded] != 1 || kinds[expectBlocked] != 1 {
		t.Fatalf("scenario mix %v", kinds)
	}
}

// TestScenarioReleasesThroughACoordinator runs the scenario's signed
// events through an in-memory coordinator: every non-superseded change is
// approved and prepared for delivery.
func TestScenarioReleasesThroughACoordinator(t *testing.T) {
	fx := releasetest.NewFixture()
	approval, publication := fx.Authorities()
	c, err := release.NewCoordinator(release.Dependencies{
		Store: releasetest.NewMemStore(), EventKey: fx.EventKey,
		Evidence: releasetest.Provider{Responder: &releasetest.Responder{Fixture: fx}}, CMS: &releasetest.CMS{},
		Verifiers: fx.Verifiers(), Approval: approval, Publication: publication,
	}, core.SystemClock{}, nil, release.DefaultConfig("rev-1", "worker-1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ch := range scenario("t2") {
		if ch.Expect == expectSuperseded {
			continue
		}
		plan, _ := ch.planPayload()
		pd, _ := signedDetail(fx.EventKey, contract.DetailPlanAccepted, plan)
		if _, _, err := c.Ingest(ctx, contract.DetailPlanAccepted, pd); err != nil {
			t.Fatal(err)
		}
		for _, j := range ch.Jobs {
			p, _ := ch.jobPayload(j)
			jd, _ := signedDetail(fx.EventKey, contract.DetailJobCompleted, p)
			if _, _, err := c.Ingest(ctx, contract.DetailJobCompleted, jd); err != nil {
				t.Fatal(err)
			}
			if _, err := releasetest.Step(ctx, c, ch.EventID); err != nil {
				t.Fatal(err)
			}
		}
		o, err := c.Deliver(ctx, ch.EventID)
		if err != nil || o.Status != release.OutcomeDelivered {
			t.Fatalf("%s: %+v %v", ch.EventID, o, err)
		}
	}
}

type fakeMon struct {
	st  monitor.Status
	err error
}

func (f fakeMon) Status(context.Context, string) (monitor.Status, error) { return f.st, f.err }

type fakeRel struct{ snap release.Snapshot }

func (f fakeRel) Load(context.Context, string) (release.Snapshot, error) { return f.snap, nil }

func delivered(total int) release.Snapshot {
	s := release.NewSnapshot()
	s.Plan = &release.PlanRecord{Jobs: make([]release.PlanJob, total)}
	s.Delivery = &release.DeliveryRecord{Lease: release.Lease{Status: release.StateSucceeded}}
	for i := range total {
		id := string(rune('a' + i))
		s.Approvals[id] = &release.ApprovalRecord{}
		s.Jobs[id] = &release.JobRecord{Status: release.JobSucceeded}
	}
	return s
}

func TestObserverJudgesEachChange(t *testing.T) {
	changes := scenario("t3")
	published, superseded, blocked := changes[0], changes[3], changes[4]
	tests := []struct {
		name      string
		c         change
		st        monitor.Status
		err       error
		snap      release.Snapshot
		final, ok bool
	}{
		{"Published", published, monitor.Status{State: monitor.StateTerminal, RemoteStatus: "published"}, nil, delivered(2), true, true},
		{"PublishedNotDeliveredYet", published, monitor.Status{State: monitor.StateWatching, RemoteStatus: "processing"}, nil, delivered(2), false, false},
		{"NotRegistered", published, monitor.Status{}, core.Fail(monitor.CodeEventMissing), release.NewSnapshot(), false, false},
		{"MonitorFailedIsFinalAndWrong", published, monitor.Status{State: monitor.StateFailed, LastErrorCode: "cms.http_503"}, nil, release.NewSnapshot(), true, false},
		{"Superseded", superseded, monitor.Status{State: monitor.StateTerminal, RemoteStatus: "superseded"}, nil, release.NewSnapshot(), true, true},
		{"SupersededButReleased", superseded, monitor.Status{State: monitor.StateTerminal, RemoteStatus: "superseded"}, nil, delivered(1), true, false},
		{"BlockedOnPurpose", blocked, monitor.Status{State: monitor.StateTerminal, RemoteStatus: "publication_blocked"}, nil, delivered(2), true, true},
		{"BlockedChangePublishedIsWrong", blocked, monitor.Status{State: monitor.StateTerminal, RemoteStatus: "published"}, nil, delivered(2), true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &observer{mon: fakeMon{tc.st, tc.err}, rel: fakeRel{tc.snap}}
			v := o.look(context.Background(), tc.c)
			if v.Final != tc.final || v.OK != tc.ok {
				t.Fatalf("final %v ok %v, want %v %v (%+v)", v.Final, v.OK, tc.final, tc.ok, v)
			}
		})
	}
}

func TestJudgeHealth(t *testing.T) {
	changes := scenario("t4")
	ok := make([]view, len(changes))
	for i := range ok {
		ok[i] = view{Final: true, OK: true}
	}
	tests := []struct {
		name string
		h    healthReport
		dlq  int
		want bool
	}{
		{"BlockedByTheOnPurposeChange", healthReport{Status: "blocked", RemoteFailures: 1}, 0, true},
		{"OkWhileAChangeFailsOnPurpose", healthReport{Status: "ok"}, 0, false},
		{"AlsoAFailedPoll", healthReport{Status: "blocked", RemoteFailures: 1, Failed: 1}, 0, false},
		{"AlsoAnExpiredLease", healthReport{Status: "blocked", RemoteFailures: 1, ExpiredLeases: 1}, 0, false},
		{"AlsoAFailedDelivery", healthReport{Status: "blocked", RemoteFailures: 1, ReleaseFailures: 1}, 0, false},
		{"TwoRemoteFailures", healthReport{Status: "blocked", RemoteFailures: 2}, 0, false},
		{"DeadLetters", healthReport{Status: "blocked", RemoteFailures: 1}, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := judge(changes, ok, tc.h, tc.dlq)
			if got := v.ChangesOK && v.HealthOK && v.DLQsEmpty; got != tc.want {
				t.Fatalf("verdict %+v, want pass=%v", v, tc.want)
			}
		})
	}
	bad := append([]view(nil), ok...)
	bad[0].OK = false
	if v := judge(changes, bad, healthReport{Status: "blocked", RemoteFailures: 1}, 0); v.ChangesOK {
		t.Fatal("a wrong change passed")
	}
}

func TestCountFailed(t *testing.T) {
	var section map[string]json.RawMessage
	_ = json.Unmarshal([]byte(`{"evidence":{"counts":{"failed":2,"succeeded":9}},"delivery":{"failed":1},"remote_failures":0,"due":4}`), &section)
	if n := countFailed(section); n != 3 {
		t.Fatalf("countFailed = %d", n)
	}
}

func TestDisplay(t *testing.T) {
	changes := scenario("t5")[:2]
	views := []view{{Monitor: "watching", Release: "translated 1/2"}, {Monitor: "done", Release: "delivered", Final: true, OK: true}}
	var plain bytes.Buffer
	d := newDisplay(&plain, false, 0, time.Now())
	d.show(changes, views, "footer")
	d.show(changes, views, "footer")
	if n := strings.Count(plain.String(), "\n"); n != 2 || strings.Contains(plain.String(), "\x1b[") {
		t.Fatalf("plain output repeats or has escapes:\n%s", plain.String())
	}
	views[0].Monitor = "done"
	d.show(changes, views, "footer")
	if n := strings.Count(plain.String(), "\n"); n != 3 {
		t.Fatalf("a change was not appended:\n%s", plain.String())
	}
	var tty bytes.Buffer
	d = newDisplay(&tty, true, 40, time.Now())
	d.show(changes, views, "footer")
	d.show(changes, views, "footer")
	if !strings.Contains(tty.String(), "\x1b[10A") || !strings.Contains(tty.String(), "✔ ") || !strings.Contains(tty.String(), "footer") {
		t.Fatalf("tty output:\n%q", tty.String())
	}
	for _, line := range strings.Split(tty.String(), "\n") {
		if n := utf8.RuneCountInString(strings.ReplaceAll(strings.ReplaceAll(line, "\x1b[2K", ""), "\x1b[10A", "")); n > 39 {
			t.Fatalf("line of %d runes is not clipped to the width: %q", n, line)
		}
	}
}

func TestParseFlags(t *testing.T) {
	if _, err := parse([]string{"-rie", "/bin/true"}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-rie", "/bin/true", "-prefix", "Bad_Prefix"},
		{"-rie", "/bin/true", "-speedup", "0.5"},
		{"-rie", "/bin/true", "-tty", "sometimes"},
		{"-rie", "/bin/true", "-timeout", "0s"},
		{"-rie", "/bin/true", "-poll-interval", "0s"},
		{"-rie", "/bin/true", "-poll-interval", "25h"},
	} {
		if _, err := parse(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	t.Setenv("LOCALEFLOW_RIE", "")
	if _, err := parse(nil); err == nil || !strings.Contains(err.Error(), "rie") {
		t.Fatalf("missing rie: %v", err)
	}
}

// The demo's poller runs the AWS interval (default 60 s), hint gap (5 s)
// and sweep grace (30 s) scaled down by -speedup, and the poller's own
// config accepts them.
func TestPollerTimingIsScaled(t *testing.T) {
	o, err := parse([]string{"-rie", "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(pollerTiming(o.pollInterval, o.speedup), " ")
	if got != "LOCALEFLOW_POLL_INTERVAL=5s LOCALEFLOW_HINT_MIN_GAP=417ms LOCALEFLOW_SWEEP_GRACE=2.5s" || !o.hints {
		t.Fatalf("poller timing %q (hints %v)", got, o.hints)
	}
}

func TestContentLeaks(t *testing.T) {
	dir := t.TempDir()
	changes := scenario("t6")
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("clean.log", `{"msg":"locale approved","event_id":"`+changes[0].EventID+`","target_locale":"de-DE"}`)
	if leaks := contentLeaks(dir, changes); len(leaks) != 0 {
		t.Fatalf("clean log flagged: %v", leaks)
	}
	write("leaky.log", `{"msg":"oops","text":"`+changes[1].Jobs[1].Translation+`"}`)
	if leaks := contentLeaks(dir, changes); len(leaks) != 1 || leaks[0] != "leaky.log" {
		t.Fatalf("leaks %v", leaks)
	}
}
