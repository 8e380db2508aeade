package signedhttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/signedhttp"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/internal/remotecall"
	"github.com/localeflow/localeflow/signing"
)

var (
	key   = []byte("0123456789abcdef0123")
	codes = signedhttp.Codes{
		Name: "test", ConfigInvalid: "t.config_invalid", RequestInvalid: "t.target_invalid",
		Timeout: "t.timeout", Cancelled: "t.cancelled", Unavailable: "t.unavailable",
	}
	epoch = core.ClockFunc(func() time.Time { return time.Unix(1_700_000_000, 0) })
)

func endpoint(t *testing.T, base string, timeout time.Duration) *signedhttp.Endpoint {
	t.Helper()
	e, err := signedhttp.New(codes, signedhttp.Config{
		BaseURL: base, Key: key, Timeout: timeout, DefaultTimeout: time.Second, MaxTimeout: time.Minute, Clock: epoch,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestNewConfig(t *testing.T) {
	tests := []struct {
		name    string
		base    string
		key     []byte
		timeout time.Duration
		ok      bool
	}{
		{"valid", "https://cms.example/prefix/", key, 0, true},
		{"ftp", "ftp://cms.example", key, 0, false},
		{"no host", "http:///x", key, 0, false},
		{"opaque", "http:cms.example", key, 0, false},
		{"credentials", "https://u:p@cms.example", key, 0, false},
		{"query", "https://cms.example?a=1", key, 0, false},
		{"fragment", "https://cms.example#f", key, 0, false},
		{"short key", "https://cms.example", key[:15], 0, false},
		{"negative timeout", "https://cms.example", key, -time.Second, false},
		{"timeout above max", "https://cms.example", key, time.Minute + 1, false},
		{"timeout at max", "https://cms.example", key, time.Minute, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := signedhttp.New(codes, signedhttp.Config{
				BaseURL: tc.base, Key: tc.key, Timeout: tc.timeout, DefaultTimeout: time.Second, MaxTimeout: time.Minute,
			})
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				if tc.timeout == 0 && e.Timeout() != time.Second {
					t.Fatalf("timeout = %s, want the default", e.Timeout())
				}
				return
			}
			if core.CodeOf(err) != codes.ConfigInvalid || core.IsRetryable(err) {
				t.Fatalf("err = %v, want %s not retryable", err, codes.ConfigInvalid)
			}
		})
	}
}

func TestDoSignsAndReads(t *testing.T) {
	body := []byte(`{"a":1}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := make([]byte, len(body))
		n, _ := r.Body.Read(got)
		id, ts := r.Header.Get(signing.HeaderRequestID), r.Header.Get(signing.HeaderTimestamp)
		if r.URL.Path != "/base/v1/x" || ts != "1700000000" || r.Header.Get("Content-Type") != "application/json" ||
			r.Header.Get("Accept") != "" || !core.ValidToken(id) || len(id) != 36 || id[:4] != "req-" ||
			r.Header.Get(signing.HeaderSignature) != signing.SignRequest(key, http.MethodPost, "/base/v1/x", id, ts, got[:n]) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set(signing.HeaderSignature, signing.SignResponse(key, id, []byte("0123456789")))
		_, _ = w.Write([]byte("0123456789"))
	}))
	defer srv.Close()
	e := endpoint(t, srv.URL+"/base/", 0)
	for _, tc := range []struct {
		name    string
		read    func(int) bool
		maxBody int64
		want    string
		valid   bool
	}{
		{"read", func(int) bool { return true }, 100, "0123456789", true},
		{"read one past the limit", func(int) bool { return true }, 4, "01234", false},
		{"drained", func(s int) bool { return s != http.StatusOK }, 100, "", false},
		{"nil read drains", nil, 100, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := e.Do(context.Background(), signedhttp.Request{
				Method: http.MethodPost, Path: "/v1/x", Body: body, ContentType: "application/json",
				Read: tc.read, MaxBody: tc.maxBody,
			})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != http.StatusOK || string(resp.Body) != tc.want {
				t.Fatalf("status %d body %q, want 200 %q", resp.Status, resp.Body, tc.want)
			}
			if e.VerifyResponse(resp) != tc.valid {
				t.Fatalf("VerifyResponse = %v, want %v", !tc.valid, tc.valid)
			}
		})
	}
}

func TestDoTransportErrors(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		base string
		ctx  context.Context
		code string
	}{
		{"timeout", slow.URL, context.Background(), codes.Timeout},
		{"cancelled", slow.URL, cancelled, codes.Cancelled},
		{"unreachable", closedURL, context.Background(), codes.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := endpoint(t, tc.base, 50*time.Millisecond)
			_, err := e.Do(tc.ctx, signedhttp.Request{Method: http.MethodGet, Path: "/v1/x"})
			if core.CodeOf(err) != tc.code || !core.IsRetryable(err) {
				t.Fatalf("err = %v, want %s retryable", err, tc.code)
			}
			if errors.As(err, new(*url.Error)) {
				t.Fatalf("error %q keeps the *url.Error (method and URL)", err)
			}
		})
	}
}

func TestStatusCode(t *testing.T) {
	for status, want := range map[int]string{503: "cms.http_503", 404: "cms.http_404", 299: "cms.http_299"} {
		if got := signedhttp.StatusCode("cms", status); got != want {
			t.Fatalf("StatusCode(%d) = %q, want %q", status, got, want)
		}
	}
	// A code that would not be a valid error code is replaced.
	if got := signedhttp.StatusCode("Cms", 503); got != "Cms.http_invalid" {
		t.Fatalf("StatusCode with an invalid prefix = %q", got)
	}
}

// TestDoPropagatesTheTraceContext: the signed CMS and evidence requests
// carried no trace header, so the other side could not correlate our calls
// with theirs. The invocation's X-Amzn-Trace-Id now goes out unchanged,
// outside the signature (the same request signs the same with or without
// it); a malformed one is not sent.
func TestDoPropagatesTheTraceContext(t *testing.T) {
	const header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("X-Amzn-Trace-Id"))
		id := r.Header.Get(signing.HeaderRequestID)
		if r.Header.Get(signing.HeaderSignature) != signing.SignRequest(key, http.MethodGet, "/base/v1/x", id, r.Header.Get(signing.HeaderTimestamp), nil) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	e := endpoint(t, srv.URL+"/base/", 0)
	for _, h := range []string{header, "", "Root=bogus"} {
		ctx := context.WithValue(context.Background(), "x-amzn-trace-id", h) //nolint:staticcheck // the runtime's own key
		resp, err := e.Do(ctx, signedhttp.Request{Method: http.MethodGet, Path: "/v1/x"})
		if err != nil || resp.Status != http.StatusOK {
			t.Fatalf("%q: %v %+v", h, err, resp)
		}
	}
	if len(got) != 3 || got[0] != header || got[1] != "" || got[2] != "" {
		t.Fatalf("trace headers sent %q", got)
	}
}

// TestDoMeasuresItsKind: every attempt of a request with a Kind is
// recorded with its signed request id for the invocation's latency
// document; a failed attempt too.
func TestDoMeasuresItsKind(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	e := endpoint(t, srv.URL+"/base/", 0)
	ctx, rec := remotecall.With(context.Background())
	if _, err := e.Do(ctx, signedhttp.Request{Method: http.MethodGet, Path: "/v1/x", Kind: remotecall.KindCMSLifecycle}); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if _, err := e.Do(ctx, signedhttp.Request{Method: http.MethodGet, Path: "/v1/x", Kind: remotecall.KindCMSLifecycle}); err == nil {
		t.Fatal("closed server answered")
	}
	if _, err := e.Do(ctx, signedhttp.Request{Method: http.MethodGet, Path: "/v1/x"}); err == nil {
		t.Fatal("closed server answered")
	}
	lines := rec.Lines(ctx, "dep-a", 1)
	if len(lines) != 1 || !strings.Contains(string(lines[0]), `"remote_calls":2`) || !strings.Contains(string(lines[0]), `"slowest_request_id":"req-`) {
		t.Fatalf("recorded %s", lines)
	}
}
