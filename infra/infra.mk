# Make targets of the CDK app (included by the top-level Makefile).
# Placeholder until the CDK stack lands; the CDK work replaces this file.
.PHONY: test-infra
test-infra: ## CDK template tests (none yet)
	@echo "infra: no CDK app yet"
