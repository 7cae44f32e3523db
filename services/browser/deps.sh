#!/usr/bin/env bash
# deps.sh installs what the browser service and its tests need and is
# missing: Debian's chromium (with fonts), and iproute2's ip, with which the
# tests put themselves in a network namespace of their own (unshare comes
# with util-linux, which is Essential). Idempotent: installs only what is
# missing, on one line; apt's output goes to DEPS_LOG (scripts/install.sh).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/install.sh"

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium fonts-liberation)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
if ((${#missing[@]})); then
	apt_install "${missing[@]}"
fi
