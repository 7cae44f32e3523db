#!/usr/bin/env bash
# Installs what the tracing test needs (deploy/tracing_test.go): Jaeger
# all-in-one v1.76.0, a Go program, as the real trace backend. `go install
# …@v1.76.0` refuses it (its go.mod has replace directives), so it is built
# inside its downloaded module, once, into the cache the test reads:
# $BRAIN_TOOLS_CACHE/jaeger/jaeger-v1.76.0 (default ~/.cache/brain-tools).
# A cold build takes several minutes. Prints one line when it installs; the
# go command's output goes to DEPS_LOG (scripts/install.sh).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/install.sh"

version=v1.76.0
dir=${BRAIN_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/brain-tools}/jaeger
bin=$dir/jaeger-$version
if [[ -x "$bin" ]]; then
	exit 0
fi
mkdir -p "$dir"

build_jaeger() {
	local src
	src=$(cd "$dir" && GOWORK=off go mod download -json "github.com/jaegertracing/jaeger@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -d "$src" ]] || { echo "go mod download gave no module directory" >&2; return 1; }
	(cd "$src" && GOWORK=off GOFLAGS=-mod=readonly go build -trimpath -o "$bin.tmp" ./cmd/jaeger)
	mv "$bin.tmp" "$bin"
}
logged "jaeger $version (go build in its module, several minutes)" build_jaeger
