#!/usr/bin/env bash
# Runs versitygw in the foreground for the demo or local development:
# posix backend under DATA_DIR, with the bucket directory created, on
# VERSITYGW_ADDR. Stop it with SIGTERM (it is exec'd, so $! is its pid).
#
#   services/storage/versitygw.sh /tmp/s3data &
#
# Environment (defaults match services/storage/README.md):
#   VERSITYGW_ADDR            127.0.0.1:7070
#   STORAGE_BUCKET            brain-tools
#   STORAGE_ACCESS_KEY_ID     local-access-key
#   STORAGE_SECRET_ACCESS_KEY local-secret-key
set -euo pipefail

data=${1:?usage: versitygw.sh DATA_DIR}
addr=${VERSITYGW_ADDR:-127.0.0.1:7070}
bucket=${STORAGE_BUCKET:-brain-tools}
access=${STORAGE_ACCESS_KEY_ID:-local-access-key}
secret=${STORAGE_SECRET_ACCESS_KEY:-local-secret-key}

bin=${VERSITYGW:-$(go env GOPATH)/bin/versitygw}
if [[ ! -x "$bin" ]]; then
	bin=$(command -v versitygw || true)
fi
if [[ -z "$bin" ]]; then
	echo "versitygw not found: run services/storage/deps.sh" >&2
	exit 1
fi
# Each top-level directory of the root is a bucket.
mkdir -p "$data/root/$bucket" "$data/meta"
exec "$bin" --access "$access" --secret "$secret" --port "$addr" \
	posix --sidecar "$data/meta" "$data/root"
