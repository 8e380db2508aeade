# shellcheck shell=bash
# Shared settings and functions of the Docker-free local AWS stack
# (DynamoDB Local + kumo, aws-lambda-rie). Sourced by install.sh,
# with-stack.sh, up.sh, down.sh and exec.sh, and by localstack/compose.sh for the
# pinned versions and helpers; not run.

# Pinned versions. Changing one invalidates the matching cached binary.
DYNAMODB_LOCAL_VERSION=1.25.1
DYNAMODB_NPM_PACKAGE=amplify-dynamodb-simulator
DYNAMODB_NPM_VERSION=2.9.30
KUMO_MODULE=github.com/sivchari/kumo
KUMO_VERSION=v0.33.1
RIE_MODULE=github.com/aws/aws-lambda-runtime-interface-emulator
RIE_VERSION=v0.0.0-20261030222936-bef5c4ba774d
GOLANGCI_LINT_VERSION=v2.15.0
# The independent checks' tools (pip; dev/emulators/install.sh installs them
# where absent): moto is the second AWS implementation (LOCALEFLOW_STACK=moto),
# cfn-lint lints the synthesized templates (infra/localeflow).
MOTO_VERSION=5.2.1
CFN_LINT_VERSION=1.51.0

STACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$STACK_DIR/../.." && pwd)
LOCALEFLOW_CACHE=${LOCALEFLOW_CACHE:-$HOME/.cache/localeflow}
export LOCALEFLOW_CACHE

DYNAMODB_DIR=$LOCALEFLOW_CACHE/dynamodb
DYNAMODB_JAR=$DYNAMODB_DIR/package/emulator/DynamoDBLocal.jar
DYNAMODB_LIB=$DYNAMODB_DIR/package/emulator/DynamoDBLocal_lib
KUMO_BIN=$LOCALEFLOW_CACHE/bin/kumo-$KUMO_VERSION
RIE_BIN=$LOCALEFLOW_CACHE/bin/aws-lambda-rie
GOLANGCI_LINT_BIN=$LOCALEFLOW_CACHE/golangci-lint/$GOLANGCI_LINT_VERSION/golangci-lint

# Inside the private network namespace both servers own fixed loopback ports.
DYNAMODB_PORT=8000
KUMO_PORT=4566
MOTO_PORT=5000
# Bounded wait for each server to answer, in seconds.
STACK_WAIT_SECONDS=${LOCALEFLOW_STACK_WAIT_SECONDS:-60}
# Modules the Go checksum database cannot verify for kumo's dependency graph.
KUMO_GONOSUMDB=github.com/aws/aws-sdk-go-v2/service/amplify,github.com/aws/aws-sdk-go-v2/service/appmesh

