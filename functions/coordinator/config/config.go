// Package config is the coordinator's configuration loader: it reads the
// variables of contract.CoordinatorEnv and checks every rule a cold start
// applies. The function (package main) and the CDK construct (infra/,
// which checks the settings a deployment gives before synthesizing) share
// this one implementation, so a value refused at cold start is refused at
// synth with the same message.
package config

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/internal/envvar"
	"github.com/localeflow/localeflow/signing"
	"github.com/localeflow/localeflow/topology"
)

// Environment variables read at cold start (contract.CoordinatorEnv).
// Every key comes either from a Secrets Manager secret (…_SECRET_ARN,
// deployed) or from hex in the environment (…_HEX, local use only);
// exactly one of the two.
const (
	envReleaseTable    = contract.EnvReleaseTable
	envReleaseQueueURL = contract.EnvReleaseQueueURL
	envEventBus        = contract.EnvEventBus
	envEvidenceBaseURL = contract.EnvEvidenceBaseURL
	envCMSBaseURL      = contract.EnvCMSBaseURL
	// envReceiptIssuersShared is the retired single issuer set for all
	// receipt kinds; it is refused (see loadIssuers).
	envReceiptIssuersShared = contract.EnvReceiptIssuersRetired
	envIssuersQuality       = contract.EnvReceiptIssuersQuality
	envIssuersHumanReview   = contract.EnvReceiptIssuersHumanReview
	envIssuersIndependent   = contract.EnvReceiptIssuersIndependentReview
	envRevision             = contract.EnvEvidenceRevision
	envWorkerID             = contract.EnvWorkerID
	envEvidenceLease        = contract.EnvEvidenceLease
	envEvidenceAttempts     = contract.EnvEvidenceMaxAttempts
	envEvidenceTimeout      = contract.EnvEvidenceTimeout
	envCMSTimeout           = contract.EnvCMSTimeout
	envApprovalTTL          = contract.EnvApprovalTTL
	envDeliveryAttempts     = contract.EnvDeliveryMaxAttempts
	envMargin               = contract.EnvDeadlineMargin
	envLogLevel             = contract.EnvLogLevel
	envQuarantineURL        = contract.EnvQuarantineQueueURL // optional: rejected inputs
	envTextRetention        = contract.EnvTextRetention      // texts kept after delivered/blocked
	envKeyTTL               = contract.EnvKeyTTL             // key sets re-read after (default 5m)
	envRecordRetention      = contract.EnvMonitorRetention   // content-free records kept after their last write (default 2160h)
	// Signed input events: the oldest v2 event accepted (v1 signatures:
	// envvar.Reader.RefuseV1).
	envEventMaxAge = contract.EnvEventMaxAge
)

// Key names (their labels in errors and logs) and their variable stems
// (contract.Key*): <stem>_SECRET_ARN / <stem>_HEX.
const (
	KeyEvent       = "EVENT"
	KeyCMS         = "CMS"
	KeyEvidence    = "EVIDENCE"
	KeyApproval    = "APPROVAL"
	KeyPublication = "PUBLICATION"
)

// KeyNames are the coordinator's keys in load order.
var KeyNames = []string{KeyEvent, KeyCMS, KeyEvidence, KeyApproval, KeyPublication}

var keyStems = map[string]string{
	KeyEvent: contract.KeyEvent, KeyCMS: contract.KeyCMS, KeyEvidence: contract.KeyEvidence,
	KeyApproval: contract.KeyApproval, KeyPublication: contract.KeyPublication,
}

// Function defaults; the policy's are release.DefaultConfig's.
const (
	DefaultRevision        = "rev-1"
	DefaultEvidenceLease   = release.DefaultEvidenceLease
	defaultEvidenceTimeout = 30 * time.Second
	defaultCMSTimeout      = 30 * time.Second
	defaultMargin          = 2 * time.Second
	minKeyBytes            = 16
)

