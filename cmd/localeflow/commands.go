package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/localeflow/localeflow/adapters/opsdb"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
)

func ts(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return core.FromMillis(ms).Format(time.RFC3339Nano)
}

func tsTime(t time.Time) string {
	if t.IsZero() || t.UnixMilli() <= 0 {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (c *cli) table() *tabwriter.Writer { return tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0) }

// leaseView is an evidence or delivery record for status output.
type leaseView struct {
	Kind          string        `json:"kind"`
	Key           string        `json:"key"`
	Status        release.State `json:"status"`
	Valid         bool          `json:"valid"`
	Attempts      int           `json:"attempts"`
	MaxAttempts   int           `json:"max_attempts"`
	NextAttemptMS int64         `json:"next_attempt_ms"`
	LeaseExpires  int64         `json:"lease_expires_ms,omitempty"`
	LastErrorCode string        `json:"last_error_code,omitempty"`
	UpdatedMS     int64         `json:"updated_ms"`
	// AcknowledgedMS is set once an operator acknowledged the failed
	// record (it no longer blocks health).
	AcknowledgedMS int64 `json:"acknowledged_ms,omitempty"`
}

type statusView struct {
	EventID  string         `json:"event_id"`
	Monitor  *monitorView   `json:"monitor"`
	Requeues *opsdb.Journal `json:"requeues,omitempty"`
	// Acknowledged is the last acknowledgement (who, when, why); it stays
	// visible after the record left the attention index.
	Acknowledged *opsdb.AckJournal `json:"acknowledged,omitempty"`
	Release      []leaseView       `json:"release"`
	// ReleaseAcks are the acknowledgements of the release's records
	// (failed evidence, delivery or job records, the blocked record).
	ReleaseAcks []release.AckRecord `json:"release_acknowledgements,omitempty"`
	Plan        *release.PlanRecord `json:"-"`
}

type monitorView struct {
	State               string   `json:"state"`
	SiteID              string   `json:"site_id"`
	PlanID              string   `json:"plan_id"`
	WebsiteVersion      string   `json:"website_version"`
	SourceSequence      int64    `json:"source_sequence"`
	JobCount            int      `json:"job_count"`
	PollAttempts        int      `json:"poll_attempts"`
	ConsecutiveFailures int      `json:"consecutive_failures"`
	MaxFailures         int      `json:"max_consecutive_failures"`
	NextPoll            string   `json:"next_poll"`
	LeaseExpires        string   `json:"lease_expires,omitempty"`
	LeaseExpired        bool     `json:"lease_expired"`
	LastErrorCode       string   `json:"last_error_code,omitempty"`
	RemoteStatus        string   `json:"remote_status,omitempty"`
	LifecycleSHA256     string   `json:"lifecycle_sha256,omitempty"`
	ApprovedLocales     []string `json:"approved_locales"`
	RequiredLocales     []string `json:"required_locales"`
	Created             string   `json:"created"`
	Updated             string   `json:"updated"`
	// Timeline is the change's last transitions, oldest first (the full
	// history is in the poller's log).
	Timeline []monitor.TimelineEntry `json:"timeline"`
}

// status shows one change. The monitor record is read and validated by the
// monitor service (an invalid record is marked failed, as on every read).
func (c *cli) status(ctx context.Context, eventID string) error {
	store := c.monitorStore()
	svc, err := monitor.NewService(store, core.SystemClock{}, nil, monitor.Config{WorkerID: "localeflow-cli"})
	if err != nil {
		return err
	}
	view := statusView{EventID: eventID, Release: []leaseView{}}
	st, err := svc.Status(ctx, eventID)
	switch {
	case core.HasCode(err, monitor.CodeEventMissing):
	case err != nil:
		return fmt.Errorf("monitor record %s: %w", eventID, err)
	default:
		view.Monitor = &monitorView{
			State: string(st.State), SiteID: st.SiteID, PlanID: st.PlanID, WebsiteVersion: st.WebsiteVersion,
			SourceSequence: st.SourceSequence, JobCount: st.JobCount, PollAttempts: st.PollAttempts,
			ConsecutiveFailures: st.ConsecutiveFailures, MaxFailures: st.MaxConsecutiveFailures,
			NextPoll: tsTime(st.NextPoll), LeaseExpired: st.LeaseExpired, LastErrorCode: st.LastErrorCode,
			RemoteStatus: st.RemoteStatus, LifecycleSHA256: st.LifecycleSHA256,
			ApprovedLocales: st.ApprovedLocales, RequiredLocales: st.RequiredLocales,
			Created: tsTime(st.Created), Updated: tsTime(st.Updated),
			Timeline: st.Timeline,
		}
		if view.Monitor.Timeline == nil {
			view.Monitor.Timeline = []monitor.TimelineEntry{}
		}
		if st.State == monitor.StateLeased {
			view.Monitor.LeaseExpires = tsTime(st.LeaseExpires)
		}
	}
	requeuer, err := opsdb.NewRequeuer(store, c.db, c.monitorTable)
	if err != nil {
		return err
	}
	if j, ok, err := requeuer.History(ctx, eventID); err != nil {
		return fmt.Errorf("requeue journal %s: %w", eventID, err)
	} else if ok {
		view.Requeues = &j
	}
	if j, ok, err := requeuer.AckHistory(ctx, eventID); err != nil {
		return fmt.Errorf("ack journal %s: %w", eventID, err)
	} else if ok {
		view.Acknowledged = &j
	}
	snap, err := c.releaseStore().Load(ctx, eventID)
	if err != nil {
		return fmt.Errorf("release records %s: %w", eventID, err)
	}
	invalid := 0
	for _, id := range sortedKeys(snap.Evidence) {
		e := snap.Evidence[id]
		v := leaseViewOf(health.KindEvidence, id, e.Lease, health.ValidEvidence(e))
		view.Release = append(view.Release, v)
	}
	if d := snap.Delivery; d != nil {
		view.Release = append(view.Release, leaseViewOf(health.KindDelivery, d.DeliveryID, d.Lease, health.ValidDelivery(d)))
	}
	for _, sk := range sortedKeys(snap.Acks) {
		view.ReleaseAcks = append(view.ReleaseAcks, *snap.Acks[sk])
	}
	for _, v := range view.Release {
		if !v.Valid {
			invalid++
		}
	}
	if view.Monitor == nil && len(view.Release) == 0 && snap.Plan == nil {
		return core.Fail(monitor.CodeEventMissing)
	}
	if c.jsonOut {
		if err := c.printJSON(view); err != nil {
			return err
		}
	} else {
		c.printStatus(view)
	}
	if invalid > 0 {
		fmt.Fprintf(c.errOut, "localeflow: %d invalid release record(s) for %s\n", invalid, eventID)
		return badError{"release_record_invalid"}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func leaseViewOf(kind, key string, l release.Lease, valid bool) leaseView {
	return leaseView{Kind: kind, Key: key, Status: l.Status, Valid: valid, Attempts: l.Attempts, MaxAttempts: l.MaxAttempts,
		NextAttemptMS: l.NextAttemptMS, LeaseExpires: l.LeaseExpiresMS, LastErrorCode: l.LastErrorCode, UpdatedMS: l.UpdatedMS,
		AcknowledgedMS: l.AcknowledgedMS}
}

func (c *cli) printStatus(v statusView) {
	w := c.table()
	fmt.Fprintf(w, "event\t%s\n", v.EventID)
	if m := v.Monitor; m != nil {
		fmt.Fprintf(w, "monitor state\t%s\n", m.State)
		fmt.Fprintf(w, "site / plan / version\t%s / %s / %s (sequence %d, %d jobs)\n", m.SiteID, m.PlanID, m.WebsiteVersion, m.SourceSequence, m.JobCount)
		fmt.Fprintf(w, "poll attempts\t%d (consecutive failures %d of %d)\n", m.PollAttempts, m.ConsecutiveFailures, m.MaxFailures)
		fmt.Fprintf(w, "next poll\t%s\n", m.NextPoll)
		if m.LeaseExpires != "" {
			expired := ""
			if m.LeaseExpired {
				expired = " (expired)"
			}
			fmt.Fprintf(w, "lease expires\t%s%s\n", m.LeaseExpires, expired)
		}
		fmt.Fprintf(w, "last error code\t%s\n", dash(m.LastErrorCode))
		fmt.Fprintf(w, "remote status\t%s\n", dash(m.RemoteStatus))
		fmt.Fprintf(w, "locales approved\t%d of %d\n", len(m.ApprovedLocales), len(m.RequiredLocales))
		fmt.Fprintf(w, "created / updated\t%s / %s\n", m.Created, m.Updated)
	} else {
		fmt.Fprintf(w, "monitor state\t(no monitor record)\n")
	}
	if j := v.Requeues; j != nil {
		fmt.Fprintf(w, "requeued\t%d time(s), last at %s (was failed with %s after %d failures)\n",
			j.RequeuedCount, ts(j.RequeuedMS), j.LastFailedCode, j.LastFailedFailures)
	}
	if m := v.Monitor; m != nil {
		for i, e := range m.Timeline {
			label := ""
			if i == 0 {
				label = "recent transitions"
			}
			fmt.Fprintf(w, "%s\t%s  %s  %s  %s\n", label, ts(e.AtMS), e.State, dash(e.RemoteStatus), dash(e.Code))
		}
	}
	if j := v.Acknowledged; j != nil {
		fmt.Fprintf(w, "acknowledged	by %s at %s: %q (was %s %s)\n", j.By, ts(j.AckMS), j.Reason, j.State, firstNonEmpty(j.ErrorCode, j.RemoteStatus))
	}
	w.Flush()
	for _, a := range v.ReleaseAcks {
		fmt.Fprintf(c.out, "release %s acknowledged by %s at %s: %q (was %s %s)\n", a.AckedKey, a.By, ts(a.AckMS), a.Reason, a.AckedState, dash(a.AckedCode))
	}
	if len(v.Release) == 0 {
		fmt.Fprintln(c.out, "\nno evidence or delivery records")
		return
	}
	fmt.Fprintln(c.out)
	w = c.table()
	fmt.Fprintln(w, "KIND\tKEY\tSTATUS\tATTEMPTS\tNEXT ATTEMPT\tLAST ERROR\tVALID\tACKNOWLEDGED")
	for _, r := range v.Release {
		acked := "-"
		if r.AcknowledgedMS != 0 {
			acked = ts(r.AcknowledgedMS)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%v\t%s\n", r.Kind, r.Key, r.Status, r.Attempts, r.MaxAttempts, ts(r.NextAttemptMS), dash(r.LastErrorCode), r.Valid, acked)
	}
	w.Flush()
}

// requeue puts a failed change back to due.
func (c *cli) requeue(ctx context.Context, eventID string) error {
	q, err := opsdb.NewRequeuer(c.monitorStore(), c.db, c.monitorTable)
	if err != nil {
		return err
	}
	got, err := q.Requeue(ctx, eventID, core.Millis(time.Now()))
	if err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(struct {
			EventID     string        `json:"event_id"`
			From        string        `json:"from"`
			To          string        `json:"to"`
			NextPollMS  int64         `json:"next_poll_ms"`
			FailureCode string        `json:"previous_error_code"`
			Journal     opsdb.Journal `json:"journal"`
		}{eventID, string(got.Before.State), string(got.After.State), got.After.NextPollMS, got.Before.LastErrorCode, got.Journal})
	}
	fmt.Fprintf(c.out, "requeued %s: %s (%s, %d consecutive failures) -> %s, due %s, failure budget %d; requeued %d time(s)\n",
		eventID, got.Before.State, got.Before.LastErrorCode, got.Before.ConsecutiveFailures, got.After.State,
		ts(got.After.NextPollMS), got.After.MaxConsecutiveFailures, got.Journal.RequeuedCount)
	return nil
}

// ack acknowledges a change that needs attention, as the caller's AWS
// identity; a second ack is a no-op.
func (c *cli) ack(ctx context.Context, eventID string) error {
	q, err := opsdb.NewRequeuer(c.monitorStore(), c.db, c.monitorTable)
	if err != nil {
		return err
	}
	by, err := c.identity(ctx)
	if err != nil {
		return err
	}
	acknowledge := q.Acknowledge
	if c.ackInvalid {
		acknowledge = q.AcknowledgeInvalid
	}
	got, err := acknowledge(ctx, eventID, by, c.reason, core.Millis(time.Now()))
	if core.HasCode(err, monitor.CodeStateInvalid) {
		return fmt.Errorf("%w (the record fails its integrity check: look at it with status and audit, then acknowledge it with ack --invalid)", err)
	}
	if err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(struct {
			EventID string           `json:"event_id"`
			Already bool             `json:"already_acknowledged"`
			Journal opsdb.AckJournal `json:"acknowledgement"`
		}{eventID, got.Already, got.Journal})
	}
	j := got.Journal
	what := j.State
	if code := firstNonEmpty(j.ErrorCode, j.RemoteStatus); code != "" {
		what += ", " + code
	}
	if got.Already {
		fmt.Fprintf(c.out, "%s was already acknowledged by %s at %s (%s): %q; nothing written\n", eventID, j.By, ts(j.AckMS), what, j.Reason)
		return nil
	}
	if c.ackInvalid && got.Record.OutboxMS != 0 {
		fmt.Fprintf(c.out, "acknowledged %s (%s) by %s at %s: %q; health counts it until its outcome is announced (the poller's next sweep)\n", eventID, what, j.By, ts(j.AckMS), j.Reason)
		return nil
	}
	fmt.Fprintf(c.out, "acknowledged %s (%s) by %s at %s: %q; health no longer counts it\n", eventID, what, j.By, ts(j.AckMS), j.Reason)
	return nil
}

// ackReleaseRecords acknowledges the release records of eventID that need
// attention (all, or the one --key names), as the caller's AWS identity.
func (c *cli) ackReleaseRecords(ctx context.Context, eventID string) error {
	sk := ""
	if c.ackKey != "" {
		var err error
		if sk, err = release.AckSortKey(c.ackKey); err != nil {
			return err
		}
	}
	by, err := c.identity(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	got, err := release.Acknowledge(ctx, c.releaseStore(), eventID, sk, by, c.reason, core.Millis(now))
	if err != nil {
		return err
	}
	if err := c.expireAckedTexts(ctx, eventID, got, now); err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(struct {
			EventID string                `json:"event_id"`
			Acked   []release.AckedRecord `json:"release"`
		}{eventID, got})
	}
	for _, a := range got {
		j := a.Journal
		what := j.AckedState
		if j.AckedCode != "" {
			what += ", " + j.AckedCode
		}
		if a.Already {
			fmt.Fprintf(c.out, "%s %s %s was already acknowledged by %s at %s: %q; nothing written\n", eventID, a.Kind, j.AckedKey, j.By, ts(j.AckMS), j.Reason)
			continue
		}
		fmt.Fprintf(c.out, "acknowledged %s %s %s (%s) by %s at %s: %q; health no longer counts it\n", eventID, a.Kind, j.AckedKey, what, j.By, ts(j.AckMS), j.Reason)
	}
	return nil
}

// expireAckedTexts starts the retention of the event's texts once its
// records are acknowledged: the operator ended the release (a failed job
// that will not run again; a blocked release's texts already expire), so
// its texts expire LOCALEFLOW_TEXT_RETENTION (default 7 days) later, like
// a delivered or blocked release's (docs/design.md "Retention"). A record
// already acknowledged sets it again: running the ack again is how a
// failed expiry is retried.
func (c *cli) expireAckedTexts(ctx context.Context, eventID string, got []release.AckedRecord, now time.Time) error {
	if len(got) == 0 {
		return nil
	}
	retention := release.DefaultTextRetention
	if d, err := time.ParseDuration(strings.TrimSpace(c.getenv(contract.EnvTextRetention))); err == nil && d > 0 {
		retention = d
	}
	return releasedb.TextExpirer{DB: c.db, Table: c.releaseTable}.ExpireTexts(ctx, eventID, now.Add(retention))
}

// health prints the health document; blocked exits 1.
func (c *cli) health(ctx context.Context) error {
	ch, err := c.checker()
	if err != nil {
		return err
	}
	r, err := ch.Check(ctx)
	if err != nil {
		return err
	}
	if c.jsonOut {
		if err := c.printJSON(healthJSON(r)); err != nil {
			return err
		}
	} else {
		c.printHealth(r)
	}
	if r.Status == health.StatusBlocked {
		return badError{health.StatusBlocked}
	}
	return nil
}

// healthJSON is the health document plus what the page shows besides it:
// the reasons it is blocked and the unacknowledged records blocking it.
func healthJSON(r health.Report) any {
	reasons, attention := r.Reasons, r.Attention()
	if reasons == nil {
		reasons = []string{}
	}
	if attention == nil {
		attention = []health.Item{}
	}
	return struct {
		health.Report
		Reasons   []string      `json:"reasons"`
		Attention []health.Item `json:"attention"`
	}{r, reasons, attention}
}

func (c *cli) printHealth(r health.Report) {
	fmt.Fprintf(c.out, "health: %s (checked %s)\n", r.Status, ts(r.CheckedAtMS))
	if len(r.Reasons) > 0 {
		fmt.Fprintf(c.out, "blocked by: %s\n", strings.Join(r.Reasons, ", "))
	}
	fmt.Fprintln(c.out)
	w := c.table()
	fmt.Fprintln(w, "MONITOR\tRECORDS")
	for _, st := range monitor.States() {
		approx := ""
		if st == monitor.StateTerminal && r.TerminalApproximate {
			approx = "~"
		}
		fmt.Fprintf(w, "%s\t%s%d\n", st, approx, r.Monitor.Counts[string(st)])
	}
	fmt.Fprintf(w, "(due now)\t%d\n(expired leases)\t%d\n(remote failures)\t%d\n",
		r.Monitor.Due, r.Monitor.ExpiredLeases, r.Monitor.RemoteFailures)
	w.Flush()
	fmt.Fprintln(c.out)
	w = c.table()
	fmt.Fprintln(w, "RELEASE\tPENDING\tLEASED\tRETRY_WAIT\tFAILED\tOPEN\tDUE\tEXPIRED LEASES")
	for _, p := range []struct {
		name string
		l    contract.LeaseHealth
	}{{"evidence", r.Release.Evidence}, {"delivery", r.Release.Delivery}} {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", p.name, p.l.Counts["pending"], p.l.Counts["leased"],
			p.l.Counts["retry_wait"], p.l.Counts["failed"], p.l.Open, p.l.Due, p.l.ExpiredLeases)
	}
	w.Flush()
	if att := r.Attention(); len(att) > 0 {
		fmt.Fprintf(c.out, "\nneeding attention (%d):\n", len(att))
		c.printItems(att, r.CheckedAtMS)
	}
}

func (c *cli) printItems(items []health.Item, nowMS int64) {
	w := c.table()
	fmt.Fprintln(w, "KIND\tEVENT\tKEY\tSTATE\tERROR CODE\tREMOTE STATUS\tNEXT DUE\tATTEMPTS")
	for _, it := range items {
		state := it.State
		switch {
		case it.Invalid:
			state = "invalid"
		case it.LeaseExpired:
			state += " (lease expired)"
		case it.Due:
			state += " (due)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", it.Kind, it.EventID, dash(it.Key), state, dash(it.ErrorCode),
			dash(it.RemoteStatus), ts(it.NextDueMS), it.Attempts)
	}
	w.Flush()
}

// list prints the indexed records, filtered.
func (c *cli) list(ctx context.Context) error {
	ch, err := c.checker()
	if err != nil {
		return err
	}
	r, err := ch.Check(ctx)
	if err != nil {
		return err
	}
	items := []health.Item{}
	for _, it := range r.Items {
		if (c.kind == "" || it.Kind == c.kind) && (c.state == "" || it.State == c.state) && (!c.attention || it.Attention) {
			items = append(items, it)
		}
	}
	if c.jsonOut {
		return c.printJSON(items)
	}
	if c.state == string(monitor.StateTerminal) {
		fmt.Fprintln(c.errOut, "localeflow: only terminal records with a remote failure are indexed; successful ones are not listed (audit reads them)")
	}
	if len(items) == 0 {
		fmt.Fprintln(c.out, "no matching records")
		return nil
	}
	c.printItems(items, r.CheckedAtMS)
	return nil
}

// audit checks every record; any invalid one exits 1.
func (c *cli) audit(ctx context.Context) error {
	a, err := opsdb.NewAuditor(c.db, c.monitorStore(), c.monitorTable, c.releaseTable)
	if err != nil {
		return err
	}
	a.Segments = c.segments
	rep, err := a.Audit(ctx)
	if err != nil {
		return err
	}
	if c.jsonOut {
		if err := c.printJSON(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.out, "audited %d monitor records, %d requeue journal items, %d release items: %d invalid\n",
			rep.MonitorRecords, rep.JournalItems, rep.ReleaseItems, len(rep.Invalid))
		if len(rep.Invalid) > 0 {
			w := c.table()
			fmt.Fprintln(w, "TABLE\tKIND\tEVENT\tKEY\tCODE")
			for _, f := range rep.Invalid {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", f.Table, f.Kind, f.EventID, dash(f.Key), f.Code)
			}
			w.Flush()
		}
	}
	if len(rep.Invalid) > 0 {
		return badError{"invalid_records"}
	}
	return nil
}
