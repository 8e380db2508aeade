#!/usr/bin/env bash
# Runs a command with the Docker-free local AWS stack, then stops the stack.
#
#   dev/emulators/with-stack.sh go test ./...
#
# The command, DynamoDB Local and kumo run in a private network namespace
# (unshare -n) that has only a loopback interface: DynamoDB Local has no
# option to bind 127.0.0.1 only, so the namespace is what keeps it (and
# everything else started here) off every real network. Inside it there is
# no network at all, so Go runs offline (GOPROXY=off, -mod=readonly):
# download modules and compile before calling this (make test does).
#
# LOCALEFLOW_STACK=moto starts moto_server (pinned, dev/emulators/install.sh)
# instead, on 127.0.0.1 in the same kind of namespace, and points every
# endpoint at it: the second, independent AWS implementation
# (docs/design.md, "Two emulators").
#
# Exits with the command's status, or 1 when the stack did not come up.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

(($# > 0)) || die "usage: $0 COMMAND [ARG...]"

if [[ ${LOCALEFLOW_NETNS_CHILD:-} != 1 ]]; then
	if [[ ${LOCALEFLOW_STACK:-} == moto ]]; then
		require_moto
	else
		require_installed
	fi
	command -v unshare >/dev/null || die "unshare (util-linux) is needed"
	command -v ip >/dev/null || die "ip (iproute2) is needed"
	# Re-enter this script as the first process of a new network namespace.
	# Without root, a user namespace (mapped to root inside) grants the right
	# to create it and to bring its loopback up.
	unshare=(unshare --net)
	if [[ $(id -u) != 0 ]]; then
		unshare=(unshare --user --map-root-user --net)
	fi
	exec "${unshare[@]}" -- env LOCALEFLOW_NETNS_CHILD=1 bash "${BASH_SOURCE[0]}" "$@"
fi
unset LOCALEFLOW_NETNS_CHILD

ip link set lo up

RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/localeflow-stack.XXXXXX")
DYNAMODB_PID="" KUMO_PID="" MOTO_PID=""
cleanup() {
	local rc=$?
	stop_pid moto "$MOTO_PID"
	stop_pid kumo "$KUMO_PID"
	stop_pid "DynamoDB Local" "$DYNAMODB_PID"
	if ((rc == 0)); then
		rm -rf "$RUN_DIR"
	else
		log "server logs kept in $RUN_DIR"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ ${LOCALEFLOW_STACK:-} == moto ]]; then
	start_moto "$RUN_DIR/moto.log"
	wait_for "moto $MOTO_VERSION" "$MOTO_PID" "$MOTO_PORT" "$RUN_DIR/moto.log" || exit 1
else
	start_dynamodb "$RUN_DIR/dynamodb.log" "$RUN_DIR"
	start_kumo "$RUN_DIR/kumo.log"
	wait_for "DynamoDB Local $DYNAMODB_LOCAL_VERSION" "$DYNAMODB_PID" "$DYNAMODB_PORT" "$RUN_DIR/dynamodb.log" || exit 1
	wait_for "kumo $KUMO_VERSION" "$KUMO_PID" "$KUMO_PORT" "$RUN_DIR/kumo.log" || exit 1
fi

stack_env_array
status=0
env "${STACK_ENV[@]}" "$@" || status=$?
if ((status != 0)); then
	log "command exited with status $status"
fi
exit "$status"
