#!/usr/bin/env bash
# Installs what the storage service's tests, benchmarks and demo need:
# versitygw, a real S3 server (posix backend). Idempotent: does nothing when
# the pinned binary is already in $(go env GOPATH)/bin. Prints one line when
# it installs; the go command's output goes to DEPS_LOG (scripts/install.sh).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/install.sh"

version=v1.8.0
bin="$(go env GOPATH)/bin/versitygw"
if [[ -x "$bin" ]]; then
	exit 0
fi
logged "versitygw $version (go install, about two minutes)" go install "github.com/versity/versitygw/cmd/versitygw@${version}"