// Config is the coordinator's configuration.
type Config struct {
	// Deployment is the metrics' Deployment dimension (LOCALEFLOW_DEPLOYMENT,
	// the resource prefix; default localeflow).
	Deployment      string
	ReleaseTable    string
	ReleaseQueueURL string
	EventBus        string
	EvidenceBaseURL string
	CMSBaseURL      string
	Keys            map[string]secretkey.Source
	Issuers         release.TrustedIssuers
	Release         release.Config
	EvidenceTimeout time.Duration
	CMSTimeout      time.Duration
	Margin          time.Duration
	// InsecureHTTP allows http:// evidence and CMS URLs
	// (LOCALEFLOW_ALLOW_INSECURE_HTTP=1, local runs only).
	InsecureHTTP bool
	// QuarantineURL is the queue of rejected inputs; empty only logs and
	// counts them (local runs without it).
	QuarantineURL string
	// TextRetention keeps source and result texts after the release is
	// delivered or blocked for good (0: the handler's 7-day default).
	TextRetention time.Duration
	// KeyTTL is how long a key set is used before its secret is read
	// again (0: secretkey.DefaultTTL).
	KeyTTL time.Duration
	// RecordRetention: a content-free release record that needs nothing
	// more expires this long after its last write (release.ExpiresAt;
	// the monitor records' setting, default release.DefaultRetention).
	RecordRetention time.Duration
	// Events are the signed input event settings (keys are added at build).
	Events release.EventSettings
	// LogLevel is nil for the default (INFO).
	LogLevel *slog.Level
}

// Load reads the environment through getenv (os.Getenv in main).
func Load(getenv func(string) string) (Config, error) {
	env := envvar.NewReader(getenv)
	c := Config{
		ReleaseTable: env.String(envReleaseTable), ReleaseQueueURL: env.String(envReleaseQueueURL), EventBus: env.String(envEventBus),
		EvidenceBaseURL: env.String(envEvidenceBaseURL), CMSBaseURL: env.String(envCMSBaseURL),
		Keys: map[string]secretkey.Source{}, EvidenceTimeout: defaultEvidenceTimeout, CMSTimeout: defaultCMSTimeout, Margin: defaultMargin,
	}
	for _, name := range KeyNames {
		c.Keys[name] = secretkey.FromEnv(getenv, KeyStem(name))
	}
	revision := env.String(envRevision)
	if revision == "" {
		revision = DefaultRevision
	}
	worker := env.String(envWorkerID)
	if worker == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return Config{}, fmt.Errorf("worker id: %w", err)
		}
		worker = "coordinator-" + hex.EncodeToString(b[:])
	}
	c.Release = release.DefaultConfig(revision, worker)
	env.Duration(envEvidenceLease, &c.Release.EvidenceLease)
	env.Duration(envEvidenceTimeout, &c.EvidenceTimeout)
	env.Duration(envCMSTimeout, &c.CMSTimeout)
	env.Duration(envApprovalTTL, &c.Release.ApprovalTTL)
	env.Duration(envMargin, &c.Margin)
	env.Int(envEvidenceAttempts, &c.Release.EvidenceMaxAttempts)
	env.Int(envDeliveryAttempts, &c.Release.DeliveryMaxAttempts)
	c.LogLevel = env.LogLevel()
	c.Deployment = env.Deployment(topology.DefaultPrefix)
	c.InsecureHTTP = env.InsecureHTTPAllowed()
	c.QuarantineURL = env.String(envQuarantineURL)
	env.Duration(envEventMaxAge, &c.Events.MaxAge)
	env.Duration(envTextRetention, &c.TextRetention)
	env.Duration(envKeyTTL, &c.KeyTTL)
	c.RecordRetention = release.DefaultRetention
	env.Duration(envRecordRetention, &c.RecordRetention)
	// v1 signatures carry no time: a replayed v1 input is accepted at any
	// age, so registration would stop being idempotent once its record
	// expired. They are refused unless LOCALEFLOW_EVENT_V1=accept (a
	// producer still signs v1; docs/design.md "Retention and the replay
	// window").
	c.Events.RefuseV1 = env.RefuseV1()
	errs := []error{env.Err()}
	c.Release.DeliveryLease = c.Release.EvidenceLease
	issuers, err := loadIssuers(env)
	if err != nil {
		errs = append(errs, err)
	}
	c.Issuers = issuers
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return c, c.validate()
}

// loadIssuers reads one trusted issuer set per receipt kind. The retired
// shared variable is refused even next to the per-kind ones: it gave the
// quality key the power to sign human-review receipts, and a deployment
// still setting it would believe a rule is in force that is not. A key
// may be trusted for one kind only.
func loadIssuers(env *envvar.Reader) (release.TrustedIssuers, error) {
	if env.String(envReceiptIssuersShared) != "" {
		return release.TrustedIssuers{}, fmt.Errorf("%s is no longer read (one issuer set for every receipt kind let the quality issuer sign human-review receipts): "+
			"split it into %s, %s and %s", envReceiptIssuersShared, envIssuersQuality, envIssuersHumanReview, envIssuersIndependent)
	}
	t := release.TrustedIssuers{Previous: map[string][]ed25519.PublicKey{}}
	var errs []error
	for _, kind := range []struct {
		name string
		set  *map[string]ed25519.PublicKey
	}{{envIssuersQuality, &t.Quality}, {envIssuersHumanReview, &t.HumanReview}, {envIssuersIndependent, &t.IndependentReview}} {
		set, prev, err := parseIssuers(kind.name, env.String(kind.name))
		if err != nil {
			errs = append(errs, err)
		}
		*kind.set = set
		for issuer, keys := range prev {
			if _, dup := t.Previous[issuer]; dup {
				errs = append(errs, fmt.Errorf("issuer %q rotates keys under two receipt kinds", issuer))
			}
			t.Previous[issuer] = keys
		}
	}
	if err := errors.Join(errs...); err != nil {
		return release.TrustedIssuers{}, err
	}
	if err := t.Validate(); err != nil {
		return release.TrustedIssuers{}, fmt.Errorf("%s, %s and %s must not share a key: %w", envIssuersQuality, envIssuersHumanReview, envIssuersIndependent, err)
	}
	return t, nil
}

