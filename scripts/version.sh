#!/usr/bin/env bash
# version.sh prints the version the Makefile stamps into every binary
# (pkg/version, through -ldflags -X) and every image (its :<version> tag
# and OCI labels); `version.sh revision` prints the VCS revision instead.
#
#   v1.2.3                          HEAD is the tag v1.2.3
#   v1.2.3-4-g0123456789ab          four commits after the tag v1.2.3
#   v0.0.0-20261201194600-0123456789ab   no v* tag yet: a Go pseudo-version
#                                   of the commit (its UTC commit time, then
#                                   the first 12 hex digits of its hash)
#
# "-dirty" is appended to both when tracked files differ from HEAD. Each
# form is a valid Docker tag. Outside a git checkout (a source archive) it
# prints nothing, and the binaries then report what the go command put in
# their build information.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! git rev-parse --verify -q HEAD >/dev/null 2>&1; then
	exit 0
fi
dirty=
git diff --quiet HEAD -- 2>/dev/null || dirty=-dirty
case ${1:-version} in
revision)
	echo "$(git rev-parse HEAD)$dirty"
	;;
version)
	if v=$(git describe --tags --match 'v[0-9]*' --abbrev=12 2>/dev/null); then
		echo "$v$dirty"
	else
		echo "v0.0.0-$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S)-$(git rev-parse --short=12 HEAD)$dirty"
	fi
	;;
*)
	echo "usage: version.sh [version|revision]" >&2
	exit 2
	;;
esac
