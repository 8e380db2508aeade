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
source "$(dirname "${BASH_SOURCE[0]}")/compose.sh"

start_localstack
export LOCALEFLOW_INTEGRATION=1

cd "$REPO_ROOT"
log "creating the named resources (prefix localeflow)"
go run ./dev/cmd/localeflow-bootstrap -prefix localeflow >/dev/null
log "go test ./... against LocalStack"
go test -count=1 -timeout "${TEST_TIMEOUT:-15m}" ./...
