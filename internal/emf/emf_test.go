package emf

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLineDimensionSetsStartWithDeployment(t *testing.T) {
	line := Line("dep-a", 1_764_460_800_000, map[string]string{"State": "watching"}, Count("Polls", "State"),
		Group{Metrics: []Metric{{Name: "HealthBlocked", Value: 1}}})
	var doc struct {
		Deployment string `json:"Deployment"`
		State      string `json:"State"`
		Polls      int    `json:"Polls"`
		Blocked    int    `json:"HealthBlocked"`
		AWS        meta   `json:"_aws"`
	}
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Deployment != "dep-a" || doc.State != "watching" || doc.Polls != 1 || doc.Blocked != 1 || doc.AWS.Timestamp != 1_764_460_800_000 {
		t.Fatalf("%s", line)
	}
	want := []directive{
		{Namespace: "Localeflow", Dimensions: [][]string{{"Deployment"}, {"Deployment", "State"}}, Metrics: []metricDef{{"Polls", "Count"}}},
		{Namespace: "Localeflow", Dimensions: [][]string{{"Deployment"}}, Metrics: []metricDef{{"HealthBlocked", "Count"}}},
	}
	if !reflect.DeepEqual(doc.AWS.CloudWatchMetrics, want) {
		t.Fatalf("directives %+v, want %+v", doc.AWS.CloudWatchMetrics, want)
	}
	names, err := Names(line)
	if err != nil || !reflect.DeepEqual(names, []string{"Polls", "HealthBlocked"}) {
		t.Fatalf("Names = %v, %v", names, err)
	}
	if got := Line("", 1, nil, Group{Metrics: []Metric{{Name: "X", Value: 2}}}); !strings.Contains(string(got), `"Deployment":"localeflow"`) {
		t.Fatalf("default deployment: %s", got)
	}
}

func TestNamesRefusesForeignLines(t *testing.T) {
	for _, line := range []string{
		`not json`, `{"msg":"plain log"}`,
		`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"Other","Dimensions":[["Deployment"]],"Metrics":[{"Name":"X","Unit":"Count"}]}]},"Deployment":"d","X":1}`,
		`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"Localeflow","Dimensions":[["Function"]],"Metrics":[{"Name":"X","Unit":"Count"}]}]},"Function":"f","X":1}`,
		`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"Localeflow","Dimensions":[["Deployment"]],"Metrics":[{"Name":"X","Unit":"Count"}]}]},"Deployment":"d"}`,
	} {
		if _, err := Names([]byte(line)); err == nil {
			t.Errorf("Names accepted %s", line)
		}
	}
}

func TestWriterWritesWholeLines(t *testing.T) {
	var buf bytes.Buffer
	at := time.UnixMilli(1_764_460_800_000)
	w := NewWriter(&buf, "dep-b", func() time.Time { return at })
	w.Emit(map[string]string{"Code": "cms.http_503"}, Count("PollFailures", "Code"))
	var nilWriter *Writer
	nilWriter.Emit(nil, Count("Polls", "State"))
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"Deployment":"dep-b"`) || !strings.Contains(lines[0], `"Code":"cms.http_503"`) {
		t.Fatalf("%q", buf.String())
	}
}

// TestBatchSumsOneInvocation: a batch of counts writes one document per
// distinct set of dimension values, each metric the sum of its adds, and
// a nested Scope does not write twice.
func TestBatchSumsOneInvocation(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, "dep-c", func() time.Time { return time.UnixMilli(1) })
	ctx, flush := w.Scope(context.Background())
	inner, innerFlush := w.Scope(ctx)
	for i := range 7 {
		values := map[string]string{"State": "watching"}
		groups := []Group{Count("Polls", "State")}
		if i%3 == 0 {
			values = map[string]string{"State": "retry_wait", "Code": "cms.http_503"}
			groups = append(groups, Count("PollFailures", "Code"))
		}
		w.Count(inner, values, groups...)
	}
	innerFlush()
	if buf.Len() != 0 {
		t.Fatalf("nested scope wrote: %q", buf.String())
	}
	flush()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines %q, want 2 (one per distinct state and code)", lines)
	}
	var polls, failures int
	for _, l := range lines {
		var doc struct{ Polls, PollFailures int }
		if err := json.Unmarshal([]byte(l), &doc); err != nil {
			t.Fatal(err)
		}
		if _, err := Names([]byte(l)); err != nil {
			t.Fatal(err)
		}
		polls += doc.Polls
		failures += doc.PollFailures
	}
	if polls != 7 || failures != 3 {
		t.Fatalf("polls %d, failures %d, want 7 and 3: %q", polls, failures, lines)
	}
	if !strings.Contains(lines[0], `"Polls":3`) || !strings.Contains(lines[0], `"PollFailures":3`) || !strings.Contains(lines[1], `"Polls":4`) {
		t.Fatalf("documents %q", lines)
	}
	// Flushed: a second flush writes nothing; no scope writes at once.
	buf.Reset()
	flush()
	w.Count(context.Background(), map[string]string{"State": "watching"}, Count("Polls", "State"))
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("after flush: %q", buf.String())
	}
	var nilWriter *Writer
	nctx, nflush := nilWriter.Scope(context.Background())
	nilWriter.Count(nctx, nil, Count("Polls", "State"))
	nflush()
}
