#!/usr/bin/env bash
# Installs what the storage service's tests, benchmarks and demo need:
# versitygw, a real S3 server (posix backend). Idempotent: does nothing when
# the pinned binary is already in $(go env GOPATH)/bin.
set -euo pipefail

version=v1.8.0
bin="$(go env GOPATH)/bin/versitygw"
if [[ -x "$bin" ]]; then
	exit 0
fi
echo "storage: installing versitygw $version (takes about two minutes)" >&2
go install "github.com/versity/versitygw/cmd/versitygw@${version}"
