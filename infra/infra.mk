# Make targets of the CDK app (included by the top-level Makefile, which
# provides `build`: build/<fn>/bootstrap for every function).
#
# The infra module is separate (infra/go.mod) and the pinned npm CLI lives in
# infra/cli (npm ci, lockfile), out of reach of `go vet ./...`.
#
# Deployment settings (see infra/README.md), passed as CDK context:
#   LOCALEFLOW_PREFIX      resource name prefix (default localeflow)
#   STACK_NAME             CloudFormation stack name (default: follows the prefix, Localeflow for the default
#                          prefix, Localeflow-<prefix> otherwise; Localeflow[-<other prefix>] is refused)
#   CMS_BASE_URL           CMS base URL (required by deploy)
#   EVIDENCE_BASE_URL      evidence provider base URL (required by deploy)
#   RECEIPT_ISSUERS_QUALITY            quality receipt issuers, issuer=<hex Ed25519 public key>,... (required by deploy)
#   RECEIPT_ISSUERS_HUMAN_REVIEW       human-review receipt issuers, same form (required by deploy)
#   RECEIPT_ISSUERS_INDEPENDENT_REVIEW independent-model-review receipt issuers, same form (required by deploy)
#                          A key may be trusted for one kind only. The retired RECEIPT_ISSUERS is refused.
#   DELETION_PROTECTION    true|false (default true; deploy-local uses false)
#   CUSTOMER_MANAGED_KEY   true|false (default true): one customer-managed KMS key (rotation on) for the
#                          release table, release queue + DLQ, quarantine queue and key secrets
#   ALARM_TOPIC_ARN        existing SNS topic for the alarms (optional; else the stack creates <prefix>-alarms)
#   ALARM_EMAIL            e-mail address subscribed to the created page and ticket topics (optional)
#   TICKET_TOPIC_ARN       existing SNS topic for the ticket-severity alarms (optional; else <prefix>-tickets,
#                          or ALARM_TOPIC_ARN's topic when that is given)
#   OK_NOTIFICATIONS       true|false (default false): alarms also notify when they return to OK
#   PAGE_ON_BUSINESS_OUTCOMES true|false (default false): the CMS failing a change pages instead of a ticket
#   RUNBOOK_URL            https:// URL of the team's copy of docs/runbook.md (alarm descriptions link to it)
#   MAX_CONSECUTIVE_FAILURES  poller failure budget, 1..20 (default 5)
#   RETRY_MAX_DELAY        poller backoff cap, Go duration (default 300s)
#   SWEEP_GRACE            poller sweep grace, Go duration, whole ms in (0, 900s] (default 30s): how long a due change
#                          is left to its queued message before the sweep polls it (docs/design.md "The sweep's grace period")
#   SETTINGS               function settings, VAR=value separated by spaces
#                          (e.g. "LOCALEFLOW_POLL_INTERVAL=60s LOCALEFLOW_LOG_LEVEL=WARN"); README.md, "Configuration".
#                          Each is applied to the functions that read it or refused at synth: a typo names the
#                          closest variable, a stack-owned one the setting that sets it; MAX_CONSECUTIVE_FAILURES,
#                          RETRY_MAX_DELAY, SWEEP_GRACE, TEXT_RETENTION and MONITOR_RETENTION (LOCALEFLOW_*) are
#                          applied as their typed setting (the same value twice is fine, two values are refused)
#   FUNCTION_OPTIONS       per-function sizing and settings, JSON as the functions context takes it, quoted once for
#                          the shell: FUNCTION_OPTIONS='{"poller":{"memoryMB":512,"timeoutSeconds":60}}' (no single quote inside)
#   CDK_FLAGS              extra flags for cdk (e.g. --require-approval never)
#   ASSET_DIR              directory with <fn>/bootstrap (default build/, from make build)

INFRA_CLI_DIR := infra/cli
INFRA_CDK := $(CURDIR)/$(INFRA_CLI_DIR)/node_modules/.bin/cdk
INFRA_CDKLOCAL := $(CURDIR)/$(INFRA_CLI_DIR)/node_modules/.bin/cdklocal
INFRA_CLI_STAMP := $(INFRA_CLI_DIR)/node_modules/.localeflow-installed

# jsii warns on every run under Node 20 (still supported by this CDK).
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

