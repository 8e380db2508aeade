package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/monitor"
)

type fakeBus struct {
	inputs []*eventbridge.PutEventsInput
	out    *eventbridge.PutEventsOutput
	err    error
}

func (f *fakeBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	f.inputs = append(f.inputs, in)
	if f.err != nil {
		return nil, f.err
	}
	if f.out != nil {
		return f.out, nil
	}
	return &eventbridge.PutEventsOutput{Entries: []types.PutEventsResultEntry{{EventId: aws.String("1")}}}, nil
}

func TestPublish(t *testing.T) {
	status := "published"
	sha := "ab" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"
	site, plan := "site-1", "plan-1"
	outcome := "cd" + sha[2:]
	detail := contract.ChangeTerminal{Schema: contract.SchemaChangeTerminal, EventID: "evt-1", OutcomeID: outcome, SiteID: &site, PlanID: &plan, State: "terminal", RemoteStatus: &status, LifecycleSHA256: &sha}
	tests := []struct {
		name      string
		bus       fakeBus
		code      string
		retryable bool
	}{
		{"ok", fakeBus{}, "", false},
		{"api error", fakeBus{err: errors.New("boom")}, eventbus.CodePublishFailed, true},
		{"failed entry", fakeBus{out: &eventbridge.PutEventsOutput{FailedEntryCount: 1,
			Entries: []types.PutEventsResultEntry{{ErrorCode: aws.String("InternalFailure")}}}}, eventbus.CodeEntryFailed, true},
		{"entry error without count", fakeBus{out: &eventbridge.PutEventsOutput{
			Entries: []types.PutEventsResultEntry{{ErrorCode: aws.String("ThrottlingException")}}}}, eventbus.CodeEntryFailed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bus := tt.bus
			err := eventbus.New(&bus, "lf-bus").Publish(context.Background(), contract.DetailChangeTerminal, detail)
			if core.CodeOf(err) != tt.code || core.IsRetryable(err) != tt.retryable {
				t.Fatalf("err %v, want code %q retryable %v", err, tt.code, tt.retryable)
			}
			if len(bus.inputs) != 1 || len(bus.inputs[0].Entries) != 1 {
				t.Fatalf("want one PutEvents with one entry, got %+v", bus.inputs)
			}
			e := bus.inputs[0].Entries[0]
			if *e.EventBusName != "lf-bus" || *e.Source != "localeflow" || *e.DetailType != contract.DetailChangeTerminal {
				t.Fatalf("entry %+v", e)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(*e.Detail), &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"schema": contract.SchemaChangeTerminal, "event_id": "evt-1", "outcome_id": outcome, "site_id": "site-1", "plan_id": "plan-1", "state": "terminal",
				"remote_status": "published", "error_code": nil, "lifecycle_sha256": sha}
			if len(got) != len(want) {
				t.Fatalf("detail keys %v, want %v", got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Fatalf("detail[%s] = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

// TestPublishCarriesTheDeployment: a publisher WithDeployment puts the
// deployment discriminator in the entry's resources (the detail is
// unchanged); a plain one puts none.
func TestPublishCarriesTheDeployment(t *testing.T) {
	var bus fakeBus
	plain := eventbus.New(&bus, "lf-bus")
	for _, p := range []*eventbus.Publisher{plain.WithDeployment("staging"), plain} {
		if err := p.Publish(context.Background(), contract.DetailHealthBlocked, map[string]any{"schema": contract.SchemaHealthBlocked}); err != nil {
			t.Fatal(err)
		}
	}
	if got := bus.inputs[0].Entries[0].Resources; len(got) != 1 || got[0] != "localeflow:deployment/staging" {
		t.Errorf("resources %v, want [localeflow:deployment/staging]", got)
	}
	if got := bus.inputs[1].Entries[0].Resources; len(got) != 0 {
		t.Errorf("plain publisher resources %v, want none", got)
	}
}

func TestPublishRejectsBadDetail(t *testing.T) {
	tests := []struct {
		name       string
		detailType string
		detail     any
	}{
		{"not an object", contract.DetailChangeTerminal, []int{1}},
		{"unencodable", contract.DetailChangeTerminal, map[string]any{"f": func() {}}},
		{"bad detail type", "has space", map[string]int{}},
		{"too large", contract.DetailChangeTerminal, map[string]string{"x": string(make([]byte, eventbus.MaxDetailBytes))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bus fakeBus
			err := eventbus.New(&bus, "b").Publish(context.Background(), tt.detailType, tt.detail)
			if core.CodeOf(err) != eventbus.CodeDetailInvalid || core.IsRetryable(err) {
				t.Fatalf("err %v", err)
			}
			if len(bus.inputs) != 0 {
				t.Fatal("invalid detail was sent")
			}
		})
	}
}

// A hint's detail is exactly what the poller's parser takes.
func TestHintDetailParses(t *testing.T) {
	bus := fakeBus{}
	if err := eventbus.New(&bus, "lf-bus").Hint(context.Background(), "evt-1", "site-berlin"); err != nil {
		t.Fatal(err)
	}
	e := bus.inputs[0].Entries[0]
	if *e.DetailType != contract.DetailChangeHint || *e.Source != contract.EventSource {
		t.Fatalf("entry %s %s", *e.DetailType, *e.Source)
	}
	d, err := monitor.ParseHint([]byte(*e.Detail))
	if err != nil || d.EventID != "evt-1" || d.SiteID != "site-berlin" {
		t.Fatalf("ParseHint(%s) = %+v, %v", *e.Detail, d, err)
	}
	err = eventbus.New(&bus, "lf-bus").Hint(context.Background(), "evt 1", "site-berlin")
	if !core.HasCode(err, eventbus.CodeDetailInvalid) || len(bus.inputs) != 1 {
		t.Fatalf("hint with an invalid id: %v (%d puts)", err, len(bus.inputs))
	}
}

// TestOutputEventCarriesTheTraceHeader: PutEvents entries had no
// TraceHeader, so the consumer of an event started a new trace. An entry
// now carries the publishing invocation's trace header; none without one.
func TestOutputEventCarriesTheTraceHeader(t *testing.T) {
	const h = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	f := &fakeBus{}
	p := eventbus.New(f, "bus")
	ctx := context.WithValue(context.Background(), "x-amzn-trace-id", h) //nolint:staticcheck // the runtime's own key
	if err := p.Hint(ctx, "evt-1", "site-1"); err != nil {
		t.Fatal(err)
	}
	if err := p.Hint(context.Background(), "evt-1", "site-1"); err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(f.inputs[0].Entries[0].TraceHeader); got != h {
		t.Errorf("TraceHeader = %q", got)
	}
	if f.inputs[1].Entries[0].TraceHeader != nil {
		t.Errorf("without a trace: %q", *f.inputs[1].Entries[0].TraceHeader)
	}
}
