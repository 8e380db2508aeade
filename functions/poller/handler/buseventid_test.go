package handler_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/dev/logcapture"
	"github.com/localeflow/localeflow/functions/poller/handler"
	"github.com/localeflow/localeflow/internal/lambdalog"
)

// TestHintAndSweepLogsCarryBusEventID: the EventBridge envelope's id was
// decoded into an anonymous struct without it and lost; the records of a
// hint and of a scheduled sweep now carry it as bus_event_id.
func TestHintAndSweepLogsCarryBusEventID(t *testing.T) {
	logs := &logcapture.Buffer{}
	e := setupWith(t, monitor.Config{WorkerID: "poller-test", PollInterval: 10 * time.Minute}, func(c *handler.Config) {
		c.Log = lambdalog.New(logs, slog.LevelInfo)
	})
	e.intake()
	e.follow()
	e.clock.Advance(2 * time.Second)
	e.hint(hintBody(hintEvent, "site-berlin"))
	if !pollerLogHas(t, logs.String(), "poller hint accepted", "h-1") {
		t.Fatalf("no hint record with bus_event_id h-1 in\n%s", logs)
	}
	if _, err := e.invoke([]byte(`{"version":"0","id":"sched-7","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`)); err != nil {
		t.Fatal(err)
	}
	if !pollerLogHas(t, logs.String(), "poller sweep done", "sched-7") {
		t.Fatalf("no sweep record with bus_event_id sched-7 in\n%s", logs)
	}
}

func pollerLogHas(t *testing.T, logs, msg, id string) bool {
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

// TestHintEnvelopeWithBadTimeIsDropped: the envelope is decoded as
// events.EventBridgeEvent, so a "time" that is not RFC 3339 makes it a
// malformed envelope (acknowledged, logged as dropped), like any other.
func TestHintEnvelopeWithBadTimeIsDropped(t *testing.T) {
	e := setup(t)
	body := strings.Replace(hintBody(hintEvent, "site-berlin"), `"time":"2026-11-30T00:00:00Z"`, `"time":"yesterday"`, 1)
	if resp := e.invokeSQS(batchOf(t, 1, body)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("hint with a bad time redelivered")
	}
	if !strings.Contains(e.logs.String(), "poller message dropped") || len(e.cms.RequestsFor(hintEvent)) != 0 {
		t.Fatalf("hint with a bad time not dropped:\n%s", e.logs.String())
	}
}