# LOG_PREFIX names the script family in log lines (localstack/compose.sh sets it).
LOG_PREFIX=${LOG_PREFIX:-emulators}
log() { printf '%s: %s\n' "$LOG_PREFIX" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# stack_env prints the environment every process inside the stack gets, as
# KEY=VALUE lines (for `env`): SDK endpoints, region, test credentials, the
# integration switch, and an offline Go (the namespace has no network).
# With LOCALEFLOW_STACK=moto every endpoint is moto_server's (and
# LOCALEFLOW_EMULATOR=moto tells the tests which implementation answers).
stack_env() {
	local goflags db=http://127.0.0.1:$DYNAMODB_PORT aws=http://127.0.0.1:$KUMO_PORT emulator=kumo
	goflags=$(go env GOFLAGS 2>/dev/null || true)
	if [[ ${LOCALEFLOW_STACK:-} == moto ]]; then
		db=http://127.0.0.1:$MOTO_PORT aws=http://127.0.0.1:$MOTO_PORT emulator=moto
	fi
	cat <<ENV
AWS_ENDPOINT_URL_DYNAMODB=$db
AWS_ENDPOINT_URL_SQS=$aws
AWS_ENDPOINT_URL_EVENTBRIDGE=$aws
AWS_ENDPOINT_URL_STS=$aws
AWS_ENDPOINT_URL_SECRETS_MANAGER=$aws
LOCALEFLOW_EMULATOR=$emulator
AWS_REGION=us-east-1
AWS_ACCESS_KEY_ID=test
AWS_SECRET_ACCESS_KEY=test
AWS_EC2_METADATA_DISABLED=true
LOCALEFLOW_INTEGRATION=1
LOCALEFLOW_CACHE=$LOCALEFLOW_CACHE
LOCALEFLOW_RIE=$RIE_BIN
GOPROXY=off
GOTOOLCHAIN=local
GOFLAGS=${goflags:+$goflags }-mod=readonly
ENV
}

require_installed() {
	[[ -f $DYNAMODB_JAR && -d $DYNAMODB_LIB ]] || die "DynamoDB Local is not installed at $DYNAMODB_JAR: run dev/emulators/install.sh (make install)"
	[[ -x $KUMO_BIN ]] || die "kumo is not installed at $KUMO_BIN: run dev/emulators/install.sh (make install)"
	command -v java >/dev/null || die "java (17+) is not on PATH; DynamoDB Local needs it"
}

# NETNS_EXEC prefixes the commands that must run inside the stack's network
# namespace: empty when this shell already is inside it (with-stack.sh),
# `ip netns exec NAME` for the named namespace of up.sh.
NETNS_EXEC=()

# stack_env_array fills STACK_ENV with the lines of stack_env (values may
# hold spaces, e.g. GOFLAGS).
stack_env_array() {
	mapfile -t STACK_ENV < <(stack_env)
}

# start_dynamodb LOGFILE WORKDIR: starts DynamoDB Local in the background of
# the current network namespace (it binds every interface of that namespace);
# sets DYNAMODB_PID. It runs in WORKDIR because it writes a metadata file
# into its working directory even with telemetry off.
start_dynamodb() {
	local logfile=$1 workdir=$2
	# shellcheck disable=SC2086 # JAVA_OPTS is a word list on purpose.
	(cd "$workdir" && exec "${NETNS_EXEC[@]}" java ${LOCALEFLOW_DYNAMODB_JAVA_OPTS:--Xmx1g} -Djava.library.path="$DYNAMODB_LIB" \
		-jar "$DYNAMODB_JAR" -inMemory -sharedDb -port "$DYNAMODB_PORT" -disableTelemetry) \
		>"$logfile" 2>&1 </dev/null &
	DYNAMODB_PID=$!
}

# start_kumo LOGFILE: starts kumo on 127.0.0.1; sets KUMO_PID.
start_kumo() {
	local logfile=$1
	KUMO_HOST=127.0.0.1 KUMO_PORT=$KUMO_PORT "${NETNS_EXEC[@]}" "$KUMO_BIN" >"$logfile" 2>&1 </dev/null &
	KUMO_PID=$!
}

# moto_version prints the installed moto's version ("" when absent).
moto_version() {
	command -v moto_server >/dev/null || return 0
	python3 -c 'import importlib.metadata as m; print(m.version("moto"))' 2>/dev/null || true
}

require_moto() {
	[[ $(moto_version) == "$MOTO_VERSION" ]] ||
		die "moto $MOTO_VERSION is not installed (found '$(moto_version)'): run dev/emulators/install.sh (make install)"
}

# start_moto LOGFILE: starts moto_server $MOTO_VERSION on 127.0.0.1; sets
# MOTO_PID.
start_moto() {
	local logfile=$1
	"${NETNS_EXEC[@]}" moto_server -H 127.0.0.1 -p "$MOTO_PORT" >"$logfile" 2>&1 </dev/null &
	MOTO_PID=$!
}

# http_answers PORT: true when something on 127.0.0.1:PORT answers an HTTP
# request with an HTTP status line (bash /dev/tcp: no curl needed).
http_answers() {
	"${NETNS_EXEC[@]}" bash -c '
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3
		IFS= read -r -t 5 line <&3 || exit 1
		[[ $line == HTTP/* ]]
	' http_answers "$1" 2>/dev/null
}

# wait_for NAME PID PORT LOGFILE: waits (bounded) until the server answers;
# on failure prints why and the log tail, and returns 1.
wait_for() {
	local name=$1 pid=$2 port=$3 logfile=$4
	local deadline=$((SECONDS + STACK_WAIT_SECONDS))
	while ((SECONDS < deadline)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "ERROR: $name (pid $pid) exited before answering on 127.0.0.1:$port; last log lines ($logfile):"
			tail -n 30 "$logfile" >&2 || true
			return 1
		fi
		if http_answers "$port"; then
			log "$name answers on 127.0.0.1:$port (pid $pid)"
			return 0
		fi
		sleep 0.2
	done
	log "ERROR: $name (pid $pid) did not answer on 127.0.0.1:$port within ${STACK_WAIT_SECONDS}s; last log lines ($logfile):"
	tail -n 30 "$logfile" >&2 || true
	return 1
}

# stop_pid NAME PID: TERM, wait up to 10 s, then KILL. Only ever the PIDs
# this script started.
stop_pid() {
	local name=$1 pid=$2 i
	[[ -n $pid ]] || return 0
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || { log "stopped $name (pid $pid)"; return 0; }
		sleep 0.2
	done
	kill -KILL "$pid" 2>/dev/null || true
	log "killed $name (pid $pid) after 10 s"
}
