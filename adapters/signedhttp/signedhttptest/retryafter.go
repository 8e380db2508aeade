// Package signedhttptest holds the test cases every signed HTTP client
// (CMS lifecycle, CMS delivery, evidence) must pass the same way.
package signedhttptest

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core"
)

// RetryAfterNow is the clock the Retry-After cases are judged against.
var RetryAfterNow = time.Unix(1764460800, 0)

// CheckRetryAfter runs call against a server answering each case's status
// and Retry-After header: on 429 and 503 the error must be retryable and
// carry the header's wait (delta-seconds or HTTP-date, capped at 1 h; a
// malformed, negative or absent header carries none), other statuses none.
// call builds the client for baseURL with a clock returning now and makes
// one request.
func CheckRetryAfter(t *testing.T, call func(baseURL string, now time.Time) error) {
	t.Helper()
	now := RetryAfterNow
	date := func(d time.Duration) string { return now.Add(d).UTC().Format(http.TimeFormat) }
	for _, tt := range []struct {
		status int
		header string
		want   time.Duration
	}{
		{503, "120", 120 * time.Second},
		{429, "30", 30 * time.Second},
		{429, date(90 * time.Second), 90 * time.Second},
		{503, date(90 * time.Second), 90 * time.Second},
		{503, "86400", time.Hour}, // capped
		{429, "86400", time.Hour}, // capped
		// 2^32 s and beyond (past uint32, past int64, past time.Duration)
		// are capped too; they used to be ignored (issue 24).
		{503, "4294967295", time.Hour},
		{503, "4294967296", time.Hour},
		{429, "4294967296", time.Hour},
		{503, "9223372036", time.Hour},
		{503, "18446744073709551616", time.Hour},
		{429, "000000000000000000000000000000120", 120 * time.Second},
		{503, "3599", 3599 * time.Second},
		{503, "3600", time.Hour},
		{503, "-5", 0},
		{503, "soon", 0},
		{429, "", 0},
		{503, "", 0},
		{500, "120", 0},
		{502, "120", 0},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if tt.header != "" {
				w.Header().Set("Retry-After", tt.header)
			}
			w.WriteHeader(tt.status)
		}))
		err := call(srv.URL, now)
		srv.Close()
		if !core.IsRetryable(err) || core.RetryAfterOf(err) != tt.want {
			t.Errorf("%d Retry-After %q: retryable %v, after %s, want %s (%v)", tt.status, tt.header, core.IsRetryable(err), core.RetryAfterOf(err), tt.want, err)
		}
	}
}
