# shellcheck shell=bash
# Settings of the named-namespace stack (up.sh, exec.sh, down.sh); sourced
# after lib.sh.
NETNS=${LOCALEFLOW_NETNS:-localeflow}
[[ $NETNS =~ ^[a-z][a-z0-9-]{0,30}$ ]] || die "LOCALEFLOW_NETNS=$NETNS is not a valid namespace name"
RUN_DIR=$LOCALEFLOW_CACHE/run/$NETNS

# pid_is PIDFILE PATTERN: the pid in PIDFILE is alive and its command line
# matches PATTERN (so a recycled pid is never mistaken for our server).
pid_is() {
	local pid
	[[ -f $1 ]] || return 1
	pid=$(cat "$1")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2"
}

stack_running() {
	pid_is "$RUN_DIR/dynamodb.pid" DynamoDBLocal.jar && pid_is "$RUN_DIR/kumo.pid" "kumo-"
}
