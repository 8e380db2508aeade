package cms_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/lifecycle"
	"github.com/localeflow/localeflow/signing"
)

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// FuzzReadLifecycleResponse drives arbitrary response bodies through the
// whole response path (size limit, signature, request-id binding, strict
// parse): the client must never panic, must fail only with
// response_invalid, and must accept only bodies bound to this request
// and target.
func FuzzReadLifecycleResponse(f *testing.F) {
	f.Add([]byte(`{"schema":"localeflow.cms-lifecycle.v1","request_id":"@","event_id":"evt-2026-0001","site_id":"site-berlin","plan_id":"plan-42","website_version":"v2026.11.29","source_sequence":7,"status":"processing","required_locales":["de-DE","fr-FR"],"approved_locales":[],"blocked_locales":[],"queue_counts":{"pending":2},"delivery":null,"tombstone":null}`), true)
	f.Add([]byte(`{"schema":"localeflow.cms-lifecycle.v1","request_id":"@","event_id":"evt-2026-0001","site_id":"site-berlin","plan_id":"plan-42","website_version":"v2026.11.29","source_sequence":7,"status":"published","required_locales":["de-DE","fr-FR"],"approved_locales":["fr-FR"],"blocked_locales":[["de-DE","x.y"]],"queue_counts":{},"delivery":{"a":1},"tombstone":null}`), true)
	f.Add([]byte(`{"schema":"localeflow.cms-lifecycle.v1","request_id":"@"}`), true)
	f.Add([]byte(`[]`), false)
	f.Add([]byte{0xff, '{'}, true)
	f.Fuzz(func(t *testing.T, template []byte, sign bool) {
		var requestID string
		client, err := cms.New(cms.Config{
			BaseURL: "http://cms.invalid",
			Key:     testKey,
			HTTPClient: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
				requestID = r.Header.Get(signing.HeaderRequestID)
				// "@" stands for the request id so valid bodies are reachable.
				body := bytes.ReplaceAll(template, []byte("@"), []byte(requestID))
				h := http.Header{}
				if sign {
					h.Set(signing.HeaderSignature, signing.SignResponse(testKey, requestID, body))
				}
				return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
			})},
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.ReadLifecycle(context.Background(), target)
		if err != nil {
			var ce *core.Error
			if !errors.As(err, &ce) || ce.Code != lifecycle.CodeResponseInvalid || ce.Retryable {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !sign {
			t.Fatal("accepted an unsigned response")
		}
		if resp.RequestID != requestID || resp.EventID != target.EventID || resp.PlanID != target.PlanID ||
			len(resp.RequiredLocales) != target.JobCount || !lifecycle.IsPollStatus(resp.Status) {
			t.Fatalf("accepted a response that does not match the request: %+v", resp)
		}
		if core.SHA256Hex(resp.Canonical) != resp.SHA256 {
			t.Fatal("snapshot hash does not match")
		}
	})
}
