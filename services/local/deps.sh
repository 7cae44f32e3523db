#!/usr/bin/env bash
# deps.sh installs what the local service's tests need and is missing:
# Debian's chromium, which the chromedp browser tests of the operator
# approval page drive. Idempotent: it installs nothing that is present.
# Prints one line per package installed; apt's output goes to DEPS_LOG
# (scripts/install.sh).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/install.sh"

if ! command -v chromium >/dev/null 2>&1; then
	apt_install chromium fonts-liberation
fi

# The approval store's tests run on PostgreSQL too (pkg/pgtest): the same
# server brain's tests use.
bash "$(dirname "${BASH_SOURCE[0]}")/../brain/deps.sh"
