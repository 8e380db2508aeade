// Command coordinator is the release coordinator's Lambda function: it
// stores signed plans and job results from the release queue, obtains
// quality evidence, approves locales with signed approvals, and prepares
// and sends the signed delivery once every locale is approved. See package
// handler for the behaviour.
//
// Environment (read once at cold start):
//
//	LOCALEFLOW_RELEASE_TABLE            release table name (required)
//	LOCALEFLOW_RELEASE_QUEUE_URL        release queue URL, for delayed steps (required)
//	LOCALEFLOW_EVENT_BUS                bus for the output events (required)
//	LOCALEFLOW_EVIDENCE_BASE_URL        evidence provider base URL (required)
//	LOCALEFLOW_CMS_BASE_URL             CMS base URL, delivery API (required)
//	LOCALEFLOW_RECEIPT_ISSUERS_QUALITY  issuer=<Ed25519 public key hex>,... trusted for
//	                                    quality receipts (required)
//	LOCALEFLOW_RECEIPT_ISSUERS_HUMAN_REVIEW
//	                                    the same for human-review receipts (required)
//	LOCALEFLOW_RECEIPT_ISSUERS_INDEPENDENT_REVIEW
//	                                    the same for independent-model-review receipts
//	                                    (required); a key may appear under one kind only.
//	                                    The retired shared LOCALEFLOW_RECEIPT_ISSUERS is
//	                                    refused at cold start.
//	LOCALEFLOW_<K>_KEY_SECRET_ARN       K ∈ EVENT, CMS, EVIDENCE, APPROVAL, PUBLICATION:
//	                                    secret with the key set "current,previous,…" as hex
//	                                    (SecretString) or one raw key (SecretBinary); HMAC
//	                                    keys ≥ 16 bytes, Ed25519 keys a 32-byte seed or
//	                                    64-byte private key (the first signs, all verify)
//	LOCALEFLOW_<K>_KEY_HEX              the same key as hex, for local use only
//	                                    (exactly one of the two per key)
//	LOCALEFLOW_EVIDENCE_REVISION        evidence revision token (default rev-1)
//	LOCALEFLOW_WORKER_ID                lease owner (default coordinator-<random>)
//	LOCALEFLOW_EVIDENCE_LEASE           evidence and delivery lease (default 90s, ≤ 1h;
//	                                    must outlast both client timeouts and fit the
//	                                    function timeout: the operation guard refuses work
//	                                    with less time left)
//	LOCALEFLOW_EVIDENCE_MAX_ATTEMPTS    1..20 (default 5)
//	LOCALEFLOW_DELIVERY_MAX_ATTEMPTS    1..20 (default 5)
//	LOCALEFLOW_APPROVAL_TTL             approval lifetime (default 720h)
//	LOCALEFLOW_EVIDENCE_TIMEOUT         evidence HTTP timeout (default 30s)
//	LOCALEFLOW_CMS_TIMEOUT              CMS delivery HTTP timeout (default 30s)
//	LOCALEFLOW_DEADLINE_MARGIN          time kept free at the end of an invocation (default 2s)
//	LOCALEFLOW_QUARANTINE_QUEUE_URL     queue of rejected inputs (optional; the stack sets it)
//	LOCALEFLOW_KEY_TTL                  HMAC key sets re-read after (default 5m)
//	LOCALEFLOW_TEXT_RETENTION           texts kept after the release ends (default 168h)
//	LOCALEFLOW_MONITOR_RETENTION        content-free records kept after their last write once they need nothing more (default 2160h)
//	LOCALEFLOW_EVENT_MAX_AGE            oldest v2 signed input event accepted (default 720h, ≤ retention)
//	LOCALEFLOW_EVENT_V1                 accept or refuse v1 event signatures (default refuse)
//	LOCALEFLOW_ALLOW_INSECURE_HTTP      1 allows http:// service URLs (local runs only)
//	LOCALEFLOW_LOG_LEVEL                DEBUG, INFO (default), WARN, ERROR
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/localeflow/localeflow/adapters/awsclient"
	"github.com/localeflow/localeflow/adapters/cmsdelivery"
	"github.com/localeflow/localeflow/adapters/delayqueue"
	"github.com/localeflow/localeflow/adapters/eventbus"
	"github.com/localeflow/localeflow/adapters/evidence"
	"github.com/localeflow/localeflow/adapters/quarantine"
	"github.com/localeflow/localeflow/adapters/releasedb"
	"github.com/localeflow/localeflow/adapters/secretkey"
	"github.com/localeflow/localeflow/contract"
	"github.com/localeflow/localeflow/core"
	"github.com/localeflow/localeflow/core/release"
	"github.com/localeflow/localeflow/functions/coordinator/handler"
	"github.com/localeflow/localeflow/internal/emf"
	"github.com/localeflow/localeflow/internal/lambdalog"
	"github.com/localeflow/localeflow/internal/remotecall"
	"github.com/localeflow/localeflow/topology"
)

func main() {
	log := lambdalog.New(os.Stdout, slog.LevelInfo)
	h, err := build(context.Background(), os.Getenv, log)
	if err != nil {
		log.Error("coordinator cold start failed", "code", "coordinator.config_invalid", "error", err.Error())
		os.Exit(1)
	}
	// One document per invocation with its remote calls' latencies
	// (internal/remotecall).
	lambda.Start(remotecall.Wrap(h.Handle, os.Stdout, os.Getenv(contract.EnvDeployment)))
}

