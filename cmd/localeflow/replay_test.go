package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/topology"
)

// fakeEventBridge answers the lookups like EventBridge and records the
// StartReplay request (kumo has no archives).
type fakeEventBridge struct {
	started *eventbridge.StartReplayInput
	// hostBus, when set, is the bus every archive keeps the events of (a
	// deployment on a host bus); else the archive <P>-archive is on <P>-bus.
	hostBus string
	// archiveCalls counts DescribeArchive.
	archiveCalls int
}

const fakeAccount = "arn:aws:events:eu-west-1:123456789012:"

func (f *fakeEventBridge) DescribeArchive(_ context.Context, in *eventbridge.DescribeArchiveInput, _ ...func(*eventbridge.Options)) (*eventbridge.DescribeArchiveOutput, error) {
	f.archiveCalls++
	name := aws.ToString(in.ArchiveName)
	bus := f.hostBus
	if bus == "" {
		bus = strings.TrimSuffix(name, "-archive") + "-bus"
	}
	return &eventbridge.DescribeArchiveOutput{ArchiveName: in.ArchiveName, ArchiveArn: aws.String(fakeAccount + "archive/" + name),
		EventSourceArn: aws.String(fakeAccount + "event-bus/" + bus)}, nil
}

// DescribeEventBus is what replay called before it read the bus from the
// archive.
func (f *fakeEventBridge) DescribeEventBus(_ context.Context, in *eventbridge.DescribeEventBusInput, _ ...func(*eventbridge.Options)) (*eventbridge.DescribeEventBusOutput, error) {
	return &eventbridge.DescribeEventBusOutput{Arn: aws.String("arn:aws:events:eu-west-1:123456789012:event-bus/" + aws.ToString(in.Name))}, nil
}

func (f *fakeEventBridge) DescribeRule(_ context.Context, in *eventbridge.DescribeRuleInput, _ ...func(*eventbridge.Options)) (*eventbridge.DescribeRuleOutput, error) {
	return &eventbridge.DescribeRuleOutput{Arn: aws.String("arn:aws:events:eu-west-1:123456789012:rule/" + aws.ToString(in.EventBusName) + "/" + aws.ToString(in.Name))}, nil
}

func (f *fakeEventBridge) StartReplay(_ context.Context, in *eventbridge.StartReplayInput, _ ...func(*eventbridge.Options)) (*eventbridge.StartReplayOutput, error) {
	f.started = in
	return &eventbridge.StartReplayOutput{State: types.ReplayStateStarting, ReplayArn: aws.String("arn:replay")}, nil
}

func withEventBridge(t *testing.T, api EventBridgeAPI) {
	t.Helper()
	old := newEventBridgeAPI
	newEventBridgeAPI = func(context.Context) (EventBridgeAPI, error) { return api, nil }
	t.Cleanup(func() { newEventBridgeAPI = old })
}

