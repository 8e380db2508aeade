# shellcheck shell=bash
# LocalStack (Docker, docker-compose.yml in this directory) for
# test-localstack.sh and demo.sh; sourced, not run. The pinned versions,
# cache paths and log helpers are the Docker-free stack's
# (dev/emulators/lib.sh).
LOG_PREFIX=localstack
source "$(dirname "${BASH_SOURCE[0]}")/../dev/emulators/lib.sh"
LOCALSTACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# start_localstack: starts LocalStack (Docker, localstack/docker-compose.yml),
# waits until it is healthy, stops it when the calling script exits (unless
# LOCALEFLOW_KEEP_LOCALSTACK=1) and points the SDK variables at it. Used by
# test-localstack.sh and demo.sh; needs Docker, so it is not run on the
# Docker-free development machines.
start_localstack() {
	command -v docker >/dev/null || die "docker is not installed: LocalStack needs Docker (make test and make demo run without it)"
	docker compose version >/dev/null 2>&1 || die "the docker compose plugin is missing"
	LOCALSTACK_COMPOSE=(docker compose -f "$LOCALSTACK_DIR/docker-compose.yml")
	trap stop_localstack EXIT
	log "starting LocalStack"
	"${LOCALSTACK_COMPOSE[@]}" up --detach --wait --wait-timeout 180
	export AWS_ENDPOINT_URL=http://127.0.0.1:4566
	export AWS_ENDPOINT_URL_DYNAMODB=$AWS_ENDPOINT_URL
	export AWS_ENDPOINT_URL_SQS=$AWS_ENDPOINT_URL
	export AWS_ENDPOINT_URL_EVENTBRIDGE=$AWS_ENDPOINT_URL
	export AWS_ENDPOINT_URL_STS=$AWS_ENDPOINT_URL
	export AWS_REGION=${AWS_REGION:-us-east-1}
	export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_EC2_METADATA_DISABLED=true
}

stop_localstack() {
	if [[ ${LOCALEFLOW_KEEP_LOCALSTACK:-} == 1 ]]; then
		log "LocalStack left running (LOCALEFLOW_KEEP_LOCALSTACK=1); stop it with: ${LOCALSTACK_COMPOSE[*]} down"
		return
	fi
	"${LOCALSTACK_COMPOSE[@]}" down --volumes --remove-orphans || true
}
