package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/dev/bootstrap"
	"github.com/localeflow/localeflow/dev/localtest"
)

// samplingSQS is the local stack's SQS with the empty receives real SQS
// gives while messages are queued (a short poll samples a subset of its
// servers; a long poll may return before a server answers): every receive
// whose number is in empty returns no message without asking the queue;
// always makes every receive empty. Everything else goes to kumo.
type samplingSQS struct {
	SQSAPI
	mu       sync.Mutex
	receives int
	empty    map[int]bool
	always   bool
}

func (s *samplingSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.mu.Lock()
	s.receives++
	empty := s.always || s.empty[s.receives]
	s.mu.Unlock()
	if empty {
		return &sqs.ReceiveMessageOutput{}, nil
	}
	return s.SQSAPI.ReceiveMessage(ctx, in, opts...)
}

// withSampling makes the commands use kumo through a samplingSQS whose
// receives 1 and 3 come back empty.
func withSampling(t *testing.T, always bool) *samplingSQS {
	t.Helper()
	s := &samplingSQS{SQSAPI: localtest.SQS(t), empty: map[int]bool{1: true, 3: true}, always: always}
	prev := newSQSAPI
	newSQSAPI = func(context.Context) (SQSAPI, error) { return s, nil }
	t.Cleanup(func() { newSQSAPI = prev })
	return s
}

func sendN(t *testing.T, q *sqs.Client, url string, n int, body func(i int) string) {
	t.Helper()
	for i := range n {
		if _, err := q.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body(i))}); err != nil {
			t.Fatal(err)
		}
	}
}

func delayedBody(i int) string {
	return fmt.Sprintf(`{"schema":"localeflow.delayed.v1","kind":"poll","event_id":"evt-drain-%d","not_before_ms":0}`, i)
}

// TestDLQScanDrainsPastEmptyReceives: `dlq list` stopped at the first
// empty receive, which SQS returns while messages are queued ("0 in the
// DLQ"), and `dlq redrive` moved 0 and exited 0. On kumo, with the first
// and third receive empty, list sees all 25 messages (more than two
// receives' worth) and says its scan was complete, and redrive moves all
// 25 (--json: one document with the counts).
func TestDLQScanDrainsPastEmptyReceives(t *testing.T) {
	localtest.Require(t)
	_, res := localtest.Stack(t)
	kumo := localtest.SQS(t)
	sendN(t, kumo, res.PollQueue.DLQURL, 25, delayedBody)
	p := "--prefix=" + res.Prefix

	withSampling(t, false)
	r := runCLI(nil, p, "--json", "dlq", "list", "poll")
	var list dlqListView
	if r.code != exitOK || json.Unmarshal([]byte(r.out), &list) != nil || list.Seen != 25 || len(list.Messages) != 25 || !list.Complete || list.Queue != "poll" {
		t.Fatalf("dlq list poll: %+v", r)
	}
	withSampling(t, false)
	if r := runCLI(nil, p, "dlq", "list", "poll"); r.code != exitOK || !strings.Contains(r.out, "25 in the DLQ (scanned") {
		t.Fatalf("dlq list poll (text): %+v", r)
	}

	withSampling(t, false)
	r = runCLI(nil, p, "--json", "dlq", "redrive", "poll")
	var redrive dlqRedriveView
	if r.code != exitOK || json.Unmarshal([]byte(r.out), &redrive) != nil || len(redrive.Redriven) != 25 || redrive.Seen != 25 || !redrive.Complete ||
		len(redrive.Kept) != 0 || len(redrive.Errors) != 0 {
		t.Fatalf("dlq redrive poll --json: %+v", r)
	}
	if got := receiveAll(t, kumo, res.PollQueue.URL); len(got) != 25 {
		t.Fatalf("poll queue after redrive: %d messages", len(got))
	}
	if got := receiveAll(t, kumo, res.PollQueue.DLQURL); len(got) != 0 {
		t.Fatalf("poll DLQ after redrive: %d messages", len(got))
	}
}

// TestDLQScanThatCannotFinishSaysSo: when every receive comes back empty
// while the queue reports messages, the scan gives up within its bound
// and the command fails with cli.queue.scan_incomplete (exit 3), printing
// what the queue still reports; nothing is moved.
func TestDLQScanThatCannotFinishSaysSo(t *testing.T) {
	localtest.Require(t)
	_, res := localtest.Stack(t)
	kumo := localtest.SQS(t)
	sendN(t, kumo, res.PollQueue.DLQURL, 3, delayedBody)
	p := "--prefix=" + res.Prefix
	s := withSampling(t, true)
	r := runCLI(nil, p, "--json", "dlq", "redrive", "poll")
	var view dlqRedriveView
	if r.code != exitRuntime || json.Unmarshal([]byte(r.out), &view) != nil || view.Complete || view.Remaining != 3 || view.Seen != 0 ||
		len(view.Errors) != 1 || view.Errors[0].Code != codeScanIncomplete || !strings.Contains(r.err, codeScanIncomplete) {
		t.Fatalf("dlq redrive with empty receives: %+v", r)
	}
	if s.receives != scanEmptyReceives {
		t.Errorf("%d receives, want the bound %d", s.receives, scanEmptyReceives)
	}
	if r := runCLI(nil, p, "dlq", "list", "poll"); r.code != exitRuntime || !strings.Contains(r.out, "0 in the DLQ (scan INCOMPLETE") || !strings.Contains(r.out, "still reports 3") {
		t.Fatalf("dlq list with empty receives: %+v", r)
	}
	if got := receiveAll(t, kumo, res.PollQueue.DLQURL); len(got) != 3 {
		t.Fatalf("poll DLQ: %d messages, want the 3 untouched", len(got))
	}
}

