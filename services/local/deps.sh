#!/usr/bin/env bash
# deps.sh installs what the local service's tests need and is missing:
# Debian's chromium, which the chromedp browser tests of the operator
# approval page drive. Idempotent: it installs nothing that is present.
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps.sh: chromium is missing and installing it needs root (apt-get install -y chromium)" >&2
		exit 1
	fi
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium fonts-liberation
fi
