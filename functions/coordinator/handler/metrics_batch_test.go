package handler_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/localeflow/localeflow/functions/coordinator/handler"
	"github.com/localeflow/localeflow/internal/emf"
)

// TestStepCountsOneDocumentPerDistinctState: through the Lambda entry
// point, each invocation writes at most one EMF document per distinct
// set of metric names and dimension values (the coordinator wrote one
// line per release step, issue 28), and every step is counted once.
func TestStepCountsOneDocumentPerDistinctState(t *testing.T) {
	var out bytes.Buffer
	b := setup(t, func(c *handler.Config) { c.Metrics = emf.NewWriter(&out, "dep-a", nil) })
	var docs, steps int
	check := func() {
		t.Helper()
		seen := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if l == "" {
				continue
			}
			names, err := emf.Names([]byte(l))
			if err != nil {
				t.Fatal(err)
			}
			var d struct {
				State, Code                  string
				EvidenceSteps, DeliverySteps int
			}
			if err := json.Unmarshal([]byte(l), &d); err != nil {
				t.Fatal(err)
			}
			key := strings.Join(names, ",") + "|" + d.State + "|" + d.Code
			if seen[key] {
				t.Fatalf("two documents for %s in one invocation: %s", key, out.String())
			}
			seen[key] = true
			docs++
			steps += d.EvidenceSteps + d.DeliverySteps
		}
		out.Reset()
	}
	b.invokeRaw(t, readTestdata(t, "sqs_plan.json"))
	check()
	b.invokeRaw(t, readTestdata(t, "sqs_jobs.json"))
	check()
	var messages int
	for range 10 {
		batch := b.queue.take(t)
		if len(batch.Records) == 0 {
			break
		}
		// Each step message three times (a redelivered duplicate is
		// harmless: the conditional writes decide), so one invocation runs
		// steps with the same outcome.
		recs := batch.Records
		for i := range 2 {
			for _, r := range recs {
				r.MessageId += "-dup" + string(rune('0'+i))
				batch.Records = append(batch.Records, r)
			}
		}
		messages += len(batch.Records)
		if resp := b.invoke(t, batch); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%+v", resp)
		}
		check()
	}
	t.Logf("%d step messages, %d steps counted, %d documents", messages, steps, docs)
	if steps == 0 || docs >= steps {
		t.Fatalf("%d steps in %d documents: want fewer documents than steps", steps, docs)
	}
}
