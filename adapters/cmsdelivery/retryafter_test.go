package cmsdelivery_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cmsdelivery"
	"github.com/localeflow/localeflow/core"
)

// TestDeliveryRetryAfterOn429And503: the CMS's Retry-After on a delivery
// was ignored; on 429 and 503 it now travels with the retryable error
// (seconds or HTTP-date, capped at 1 h), and other statuses carry none.
func TestDeliveryRetryAfterOn429And503(t *testing.T) {
	now := time.Unix(1764460800, 0)
	for _, tt := range []struct {
		status int
		header string
		want   time.Duration
	}{
		{503, "120", 120 * time.Second},
		{429, "30", 30 * time.Second},
		{429, now.Add(90 * time.Second).UTC().Format(http.TimeFormat), 90 * time.Second},
		{503, "86400", time.Hour}, // capped
		{503, "-5", 0},
		{429, "", 0},
		{500, "120", 0},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if tt.header != "" {
				w.Header().Set("Retry-After", tt.header)
			}
			w.WriteHeader(tt.status)
		}))
		c, err := cmsdelivery.New(cmsdelivery.Config{BaseURL: srv.URL, Key: key, Timeout: time.Second,
			Clock: core.ClockFunc(func() time.Time { return now })})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Deliver(context.Background(), "site-1", "evt-1", []byte("{}"))
		srv.Close()
		if !core.IsRetryable(err) || core.RetryAfterOf(err) != tt.want {
			t.Errorf("%d Retry-After %q: retryable %v, after %s, want %s (%v)", tt.status, tt.header, core.IsRetryable(err), core.RetryAfterOf(err), tt.want, err)
		}
	}
}
