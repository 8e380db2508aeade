package main

import (
	"encoding/hex"
	"testing"

	"github.com/localeflow/localeflow/adapters/cms/cmstest"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/dev/rietest"
)

// TestColdStartUnderRIE measures init + first invoke of the stripped
// bootstrap under aws-lambda-rie on the local stack (`make coldstart`): the
// first event is the scheduled sweep (one query per wake shard, nothing
// due).
func TestColdStartUnderRIE(t *testing.T) {
	rietest.RequireColdStart(t)
	localtest.Require(t)
	bin := rietest.BuildStripped(t)
	_, res := localtest.Stack(t)
	key := []byte("localeflow-cms-test-key-00000001")
	srv := cmstest.New(key).Start()
	defer srv.Close()
	bin.ColdStarts(t, "poller", rietest.ReadFile(t, "testdata/scheduled.json"),
		envMonitorTable+"="+res.MonitorTable,
		envPollQueueURL+"="+res.PollQueue.URL,
		envEventBus+"="+res.BusName,
		envCMSBaseURL+"="+srv.URL, "LOCALEFLOW_ALLOW_INSECURE_HTTP=1",
		envCMSKeyHex+"="+hex.EncodeToString(key),
		envEventKeyHex+"="+hex.EncodeToString([]byte("localeflow-event-test-key-000001")),
		envCMSTimeout+"=2s",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=60")
}
