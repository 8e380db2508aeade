package evidence_test

import (
	"context"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/evidence"
	"github.com/localeflow/localeflow/adapters/signedhttp/signedhttptest"
	"github.com/localeflow/localeflow/core"
)

// TestEvidenceRetryAfterOn429And503: the provider's Retry-After was
// ignored (the coordinator retried after its own backoff only); on 429 and
// 503 it now travels with the retryable error (seconds or HTTP-date,
// capped at 1 h), and other statuses carry none.
func TestEvidenceRetryAfterOn429And503(t *testing.T) {
	signedhttptest.CheckRetryAfter(t, func(baseURL string, now time.Time) error {
		c, err := evidence.New(evidence.Config{BaseURL: baseURL, Key: key, Timeout: time.Second,
			Clock: core.ClockFunc(func() time.Time { return now })})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Obtain(context.Background(), request(t, false, false))
		return err
	})
}
