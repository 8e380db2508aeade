package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/localeflow/localeflow/adapters/monitordb"
	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/runner"
)

// verdict decides the exit: every change as expected, and the health
// blocked exactly by the one change that fails on purpose.
type verdict struct {
	ChangesOK   bool
	HealthOK    bool
	DLQsEmpty   bool
	Explanation string
}

func judge(changes []change, views []view, h healthReport, dlqTotal int) verdict {
	v := verdict{ChangesOK: true, DLQsEmpty: dlqTotal == 0}
	blockedOnPurpose := 0
	for i, c := range changes {
		v.ChangesOK = v.ChangesOK && views[i].OK
		if c.Expect == expectBlocked {
			blockedOnPurpose++
		}
	}
	clean := h.Failed == 0 && h.ExpiredLeases == 0 && h.ReleaseFailures == 0
	if blockedOnPurpose == 0 {
		v.HealthOK = h.Status == monitor.HealthOK && clean && h.RemoteFailures == 0
		v.Explanation = "nothing fails on purpose, so health must be ok"
	} else {
		v.HealthOK = h.Status == monitor.HealthBlocked && clean && h.RemoteFailures == blockedOnPurpose
		v.Explanation = fmt.Sprintf("expected: blocked by exactly %d remote failure (the change that fails on purpose), "+
			"no failed polls, no expired leases, no failed evidence or delivery", blockedOnPurpose)
	}
	return v
}

func (d *demo) finish(ctx context.Context, changes []change, views []view, timedOut bool, mon MonitorHealth, rel SnapshotLoader, st runner.Stack) error {
	out := d.out
	say(out, "")
	if timedOut {
		say(out, "Stopped waiting after %s: some changes did not reach a final state.", d.o.timeout)
	}
	say(out, "Final state of each change:")
	for i, c := range changes {
		mark := "✔"
		if !views[i].OK {
			mark = "✘"
		}
		text := views[i].Outcome
		if !views[i].Final {
			text = "NOT FINISHED: monitor " + views[i].Monitor + "; release " + views[i].Release
		}
		say(out, "  %s %-24s %s", mark, shortID(c.EventID), text)
	}

	var h healthReport
	var err error
	if sched := d.healthSchedule(st); sched != nil {
		// One tick of the health schedule, as EventBridge would fire it: the
		// function emits its metrics and, when blocked, the
		// localeflow.health.blocked event.
		resp, ferr := sched.Fire(ctx)
		var r struct {
			Status  string   `json:"status"`
			Reasons []string `json:"reasons"`
		}
		if ferr == nil && json.Unmarshal(resp, &r) == nil {
			say(out, "")
			say(out, "Health schedule fired (%s): status %s, reasons %v", sched.Name, r.Status, r.Reasons)
		} else {
			say(out, "Health schedule fired (%s): invocation failed: %v", sched.Name, ferr)
		}
	}
	if fn := d.fns["health"]; fn != nil {
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		h, err = fromFunction(hctx, fn.Proc)
		cancel()
	} else {
		h, err = computed(ctx, mon, rel, changes)
	}
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	jsonPath := filepath.Join(d.o.outDir, "health.json")
	htmlPath := filepath.Join(d.o.outDir, "health.html")
	_ = os.WriteFile(jsonPath, h.JSON, 0o644)
	if len(h.HTML) > 0 {
		_ = os.WriteFile(htmlPath, h.HTML, 0o644)
	}
	dlqTotal := 0
	type dlq struct {
		name string
		n    int
	}
	var dlqs []dlq
	for _, q := range []struct{ name, url string }{{d.res.PollQueue.DLQName, d.res.PollQueue.DLQURL}, {d.res.ReleaseQueue.DLQName, d.res.ReleaseQueue.DLQURL}} {
		n := d.dlqCount(ctx, q.url)
		dlqs = append(dlqs, dlq{q.name, n})
		if n != 0 {
			dlqTotal++
		}
	}
	v := judge(changes, views, h, dlqTotal)
	leaks := contentLeaks(d.o.outDir, changes)
	acked := false
	if v.HealthOK && h.Status == monitor.HealthBlocked {
		// What on-call does next: acknowledge the failure that was looked
		// at, and health is ok again.
		say(out, "")
		say(out, "Health: BLOCKED (HTTP %d) by %d remote failure(s): the change that fails on purpose. On-call looks at it and acknowledges it:",
			h.HTTPStatus, h.RemoteFailures)
		after, err := d.acknowledge(ctx, changes, mon, rel, st)
		if err != nil {
			say(out, "")
			say(out, "Acknowledging the change that fails on purpose failed: %v", err)
			v.HealthOK = false
		} else {
			acked = true
			v.HealthOK = after.Status == monitor.HealthOK && after.RemoteFailures == 0 && after.Failed == 0
			v.Explanation += "; after `localeflow ack` it must be ok"
			h = after
			_ = os.WriteFile(jsonPath, h.JSON, 0o644)
			if len(h.HTML) > 0 {
				_ = os.WriteFile(htmlPath, h.HTML, 0o644)
			}
		}
	}

	say(out, "")
	say(out, "Health: %s (HTTP %d), from %s", upper(h.Status), h.HTTPStatus, h.Source)
	say(out, "  monitor: %d failed, %d remote failures, %d expired leases; release: %d failed evidence/delivery records",
		h.Failed, h.RemoteFailures, h.ExpiredLeases, h.ReleaseFailures)
	for _, c := range changes {
		if c.Expect == expectBlocked && acked {
			say(out, "  %s (%s) was delivered, then the CMS refused to publish pt-BR (legal_hold): health was BLOCKED on purpose",
				shortID(c.EventID), c.SiteID)
			say(out, "  until the operator acknowledged it (`localeflow ack %s --reason ...`); it stays visible in `localeflow status`.", c.EventID)
		} else if c.Expect == expectBlocked {
			say(out, "  The BLOCKED status is on purpose: %s (%s) was delivered, then the CMS refused to publish pt-BR (legal_hold).",
				shortID(c.EventID), c.SiteID)
			say(out, "  That is what health is for: an operator has to look at it. Everything else finished cleanly.")
		}
	}
	if d.fns["health"] == nil {
		say(out, "  NOTE: the health function is not built yet; this status uses the monitor core's own health rule.")
	}
	if d.fns["coordinator"] == nil {
		say(out, "  NOTE: the coordinator is not built yet; the release stage did not run.")
	}
	say(out, "")
	say(out, "Where to look:")
	say(out, "  health page      %s   (JSON: %s)", absPath(htmlPath), absPath(jsonPath))
	say(out, "                   on AWS: the Function URL of %s-health (IAM auth): 200 when ok, 503 when blocked", d.o.prefix)
	for _, q := range dlqs {
		count := fmt.Sprint(q.n)
		if q.n < 0 {
			count = "unknown"
		}
		say(out, "  dead letters     %-28s %s messages", q.name, count)
	}
	say(out, "  function logs    %s", absPath(d.o.outDir)+"/{poller,coordinator,health}.log (JSON, ids and codes only)")
	say(out, "  runner log       %s", absPath(filepath.Join(d.o.outDir, "runner.log")))
	say(out, "  runner totals    %s", d.footer(st))
	if len(leaks) == 0 {
		say(out, "  content-free     no source or translation text in any function or runner log")
	} else {
		say(out, "  CONTENT LEAK     translation or source text found in %v", leaks)
	}
	say(out, "")
	say(out, "Stopping the functions, the reference servers and the local resources…")
	d.passed = v.ChangesOK && v.HealthOK && v.DLQsEmpty && !timedOut && len(leaks) == 0
	switch {
	case d.passed:
		say(out, "DEMO OK: every change ended as expected; health is %s as %s.", h.Status, v.Explanation)
	default:
		say(out, "DEMO NOT OK: changes as expected: %v; health as expected: %v (%s); DLQs empty: %v.", v.ChangesOK, v.HealthOK, v.Explanation, v.DLQsEmpty)
	}
	return nil
}

