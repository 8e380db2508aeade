package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/dev/bootstrap"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

func TestRunRejectsBadArguments(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"invalid prefix", []string{"-prefix", "Not_Valid"}},
		{"unknown flag", []string{"-nope"}},
		{"extra argument", []string{"extra"}},
		{"zero timeout", []string{"-timeout", "0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), tt.args, &out, &errOut); code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, errOut.String())
			}
			if out.Len() != 0 {
				t.Fatalf("printed %q on a usage error", out.String())
			}
		})
	}
}

// TestRunAppliesAndDestroys runs the command against the local stack.
func TestRunAppliesAndDestroys(t *testing.T) {
	localtest.Require(t)
	prefix := localtest.UniquePrefix(t)
	ctx := context.Background()
	t.Cleanup(func() {
		var out, errOut bytes.Buffer
		if code := run(ctx, []string{"-prefix", prefix, "-destroy"}, &out, &errOut); code != 0 {
			t.Errorf("destroy exit %d: %s", code, errOut.String())
		}
	})
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"-prefix", prefix}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var res bootstrap.Resources
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output is not Resources JSON: %v\n%s", err, out.String())
	}
	if res.Prefix != prefix || res.BusName != prefix+"-bus" || len(res.Rules) != len(topology.New(prefix).Rules) ||
		!strings.HasSuffix(res.PollQueue.URL, prefix+"-poll") || res.ReleaseQueue.DLQARN == "" ||
		!strings.HasSuffix(res.QuarantineQueue.URL, prefix+"-quarantine") {
		t.Fatalf("unexpected resources: %+v", res)
	}

	// Applying again with -env prints the functions' variables.
	out.Reset()
	if code := run(ctx, []string{"-prefix", prefix, "-env"}, &out, &errOut); code != 0 {
		t.Fatalf("-env exit %d: %s", code, errOut.String())
	}
	want := "LOCALEFLOW_EVENT_BUS=" + prefix + "-bus\n" +
		"LOCALEFLOW_MONITOR_TABLE=" + prefix + "-monitor\n" +
		"LOCALEFLOW_POLL_QUEUE_URL=" + res.PollQueue.URL + "\n" +
		"LOCALEFLOW_QUARANTINE_QUEUE_URL=" + res.QuarantineQueue.URL + "\n" +
		"LOCALEFLOW_RELEASE_QUEUE_URL=" + res.ReleaseQueue.URL + "\n" +
		"LOCALEFLOW_RELEASE_TABLE=" + prefix + "-release\n"
	if out.String() != want {
		t.Fatalf("-env printed\n%s\nwant\n%s", out.String(), want)
	}
}
