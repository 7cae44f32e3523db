#!/usr/bin/env bash
# deps.sh installs what the browser service and its tests need and is
# missing: Debian's chromium (with fonts), and iproute2's ip, with which the
# tests put themselves in a network namespace of their own (unshare comes
# with util-linux, which is Essential). Idempotent: installs only what is
# missing.
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium fonts-liberation)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
if ((${#missing[@]})); then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps.sh: ${missing[*]} missing and installing needs root (apt-get install -y ${missing[*]})" >&2
		exit 1
	fi
	lock=()
	command -v flock >/dev/null 2>&1 && lock=(flock /tmp/apt.lock)
	"${lock[@]}" apt-get update
	DEBIAN_FRONTEND=noninteractive "${lock[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
