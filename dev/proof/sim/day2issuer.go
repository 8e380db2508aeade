package sim

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/functions/coordinator/config"
)

// Day2ReceiptIssuer: a receipt issuer's Ed25519 key rotates mid-release,
// by docs/security.md "Receipt issuer keys": (1) deploy with
// `name=OLD,name=NEW` in the kind's LOCALEFLOW_RECEIPT_ISSUERS_<KIND>
// (new environments), (2) the issuer signs with NEW, (3) deploy
// `name=NEW`. The variables go through the coordinator's own loader
// (functions/coordinator/config.Load), so a configuration the runbook
// prescribes and the code refuses is found (issue 25 finding 8). Checks: the
// loader accepts each step, and no receipt is refused (receipt.* codes)
// while the issuer rotates. Draws from a stream of their own.
const Day2ReceiptIssuer = "receipt-issuer"

const issuerStream = 0x69737375_65726b79

// issuerEnv is the coordinator's environment with the receipt issuer
// variables given (the other required variables set to valid values).
func issuerEnv(vars map[string]string) func(string) string {
	env := map[string]string{
		contract.EnvReleaseTable: "sim-release", contract.EnvReleaseQueueURL: "https://sqs.sim.invalid/release",
		contract.EnvEventBus: "sim-bus", contract.EnvEvidenceBaseURL: "https://evidence.sim.invalid",
		contract.EnvCMSBaseURL: "https://cms.sim.invalid",
	}
	for _, name := range config.KeyNames {
		// Keys inline (the loader reads them at cold start; the
		// simulation's key sets come from the deployment).
		env[config.KeyStem(name)+"_HEX"] = strings.Repeat("5a", 32)
	}
	for k, v := range vars {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

func issuerEntry(name string, key ed25519.PrivateKey) string {
	return name + "=" + hex.EncodeToString(key.Public().(ed25519.PublicKey))
}

// attachIssuer schedules the receipt-issuer rotation (when the kind is on
// and the seed's provider is not the rogue one, whose human-review receipts
// are refused by design).
func (d *day2) attachIssuer(rel *Release, window time.Duration) {
	if !d.on(Day2ReceiptIssuer) || rel.rogue {
		return
	}
	w := d.w
	rng := rand.New(rand.NewPCG(w.Seed, issuerStream))
	fx := &rel.peers.Responder.Fixture
	kinds := []struct {
		kind, variable string
		name           *string
		key            *ed25519.PrivateKey
	}{
		{release.KindQuality, contract.EnvReceiptIssuersQuality, &fx.Issuer, &fx.IssuerKey},
		{release.KindHumanReview, contract.EnvReceiptIssuersHumanReview, &fx.HumanIssuer, &fx.HumanIssuerKey},
		{release.KindIndependentModelReview, contract.EnvReceiptIssuersIndependentReview, &fx.ReviewIssuer, &fx.ReviewIssuerKey},
	}
	k := kinds[rng.IntN(len(kinds))]
	var seed [32]byte
	for i := range seed {
		seed[i] = byte(rng.IntN(256))
	}
	newKey := ed25519.NewKeyFromSeed(seed[:])
	oldKey := *k.key
	vars := func(entries string) map[string]string {
		out := map[string]string{}
		for _, o := range kinds {
			out[o.variable] = issuerEntry(*o.name, *o.key)
		}
		out[k.variable] = entries
		return out
	}
	deploy := func(step string, entries string) {
		cfg, err := config.Load(issuerEnv(vars(entries)))
		if err != nil {
			d.w.violate("day-2: receipt-issuer rotation (%s, docs/security.md \"Receipt issuer keys\" step %s): the coordinator refuses the runbook's configuration: %v",
				k.variable, step, err)
			return
		}
		d.dep.verifiers = cfg.Issuers.Verifiers()
		d.redeploy(fmt.Sprintf("receipt issuer %s (%s) step %s", *k.name, k.kind, step))
	}
	t1 := w.start.Add(time.Minute + time.Duration(rng.Int64N(int64(window-time.Minute))))
	// Step 2 once no invocation of an older environment still runs.
	t2 := t1.Add(w.Faults.Config.FunctionTimeout + time.Duration(rng.Int64N(int64(5*time.Minute))))
	t3 := t2.Add(time.Duration(rng.Int64N(int64(10 * time.Minute))))
	w.at(t1, "day-2 receipt issuer step 1", func() {
		d.issuerRotating = true
		deploy("1", issuerEntry(*k.name, oldKey)+","+issuerEntry(*k.name, newKey))
	})
	w.at(t2, "day-2 receipt issuer step 2", func() {
		d.op("receipt issuer %s (%s) signs with NEW", *k.name, k.kind)
		*k.key = newKey
	})
	w.at(t3, "day-2 receipt issuer step 3", func() { deploy("3", issuerEntry(*k.name, newKey)) })
}

// receiptRefusals are the codes of a receipt the coordinator does not
// trust; during an issuer rotation by the runbook none may occur.
var receiptRefusals = []string{release.CodeReceiptIssuerUnknown, release.CodeReceiptIssuerUntrusted, release.CodeReceiptSignature}

// checkIssuer: no receipt refused while an issuer rotated.
func (d *day2) checkIssuer(codes func(code string) (int, []string)) {
	if !d.issuerRotating {
		return
	}
	for _, c := range receiptRefusals {
		for _, code := range []string{c, "release." + c} {
			if n, ids := codes(code); n > 0 {
				d.w.violate("day-2: receipt-issuer rotation by the runbook: %d receipts refused with %s (releases %s)", n, code, strings.Join(ids, ", "))
			}
		}
	}
}
