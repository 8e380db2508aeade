package cmsdelivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cmsdelivery"
	"github.com/localeflow/localeflow/adapters/signedhttp/signedhttptest"
	"github.com/localeflow/localeflow/core"
)

// TestDeliveryRetryAfterOn429And503: the CMS's Retry-After on a delivery
// was ignored; on 429 and 503 it now travels with the retryable error
// (seconds or HTTP-date, capped at 1 h), and other statuses carry none.
func TestDeliveryRetryAfterOn429And503(t *testing.T) {
	signedhttptest.CheckRetryAfter(t, func(baseURL string, now time.Time) error {
		c, err := cmsdelivery.New(cmsdelivery.Config{BaseURL: baseURL, Key: key, Timeout: time.Second,
			Clock: core.ClockFunc(func() time.Time { return now })})
		if err != nil {
			t.Fatal(err)
		}
		return c.Deliver(context.Background(), "site-1", "evt-1", []byte("{}"))
	})
}
