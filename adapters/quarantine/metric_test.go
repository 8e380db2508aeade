package quarantine_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/localeflow/localeflow/adapters/quarantine"
)

// TestMetricLineCarriesDeployment: MessagesRejected had no Deployment
// dimension, so two deployments in one account raised each other's
// messages-rejected alarm.
func TestMetricLineCarriesDeployment(t *testing.T) {
	for _, tc := range []struct{ deployment, want string }{{"ops-b", "ops-b"}, {"", quarantine.DefaultDeployment}} {
		var doc struct {
			AWS struct {
				CloudWatchMetrics []struct {
					Dimensions [][]string `json:"Dimensions"`
				} `json:"CloudWatchMetrics"`
			} `json:"_aws"`
			Deployment string  `json:"Deployment"`
			Function   string  `json:"Function"`
			Code       string  `json:"Code"`
			Value      float64 `json:"MessagesRejected"`
		}
		if err := json.Unmarshal(quarantine.MetricLine(tc.deployment, "poller", "poller.x", time.UnixMilli(1)), &doc); err != nil {
			t.Fatal(err)
		}
		dims := doc.AWS.CloudWatchMetrics[0].Dimensions
		if doc.Deployment != tc.want || doc.Function != "poller" || doc.Code != "poller.x" || doc.Value != 1 ||
			len(dims) != 2 || !slices.Equal(dims[0], []string{"Deployment", "Function"}) ||
			!slices.Equal(dims[1], []string{"Deployment", "Function", "Code"}) {
			t.Fatalf("deployment %q: %+v", tc.deployment, doc)
		}
	}
}
