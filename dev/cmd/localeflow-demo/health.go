package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/dev/runner"
)

// healthReport is the final health as the demo shows it.
type healthReport struct {
	// Source says where the report comes from.
	Source     string
	HTTPStatus int
	Status     string
	// JSON is the health body; HTML the page a browser gets.
	JSON []byte
	HTML []byte
	// Monitor counters the demo checks.
	Failed, RemoteFailures, ExpiredLeases int
	// ReleaseFailures counts failed evidence or delivery records.
	ReleaseFailures int
}

// urlRequest is a Function URL GET of the health page.
func urlRequest(accept string) ([]byte, error) {
	now := time.Now()
	return json.Marshal(events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/", Headers: map[string]string{"accept": accept, "host": "health.lambda-url.local"},
		RequestContext: events.LambdaFunctionURLRequestContext{
			RequestID: fmt.Sprintf("demo-%d", now.UnixNano()), APIID: "health", DomainName: "health.lambda-url.local",
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "GET", Path: "/", Protocol: "HTTP/1.1", SourceIP: "127.0.0.1", UserAgent: "localeflow-demo"},
			Time: now.UTC().Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: now.UnixMilli(),
		},
	})
}

// fromFunction invokes the real health function the way its Function URL
// would, for JSON and for the page.
func fromFunction(ctx context.Context, inv runner.Invoker) (healthReport, error) {
	get := func(accept string) (events.LambdaFunctionURLResponse, error) {
		req, err := urlRequest(accept)
		if err != nil {
			return events.LambdaFunctionURLResponse{}, err
		}
		out, err := inv.Invoke(ctx, req)
		if err != nil {
			return events.LambdaFunctionURLResponse{}, fmt.Errorf("invoke health: %w", err)
		}
		var resp events.LambdaFunctionURLResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			return resp, fmt.Errorf("health response: %w", err)
		}
		if resp.IsBase64Encoded {
			b, err := base64.StdEncoding.DecodeString(resp.Body)
			if err != nil {
				return resp, fmt.Errorf("health body: %w", err)
			}
			resp.Body = string(b)
		}
		return resp, nil
	}
	j, err := get("application/json")
	if err != nil {
		return healthReport{}, err
	}
	r := healthReport{Source: "the health function (real bootstrap under aws-lambda-rie, invoked as its Function URL)", HTTPStatus: j.StatusCode, JSON: []byte(j.Body)}
	var body struct {
		Schema  string `json:"schema"`
		Status  string `json:"status"`
		Monitor struct {
			Failed         int `json:"failed"`
			RemoteFailures int `json:"remote_failures"`
			ExpiredLeases  int `json:"expired_leases"`
		} `json:"monitor"`
		Release map[string]json.RawMessage `json:"release"`
	}
	if err := json.Unmarshal([]byte(j.Body), &body); err != nil || body.Schema != "localeflow.health.v1" {
		return r, fmt.Errorf("health body is not localeflow.health.v1: %s", clip(j.Body, 200))
	}
	r.Status, r.Failed, r.RemoteFailures, r.ExpiredLeases = body.Status, body.Monitor.Failed, body.Monitor.RemoteFailures, body.Monitor.ExpiredLeases
	r.ReleaseFailures = countFailed(body.Release)
	if h, err := get("text/html"); err == nil {
		r.HTML = []byte(h.Body)
	}
	return r, nil
}

// countFailed sums the release section's counters named like failures
// ("failed", "…_failed", "failures"), at any depth.
func countFailed(section map[string]json.RawMessage) int {
	n := 0
	for k, raw := range section {
		var num int
		if json.Unmarshal(raw, &num) == nil {
			if k == "failed" || strings.HasSuffix(k, "_failed") || strings.HasSuffix(k, "failures") {
				n += num
			}
			continue
		}
		var sub map[string]json.RawMessage
		if json.Unmarshal(raw, &sub) == nil {
			n += countFailed(sub)
		}
	}
	return n
}

// MonitorHealth is the monitor core's health (*monitor.Service).
type MonitorHealth interface {
	Health(ctx context.Context) (monitor.Health, error)
}

// computed is the fallback while the health function is not built: the
// monitor core's own health rule, and the release records of the demo's
// changes.
func computed(ctx context.Context, mon MonitorHealth, rel SnapshotLoader, changes []change) (healthReport, error) {
	h, err := mon.Health(ctx)
	if err != nil {
		return healthReport{}, fmt.Errorf("monitor health: %w", err)
	}
	r := healthReport{Source: "computed by the demo with the monitor core's health rule (the health function is not built yet)",
		Status: h.Status, Failed: h.Failed, RemoteFailures: h.RemoteFailures, ExpiredLeases: h.ExpiredLeases}
	evidence := map[release.State]int{}
	delivery := map[release.State]int{}
	for _, c := range changes {
		snap, err := rel.Load(ctx, c.EventID)
		if err != nil {
			return healthReport{}, fmt.Errorf("release %s: %w", c.EventID, err)
		}
		for _, e := range snap.Evidence {
			evidence[e.Status]++
		}
		if snap.Delivery != nil {
			delivery[snap.Delivery.Status]++
		}
	}
	r.ReleaseFailures = evidence[release.StateFailed] + delivery[release.StateFailed]
	if r.ReleaseFailures > 0 {
		r.Status = monitor.HealthBlocked
	}
	r.HTTPStatus = 200
	if r.Status != monitor.HealthOK {
		r.HTTPStatus = 503
	}
	body := map[string]any{
		"schema": "localeflow.health.v1", "status": r.Status, "checked_at_ms": core.Millis(time.Now()),
		"monitor": h, "release": map[string]any{"evidence": evidence, "delivery": delivery},
	}
	r.JSON, err = json.MarshalIndent(body, "", "  ")
	if err != nil {
		return healthReport{}, err
	}
	r.HTML = []byte("<!doctype html><title>localeflow health</title><h1>localeflow health: " + html.EscapeString(r.Status) +
		"</h1><p>" + html.EscapeString(r.Source) + "</p><pre>" + html.EscapeString(string(r.JSON)) + "</pre>")
	return r, nil
}
