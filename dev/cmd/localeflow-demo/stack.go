package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core/monitor"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/dev/reference"
	"github.com/localeflow/localeflow/dev/runner"
)

// keys is the demo's key material, fresh for every run.
type keys struct {
	CMS, Event, Evidence          []byte // HMAC
	ApprovalSeed, PublicationSeed []byte // Ed25519 seeds (localeflow's authorities)
	// Ed25519 seeds of the evidence provider's receipt issuers, one per
	// receipt kind: the coordinator trusts each for its own kind only, so
	// the legal-text change needs a receipt from the human-review issuer.
	IssuerSeed, HumanIssuerSeed, ReviewIssuerSeed []byte
}

func newKeys() (keys, error) {
	k := keys{}
	for _, p := range []*[]byte{&k.CMS, &k.Event, &k.Evidence, &k.ApprovalSeed, &k.PublicationSeed, &k.IssuerSeed, &k.HumanIssuerSeed, &k.ReviewIssuerSeed} {
		*p = make([]byte, 32)
		if _, err := rand.Read(*p); err != nil {
			return keys{}, fmt.Errorf("keys: %w", err)
		}
	}
	return k, nil
}

// servers are the reference CMS and evidence provider, in process.
type servers struct {
	CMS         *reference.CMS
	Evidence    *reference.Evidence
	CMSURL      string
	EvidenceURL string
	closers     []func()
}