LOCALEFLOW_PREFIX ?=
STACK_NAME ?=
CMS_BASE_URL ?=
EVIDENCE_BASE_URL ?=
RECEIPT_ISSUERS ?=
RECEIPT_ISSUERS_QUALITY ?=
RECEIPT_ISSUERS_HUMAN_REVIEW ?=
RECEIPT_ISSUERS_INDEPENDENT_REVIEW ?=
DELETION_PROTECTION ?= true
CUSTOMER_MANAGED_KEY ?=
ALARM_TOPIC_ARN ?=
ALARM_EMAIL ?=
TICKET_TOPIC_ARN ?=
OK_NOTIFICATIONS ?=
PAGE_ON_BUSINESS_OUTCOMES ?=
RUNBOOK_URL ?=
MAX_CONSECUTIVE_FAILURES ?=
RETRY_MAX_DELAY ?=
SWEEP_GRACE ?=
SETTINGS ?=
FUNCTION_OPTIONS ?=
CDK_FLAGS ?=
ASSET_DIR ?= $(CURDIR)/build

INFRA_CONTEXT = -c assetDir=$(ASSET_DIR) \
	$(if $(STACK_NAME),-c stackName=$(STACK_NAME)) \
	$(if $(LOCALEFLOW_PREFIX),-c prefix=$(LOCALEFLOW_PREFIX)) \
	$(if $(CMS_BASE_URL),-c cmsBaseUrl=$(CMS_BASE_URL)) \
	$(if $(EVIDENCE_BASE_URL),-c evidenceBaseUrl=$(EVIDENCE_BASE_URL)) \
	$(if $(RECEIPT_ISSUERS_QUALITY),-c receiptIssuersQuality=$(RECEIPT_ISSUERS_QUALITY)) \
	$(if $(RECEIPT_ISSUERS_HUMAN_REVIEW),-c receiptIssuersHumanReview=$(RECEIPT_ISSUERS_HUMAN_REVIEW)) \
	$(if $(RECEIPT_ISSUERS_INDEPENDENT_REVIEW),-c receiptIssuersIndependentReview=$(RECEIPT_ISSUERS_INDEPENDENT_REVIEW)) \
	$(if $(ALARM_TOPIC_ARN),-c alarmTopicArn=$(ALARM_TOPIC_ARN)) \
	$(if $(ALARM_EMAIL),-c alarmEmail=$(ALARM_EMAIL)) \
	$(if $(TICKET_TOPIC_ARN),-c ticketTopicArn=$(TICKET_TOPIC_ARN)) \
	$(if $(OK_NOTIFICATIONS),-c okNotifications=$(OK_NOTIFICATIONS)) \
	$(if $(PAGE_ON_BUSINESS_OUTCOMES),-c pageOnBusinessOutcomes=$(PAGE_ON_BUSINESS_OUTCOMES)) \
	$(if $(RUNBOOK_URL),-c runbookUrl=$(RUNBOOK_URL)) \
	$(if $(MAX_CONSECUTIVE_FAILURES),-c maxConsecutiveFailures=$(MAX_CONSECUTIVE_FAILURES)) \
	$(if $(RETRY_MAX_DELAY),-c retryMaxDelay=$(RETRY_MAX_DELAY)) \
	$(if $(CUSTOMER_MANAGED_KEY),-c customerManagedKey=$(CUSTOMER_MANAGED_KEY)) \
	$(if $(SWEEP_GRACE),-c sweepGrace=$(SWEEP_GRACE)) \
	$(if $(FUNCTION_OPTIONS),-c 'functions=$(FUNCTION_OPTIONS)') \
	$(foreach s,$(SETTINGS),-c $(s))

.PHONY: cdk-cli synth deploy deploy-local test-infra lint-infra infra-deploy-settings deploy-next-steps

