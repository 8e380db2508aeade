#!/usr/bin/env bash
# Runs the integration suite against LocalStack (docker-compose.yml) instead
# of the Docker-free stack: starts the container, waits for its health check,
# creates the named resources with localeflow-bootstrap, runs
# `go test ./...` with LOCALEFLOW_INTEGRATION=1 and every SDK endpoint at
# http://127.0.0.1:4566, and stops the container (LOCALEFLOW_KEEP_LOCALSTACK=1
# keeps it running, e.g. for make deploy-local).
#
# Needs Docker with the compose plugin; the development machines of this
# project have no Docker engine, so this path is not exercised there.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v docker >/dev/null || die "docker is not installed: LocalStack needs Docker (use make test for the Docker-free stack)"
docker compose version >/dev/null 2>&1 || die "the docker compose plugin is missing"
compose=(docker compose -f "$LOCALSTACK_DIR/docker-compose.yml")

stop() {
	if [[ ${LOCALEFLOW_KEEP_LOCALSTACK:-} == 1 ]]; then
		log "LocalStack left running (LOCALEFLOW_KEEP_LOCALSTACK=1); stop it with: ${compose[*]} down"
		return
	fi
	"${compose[@]}" down --volumes --remove-orphans || true
}
trap stop EXIT

log "starting LocalStack"
"${compose[@]}" up --detach --wait --wait-timeout 180

export AWS_ENDPOINT_URL=http://127.0.0.1:4566
export AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL
export AWS_ENDPOINT_URL_SQS=$AWS_ENDPOINT_URL
export AWS_ENDPOINT_URL_EVENTBRIDGE=$AWS_ENDPOINT_URL
export AWS_REGION=${AWS_REGION:-us-east-1}
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_EC2_METADATA_DISABLED=true
export LOCALEFLOW_INTEGRATION=1

cd "$REPO_ROOT"
log "creating the named resources (prefix localeflow)"
go run ./cmd/localeflow-bootstrap -prefix localeflow >/dev/null
log "go test ./... against LocalStack"
go test -count=1 -timeout "${TEST_TIMEOUT:-15m}" ./...