// parseIssuers reads "issuer=hexkey,issuer2=hexkey2" (Ed25519 public keys)
// from the variable name. An issuer named again is rotating its key: its
// first entry is its key, the later ones (at most release.MaxIssuerKeys
// in all) are returned in prev and verify its receipts too
// (docs/security.md "Receipt issuer keys").
func parseIssuers(name, s string) (map[string]ed25519.PublicKey, map[string][]ed25519.PublicKey, error) {
	out, prev := map[string]ed25519.PublicKey{}, map[string][]ed25519.PublicKey{}
	if s == "" {
		return nil, nil, fmt.Errorf("%s is required (issuer=hex public key, comma separated)", name)
	}
	for _, part := range strings.Split(s, ",") {
		issuer, keyHex, ok := strings.Cut(strings.TrimSpace(part), "=")
		key, err := hex.DecodeString(keyHex)
		if !ok || !core.ValidToken(issuer) || err != nil || len(key) != ed25519.PublicKeySize {
			return nil, nil, fmt.Errorf("%s: entry %q is not issuer=<64 hex digits>", name, issuer)
		}
		first, seen := out[issuer]
		if !seen {
			out[issuer] = ed25519.PublicKey(key)
			continue
		}
		if first.Equal(ed25519.PublicKey(key)) || slices.ContainsFunc(prev[issuer], func(k ed25519.PublicKey) bool { return k.Equal(ed25519.PublicKey(key)) }) {
			return nil, nil, fmt.Errorf("%s: issuer %q repeats a key", name, issuer)
		}
		if len(prev[issuer])+2 > release.MaxIssuerKeys {
			return nil, nil, fmt.Errorf("%s: issuer %q has more than %d keys", name, issuer, release.MaxIssuerKeys)
		}
		prev[issuer] = append(prev[issuer], ed25519.PublicKey(key))
	}
	return out, prev, nil
}

func (c Config) validate() error {
	var errs []error
	for _, req := range []struct{ name, value string }{
		{envReleaseTable, c.ReleaseTable}, {envReleaseQueueURL, c.ReleaseQueueURL}, {envEventBus, c.EventBus},
		{envEvidenceBaseURL, c.EvidenceBaseURL}, {envCMSBaseURL, c.CMSBaseURL},
	} {
		if req.value == "" {
			errs = append(errs, fmt.Errorf("%s is required", req.name))
		}
	}
	if c.ReleaseQueueURL != "" && !strings.HasPrefix(c.ReleaseQueueURL, "https://") && !strings.HasPrefix(c.ReleaseQueueURL, "http://") {
		errs = append(errs, fmt.Errorf("%s must be a queue URL", envReleaseQueueURL))
	}
	for _, u := range [][2]string{{envEvidenceBaseURL, c.EvidenceBaseURL}, {envCMSBaseURL, c.CMSBaseURL}} {
		if err := envvar.CheckServiceURL(u[0], u[1], c.InsecureHTTP); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range KeyNames {
		if err := c.Keys[name].Validate(keyCheck(name)); err != nil {
			errs = append(errs, err)
		}
	}
	r := c.Release
	if r.EvidenceLease <= c.EvidenceTimeout || r.EvidenceLease <= c.CMSTimeout {
		errs = append(errs, fmt.Errorf("%s (%s) must outlast %s (%s) and %s (%s): %w", envEvidenceLease, r.EvidenceLease, envEvidenceTimeout, c.EvidenceTimeout, envCMSTimeout, c.CMSTimeout,
			core.Fail("coordinator.lease_too_short")))
	}
	if c.KeyTTL < 0 {
		errs = append(errs, fmt.Errorf("%s (%s) must not be negative", envKeyTTL, c.KeyTTL))
	}
	if c.RecordRetention < time.Hour {
		errs = append(errs, fmt.Errorf("%s (%s) must be at least 1h (a Go duration such as 2160h)", envRecordRetention, c.RecordRetention))
	}
	if c.TextRetention < 0 {
		errs = append(errs, fmt.Errorf("%s (%s) must not be negative", envTextRetention, c.TextRetention))
	}
	if c.Events.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("%s (%s) must not be negative", envEventMaxAge, c.Events.MaxAge))
	}
	if maxAge := signing.EffectiveEventMaxAge(c.Events.MaxAge); c.RecordRetention >= time.Hour && c.RecordRetention < maxAge {
		// A record deleted while an input can still arrive would let a
		// redelivered or replayed input register a finished change (or
		// release) again.
		errs = append(errs, fmt.Errorf("%s (%s) must be at least %s (%s): records must outlive every input that can still arrive",
			envRecordRetention, c.RecordRetention, envEventMaxAge, maxAge))
	}
	if c.EvidenceTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%s (%s) must be positive", envEvidenceTimeout, c.EvidenceTimeout))
	}
	if c.CMSTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%s (%s) must be positive", envCMSTimeout, c.CMSTimeout))
	}
	if c.Margin < 0 {
		errs = append(errs, fmt.Errorf("%s (%s) must not be negative", envMargin, c.Margin))
	}
	if err := validatePolicy(r); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validatePolicy applies the coordinator's own bounds (lease ≤ 3600 s,
