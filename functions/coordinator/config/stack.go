package config

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/topology"
)

// StackResources are what the stack (infra/localeflow) gives the
// coordinator besides the operator's settings and the key secrets: the
// names of its resources, the service URLs and the stack's own retention
// values. infra passes CDK tokens; DeployedRelease passes placeholders.
type StackResources struct {
	Deployment, EventBus, ReleaseTable, ReleaseQueueURL, QuarantineQueueURL string
	CMSBaseURL, EvidenceBaseURL                                             string
	TextRetention, RecordRetention                                          time.Duration
	// The trusted receipt issuers by kind; all empty when the stack is
	// synthesized without them.
	QualityIssuers, HumanReviewIssuers, IndependentReviewIssuers string
}

// StackEnv is the coordinator's environment as the stack deploys it,
// before the operator's settings and the key secrets: infra/localeflow
// builds the function's environment with it, and DeployedRelease loads
// it, so the configuration the simulation and the benchmarks run can be
// checked against the deployed one.
func StackEnv(r StackResources) map[string]string {
	env := map[string]string{
		contract.EnvEventBus: r.EventBus, contract.EnvDeployment: r.Deployment,
		contract.EnvReleaseTable: r.ReleaseTable, contract.EnvReleaseQueueURL: r.ReleaseQueueURL,
		contract.EnvQuarantineQueueURL: r.QuarantineQueueURL,
		contract.EnvCMSBaseURL:         r.CMSBaseURL, contract.EnvEvidenceBaseURL: r.EvidenceBaseURL,
		contract.EnvTextRetention: r.TextRetention.String(),
		// Content-free release records expire like monitor records.
		contract.EnvMonitorRetention: r.RecordRetention.String(),
	}
	if r.QualityIssuers != "" {
		env[contract.EnvReceiptIssuersQuality] = r.QualityIssuers
		env[contract.EnvReceiptIssuersHumanReview] = r.HumanReviewIssuers
		env[contract.EnvReceiptIssuersIndependentReview] = r.IndependentReviewIssuers
	}
	return env
}

// DeployedRelease is the release.Config Load makes of the environment a
// stack with the default props gives the coordinator (StackEnv with
// placeholder resources, key secrets and issuers) plus settings (the
// operator's variables, as Settings would deploy them), with workerID as
// LOCALEFLOW_WORKER_ID. The simulation, the soak, the fault suite and the
// cost benchmarks build their coordinators with it.
func DeployedRelease(workerID string, settings map[string]string) (release.Config, error) {
	placeholderQueue := func(name string) string { return "https://sqs.us-east-1.amazonaws.com/000000000000/" + name }
	topo := topology.New(topology.DefaultPrefix)
	env := StackEnv(StackResources{
		Deployment: topo.Prefix, EventBus: topo.BusName, ReleaseTable: topo.Release.Name,
		ReleaseQueueURL: placeholderQueue(topo.RelQueue.Name), QuarantineQueueURL: placeholderQueue(topo.Quarantine.Name),
		CMSBaseURL: "https://cms.example.com", EvidenceBaseURL: "https://evidence.example.com",
		TextRetention: release.DefaultTextRetention, RecordRetention: release.DefaultRetention,
		QualityIssuers: placeholderIssuer(1), HumanReviewIssuers: placeholderIssuer(2), IndependentReviewIssuers: placeholderIssuer(3),
	})
	for _, name := range KeyNames {
		env[KeyStem(name)+"_SECRET_ARN"] = "arn:aws:secretsmanager:us-east-1:000000000000:secret:" + topo.Prefix + "/" + name
	}
	for name, value := range settings {
		env[name] = value
	}
	env[contract.EnvWorkerID] = workerID
	c, err := Load(func(name string) string { return env[name] })
	if err != nil {
		return release.Config{}, fmt.Errorf("deployed coordinator configuration: %w", err)
	}
	return c.Release, nil
}

// placeholderIssuer is a well-formed issuer list with a key derived from n.
func placeholderIssuer(n byte) string {
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = n
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	return fmt.Sprintf("placeholder%d=%s", n, hex.EncodeToString(pub))
}
