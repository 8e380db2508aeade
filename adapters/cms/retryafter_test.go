package cms_test

import (
	"context"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/cms"
	"github.com/localeflow/localeflow/adapters/signedhttp/signedhttptest"
	"github.com/localeflow/localeflow/core"
)

// TestRetryAfterOn429And503: the CMS's Retry-After was ignored; on 429 and
// 503 it now travels with the retryable error (seconds or HTTP-date), and
// other statuses carry none.
func TestRetryAfterOn429And503(t *testing.T) {
	signedhttptest.CheckRetryAfter(t, func(baseURL string, now time.Time) error {
		client, err := cms.New(cms.Config{BaseURL: baseURL, Key: testKey, Timeout: time.Second,
			Clock: core.ClockFunc(func() time.Time { return now })})
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.ReadLifecycle(context.Background(), target)
		return err
	})
}
