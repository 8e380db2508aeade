package handler

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/monitor"
)

// MaxPageItems bounds the open items listed on the page (the counts are
// always complete; items needing attention are always all listed).
const MaxPageItems = 500

const pageCSS = `
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d232b;background:#f5f6f8}
header{padding:20px 32px;color:#fff}
header.ok{background:#1f7a3a}header.blocked{background:#b3261e}
header h1{margin:0;font-size:26px}header p{margin:6px 0 0;font-size:15px}
main{padding:8px 32px 32px}
h2{font-size:18px;margin:24px 0 8px}
section.cards{display:flex;gap:16px;flex-wrap:wrap}
.card{background:#fff;border:1px solid #d8dce2;border-radius:8px;padding:12px 16px;min-width:300px}
.card h3{margin:0 0 8px;font-size:15px}
table{border-collapse:collapse;background:#fff;font-size:14px}
th,td{border:1px solid #d8dce2;padding:5px 10px;text-align:left;vertical-align:top}
th{background:#eef0f3}
td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.bad td{background:#fdecea}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px;white-space:nowrap}
.reasons code{display:inline-block;margin:0 6px 4px 0;padding:1px 6px;border-radius:4px;background:rgba(255,255,255,.2)}
p.note{color:#5b6470;font-size:13px;max-width:900px}
`

