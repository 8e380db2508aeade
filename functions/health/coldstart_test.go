package main

import (
	"testing"

	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/dev/rietest"
)

// TestColdStartUnderRIE measures init + first invoke of the stripped
// bootstrap under aws-lambda-rie on the local stack (`make coldstart`): the
// first event is a Function URL GET of the JSON document (a full health
// check of both tables).
func TestColdStartUnderRIE(t *testing.T) {
	rietest.RequireColdStart(t)
	localtest.Require(t)
	bin := rietest.BuildStripped(t)
	_, res := localtest.Stack(t)
	bin.ColdStarts(t, "health", rietest.ReadFile(t, "testdata/url_get_json.json"),
		envMonitorTable+"="+res.MonitorTable, envReleaseTable+"="+res.ReleaseTable, envEventBus+"="+res.BusName,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=30")
}