// TestQuarantineScanDrainsPastEmptyReceives: `quarantine replay m-7` said
// "not found" (exit 1) when the first receive came back empty. On kumo
// with empty receives, list sees all 12, replay of one id finds it, and
// `replay --all --json` replays the rest, as one JSON document.
func TestQuarantineScanDrainsPastEmptyReceives(t *testing.T) {
	localtest.Require(t)
	_, res := localtest.Stack(t)
	kumo := localtest.SQS(t)
	for i := range 12 {
		rej := &quarantine.Rejecter{SQS: kumo, QueueURL: res.QuarantineQueue.URL, Source: "PollQueue", Function: "poller"}
		if err := rej.Reject(context.Background(), fmt.Sprintf("m-%d", i), delayedBody(i), "poller.dispatch.signature_invalid"); err != nil {
			t.Fatal(err)
		}
	}
	p := "--prefix=" + res.Prefix
	withSampling(t, false)
	r := runCLI(nil, p, "--json", "quarantine", "list")
	var list quarantineListView
	if r.code != exitOK || json.Unmarshal([]byte(r.out), &list) != nil || list.Seen != 12 || !list.Complete {
		t.Fatalf("quarantine list: %+v", r)
	}
	withSampling(t, false)
	if r := runCLI(nil, p, "quarantine", "replay", "m-7"); r.code != exitOK || !strings.Contains(r.out, "1 replayed of 12 seen") {
		t.Fatalf("quarantine replay m-7: %+v", r)
	}
	withSampling(t, false)
	r = runCLI(nil, p, "--json", "quarantine", "replay", "--all")
	var replay quarantineReplayView
	if r.code != exitOK || json.Unmarshal([]byte(r.out), &replay) != nil || len(replay.Replayed) != 11 || replay.Seen != 11 || !replay.Complete {
		t.Fatalf("quarantine replay --all --json: %+v", r)
	}
	if got := receiveAll(t, kumo, res.PollQueue.URL); len(got) != 12 {
		t.Fatalf("poll queue after the replays: %d messages", len(got))
	}
	// An id a complete scan did not see is not found; --json lists it.
	withSampling(t, false)
	r = runCLI(nil, p, "--json", "quarantine", "replay", "m-7")
	if r.code != exitBad || json.Unmarshal([]byte(r.out), &replay) != nil || strings.Join(replay.NotFound, ",") != "m-7" ||
		len(replay.Errors) != 1 || replay.Errors[0].Code != codeQuarantineNotFound {
		t.Fatalf("replay of a replayed id: %+v", r)
	}
}

// TestQueueCommandsFollowTheDeploymentsVariables: without --prefix, `dlq
// redrive` ignored the queue variables set for a deployment and redrove
// deployment localeflow's DLQ. On kumo with two deployments: the variables
// of one redrive its DLQ only; variables naming both are refused
// (cli.deployment_ambiguous) before any call, and so is a queue variable
// that names no deployment; no variable at all is a usage error.
func TestQueueCommandsFollowTheDeploymentsVariables(t *testing.T) {
	localtest.Require(t)
	_, a := localtest.Stack(t)
	_, b := localtest.Stack(t)
	kumo := localtest.SQS(t)
	sendN(t, kumo, a.PollQueue.DLQURL, 2, delayedBody)
	sendN(t, kumo, b.PollQueue.DLQURL, 3, delayedBody)
	envOf := func(res bootstrap.Resources) map[string]string {
		return map[string]string{
			contract.EnvPollQueueURL: res.PollQueue.URL, contract.EnvReleaseQueueURL: res.ReleaseQueue.URL,
			contract.EnvQuarantineQueueURL: res.QuarantineQueue.URL, contract.EnvDeployment: res.Prefix,
		}
	}
	if r := runCLI(envOf(a), "dlq", "redrive", "poll"); r.code != exitOK || !strings.Contains(r.out, "2 redriven") {
		t.Fatalf("dlq redrive poll with deployment A's variables: %+v", r)
	}
	if got := receiveAll(t, kumo, a.PollQueue.URL); len(got) != 2 {
		t.Fatalf("A's poll queue: %d messages", len(got))
	}
	mixed := envOf(a)
	mixed[contract.EnvReleaseQueueURL] = b.ReleaseQueue.URL
	notOurs := envOf(a)
	notOurs[contract.EnvQuarantineQueueURL] = strings.TrimSuffix(a.QuarantineQueue.URL, "-quarantine") + "-elsewhere"
	for name, env := range map[string]map[string]string{"two deployments": mixed, "a queue of none": notOurs} {
		for _, args := range [][]string{{"dlq", "redrive", "poll"}, {"quarantine", "replay", "--all"}, {"keys"}, {"replay", "--from", "2026-12-01T08:00:00Z", "--to", "2026-12-01T09:00:00Z"}} {
			if r := runCLI(env, args...); r.code != exitBad || !strings.Contains(r.err, codeDeploymentAmbiguous) {
				t.Errorf("%s: %v: %+v", name, args, r)
			}
		}
	}
	if r := runCLI(nil, "dlq", "redrive", "poll"); r.code != exitUsage || !strings.Contains(r.err, "--prefix") {
		t.Errorf("no deployment named: %+v", r)
	}
	if got := receiveAll(t, kumo, b.PollQueue.DLQURL); len(got) != 3 {
		t.Fatalf("B's poll DLQ: %d messages, want its 3 untouched", len(got))
	}
}
