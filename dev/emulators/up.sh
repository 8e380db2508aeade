#!/usr/bin/env bash
# Starts a long-lived local AWS stack (DynamoDB Local + kumo) in a named
# network namespace, for working interactively; `make down` stops it.
#
#   make up
#   dev/emulators/exec.sh go test ./dev/bootstrap      # any command, inside the stack
#   dev/emulators/exec.sh go run ./dev/cmd/localeflow-bootstrap
#   make down
#
# The namespace (default "localeflow", LOCALEFLOW_NETNS overrides) has only a
# loopback interface: the servers are reachable only from commands run in it
# (dev/emulators/exec.sh), never from the host's network. PIDs and logs are kept
# in $LOCALEFLOW_CACHE/run/<namespace>/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$STACK_DIR/netns.sh"

require_installed
if stack_running; then
	log "already up in network namespace $NETNS (pids $(cat "$RUN_DIR/dynamodb.pid") $(cat "$RUN_DIR/kumo.pid"))"
	exit 0
fi
mkdir -p "$RUN_DIR"
if ! ip netns list | grep -qw "^$NETNS"; then
	ip netns add "$NETNS"
fi
ip netns exec "$NETNS" ip link set lo up

NETNS_EXEC=(ip netns exec "$NETNS")
start_dynamodb "$RUN_DIR/dynamodb.log" "$RUN_DIR"
echo "$DYNAMODB_PID" >"$RUN_DIR/dynamodb.pid"
start_kumo "$RUN_DIR/kumo.log"
echo "$KUMO_PID" >"$RUN_DIR/kumo.pid"
disown -a
if ! wait_for "DynamoDB Local $DYNAMODB_LOCAL_VERSION" "$DYNAMODB_PID" "$DYNAMODB_PORT" "$RUN_DIR/dynamodb.log" ||
	! wait_for "kumo $KUMO_VERSION" "$KUMO_PID" "$KUMO_PORT" "$RUN_DIR/kumo.log"; then
	"$STACK_DIR/down.sh"
	exit 1
fi
log "up in network namespace $NETNS; run commands with: dev/emulators/exec.sh COMMAND (make down stops it)"
