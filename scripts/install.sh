# shellcheck shell=bash
# install.sh is sourced (not run) by every script that installs something
# the suite needs: the deps.sh of each service, scripts/mcp-deps.sh and
# scripts/compose-test.sh. It keeps what they print to one short line per
# dependency installed and sends the package managers' own output to one
# log file, so `make run` on a fresh machine shows what is happening rather
# than minutes of apt output.
#
#   . "$(dirname "${BASH_SOURCE[0]}")/../../scripts/install.sh"
#   apt_install bubblewrap        # deps: installing bubblewrap (apt) … done
#   logged "versitygw v1.8.0 (go install)" go install ...@v1.8.0
#
# DEPS_LOG names the log (default bin/deps.log in the repository, which
# git ignores); each run appends to it. When a step fails, the last lines of
# its output and the log's path go to stderr and the function returns 1.
# apt runs under flock /tmp/apt.lock, so concurrent installs on one machine
# wait for each other instead of failing on dpkg's lock.

DEPS_LOG=${DEPS_LOG:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/bin/deps.log}

# logged WHAT CMD... runs CMD with its output appended to DEPS_LOG, on one
# line of its own: "deps: installing WHAT … done" (the start is printed
# first, so a slow step does not look hung).
logged() {
	local what=$1
	shift
	mkdir -p "$(dirname "$DEPS_LOG")"
	printf '\n== %s: %s\n' "$(date -u +%FT%TZ)" "$*" >>"$DEPS_LOG"
	printf 'deps: installing %s … ' "$what"
	if ! "$@" >>"$DEPS_LOG" 2>&1; then
		echo "failed"
		echo "deps: the end of its output (all of it in $DEPS_LOG):" >&2
		tail -n 20 "$DEPS_LOG" >&2
		return 1
	fi
	echo "done"
}

# apt_install PKG... installs Debian packages (no recommends) in one
# apt-get run, after apt-get update, and says so on one line:
# "deps: installing bubblewrap (apt) … done".
apt_install() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: $* missing, and installing needs root: apt-get install -y --no-install-recommends $*" >&2
		return 1
	fi
	local lock=()
	command -v flock >/dev/null 2>&1 && lock=(flock /tmp/apt.lock)
	logged "$* (apt)" "${lock[@]}" bash -c 'apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"' apt_install "$@"
}
