package lambdalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/localeflow/localeflow/internal/lambdalog"
)

func TestWithEventIDAddsBusEventID(t *testing.T) {
	inv := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	tests := []struct {
		name string
		id   string
		want string // bus_event_id in the record; "" = absent
	}{
		{"event", "3f1b7a2c-0c1e-4e57-9a55-1d8f2f5b6c77", "3f1b7a2c-0c1e-4e57-9a55-1d8f2f5b6c77"},
		{"none", "", ""},
		{"not a token", "a b\n", ""},
		{"too long", strings.Repeat("a", 257), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			lambdalog.New(&out, slog.LevelInfo).InfoContext(lambdalog.WithEventID(inv, tt.id), "hello")
			var rec map[string]any
			if err := json.Unmarshal(out.Bytes(), &rec); err != nil {
				t.Fatal(err)
			}
			got, _ := rec["bus_event_id"].(string)
			if got != tt.want || rec["request_id"] != "req-1" {
				t.Fatalf("record %v: bus_event_id %q, want %q (and request_id req-1)", rec, got, tt.want)
			}
		})
	}
}
