package handler

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"

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

var (
	pageTemplate = template.Must(template.New("health").Funcs(template.FuncMap{
		"when":  when,
		"state": stateLabel,
	}).Parse(pageHTML))
	errorTemplate = template.Must(template.New("error").Parse(errorHTML))
	// The page has no script; its one inline style is allowed by hash.
	pageCSP = func() string {
		sum := sha256.Sum256([]byte(pageCSS))
		return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	}()
)

const pageHTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>localeflow health: {{.Report.Status}}</title><style>{{.CSS}}</style></head>
<body>
<header class="{{.Report.Status}}"><h1>localeflow health: {{.Report.Status}}</h1>
<p>Checked {{.Checked}}.{{if .Report.Reasons}} Blocked by:{{end}}</p>
{{if .Report.Reasons}}<p class="reasons">{{range .Report.Reasons}}<code>{{.}}</code>{{end}}</p>{{end}}
</header>
<main>
<section class="cards">
<div class="card"><h3>Lifecycle monitor</h3><table>
<tr><th>State</th><th>Records</th></tr>
{{range .MonitorStates}}<tr><td>{{.Name}}</td><td class="n">{{if .Approx}}≈ {{end}}{{.N}}</td></tr>
{{end}}<tr><th>Due now</th><td class="n">{{.Report.Monitor.Due}}</td></tr>
<tr{{if .Report.Monitor.ExpiredLeases}} class="bad"{{end}}><th>Expired leases</th><td class="n">{{.Report.Monitor.ExpiredLeases}}</td></tr>
<tr{{if .Report.Monitor.Failed}} class="bad"{{end}}><th>Failed</th><td class="n">{{.Report.Monitor.Failed}}</td></tr>
<tr{{if .Report.Monitor.RemoteFailures}} class="bad"{{end}}><th>Remote failures</th><td class="n">{{.Report.Monitor.RemoteFailures}}</td></tr>
</table></div>
{{range .Release}}<div class="card"><h3>{{.Title}}</h3><table>
<tr><th>State</th><th>Records</th></tr>
{{range .States}}<tr><td>{{.Name}}</td><td class="n">{{.N}}</td></tr>
{{end}}<tr><th>Open</th><td class="n">{{.Part.Open}}</td></tr>
<tr><th>Due now</th><td class="n">{{.Part.Due}}</td></tr>
<tr{{if .Part.ExpiredLeases}} class="bad"{{end}}><th>Expired leases</th><td class="n">{{.Part.ExpiredLeases}}</td></tr>
<tr{{if .Part.Failed}} class="bad"{{end}}><th>Failed</th><td class="n">{{.Part.Failed}}</td></tr>
</table></div>
{{end}}</section>

<h2>Needing attention ({{len .Attention}})</h2>
{{if .Attention}}<table>
<tr><th>Kind</th><th>Event</th><th>Key</th><th>State</th><th>Error code</th><th>Remote status</th><th>Attempts</th><th>Since</th></tr>
{{range .Attention}}<tr class="bad"><td>{{.Kind}}</td><td><code>{{.EventID}}</code></td><td><code>{{.Key}}</code></td><td>{{state .}}</td><td><code>{{.ErrorCode}}</code></td><td>{{.RemoteStatus}}</td><td class="n">{{.Attempts}}</td><td>{{if .LeaseExpired}}lease expired {{when $.Now .NextDueMS}}{{else}}{{when $.Now .UpdatedMS}}{{end}}</td></tr>
{{end}}</table>{{else}}<p>Nothing needs attention.</p>{{end}}

<h2>Open items ({{.OpenCount}})</h2>
{{if .Open}}<table>
<tr><th>Kind</th><th>Event</th><th>Key</th><th>State</th><th>Next due</th><th>Last error code</th><th>Attempts</th></tr>
{{range .Open}}<tr><td>{{.Kind}}</td><td><code>{{.EventID}}</code></td><td><code>{{.Key}}</code></td><td>{{state .}}</td><td>{{if eq .State "leased"}}lease ends {{end}}{{when $.Now .NextDueMS}}</td><td><code>{{.ErrorCode}}</code></td><td class="n">{{.Attempts}}</td></tr>
{{end}}</table>{{if .Hidden}}<p class="note">{{.Hidden}} more open items are not listed.</p>{{end}}{{else}}<p>No open items.</p>{{end}}
<p class="note">Counts come from the sparse wake and attention indexes; every record counted was read and integrity-checked.
The terminal count is approximate (table item count, refreshed by DynamoDB about every six hours); succeeded evidence and deliveries are finished and not counted.
Machine-readable: request this URL without <code>Accept: text/html</code> ({{.Schema}}).</p>
</main></body></html>
`

const errorHTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>localeflow health: unavailable</title><style>{{.CSS}}</style></head>
<body><header class="blocked"><h1>localeflow health: unavailable</h1><p>The tables could not be read at {{.Checked}} (<code>{{.Code}}</code>). Try again shortly.</p></header></body></html>
`

type countRow struct {
	Name   string
	N      int
	Approx bool
}

type releaseCard struct {
	Title  string
	Part   health.LeaseHealth
	States []countRow
}

type pageData struct {
	CSS           template.CSS
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
	d := pageData{CSS: template.CSS(pageCSS), Report: r, Schema: health.Schema, Now: r.CheckedAtMS,
		Checked: core.FromMillis(r.CheckedAtMS).Format("2006-01-02 15:04:05 MST")}
	for _, st := range monitor.States() {
		d.MonitorStates = append(d.MonitorStates, countRow{Name: string(st), N: r.Monitor.Counts[string(st)],
			Approx: st == monitor.StateTerminal && r.TerminalApproximate})
	}
	for _, c := range []struct {
		title string
		part  health.LeaseHealth
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
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, newPageData(r)); err != nil {
		return nil, fmt.Errorf("render health page: %w", err)
	}
	return buf.Bytes(), nil
}

func (h *Handler) htmlResponse(ctx context.Context, r health.Report) events.LambdaFunctionURLResponse {
	body, err := RenderPage(r)
	if err != nil {
		h.log.ErrorContext(ctx, "health page not rendered", "code", "health.render_failed", "error", err.Error())
		return errorResponse(http.StatusInternalServerError, "health.render_failed", false)
	}
	return events.LambdaFunctionURLResponse{StatusCode: statusCode(r), Headers: htmlHeaders(), Body: string(body)}
}

func (h *Handler) htmlError(ctx context.Context) events.LambdaFunctionURLResponse {
	var buf bytes.Buffer
	err := errorTemplate.Execute(&buf, struct {
		CSS           template.CSS
		Checked, Code string
	}{template.CSS(pageCSS), h.clock.Now().UTC().Format("2006-01-02 15:04:05 MST"), health.CodeUnavailable})
	if err != nil {
		return errorResponse(http.StatusServiceUnavailable, health.CodeUnavailable, true)
	}
	return events.LambdaFunctionURLResponse{StatusCode: http.StatusServiceUnavailable, Headers: htmlHeaders(), Body: buf.String()}
}
