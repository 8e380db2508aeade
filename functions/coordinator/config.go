package main

import (
	"github.com/localeflow/localeflow/contract"
	fnconfig "github.com/localeflow/localeflow/functions/coordinator/config"
)

// config is the coordinator's configuration; package config loads and
// checks it (shared with infra/, which checks a deployment's settings at
// synth).
type config = fnconfig.Config

// loadConfig reads the environment through getenv (os.Getenv in main).
func loadConfig(getenv func(string) string) (config, error) { return fnconfig.Load(getenv) }

// The keys (their labels in errors and logs), in load order.
const (
	keyEvent       = fnconfig.KeyEvent
	keyCMS         = fnconfig.KeyCMS
	keyEvidence    = fnconfig.KeyEvidence
	keyApproval    = fnconfig.KeyApproval
	keyPublication = fnconfig.KeyPublication
)

var keyNames = fnconfig.KeyNames

// keyStem is the variable stem of one key (fnconfig.KeyStem).
func keyStem(name string) string { return fnconfig.KeyStem(name) }

// Defaults the tests check.
const (
	defaultRevision      = fnconfig.DefaultRevision
	defaultEvidenceLease = fnconfig.DefaultEvidenceLease
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
	// Signed input events: the oldest v2 event accepted, and whether v1
	// signatures are accepted (accept|refuse, default refuse).
	envEventMaxAge = contract.EnvEventMaxAge
	envEventV1     = contract.EnvEventV1
)