// pageCSP: the page has no script; its one inline style is allowed by hash.
var pageCSP = func() string {
	sum := sha256.Sum256([]byte(pageCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

// The page is written by hand rather than with html/template: the template
// engine looks methods up by name through reflection, which makes the
// linker keep every exported method of every reachable type (all of the SDK
// clients' operations) and grew the bootstrap by about 40 %. Every value
// that comes from a report goes through text(), which escapes exactly what
// html/template escapes in element text, RCDATA and quoted attribute values
// (NUL, ", &, ', +, <, >); the markup around the values is constant.

// pageWriter accumulates a page.
type pageWriter struct{ b strings.Builder }

// raw writes constant markup.
func (w *pageWriter) raw(s string) { w.b.WriteString(s) }

// text writes s escaped for HTML text and quoted attribute values.
func (w *pageWriter) text(s string) {
	last := 0
	for i := 0; i < len(s); i++ {
		var repl string
		switch s[i] {
		case 0:
			repl = "\uFFFD"
		case '"':
			repl = "&#34;"
		case '&':
			repl = "&amp;"
		case '\'':
			repl = "&#39;"
		case '+':
			repl = "&#43;"
		case '<':
			repl = "&lt;"
		case '>':
			repl = "&gt;"
		default:
			continue
		}
		w.b.WriteString(s[last:i])
		w.b.WriteString(repl)
		last = i + 1
	}
	w.b.WriteString(s[last:])
}

// num writes a decimal number (nothing in it needs escaping).
func (w *pageWriter) num(n int) { w.b.WriteString(strconv.Itoa(n)) }

// row writes a table row with a header cell and a number, marked as
// needing attention when bad and n is not 0.
func (w *pageWriter) row(header string, n int, bad bool) {
	w.raw("<tr")
	if bad && n != 0 {
		w.raw(` class="bad"`)
	}
	w.raw("><th>" + header + `</th><td class="n">`)
	w.num(n)
	w.raw("</td></tr>\n")
}

// states writes one row per state count.
func (w *pageWriter) states(rows []countRow) {
	for _, row := range rows {
		w.raw("<tr><td>")
		w.text(row.Name)
		w.raw(`</td><td class="n">`)
		if row.Approx {
			w.raw("≈ ")
		}
		w.num(row.N)
		w.raw("</td></tr>\n")
	}
}

// page writes the whole document: the header with the verdict, the count
// cards, the records needing attention, the open items and the note.
func (w *pageWriter) page(d pageData) {
	w.header(d)
	w.cards(d)
	w.attention(d)
	w.open(d)
	w.footer(d)
}

func (w *pageWriter) header(d pageData) {
	w.raw("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>localeflow health: ")
	w.text(d.Report.Status)
	w.raw("</title><style>" + pageCSS + "</style></head>\n<body>\n<header class=\"")
	w.text(d.Report.Status)
	w.raw("\"><h1>localeflow health: ")
	w.text(d.Report.Status)
	w.raw("</h1>\n<p>Checked ")
	w.text(d.Checked)
	w.raw(".")
	if len(d.Report.Reasons) > 0 {
		w.raw(" Blocked by:")
	}
	w.raw("</p>\n")
	if len(d.Report.Reasons) > 0 {
		w.raw(`<p class="reasons">`)
		for _, r := range d.Report.Reasons {
			w.raw("<code>")
			w.text(r)
			w.raw("</code>")
		}
		w.raw("</p>")
	}
	w.raw("\n</header>\n")
}

func (w *pageWriter) cards(d pageData) {
	w.raw("<main>\n<section class=\"cards\">\n<div class=\"card\"><h3>Lifecycle monitor</h3><table>\n<tr><th>State</th><th>Records</th></tr>\n")
	w.states(d.MonitorStates)
	m := d.Report.Monitor
	w.row("Due now", m.Due, false)
	w.row("Expired leases", m.ExpiredLeases, true)
	w.row("Failed", m.Failed, true)
	w.row("Remote failures", m.RemoteFailures, true)
	w.raw("</table></div>\n")
	for _, c := range d.Release {
		w.raw(`<div class="card"><h3>`)
		w.text(c.Title)
		w.raw("</h3><table>\n<tr><th>State</th><th>Records</th></tr>\n")
		w.states(c.States)
		w.row("Open", c.Part.Open, false)
		w.row("Due now", c.Part.Due, false)
		w.row("Expired leases", c.Part.ExpiredLeases, true)
		w.row("Failed", c.Part.Failed, true)
		w.raw("</table></div>\n")
	}
	w.raw("</section>\n")
}

func (w *pageWriter) attention(d pageData) {
	w.raw("\n<h2>Needing attention (")
	w.num(len(d.Attention))
	w.raw(")</h2>\n")
	if len(d.Attention) > 0 {
		w.raw("<table>\n<tr><th>Kind</th><th>Event</th><th>Key</th><th>State</th><th>Error code</th><th>Remote status</th><th>Attempts</th><th>Since</th><th>Recent transitions</th></tr>\n")
		for _, it := range d.Attention {
			w.raw(`<tr class="bad">`)
			w.itemCells(it)
			w.raw("<td><code>")
			w.text(it.ErrorCode)
			w.raw("</code></td><td>")
			w.text(it.RemoteStatus)
			w.raw(`</td><td class="n">`)
			w.num(it.Attempts)
			w.raw("</td><td>")
			if it.LeaseExpired {
				w.raw("lease expired ")
				w.text(when(d.Now, it.NextDueMS))
			} else {
				w.text(when(d.Now, it.UpdatedMS))
			}
			w.raw("</td><td>")
			w.text(timeline(it.Timeline))
			w.raw("</td></tr>\n")
		}
		w.raw("</table>")
	} else {
		w.raw("<p>Nothing needs attention.</p>")
	}
}

func (w *pageWriter) open(d pageData) {
	w.raw("\n\n<h2>Open items (")
	w.num(d.OpenCount)
	w.raw(")</h2>\n")
	if len(d.Open) > 0 {
		w.raw("<table>\n<tr><th>Kind</th><th>Event</th><th>Key</th><th>State</th><th>Next due</th><th>Last error code</th><th>Attempts</th></tr>\n")
		for _, it := range d.Open {
			w.raw("<tr>")
			w.itemCells(it)
			w.raw("<td>")
			if it.State == "leased" {
				w.raw("lease ends ")
			}
			w.text(when(d.Now, it.NextDueMS))
			w.raw("</td><td><code>")
			w.text(it.ErrorCode)
			w.raw(`</code></td><td class="n">`)
			w.num(it.Attempts)
			w.raw("</td></tr>\n")
		}
		w.raw("</table>")
		if d.Hidden != 0 {
			w.raw(`<p class="note">`)
			w.num(d.Hidden)
			w.raw(" more open items are not listed.</p>")
		}
	} else {
		w.raw("<p>No open items.</p>")
	}
}

func (w *pageWriter) footer(d pageData) {
	w.raw(`
<p class="note">Counts come from the sparse wake and attention indexes; every record counted was read and integrity-checked.
The terminal count is approximate (table item count, refreshed by DynamoDB about every six hours); succeeded evidence and deliveries are finished and not counted.
Machine-readable: request this URL without <code>Accept: text/html</code> (`)
	w.text(d.Schema)
	w.raw(").</p>\n</main></body></html>\n")
}

// itemCells writes an item's kind, event, key and state cells.
func (w *pageWriter) itemCells(it health.Item) {
	w.raw("<td>")
	w.text(it.Kind)
	w.raw("</td><td><code>")
	w.text(it.EventID)
	w.raw("</code></td><td><code>")
	w.text(it.Key)
	w.raw("</code></td><td>")
	w.text(stateLabel(it))
	w.raw("</td>")
}

// errorPage is the page answered when the tables cannot be read.
func errorPage(checked, code string) string {
	var w pageWriter
	w.raw("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>localeflow health: unavailable</title><style>" + pageCSS +
		"</style></head>\n<body><header class=\"blocked\"><h1>localeflow health: unavailable</h1><p>The tables could not be read at ")
	w.text(checked)
	w.raw(" (<code>")
	w.text(code)
	w.raw("</code>). Try again shortly.</p></header></body></html>\n")
	return w.b.String()
}

type countRow struct {
	Name   string
	N      int
	Approx bool
}

type releaseCard struct {
	Title  string
	Part   contract.LeaseHealth
	States []countRow
}

type pageData struct {
	Report        health.Report
	Schema        string
	Now           int64
	Checked       string
	MonitorStates []countRow
	Release       []releaseCard
	Attention     []health.Item
	Open          []health.Item
	OpenCount     int
	Hidden        int
}

func newPageData(r health.Report) pageData {
	d := pageData{Report: r, Schema: health.Schema, Now: r.CheckedAtMS,
		Checked: core.FromMillis(r.CheckedAtMS).Format("2006-01-02 15:04:05 MST")}
	for _, st := range monitor.States() {
		d.MonitorStates = append(d.MonitorStates, countRow{Name: string(st), N: r.Monitor.Counts[string(st)],
			Approx: st == monitor.StateTerminal && r.TerminalApproximate})
	}
	for _, c := range []struct {
		title string
		part  contract.LeaseHealth
	}{{"Quality evidence", r.Release.Evidence}, {"Deliveries", r.Release.Delivery}} {
		card := releaseCard{Title: c.title, Part: c.part}
		for _, st := range []string{"pending", "leased", "retry_wait", "failed"} {
			card.States = append(card.States, countRow{Name: st, N: c.part.Counts[st]})
		}
		d.Release = append(d.Release, card)
	}
	for _, it := range r.Items {
		if it.Attention {
			d.Attention = append(d.Attention, it)
			continue
		}
		d.OpenCount++
		if len(d.Open) < MaxPageItems {
			d.Open = append(d.Open, it)
		}
	}
	d.Hidden = d.OpenCount - len(d.Open)
	return d
}

// stateLabel is the item's state with its condition.
func stateLabel(it health.Item) string {
	switch {
	case it.Invalid:
		return "invalid record"
	case it.LeaseExpired:
		return it.State + " (lease expired)"
	case it.RemoteStatus != "" && it.Attention && it.State == string(monitor.StateTerminal):
		return "terminal (remote failure)"
	case it.Due:
		return it.State + " (due)"
	}
	return it.State
}

// when is ms as UTC time with its distance from now ("in 25s", "3m ago").
// timeline is a record's last transitions on one line, oldest first:
// "15:04:05 state remote code → …".
func timeline(t []monitor.TimelineEntry) string {
	parts := make([]string, 0, len(t))
	for _, e := range t {
		p := core.FromMillis(e.AtMS).Format("15:04:05") + " " + string(e.State)
		for _, f := range []string{e.RemoteStatus, e.Code} {
			if f != "" {
				p += " " + f
			}
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " → ")
}

func when(nowMS, ms int64) string {
	if ms <= 0 {
		return "—"
	}
	d := time.Duration(ms-nowMS) * time.Millisecond
	rel := "now"
	switch {
	case d >= time.Second:
		rel = "in " + short(d)
	case d <= -time.Second:
		rel = short(-d) + " ago"
	}
	return fmt.Sprintf("%s (%s)", core.FromMillis(ms).Format("2006-01-02 15:04:05"), rel)
}

func short(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

func htmlHeaders() map[string]string {
	h := baseHeaders("text/html; charset=utf-8")
	h["Content-Security-Policy"] = pageCSP
	h["Referrer-Policy"] = "no-referrer"
	return h
}

// RenderPage renders the page of r.
func RenderPage(r health.Report) ([]byte, error) {
	var w pageWriter
	w.page(newPageData(r))
	return []byte(w.b.String()), nil
}

func (h *Handler) htmlResponse(ctx context.Context, r health.Report) events.LambdaFunctionURLResponse {
	body, err := RenderPage(r)
	if err != nil {
		h.log.ErrorContext(ctx, "health page not rendered", "code", CodeRenderFailed, "error", err.Error())
		return errorResponse(http.StatusInternalServerError, CodeRenderFailed, false)
	}
	return events.LambdaFunctionURLResponse{StatusCode: statusCode(r), Headers: htmlHeaders(), Body: string(body)}
}

func (h *Handler) htmlError(context.Context) events.LambdaFunctionURLResponse {
	body := errorPage(h.clock.Now().UTC().Format("2006-01-02 15:04:05 MST"), health.CodeUnavailable)
	return events.LambdaFunctionURLResponse{StatusCode: http.StatusServiceUnavailable, Headers: htmlHeaders(), Body: body}
}