$(INFRA_CLI_STAMP): $(INFRA_CLI_DIR)/package.json $(INFRA_CLI_DIR)/package-lock.json
	cd $(INFRA_CLI_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

cdk-cli: $(INFRA_CLI_STAMP) ## Install the pinned CDK CLI (aws-cdk, aws-cdk-local) into infra/cli with npm ci

synth: build $(INFRA_CLI_STAMP) ## Synthesize the CloudFormation template offline into infra/cdk.out (runs cdk-nag)
	cd infra && $(INFRA_CDK) synth --quiet $(INFRA_CONTEXT) -c deletionProtection=$(DELETION_PROTECTION) $(CDK_FLAGS)
	@echo "template: infra/cdk.out/$(DEPLOY_STACK).template.json"
	@cat infra/cdk.out/outage-tolerance.txt
	@cat infra/cdk.out/alarms.txt
	@cat infra/cdk.out/encryption.txt

infra-deploy-settings:
	@test -n "$(CMS_BASE_URL)" || { echo "deploy: set CMS_BASE_URL=https://..." >&2; exit 2; }
	@test -n "$(EVIDENCE_BASE_URL)" || { echo "deploy: set EVIDENCE_BASE_URL=https://..." >&2; exit 2; }
	@test -z "$(RECEIPT_ISSUERS)" || { echo "deploy: RECEIPT_ISSUERS is retired (one issuer set let the quality issuer sign human-review receipts); set RECEIPT_ISSUERS_QUALITY, RECEIPT_ISSUERS_HUMAN_REVIEW and RECEIPT_ISSUERS_INDEPENDENT_REVIEW" >&2; exit 2; }
	@test -n "$(RECEIPT_ISSUERS_QUALITY)" || { echo "deploy: set RECEIPT_ISSUERS_QUALITY=issuer=<64 hex>,..." >&2; exit 2; }
	@test -n "$(RECEIPT_ISSUERS_HUMAN_REVIEW)" || { echo "deploy: set RECEIPT_ISSUERS_HUMAN_REVIEW=issuer=<64 hex>,..." >&2; exit 2; }
	@test -n "$(RECEIPT_ISSUERS_INDEPENDENT_REVIEW)" || { echo "deploy: set RECEIPT_ISSUERS_INDEPENDENT_REVIEW=issuer=<64 hex>,..." >&2; exit 2; }

deploy: infra-deploy-settings build $(INFRA_CLI_STAMP) ## Deploy to AWS with cdk deploy (needs AWS credentials, CMS_BASE_URL, EVIDENCE_BASE_URL, RECEIPT_ISSUERS_{QUALITY,HUMAN_REVIEW,INDEPENDENT_REVIEW})
	cd infra && $(INFRA_CDK) deploy $(INFRA_CONTEXT) -c deletionProtection=$(DELETION_PROTECTION) $(CDK_FLAGS)
	@$(MAKE) --no-print-directory deploy-next-steps

# deploy-next-steps is what `make deploy` prints at its end (infra/README.md,
# "First change published: checklist").
DEPLOY_PREFIX = $(or $(LOCALEFLOW_PREFIX),localeflow)
# DEPLOY_STACK is the stack name the app derives (infra/main.go, appStackName).
DEPLOY_STACK = $(or $(STACK_NAME),$(if $(filter localeflow,$(DEPLOY_PREFIX)),Localeflow,Localeflow-$(DEPLOY_PREFIX)))
deploy-next-steps:
	@echo ""
	@echo "Deployed $(DEPLOY_STACK) (prefix $(DEPLOY_PREFIX)). Next steps (infra/README.md, \"First change published: checklist\"):"
	@echo "  1. make build-local && build/local/localeflow keys --prefix $(DEPLOY_PREFIX)"
	@echo "     (the public keys appear once the coordinator has cold-started: its release sweep runs within 5 minutes)"
	@echo "     hand the CMS its HMAC key (by secret reference) and the approval and publication public keys,"
	@echo "     the event producer and the evidence provider their HMAC keys; every change fails until the CMS has its key"
	@echo "  2. grant the producer PutEvents of the input detail-types only (localeflow.GrantPublishInputs; infra/README.md, IAM)"
	@echo "  3. subscribe on-call to the alarm topic ($(if $(ALARM_TOPIC_ARN),$(ALARM_TOPIC_ARN),$(DEPLOY_PREFIX)-alarms)) and check health:"
	@echo "     build/local/localeflow health --prefix $(DEPLOY_PREFIX)"
	@echo "  4. publish one change.dispatched and follow it: build/local/localeflow status EVENT_ID --prefix $(DEPLOY_PREFIX)"

deploy-local: build $(INFRA_CLI_STAMP) ## Deploy to a running LocalStack with cdklocal (bootstrap + deploy, deletion protection off)
	cd infra && AWS_ENVAR_ALLOWLIST=AWS_REGION,AWS_DEFAULT_REGION AWS_REGION=$${AWS_REGION:-us-east-1} \
		$(INFRA_CDKLOCAL) bootstrap $(INFRA_CONTEXT) -c deletionProtection=false
	cd infra && AWS_ENVAR_ALLOWLIST=AWS_REGION,AWS_DEFAULT_REGION AWS_REGION=$${AWS_REGION:-us-east-1} \
		$(INFRA_CDKLOCAL) deploy --require-approval never $(INFRA_CONTEXT) -c deletionProtection=false $(CDK_FLAGS)

test-infra: ## CDK template tests, the cdk-nag AwsSolutions check, cfn-lint on 5 variants, the IAM check of the calls make test recorded (infra module)
	cd infra && go test -count=1 ./...

lint-infra: ## gofmt and go vet of the infra module
	@out=$$(cd infra && gofmt -l $$(go list -f '{{range .GoFiles}}{{$$.Dir}}/{{.}} {{end}}{{range .TestGoFiles}}{{$$.Dir}}/{{.}} {{end}}{{range .XTestGoFiles}}{{$$.Dir}}/{{.}} {{end}}' ./...)); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	cd infra && go vet ./...