// attempts 1..20, positive TTL) with the variable names in the message.
func validatePolicy(r release.Config) error {
	switch {
	case !core.ValidToken(r.EvidenceRevision):
		return fmt.Errorf("%s (%q) must be 1..256 characters of [A-Za-z0-9_.:-]", envRevision, r.EvidenceRevision)
	case !core.ValidTokenN(r.WorkerID, core.MaxWorkerIDLength):
		return fmt.Errorf("%s (%q) must be 1..%d characters of [A-Za-z0-9_.:-]", envWorkerID, r.WorkerID, core.MaxWorkerIDLength)
	case r.EvidenceLease <= 0 || r.EvidenceLease > release.MaxLease:
		return fmt.Errorf("%s (%s) must be more than 0 and at most %s", envEvidenceLease, r.EvidenceLease, release.MaxLease)
	case r.EvidenceMaxAttempts < 1 || r.EvidenceMaxAttempts > release.MaxAttempts:
		return fmt.Errorf("%s (%d) must be 1..%d", envEvidenceAttempts, r.EvidenceMaxAttempts, release.MaxAttempts)
	case r.DeliveryMaxAttempts < 1 || r.DeliveryMaxAttempts > release.MaxAttempts:
		return fmt.Errorf("%s (%d) must be 1..%d", envDeliveryAttempts, r.DeliveryMaxAttempts, release.MaxAttempts)
	case r.ApprovalTTL <= 0:
		return fmt.Errorf("%s (%s) must be positive", envApprovalTTL, r.ApprovalTTL)
	}
	return nil
}

// KeyStem is the variable stem of one key:
// LOCALEFLOW_<NAME>_KEY_SECRET_ARN / LOCALEFLOW_<NAME>_KEY_HEX.
func KeyStem(name string) string { return keyStems[name] }

// keyCheck is the key material rule of one key: Ed25519 keys are a 32-byte
// seed or a 64-byte private key, HMAC keys need at least 16 bytes.
func keyCheck(name string) secretkey.Check {
	switch name {
	case KeyApproval, KeyPublication:
		return secretkey.Ed25519
	default:
		return secretkey.MinBytes(minKeyBytes)
	}
}

// Key returns one key: from hex in the environment, or from its secret
// (SecretString = hex, SecretBinary = raw bytes).
func (c Config) Key(ctx context.Context, sm secretkey.SecretsManagerAPI, name string) ([]byte, error) {
	return c.Keys[name].Load(ctx, sm, strings.ToLower(name), keyCheck(name))
}

// KeyCache loads one key set "current,previous,…" and re-reads it every
// KeyTTL (secretkey.Cache).
func (c Config) KeyCache(ctx context.Context, sm secretkey.SecretsManagerAPI, name string) (*secretkey.Cache, error) {
	return secretkey.NewCache(ctx, c.Keys[name], sm, strings.ToLower(name), keyCheck(name), c.KeyTTL, nil)
}

// EventSettings are the event settings verifying with the event key set.
func (c Config) EventSettings(set *secretkey.Cache) release.EventSettings {
	e := c.Events
	e.KeySet = set
	return e
}
