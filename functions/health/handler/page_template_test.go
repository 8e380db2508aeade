package handler

import (
	"bytes"
	"html/template"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/health"
	"github.com/localeflow/localeflow/core/monitor"
)

// The page used to be rendered by html/template from the templates below.
// The hand-written renderer must produce the same bytes for every report:
// TestPageMatchesHTMLTemplate renders random reports (values full of
// characters that need escaping, invalid UTF-8, empty and long lists) both
// ways and compares them. html/template stays in the test binary only.

const templatePageHTML = `<!doctype html>
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
<tr><th>Kind</th><th>Event</th><th>Key</th><th>State</th><th>Error code</th><th>Remote status</th><th>Attempts</th><th>Since</th><th>Recent transitions</th></tr>
{{range .Attention}}<tr class="bad"><td>{{.Kind}}</td><td><code>{{.EventID}}</code></td><td><code>{{.Key}}</code></td><td>{{state .}}</td><td><code>{{.ErrorCode}}</code></td><td>{{.RemoteStatus}}</td><td class="n">{{.Attempts}}</td><td>{{if .LeaseExpired}}lease expired {{when $.Now .NextDueMS}}{{else}}{{when $.Now .UpdatedMS}}{{end}}</td><td>{{timeline .Timeline}}</td></tr>
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

const templateErrorHTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>localeflow health: unavailable</title><style>{{.CSS}}</style></head>
<body><header class="blocked"><h1>localeflow health: unavailable</h1><p>The tables could not be read at {{.Checked}} (<code>{{.Code}}</code>). Try again shortly.</p></header></body></html>
`

var (
	oraclePage = template.Must(template.New("health").Funcs(template.FuncMap{
		"when":     when,
		"timeline": timeline,
		"state":    stateLabel,
	}).Parse(templatePageHTML))
	oracleError = template.Must(template.New("error").Parse(templateErrorHTML))
)

type oraclePageData struct {
	pageData
	CSS template.CSS
}

func oracleRender(t *testing.T, r health.Report) string {
	t.Helper()
	var buf bytes.Buffer
	if err := oraclePage.Execute(&buf, oraclePageData{pageData: newPageData(r), CSS: template.CSS(pageCSS)}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// nasty is a short string drawn from characters html/template escapes,
// markup, non-ASCII and invalid UTF-8.
func nasty(rng *rand.Rand) string {
	parts := []string{"", "a", "evt-1", "<", ">", "&", "'", `"`, "+", "\x00", "é", "≈", "\xff", "\xe2\x82", "<script>", "</code>", " ", "\u2028", "&amp;", "{{.}}", "\ufdd0", "\uffff"}
	var b strings.Builder
	for n := rng.IntN(6); n > 0; n-- {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	return b.String()
}

func randomCounts(rng *rand.Rand, keys []string) map[string]int {
	m := map[string]int{}
	for _, k := range keys {
		if rng.IntN(4) > 0 {
			m[k] = rng.IntN(3000) - 2
		}
	}
	return m
}

func randomReport(rng *rand.Rand) health.Report {
	var states []string
	for _, st := range monitor.States() {
		states = append(states, string(st))
	}
	leaseStates := []string{"pending", "leased", "retry_wait", "failed"}
	lease := func() contract.LeaseHealth {
		return contract.LeaseHealth{Counts: randomCounts(rng, leaseStates), Open: rng.IntN(5), Due: rng.IntN(3),
			ExpiredLeases: rng.IntN(2), Failed: rng.IntN(2)}
	}
	now := int64(1_764_460_800_000) + rng.Int64N(1e9)
	r := health.Report{Schema: health.Schema, Status: []string{"ok", "blocked", nasty(rng)}[rng.IntN(3)], CheckedAtMS: now,
		Monitor: contract.MonitorHealth{Counts: randomCounts(rng, states), Due: rng.IntN(4), ExpiredLeases: rng.IntN(2),
			Failed: rng.IntN(2), RemoteFailures: rng.IntN(2)},
		Release:             contract.ReleaseHealth{Evidence: lease(), Delivery: lease()},
		TerminalApproximate: rng.IntN(2) == 0}
	for n := rng.IntN(4); n > 0; n-- {
		r.Reasons = append(r.Reasons, nasty(rng))
	}
	items := rng.IntN(12)
	if rng.IntN(20) == 0 {
		items = MaxPageItems + rng.IntN(20)
	}
	times := []int64{0, -5, now, now - 999, now + 999, now + 1000, now - 1000, now + 59_000, now - 3_600_000, now + 50*3_600_000, now - 7*86_400_000}
	for range items {
		r.Items = append(r.Items, health.Item{Kind: []string{health.KindMonitor, health.KindEvidence, nasty(rng)}[rng.IntN(3)],
			EventID: nasty(rng), Key: nasty(rng), State: []string{"leased", "watching", "failed", nasty(rng)}[rng.IntN(4)],
			ErrorCode: nasty(rng), RemoteStatus: nasty(rng), NextDueMS: times[rng.IntN(len(times))], Attempts: rng.IntN(40) - 1,
			UpdatedMS: times[rng.IntN(len(times))], Attention: rng.IntN(2) == 0, Invalid: rng.IntN(5) == 0,
			Due: rng.IntN(3) == 0, LeaseExpired: rng.IntN(4) == 0})
		for n := rng.IntN(4); n > 0; n-- {
			it := &r.Items[len(r.Items)-1]
			it.Timeline = append(it.Timeline, monitor.TimelineEntry{AtMS: times[rng.IntN(len(times))], State: monitor.State(nasty(rng)),
				RemoteStatus: nasty(rng), Code: nasty(rng)})
		}
	}
	return r
}

func TestPageMatchesHTMLTemplate(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 1))
	for i := range 1000 {
		r := randomReport(rng)
		got, err := RenderPage(r)
		if err != nil {
			t.Fatal(err)
		}
		if want := oracleRender(t, r); string(got) != want {
			t.Fatalf("report %d (%+v): page differs from html/template's\n got: %q\nwant: %q", i, r, got, want)
		}
	}
}

func TestErrorPageMatchesHTMLTemplate(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 2))
	for range 200 {
		checked, code := nasty(rng), nasty(rng)
		var buf bytes.Buffer
		if err := oracleError.Execute(&buf, struct {
			CSS           template.CSS
			Checked, Code string
		}{template.CSS(pageCSS), checked, code}); err != nil {
			t.Fatal(err)
		}
		if got := errorPage(checked, code); got != buf.String() {
			t.Fatalf("error page differs\n got: %q\nwant: %q", got, buf.String())
		}
	}
}
