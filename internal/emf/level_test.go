package emf_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/internal/emf"
	"github.com/localeflow/localeflow/internal/lambdalog"
)

// lambdaKeeps is Lambda's log-level filter on a JSON line: the "level"
// member names the line's level; missing or invalid is INFO; a line below
// the function's ApplicationLogLevel is dropped.
func lambdaKeeps(t *testing.T, line []byte, filter string) bool {
	t.Helper()
	order := []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}
	rank := func(s string) int {
		for i, l := range order {
			if strings.EqualFold(l, s) {
				return i
			}
		}
		return 2 // INFO
	}
	var doc struct {
		Level string `json:"level"`
	}
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatal(err)
	}
	return rank(doc.Level) >= rank(filter)
}

// TestMetricLinesSurviveLambdaLevelFilter: EMF lines carried no "level",
// which Lambda reads as INFO, so an ApplicationLogLevel of WARN dropped
// every custom metric and the health heartbeat. A metric line now carries
// the function's own level (at least INFO): Lambda's filter at that level
// keeps it, at every level.
func TestMetricLinesSurviveLambdaLevelFilter(t *testing.T) {
	t.Cleanup(func() { emf.SetLevel(slog.LevelInfo) })
	for _, filter := range []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"} {
		level, err := lambdalog.ParseLambdaLevel("AWS_LAMBDA_LOG_LEVEL", filter)
		if err != nil {
			t.Fatal(err)
		}
		emf.SetLevel(level)
		line := emf.Line("localeflow", 1, nil, emf.Group{Metrics: []emf.Metric{{Name: "HealthBlocked", Value: 0}}})
		if !lambdaKeeps(t, line, filter) {
			t.Errorf("at %s Lambda drops the metric line %s", filter, line)
		}
		if names, err := emf.Names(line); err != nil || len(names) != 1 {
			t.Errorf("at %s: %v %v", filter, names, err)
		}
	}
	emf.SetLevel(slog.LevelDebug)
	if line := emf.Line("localeflow", 1, nil); !strings.Contains(string(line), `"level":"INFO"`) {
		t.Errorf("a DEBUG function's metric line: %s", line)
	}
}
