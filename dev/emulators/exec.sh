#!/usr/bin/env bash
# Runs a command inside the stack started by up.sh (its network namespace,
# with the AWS_ENDPOINT_URL_* variables, test credentials and an offline Go
# set), e.g. `dev/emulators/exec.sh go test ./...`. Exits with its status.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$STACK_DIR/netns.sh"

(($# > 0)) || die "usage: $0 COMMAND [ARG...]"
stack_running || die "the stack is not up: run make up first"
stack_env_array
exec ip netns exec "$NETNS" env "${STACK_ENV[@]}" "$@"
