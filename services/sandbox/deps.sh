#!/usr/bin/env bash
# deps.sh installs what the sandbox service's local backend and its tests need:
# bubblewrap (bwrap, 0.8 or later for --disable-userns) from Debian;
# util-linux's prlimit (the sandbox limits), fallocate and unshare (the tests
# run the service as PID 1 of a PID namespace of their own with it), and
# perl, which the seccomp and memory-bound tests run inside a sandbox (both are
# Essential in Debian, so normally present). Idempotent: installs only what is
# missing, one line per package installed; apt's output goes to DEPS_LOG
# (scripts/install.sh).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/install.sh"

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
{ command -v prlimit >/dev/null 2>&1 && command -v fallocate >/dev/null 2>&1 && command -v unshare >/dev/null 2>&1; } || missing+=(util-linux)
command -v perl >/dev/null 2>&1 || missing+=(perl-base)
if ((${#missing[@]})); then
	apt_install "${missing[@]}"
fi
