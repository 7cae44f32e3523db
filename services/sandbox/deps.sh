#!/usr/bin/env bash
# deps.sh installs what the sandbox service's local backend and its tests need:
# bubblewrap (bwrap) from Debian. Idempotent: installs only what is missing.
set -euo pipefail

if ! command -v bwrap >/dev/null 2>&1; then
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bubblewrap
fi
bwrap --version
