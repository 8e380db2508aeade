#!/usr/bin/env bash
# Runs the demo driver (dev/cmd/localeflow-demo, built by make demo-localstack)
# against LocalStack instead of the Docker-free stack: starts the pinned
# LocalStack container (docker-compose.yml), points every SDK endpoint at
# it, runs the demo (the real bootstraps under aws-lambda-rie on this
# machine, driven by the local runner against LocalStack's SQS), and stops
# the container (LOCALEFLOW_KEEP_LOCALSTACK=1 keeps it).
#
#   localstack/demo.sh BUILD_DIR [DEMO FLAGS...]
#
# Needs Docker with the compose plugin; the development machines of this
# project have no Docker engine, so this path is not exercised there.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/compose.sh"

(($# >= 1)) || die "usage: $0 BUILD_DIR [DEMO FLAGS...]"
build=$1
shift
[[ -x $build/localeflow-demo ]] || die "$build/localeflow-demo is missing: run make demo-localstack"
[[ -x $RIE_BIN ]] || die "aws-lambda-rie is not installed at $RIE_BIN: run make install"
start_localstack

cd "$REPO_ROOT"
"$build/localeflow-demo" -rie "$RIE_BIN" -bin-dir "$build" -out "$build/demo-localstack" "$@"