// secretsManager is the Secrets Manager client of the key secrets (the
// rotation runbook tests give a stand-in: the local stack has no Secrets
// Manager).
var secretsManager = func(cfg aws.Config) secretkey.SecretsManagerAPI { return secretsmanager.NewFromConfig(cfg) }

// build reads the configuration and wires the handler once per cold start.
func build(ctx context.Context, getenv func(string) string, log *slog.Logger) (*handler.Handler, error) {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return nil, err
	}
	if cfg.LogLevel != nil {
		log = lambdalog.New(os.Stdout, *cfg.LogLevel)
		// Metric lines carry the same level: Lambda's filter keeps them.
		emf.SetLevel(*cfg.LogLevel)
	}
	awsCfg, err := awsclient.FromEnv()
	if err != nil {
		return nil, err
	}
	// Each call is appended to LOCALEFLOW_AWS_CALL_LOG when the tests set it
	// (the IAM sufficiency check); nothing otherwise.
	awsCfg = awsclient.Record(awsCfg, "coordinator")
	var sm secretkey.SecretsManagerAPI
	for _, name := range keyNames {
		if cfg.Keys[name].SecretARN != "" {
			sm = secretsManager(awsCfg)
			break
		}
	}
	// Each key is a set "current,previous,…": the current key signs, every
	// key of the set verifies (a rotation in progress). The HMAC sets are
	// re-read every LOCALEFLOW_KEY_TTL, so a rotated secret needs no cold
	// start, and a failed re-read is loud (ERROR log, KeyReloadFailures,
	// alarm <prefix>-coordinator-key-reload-failed); the Ed25519 seed sets
	// are read once (docs/security.md "Key rotation runbooks").
	keys, all, sets := map[string][]byte{}, map[string][][]byte{}, map[string]*secretkey.Cache{}
	for _, name := range keyNames {
		cache, err := cfg.KeyCache(ctx, sm, name)
		if err != nil {
			return nil, err
		}
		cache.Alarm(log, os.Stdout, cfg.Deployment, "coordinator")
		set, _ := cache.Keys(ctx)
		keys[name], all[name], sets[name] = set[0], set, cache
	}
	evidenceClient, err := evidence.New(evidence.Config{BaseURL: cfg.EvidenceBaseURL, Key: keys[keyEvidence],
		KeySet: sets[keyEvidence], Timeout: cfg.EvidenceTimeout})
	if err != nil {
		return nil, fmt.Errorf("evidence client: %w", err)
	}
	cmsClient, err := cmsdelivery.New(cmsdelivery.Config{BaseURL: cfg.CMSBaseURL, Key: keys[keyCMS],
		KeySet: sets[keyCMS], Timeout: cfg.CMSTimeout})
	if err != nil {
		return nil, fmt.Errorf("cms delivery client: %w", err)
	}
	approval, err := release.NewApprovalAuthority(keys[keyApproval], all[keyApproval][1:]...)
	if err != nil {
		return nil, fmt.Errorf("approval key: %w", err)
	}
	publication, err := release.NewPublicationAuthority(keys[keyPublication], all[keyPublication][1:]...)
	if err != nil {
		return nil, fmt.Errorf("publication key: %w", err)
	}
	// The public halves go where an operator may read them (`localeflow
	// keys`), for the sets read from Secrets Manager (a deployment).
	published := map[string]*release.Authority{}
	for _, k := range []struct {
		name, stem string
		a          *release.Authority
	}{{keyApproval, contract.KeyApproval, approval}, {keyPublication, contract.KeyPublication, publication}} {
		if cfg.Keys[k.name].SecretARN != "" {
			published[k.stem] = k.a
		}
	}
	if pub, ok := sm.(PublicKeySecretsAPI); ok && len(published) > 0 {
		publishPublicKeys(ctx, pub, cfg.Deployment, published, log)
	}
	clock := core.SystemClock{}
	store := releasedb.New(awsclient.DynamoDB(awsCfg), cfg.ReleaseTable).WithRetention(cfg.RecordRetention)
	coord, err := release.NewCoordinator(release.Dependencies{
		Store:    store,
		EventKey: keys[keyEvent],
		Evidence: evidenceClient,
		CMS:      cmsClient,
		// Each receipt kind trusts only its own issuers.
		Verifiers: cfg.Issuers.Verifiers(),
		Approval:  approval, Publication: publication,
		Events: cfg.EventSettings(sets[keyEvent]),
	}, clock, log, cfg.Release)
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	return handler.New(handler.Config{
		Coordinator: coord,
		Queue:       delayqueue.New(awsclient.SQS(awsCfg), cfg.ReleaseQueueURL),
		Bus:         eventbus.New(awsclient.EventBridge(awsCfg), cfg.EventBus).WithDeployment(cfg.Deployment),
		Due:         store,
		Clock:       clock,
		Log:         log,
		Margin:      cfg.Margin,
		Rejecter: &quarantine.Rejecter{
			SQS: awsclient.SQS(awsCfg), QueueURL: cfg.QuarantineURL, Source: topology.New(topology.DefaultPrefix).RelQueue.Logical,
			Function: "coordinator", Deployment: cfg.Deployment, Metrics: os.Stdout, Clock: clock,
		},
		Texts:         releasedb.TextExpirer{DB: awsclient.DynamoDB(awsCfg), Table: cfg.ReleaseTable},
		TextRetention: cfg.TextRetention,
		LongestWait:   max(handler.DefaultLongestWait, release.MaxRetryAfter, cfg.Release.EvidenceLease, cfg.Release.DeliveryLease),
		Metrics:       emf.NewWriter(os.Stdout, cfg.Deployment, clock.Now),
	})
}
