package main

import (
	"testing"

	"github.com/localeflow/localeflow/adapters/cmsdelivery/cmsdeliverytest"
	"github.com/localeflow/localeflow/adapters/evidence/evidencetest"
	"github.com/localeflow/localeflow/core/release/releasetest"
	"github.com/localeflow/localeflow/dev/localtest"
	"github.com/localeflow/localeflow/dev/rietest"
)

// TestColdStartUnderRIE measures init + first invoke of the stripped
// bootstrap under aws-lambda-rie on the local stack (`make coldstart`): the
// first event is the scheduled release sweep (one query of the release
// table's due index).
func TestColdStartUnderRIE(t *testing.T) {
	rietest.RequireColdStart(t)
	localtest.Require(t)
	bin := rietest.BuildStripped(t)
	_, res := localtest.Stack(t)
	fx := releasetest.NewFixture()
	approval, publication := fx.Authorities()
	evidenceKey, cmsKey := []byte("evidence-hmac-key-0123456789"), []byte("cms-hmac-key-0123456789")
	ev := evidencetest.New(evidenceKey, &releasetest.Responder{Fixture: fx})
	defer ev.Close()
	cms := cmsdeliverytest.New(cmsKey, publication.PublicKey(), approval.PublicKey())
	defer cms.Close()
	bin.ColdStarts(t, "coordinator", rietest.ReadFile(t, "testdata/scheduled.json"),
		rieEnv(fx, res.ReleaseTable, res.ReleaseQueue.URL, res.BusName, ev.URL, cms.URL, evidenceKey, cmsKey)...)
}