// acknowledge acknowledges every change that fails on purpose, as the
// caller's AWS identity (STS), the way `localeflow ack` does, and reads
// health again.
func (d *demo) acknowledge(ctx context.Context, changes []change, mon MonitorHealth, rel SnapshotLoader, st runner.Stack) (healthReport, error) {
	db, ok := d.clients.DynamoDB.(*dynamodb.Client)
	if !ok {
		return healthReport{}, fmt.Errorf("acknowledge: no DynamoDB client")
	}
	store, err := monitordb.New(db, d.res.MonitorTable)
	if err != nil {
		return healthReport{}, err
	}
	q, err := opsdb.NewRequeuer(store, db, d.res.MonitorTable)
	if err != nil {
		return healthReport{}, err
	}
	who, err := d.sts.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return healthReport{}, fmt.Errorf("sts GetCallerIdentity: %w", err)
	}
	say(d.out, "")
	for _, c := range changes {
		if c.Expect != expectBlocked {
			continue
		}
		reason := "demo: legal hold on pt-BR seen and handled by the content team"
		got, err := q.Acknowledge(ctx, c.EventID, aws.ToString(who.Arn), reason, core.Millis(time.Now()))
		if err != nil {
			return healthReport{}, err
		}
		say(d.out, "$ localeflow ack %s --reason %q", c.EventID, reason)
		say(d.out, "  acknowledged %s (%s, %s) by %s: health no longer counts it", shortID(c.EventID), got.Journal.State,
			got.Journal.RemoteStatus, got.Journal.By)
	}
	if sched := d.healthSchedule(st); sched != nil {
		if resp, ferr := sched.Fire(ctx); ferr == nil {
			var r struct {
				Status string `json:"status"`
			}
			if json.Unmarshal(resp, &r) == nil {
				say(d.out, "Health schedule fired again (%s): status %s", sched.Name, r.Status)
			}
		}
	}
	if fn := d.fns["health"]; fn != nil {
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return fromFunction(hctx, fn.Proc)
	}
	return computed(ctx, mon, rel, changes)
}

// healthSchedule is the schedule that targets the health function.
func (d *demo) healthSchedule(st runner.Stack) *runner.Schedule {
	for _, s := range d.topo.Schedules {
		if s.Function != "health" {
			continue
		}
		for _, sc := range st.Schedules {
			if sc.Name == s.Name {
				return sc
			}
		}
	}
	return nil
}

// contentLeaks lists the logs in dir that contain a source or translation
// text of the scenario (they must hold ids, counts and codes only).
func contentLeaks(dir string, changes []change) []string {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var leaks []string
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
	search:
		for _, c := range changes {
			for _, j := range c.Jobs {
				if bytes.Contains(b, []byte(j.Source)) || bytes.Contains(b, []byte(j.Translation)) {
					leaks = append(leaks, filepath.Base(p))
					break search
				}
			}
		}
	}
	return leaks
}

func upper(s string) string {
	if s == "" {
		return "UNKNOWN"
	}
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