// startServers starts both servers; hinter (nil: none) hears the CMS's
// status changes.
func startServers(k keys, cmsFaults, evFaults reference.Faults, hinter reference.Hinter) (*servers, error) {
	approval, err := release.NewApprovalAuthority(k.ApprovalSeed)
	if err != nil {
		return nil, err
	}
	publication, err := release.NewPublicationAuthority(k.PublicationSeed)
	if err != nil {
		return nil, err
	}
	s := &servers{}
	s.CMS, err = reference.NewCMS(reference.CMSConfig{Key: k.CMS, Publication: publication.PublicKey(), Approval: approval.PublicKey(),
		Faults: cmsFaults, Hinter: hinter})
	if err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.CMS.Close)
	cs, err := reference.Serve("127.0.0.1:0", s.CMS)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.closers = append(s.closers, func() { _ = cs.Close() })
	s.CMSURL = cs.URL
	s.Evidence, err = reference.NewEvidence(reference.EvidenceConfig{
		Key: k.Evidence, Issuer: "evidence-local", IssuerSeed: k.IssuerSeed,
		HumanIssuer: "human-review-local", HumanIssuerSeed: k.HumanIssuerSeed,
		ReviewIssuer: "independent-review-local", ReviewIssuerSeed: k.ReviewIssuerSeed, Faults: evFaults,
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.closers = append(s.closers, s.Evidence.Close)
	es, err := reference.Serve("127.0.0.1:0", s.Evidence)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.closers = append(s.closers, func() { _ = es.Close() })
	s.EvidenceURL = es.URL
	return s, nil
}

// Close stops both servers.
func (s *servers) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// function is one real bootstrap binary running under aws-lambda-rie.
type function struct {
	Name    string
	Proc    *runner.Process
	LogPath string
	logFile *os.File
}

// functionEnv returns each function's environment (LOCALEFLOW_*, local
// keys as hex; the AWS endpoints are inherited from the stack).
func functionEnv(names resourceNames, k keys, s *servers, issuers reference.ReceiptIssuers) map[string][]string {
	hx := hex.EncodeToString
	env := map[string][]string{
		"poller": {
			contract.EnvMonitorTable + "=" + names.MonitorTable, contract.EnvPollQueueURL + "=" + names.PollQueueURL,
			contract.EnvQuarantineQueueURL + "=" + names.QuarantineQueueURL,
			contract.EnvEventBus + "=" + names.Bus, contract.EnvCMSBaseURL + "=" + s.CMSURL, contract.Hex(contract.KeyCMS) + "=" + hx(k.CMS),
			contract.Hex(contract.KeyEvent) + "=" + hx(k.Event),
			contract.EnvCMSTimeout + "=5s", contract.EnvMonitorLease + "=30s",
			// The demo's fake CMS and evidence provider listen on plain http.
			contract.EnvAllowInsecureHTTP + "=1",
			// Accelerated for the demo (defaults: 5 s..300 s backoff); the
			// poll interval, hint gap and sweep grace come from pollerTiming.
			contract.EnvRetryBaseDelay + "=1s", contract.EnvRetryMaxDelay + "=4s",
		},
		"coordinator": {
			contract.EnvReleaseTable + "=" + names.ReleaseTable, contract.EnvReleaseQueueURL + "=" + names.ReleaseQueueURL,
			contract.EnvQuarantineQueueURL + "=" + names.QuarantineQueueURL,
			contract.EnvEventBus + "=" + names.Bus, contract.EnvEvidenceBaseURL + "=" + s.EvidenceURL, contract.EnvCMSBaseURL + "=" + s.CMSURL,
			contract.Hex(contract.KeyEvent) + "=" + hx(k.Event), contract.Hex(contract.KeyCMS) + "=" + hx(k.CMS), contract.Hex(contract.KeyEvidence) + "=" + hx(k.Evidence),
			contract.Hex(contract.KeyApproval) + "=" + hx(k.ApprovalSeed), contract.Hex(contract.KeyPublication) + "=" + hx(k.PublicationSeed),
			contract.EnvEvidenceTimeout + "=5s", contract.EnvCMSTimeout + "=5s", contract.EnvEvidenceLease + "=30s",
			contract.EnvAllowInsecureHTTP + "=1",
		},
		"health": {
			contract.EnvMonitorTable + "=" + names.MonitorTable, contract.EnvReleaseTable + "=" + names.ReleaseTable,
			contract.EnvEventBus + "=" + names.Bus,
		},
	}
	// One trusted issuer set per receipt kind.
	env["coordinator"] = append(env["coordinator"], issuers.Env()...)
	return env
}

// pollerTiming is the poller's interval, hint gap and sweep grace: the
// AWS values (interval as given, gap the default 5 s, grace the default
// 30 s) divided by speedup, as the sweep's schedule is.
func pollerTiming(interval time.Duration, speedup float64) []string {
	return []string{
		contract.EnvPollInterval + "=" + scaled(interval, speedup).String(),
		contract.EnvHintMinGap + "=" + scaled(monitor.DefaultHintMinGap, speedup).String(),
		contract.EnvSweepGrace + "=" + scaled(monitor.DefaultSweepGrace, speedup).String(),
	}
}

// scaled is d divided by speedup, in whole milliseconds.
func scaled(d time.Duration, speedup float64) time.Duration {
	return time.Duration(float64(d) / speedup).Round(time.Millisecond)
}

// resourceNames are what the functions need from the created resources.
type resourceNames struct {
	MonitorTable, ReleaseTable, Bus, PollQueueURL, ReleaseQueueURL, QuarantineQueueURL string
}

// startFunction starts build/local/<name>/bootstrap under rie; a missing
// binary is reported as errNotBuilt.
func startFunction(ctx context.Context, rie, binDir, logDir, name string, env []string, timeout time.Duration) (*function, error) {
	bin := filepath.Join(binDir, name, "bootstrap")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: %w", bin, errNotBuilt)
	}
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("function log: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := runner.StartRIE(sctx, runner.RIEConfig{RIE: rie, Bootstrap: bin, Env: env, Timeout: timeout, Output: f})
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &function{Name: name, Proc: p, LogPath: logPath, logFile: f}, nil
}

var errNotBuilt = errors.New("not built")

// Stop stops rie and closes the log.
func (f *function) Stop() {
	f.Proc.Stop()
	_ = f.logFile.Close()
}
