package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/dev/localtest"
)

// TestReplayOnMoto: `localeflow replay` against an EventBridge that has
// archives (moto; kumo has none, TestReplayOnLocalStack): an input event
// put on the bus reaches the poll queue through its rule and the archive;
// the replay of the window that holds it delivers it to the poll queue
// once more. Runs on the moto stack only (LOCALEFLOW_STACK=moto).
func TestReplayOnMoto(t *testing.T) {
	localtest.Require(t)
	if os.Getenv("LOCALEFLOW_EMULATOR") != "moto" {
		t.Skip("EventBridge archives and replays: moto only (make test runs it with LOCALEFLOW_STACK=moto)")
	}
	topo, res := localtest.Stack(t)
	eb := localtest.EventBridge(t)
	q := localtest.SQS(t)
	ctx := context.Background()
	if _, err := eb.CreateArchive(ctx, &eventbridge.CreateArchiveInput{
		ArchiveName: aws.String(topo.Archive.Name), EventSourceArn: aws.String(res.BusARN),
		EventPattern: aws.String(`{"source":["` + contract.EventSource + `"]}`),
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = eb.DeleteArchive(context.Background(), &eventbridge.DeleteArchiveInput{ArchiveName: aws.String(topo.Archive.Name)})
	})
	from := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	const detail = `{"note":"replayed"}`
	out, err := eb.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		EventBusName: aws.String(topo.BusName), Source: aws.String(contract.EventSource),
		DetailType: aws.String(contract.DetailChangeDispatched), Detail: aws.String(detail),
	}}})
	if err != nil || out.FailedEntryCount != 0 {
		t.Fatalf("PutEvents: %v %+v", err, out)
	}
	if got := receiveAll(t, q, res.PollQueue.URL); len(got) != 1 || !strings.Contains(aws.ToString(got[0].Body), "replayed") {
		t.Fatalf("poll queue after PutEvents: %v", got)
	}
	time.Sleep(1100 * time.Millisecond) // --to is at most now, in whole seconds
	to := time.Now().UTC().Truncate(time.Second)
	r := runCLI(nil, "--prefix", topo.Prefix, "replay", "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339),
		"--detail-type", contract.DetailChangeDispatched)
	if r.code != exitOK {
		t.Fatalf("replay on moto: %+v", r)
	}
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for len(got) == 0 && time.Now().Before(deadline) {
		for _, m := range receiveAll(t, q, res.PollQueue.URL) {
			got = append(got, aws.ToString(m.Body))
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "replayed") || !strings.Contains(got[0], contract.DetailChangeDispatched) {
		t.Fatalf("poll queue after the replay: %v (replay said %s)", got, r.out)
	}
	t.Logf("localeflow replay: %s", strings.TrimSpace(r.out))
}