// TestReplayStartsAnArchiveReplay: `replay` replays the archive's window
// to the bus, limited to the rules of the detail-type (all input rules
// without one); bad windows and detail-types are refused before any call.
func TestReplayStartsAnArchiveReplay(t *testing.T) {
	fake := &fakeEventBridge{}
	withEventBridge(t, fake)
	now := time.Now().UTC()
	from, to := now.Add(-3*time.Hour).Format(time.RFC3339), now.Add(-time.Hour).Format(time.RFC3339)
	r := runCLI(nil, "--prefix", "acme", "--json", "replay", "--from", from, "--to", to, "--detail-type", contract.DetailJobCompleted)
	var out map[string]any
	if r.code != exitOK || json.Unmarshal([]byte(r.out), &out) != nil || fake.started == nil {
		t.Fatalf("replay: %+v", r)
	}
	in := fake.started
	if aws.ToString(in.EventSourceArn) != "arn:aws:events:eu-west-1:123456789012:archive/acme-archive" ||
		aws.ToString(in.Destination.Arn) != "arn:aws:events:eu-west-1:123456789012:event-bus/acme-bus" ||
		strings.Join(in.Destination.FilterArns, ",") != "arn:aws:events:eu-west-1:123456789012:rule/acme-bus/acme-release-input" ||
		in.EventStartTime.Format(time.RFC3339) != from || in.EventEndTime.Format(time.RFC3339) != to ||
		!strings.HasPrefix(aws.ToString(in.ReplayName), "acme-replay-") || len(aws.ToString(in.ReplayName)) > 64 {
		t.Fatalf("StartReplay %+v %+v", in, in.Destination)
	}
	fake.started = nil
	if r := runCLI(nil, "--prefix", "acme", "replay", "--from", from, "--to", to); r.code != exitOK || len(fake.started.Destination.FilterArns) != len(topology.New("acme").Rules) {
		t.Fatalf("replay of every input: %+v", r)
	}
	fake.started = nil
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"replay", "--from", from}, exitUsage, "replay: --from T --to T"},
		{[]string{"replay", "--from", "yesterday", "--to", to}, exitUsage, "RFC 3339"},
		{[]string{"replay", "--from", to, "--to", from}, exitBad, codeReplayWindow},
		{[]string{"replay", "--from", from, "--to", now.Add(time.Hour).Format(time.RFC3339)}, exitBad, codeReplayWindow},
		{[]string{"replay", "--from", now.Add(-8 * 24 * time.Hour).Format(time.RFC3339), "--to", to}, exitBad, codeReplayWindow},
		{[]string{"replay", "--from", from, "--to", to, "--detail-type", contract.DetailChangeTerminal}, exitUsage, "input detail-type"},
		{[]string{"replay", "--from", from, "--to", to, "extra"}, exitUsage, "no arguments"},
	} {
		r := runCLI(nil, append([]string{"--prefix", "acme"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.out+r.err, tc.want) {
			t.Errorf("%v: %+v", tc.args, r)
		}
	}
	if fake.started != nil {
		t.Fatal("a refused replay was started")
	}
}

// TestReplayOnAHostBus: `replay` always targeted <prefix>-bus, which does
// not exist for a deployment on a team's host bus. The bus is now the one
// the deployment's archive keeps the events of (DescribeArchive): the
// replay goes to the host bus, filtered to the deployment's rules there. A
// bus named otherwise by --bus or, without --prefix, $LOCALEFLOW_EVENT_BUS
// is refused (cli.deployment_ambiguous) before any replay starts.
func TestReplayOnAHostBus(t *testing.T) {
	fake := &fakeEventBridge{hostBus: "team-bus"}
	withEventBridge(t, fake)
	now := time.Now().UTC()
	from, to := now.Add(-3*time.Hour).Format(time.RFC3339), now.Add(-time.Hour).Format(time.RFC3339)
	r := runCLI(nil, "--prefix", "acme", "replay", "--from", from, "--to", to, "--detail-type", contract.DetailChangeDispatched)
	if r.code != exitOK || fake.started == nil {
		t.Fatalf("replay on a host bus: %+v", r)
	}
	in := fake.started
	if aws.ToString(in.EventSourceArn) != fakeAccount+"archive/acme-archive" || aws.ToString(in.Destination.Arn) != fakeAccount+"event-bus/team-bus" ||
		strings.Join(in.Destination.FilterArns, ",") != fakeAccount+"rule/team-bus/acme-change-dispatched" {
		t.Fatalf("StartReplay %+v %+v", in, in.Destination)
	}
	for _, tc := range []struct {
		env  map[string]string
		args []string
		code int
	}{
		{nil, []string{"--prefix", "acme", "--bus", "team-bus"}, exitOK},
		{nil, []string{"--prefix", "acme", "--bus", fakeAccount + "event-bus/team-bus"}, exitOK},
		{map[string]string{contract.EnvEventBus: "team-bus", contract.EnvDeployment: "acme"}, nil, exitOK},
		{nil, []string{"--prefix", "acme", "--bus", "acme-bus"}, exitBad},
		{map[string]string{contract.EnvEventBus: "other-bus", contract.EnvDeployment: "acme"}, nil, exitBad},
		// With --prefix the variables of the shell are not the deployment's.
		{map[string]string{contract.EnvEventBus: "other-bus"}, []string{"--prefix", "acme"}, exitOK},
	} {
		fake.started = nil
		r := runCLI(tc.env, append(tc.args, "replay", "--from", from, "--to", to)...)
		if r.code != tc.code || (tc.code == exitBad) != (fake.started == nil) || (tc.code == exitBad && !strings.Contains(r.err, codeDeploymentAmbiguous)) {
			t.Errorf("%v %v: %+v", tc.env, tc.args, r)
		}
		// Without --prefix the deployment is the variables' (it was
		// localeflow's archive).
		if fake.started != nil && aws.ToString(fake.started.EventSourceArn) != fakeAccount+"archive/acme-archive" {
			t.Errorf("%v %v: replayed %s", tc.env, tc.args, aws.ToString(fake.started.EventSourceArn))
		}
	}
}

// TestReplayOnLocalStack: kumo has no archives: DescribeArchive, the first
// call, is refused there and the command reports a runtime error (exit 3)
// naming the deployment's archive (moto, which has archives, is where the
// whole replay can run).
func TestReplayOnLocalStack(t *testing.T) {
	localtest.Require(t)
	if os.Getenv("LOCALEFLOW_EMULATOR") == "moto" {
		t.Skip("moto has archives: TestReplayOnMoto")
	}
	topo := localtest.Topology(t)
	now := time.Now().UTC()
	r := runCLI(nil, "--prefix", topo.Prefix, "replay", "--from", now.Add(-time.Hour).Format(time.RFC3339), "--to", now.Add(-time.Minute).Format(time.RFC3339))
	if r.code != exitRuntime || !strings.Contains(r.err, "archive "+topo.Archive.Name+": ") {
		t.Fatalf("replay on kumo: %+v", r)
	}
}
