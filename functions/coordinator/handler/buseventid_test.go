package handler_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release/releasetest"
)

// TestInputLogCarriesBusEventID: the EventBridge envelope's id was decoded
// into an anonymous struct without it and lost; the records of an input
// now carry it as bus_event_id next to the request id.
func TestInputLogCarriesBusEventID(t *testing.T) {
	b := setup(t)
	fx := releasetest.NewFixture()
	plan := releasetest.NewPlan("evt-bus-1", "de-DE")
	b.invoke(t, events.SQSEvent{Records: []events.SQSMessage{envelopeMessage("m-plan", contract.DetailPlanAccepted, fx.Detail(plan.PlanPayload()))}})
	if !logHas(t, b.logs.String(), "input stored", "eb-m-plan") {
		t.Fatalf("no input record with bus_event_id eb-m-plan in\n%s", b.logs)
	}
}

// TestScheduledSweepLogCarriesBusEventID: the sweep's records carry the
// scheduled event's id.
func TestScheduledSweepLogCarriesBusEventID(t *testing.T) {
	b := setup(t)
	b.invokeRaw(t, []byte(`{"version":"0","id":"sched-7","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`))
	if !logHas(t, b.logs.String(), "coordinator sweep done", "sched-7") {
		t.Fatalf("no sweep record with bus_event_id sched-7 in\n%s", b.logs)
	}
}

// logHas reports whether a JSON log record with message msg carries
// bus_event_id id.
func logHas(t *testing.T, logs, msg, id string) bool {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == msg && rec["bus_event_id"] == id {
			return true
		}
	}
	return false
}
