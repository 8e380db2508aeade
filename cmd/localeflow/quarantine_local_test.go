package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/dev/localtest"
)

// TestQuarantineOnLocalStack: `quarantine list` and `quarantine replay`
// against the local stack's SQS (the IAM sufficiency check needs both
// commands' real calls): two messages rejected the way the consumers
// reject them are listed without their bodies and replayed to their
// source queues.
func TestQuarantineOnLocalStack(t *testing.T) {
	localtest.Require(t)
	topo, res := localtest.Stack(t)
	q := localtest.SQS(t)
	ctx := context.Background()
	const secret = "SOURCE-TEXT-MUST-NOT-BE-PRINTED"
	for i, source := range []string{topo.PollQueue.Logical, topo.RelQueue.Logical} {
		r := &quarantine.Rejecter{SQS: q, QueueURL: res.QuarantineQueue.URL, Source: source, Function: "poller"}
		if err := r.Reject(ctx, fmt.Sprintf("m-%d", i), fmt.Sprintf(`{"note":%q}`, secret), "poller.dispatch.signature_invalid"); err != nil {
			t.Fatal(err)
		}
	}
	p := "--prefix=" + topo.Prefix
	r := runCLI(nil, p, "quarantine", "list")
	if r.code != exitOK || !strings.Contains(r.out, "2 quarantined") || strings.Contains(r.out, secret) {
		t.Fatalf("quarantine list: %+v", r)
	}
	r = runCLI(nil, p, "quarantine", "replay", "--all")
	if r.code != exitOK || !strings.Contains(r.out, "2 replayed") {
		t.Fatalf("quarantine replay --all: %+v", r)
	}
	for _, url := range []string{res.PollQueue.URL, res.ReleaseQueue.URL} {
		if got := receiveAll(t, q, url); len(got) != 1 || !strings.Contains(aws.ToString(got[0].Body), secret) {
			t.Fatalf("%s after replay: %v", url, got)
		}
	}
	if got := receiveAll(t, q, res.QuarantineQueue.URL); len(got) != 0 {
		t.Fatalf("quarantine after replay: %d left", len(got))
	}
}
