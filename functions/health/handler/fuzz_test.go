package handler_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// FuzzHandle: any invocation payload either fails with an error or, for a
// Function URL request, gets a response with a status and JSON or HTML
// body; nothing panics.
func FuzzHandle(f *testing.F) {
	for _, file := range []string{"url_get_json.json", "url_get_html.json", "url_post.json", "url_head.json", "scheduled.json", "sqs_event.json"} {
		raw, err := os.ReadFile(filepath.Join("..", "testdata", file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte(`{"requestContext":{"http":{}}}`))
	f.Add([]byte(`{"requestContext":{"http":{"method":"GET"}},"headers":{"Accept":"text/html"}}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		b := setup(t, reportChecker{report: blockedReport()})
		out, err := b.h.Handle(context.Background(), payload)
		if err != nil {
			return
		}
		if resp, ok := out.(events.LambdaFunctionURLResponse); ok {
			if resp.StatusCode < 200 || resp.StatusCode > 599 || resp.Headers["Content-Type"] == "" {
				t.Fatalf("response %+v", resp)
			}
			if resp.Headers["Content-Type"] == "application/json" && resp.Body != "" && !json.Valid([]byte(resp.Body)) {
				t.Fatalf("invalid JSON body %q", resp.Body)
			}
		}
	})
}
