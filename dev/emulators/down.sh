#!/usr/bin/env bash
# Stops the stack that up.sh started (by the PIDs it recorded) and deletes
# its network namespace. Safe to run when nothing is up.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$STACK_DIR/netns.sh"

if pid_is "$RUN_DIR/kumo.pid" "kumo-"; then
	stop_pid kumo "$(cat "$RUN_DIR/kumo.pid")"
fi
if pid_is "$RUN_DIR/dynamodb.pid" DynamoDBLocal.jar; then
	stop_pid "DynamoDB Local" "$(cat "$RUN_DIR/dynamodb.pid")"
fi
rm -f "$RUN_DIR/kumo.pid" "$RUN_DIR/dynamodb.pid"
if ip netns list 2>/dev/null | grep -qw "^$NETNS"; then
	ip netns del "$NETNS"
	log "deleted network namespace $NETNS"
fi
log "down"
