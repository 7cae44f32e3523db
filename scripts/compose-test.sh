#!/usr/bin/env bash
# compose-test.sh is `make compose-test` (run by .ci/run): compose.yaml's
# whole stack built and started for real in a Docker engine, driven through
# its published ports with the demo session of `make run`, checked, and
# torn down. It holds flock /tmp/suite-ports.lock from start to end of its
# teardown, since the stack publishes the suite's fixed ports.
#
#  1. engine: the Docker engine `docker info` answers, else Debian's
#     docker.io (installed when missing) started here as a dockerd of its
#     own: data root $CACHE/docker, socket /run/brain-tools-docker, and
#     --iptables=false --ip-forward=false, so containers reach each other
#     and this machine's published ports and nothing beyond it; no other
#     network setting changes. It is stopped again at the end.
#  2. compose: Compose v2 (Debian's docker-compose 1.29 refuses the file's
#     top-level name:): `docker compose` when it is v2, else
#     github.com/docker/compose/v2 at COMPOSE_VERSION built from its module
#     (`go install ...@version` is refused: its go.mod has exclude
#     directives) and installed as ~/.docker/cli-plugins/docker-compose.
#  3. base images, since no registry is reachable: debian:bookworm-slim from
#     `debootstrap --variant=minbase bookworm` and `docker import`; the
#     versitygw image compose.yaml names, as a stand-in built from
#     versitygw's Go module at that tag (compose-test/versitygw.Dockerfile).
#  4. make images (DOCKER_BUILD_FLAGS=--network host: the engine gives build
#     containers no NAT), then `docker compose up -d --wait` of compose.yaml
#     plus deploy/compose.demo.yaml (the demo's docs server), with
#     .env.example's settings and fresh tokens, as the README says.
#  5. checks: every container running and healthy, with its memory, CPU
#     and pids limits applied; the demo session (examples/session, the
#     tools of scripts/demo-tools.sh) through brain's published port; a
#     sandbox_exec whose file is then found inside the sandbox container;
#     no zombie left under the sandbox's PID 1 by a timed-out command; each
#     image's -version, /metrics build_info, :<version> tag and OCI label
#     agreeing.
#  6. docker compose down -v; the daemon it started is stopped. Each part
#     of this teardown is bounded and prints its line like a step.
#
# Reused by later runs on the same machine, under CACHE
# (BRAIN_TOOLS_CACHE, default ~/.cache/brain-tools): the engine's data root
# (base images, image layers), the debootstrap tarball, the Compose plugin
# and the versitygw binary. Each step prints one line with its time; the
# tools' output goes to bin/compose-test/<step>.log, whose end is printed
# when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/demo-tools.sh

CACHE=${BRAIN_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/brain-tools}
COMPOSE_VERSION=v2.40.3
PROJECT=brain-tools-compose-test
LOGS=$ROOT/bin/compose-test
DEMO_BIN=$ROOT/bin/demo
RUN_DIR=/run/brain-tools-docker
export DEPS_LOG=$LOGS/install.log
. scripts/install.sh

# The versitygw image compose.yaml runs, e.g. versity/versitygw:v1.8.0.
VERSITYGW_IMAGE=$(sed -n 's/^ *image: *\(versity\/versitygw:[^ ]*\) *$/\1/p' compose.yaml)
[ -n "$VERSITYGW_IMAGE" ] || { echo "compose-test: compose.yaml names no versity/versitygw image" >&2; exit 1; }
VERSITYGW_VERSION=${VERSITYGW_IMAGE##*:}

# The suite's fixed ports: held until this shell exits, after its teardown
# (fd 9, closed for dockerd, which may outlive a killed run).
exec 9>/tmp/suite-ports.lock
flock 9
rm -rf "$LOGS"
mkdir -p "$LOGS" "$CACHE" "$DEMO_BIN"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/compose-test.XXXXXX")
DOCKERD_PID=
DEBOOTSTRAP_PID=
STARTED=$SECONDS
UP=
STEP=

# note TEXT: the detail printed after a step's time.
note() { printf '%s' "$*" >"$WORK/note"; }

# keep NAME=VALUE...: a variable a step sets for the rest of the script
# (steps run in a subshell); "export NAME=VALUE" exports it too.
keep() { printf '%s\n' "$*" >>"$WORK/state"; }

# step NAME FUNC ARGS...: runs FUNC with its output in $LOGS/NAME.log and
# prints one line: the name, the seconds it took, its note. FUNC runs in a
# subshell under set -e, so any failing command ends it; what it keeps
# is read back whether it failed or not, for the cleanup. The subshell
# runs in the background and is waited for, so that a signal (make
# compose-test's limit, Ctrl-C) is handled at once: the trap below stops
# the step's processes and says which step it stopped.
step() {
	local name=$1 t0=$SECONDS rc pid
	shift
	: >"$WORK/note"
	: >"$WORK/state"
	STEP=$name
	set +e
	(
		set -e
		"$@"
	) >"$LOGS/$name.log" 2>&1 &
	pid=$!
	wait "$pid"
	rc=$?
	set -e
	. "$WORK/state"
	if [ "$rc" -eq 0 ]; then
		printf '  %-11s %4ds  %s\n' "$name" $((SECONDS - t0)) "$(cat "$WORK/note")"
		STEP=
		return 0
	fi
	printf '  %-11s %4ds  FAILED (%s)\n' "$name" $((SECONDS - t0)) "$LOGS/$name.log"
	echo "--- the end of $LOGS/$name.log:" >&2
	tail -n 40 "$LOGS/$name.log" >&2
	return "$rc"
}

# fail MESSAGE: ends the step that calls it.
fail() {
	echo "compose-test: $*" >&2
	return 1
}

# tree PID: PID and all its descendants, parents before children (from
# /proc, so no particular ps is needed).
tree() {
	local child
	echo "$1"
	for child in $(cat /proc/"$1"/task/*/children 2>/dev/null); do tree "$child"; done
}

# kill_tree SIGNAL PID: the signal to PID and all its descendants, all of
# them found before any is signalled (a child orphaned by its parent's
# death is still found).
kill_tree() {
	local pids
	pids=$(tree "$2")
	kill "-$1" $pids 2>/dev/null || true
}

# teardown NAME LIMIT FUNC ARGS...: one part of the cleanup, bounded: FUNC
# (output appended to $LOGS/down.log) runs at most LIMIT seconds, then it
# and what it started get SIGTERM, and those still there 10 s later
# SIGKILL. Prints one line like step's, so a run cut short shows which part
# of the teardown held it; returns FUNC's status. FUNC must return non-zero
# itself on failure: set -e does not hold in a function of the cleanup.
teardown() {
	local name=$1 limit=$2 t0=$SECONDS pid rc watchdog
	shift 2
	: >"$WORK/note"
	rm -f "$WORK/stopped" "$WORK/rc"
	(
		# Ctrl-C does not stop a part: the teardown runs to its end.
		trap '' INT
		"$@"
		# Its own status: a signal to this shell as it ends would give
		# wait the signal's.
		echo "$?" >"$WORK/rc"
	) >>"$LOGS/down.log" 2>&1 &
	pid=$!
	(
		# A Ctrl-C reaches this process group: it must not end the wait.
		trap '' INT
		sleep "$limit"
		tree "$pid" >"$WORK/stopped"
		echo "compose-test: $name took over $limit s; stopping it" >>"$LOGS/down.log"
		kill -TERM $(cat "$WORK/stopped") 2>/dev/null
	) &
	watchdog=$!
	# wait returns early when the cleanup's trap takes a signal: wait again.
	while :; do
		wait "$pid"
		rc=$?
		kill -0 "$pid" 2>/dev/null || break
	done
	[ ! -s "$WORK/rc" ] || rc=$(cat "$WORK/rc")
	kill_tree TERM "$watchdog"
	wait "$watchdog" 2>/dev/null
	if [ -s "$WORK/stopped" ]; then
		# Stopped at the limit, whatever its status (a tool may exit 0 on
		# SIGTERM): a failure. What ignored the SIGTERM gets SIGKILL.
		[ "$rc" -ne 0 ] || rc=124
		local p alive until=$((SECONDS + 10))
		while [ "$SECONDS" -lt "$until" ]; do
			alive=
			for p in $(cat "$WORK/stopped"); do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
			[ -n "$alive" ] || break
			sleep 0.1
		done
		[ -z "$alive" ] || kill -KILL $alive 2>/dev/null
	fi
	if [ "$rc" -eq 0 ]; then
		printf '  %-11s %4ds  %s\n' "$name" $((SECONDS - t0)) "$(cat "$WORK/note")"
	else
		printf '  %-11s %4ds  FAILED (exit %d; %s)\n' "$name" $((SECONDS - t0)) "$rc" "$LOGS/down.log"
		tail -n 20 "$LOGS/down.log" >&2
	fi
	return "$rc"
}

# save_state: after a failure, the containers' state and logs.
save_state() {
	compose ps -a >"$LOGS/ps.txt" 2>&1 || return
	compose logs --no-color --timestamps >"$LOGS/containers.log" 2>&1 || return
	note "the containers' state in $LOGS/ps.txt, their logs in $LOGS/containers.log"
}

# down: the stack removed with its volumes; --timeout bounds each
# container's stop (SIGKILL after it).
down() {
	compose down -v --remove-orphans --timeout 20 || return
	note "compose down -v: the stack and its volumes removed"
}

# dump_dockerd: the goroutines of the dockerd this script started, written
# by it on SIGUSR1 to a file dockerd.log names, so a hang shows where.
dump_dockerd() {
	[ -n "$DOCKERD_PID" ] && kill -USR1 "$DOCKERD_PID" 2>/dev/null || return 0
	sleep 1
	echo "compose-test: dockerd's $(grep -o 'goroutine stacks written to [^"]*' "$LOGS/dockerd.log" | tail -n 1)"
}

# engine_stop: the dockerd this script started, stopped.
engine_stop() {
	stop_dockerd || return
	note "dockerd stopped"
}

cleanup() {
	local status=$? rc
	set +e
	in_teardown
	# What a step interrupted midway kept (the dockerd it started).
	[ -f "$WORK/state" ] && . "$WORK/state"
	# The step under way, stopped: every child of this shell (a signal may
	# come before a step's pid is known). dockerd and debootstrap are not
	# among them: the steps' subshells that started them have ended.
	local child
	for child in $(cat /proc/$$/task/*/children 2>/dev/null); do kill_tree TERM "$child"; done
	wait 2>/dev/null
	if [ -n "$UP" ]; then
		if [ "$status" -ne 0 ]; then
			teardown state 120 save_state
		fi
		teardown down 120 down
		rc=$?
		if [ "$rc" -ne 0 ]; then
			[ "$status" -ne 0 ] || status=$rc
			dump_dockerd >&2
		fi
	fi
	if [ -n "$DOCKERD_PID" ]; then
		teardown engine 60 engine_stop
		rc=$?
		[ "$rc" -eq 0 ] || [ "$status" -ne 0 ] || status=$rc
		# dockerd is in a session of its own, out of the part's reach: a
		# part stopped at its limit leaves it to this.
		if [ "$(cat "/proc/$DOCKERD_PID/comm" 2>/dev/null)" = dockerd ]; then
			echo "compose-test: dockerd $DOCKERD_PID still runs after the engine's stop; killing it" >&2
			kill -KILL "$DOCKERD_PID" 2>/dev/null
		fi
	fi
	# A debootstrap still running after a failure finishes (its tarball
	# serves the next run) before this exits: no process is left behind.
	# At most 10 minutes, then it is stopped.
	if [ -n "${DEBOOTSTRAP_PID:-}" ] && kill -0 "$DEBOOTSTRAP_PID" 2>/dev/null; then
		echo "compose-test: waiting for the background debootstrap to finish (at most 600 s)" >&2
		local until=$((SECONDS + 600))
		while kill -0 "$DEBOOTSTRAP_PID" 2>/dev/null && [ "$SECONDS" -lt "$until" ]; do sleep 1; done
		if kill -0 "$DEBOOTSTRAP_PID" 2>/dev/null; then
			echo "compose-test: debootstrap still runs after 600 s; stopping it" >&2
			kill_tree TERM "$DEBOOTSTRAP_PID"
		fi
	fi
	rm -rf "$WORK"
	if [ "$status" -eq 0 ]; then
		echo "== compose-test passed in $((SECONDS - STARTED)) s"
	else
		echo "== compose-test FAILED after $((SECONDS - STARTED)) s (logs: $LOGS)" >&2
	fi
	exit "$status"
}
# in_teardown: the trap of the teardown. A signal then does not end this
# shell (the limit's SIGTERM reaches only it; a second Ctrl-C also reaches
# the part under way, which may stop, and the next parts still run).
in_teardown() { trap 'echo "compose-test: signal during the teardown; it goes on" >&2' INT TERM; }

# on_signal: a signal (make compose-test's limit, Ctrl-C) stops the step
# under way; the line printed names it, and the cleanup stops its
# processes. Ctrl-C comes twice at once (from the terminal and forwarded
# by timeout): the trap is the teardown's before anything else, so the
# second cannot end the cleanup the first began.
on_signal() {
	in_teardown
	echo "  ${STEP:-(between steps)}: stopped by a signal" >&2
	exit 130
}
trap cleanup EXIT
trap on_signal INT TERM

rand() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# --- 1. the engine

# stop_dockerd stops the dockerd this script started (SIGTERM, then up to
# 30 s for its containers and containerd to stop).
stop_dockerd() {
	kill -TERM "$DOCKERD_PID" 2>/dev/null || return 0
	local until=$((SECONDS + 30))
	while [ "$SECONDS" -lt "$until" ]; do
		kill -0 "$DOCKERD_PID" 2>/dev/null || { DOCKERD_PID=; return 0; }
		sleep 0.1
	done
	echo "dockerd $DOCKERD_PID did not stop within 30 s; killing it"
	dump_dockerd
	kill -KILL "$DOCKERD_PID" 2>/dev/null
	DOCKERD_PID=
}

engine() {
	if docker info >/dev/null 2>&1; then
		note "the running engine, Docker $(docker info -f '{{.ServerVersion}}')"
		return 0
	fi
	local installed=
	if ! command -v dockerd >/dev/null 2>&1; then
		# The package starts a dockerd of its own (iptables on, NAT rules
		# added) unless a policy-rc.d forbids it: forbid it for the install.
		local policy=/usr/sbin/policy-rc.d added=
		if [ ! -e "$policy" ]; then
			printf '#!/bin/sh\n# make compose-test: no service starts while docker.io installs\nexit 101\n' >"$policy"
			chmod 0755 "$policy"
			added=1
		fi
		apt_install docker.io || { [ -z "$added" ] || rm -f "$policy"; fail "apt-get install docker.io failed"; }
		[ -z "$added" ] || rm -f "$policy"
		installed="docker.io installed; "
	fi
	export DOCKER_HOST=unix://$RUN_DIR/docker.sock
	keep "export DOCKER_HOST=$DOCKER_HOST"
	mkdir -p "$RUN_DIR" "$CACHE/docker"
	# A dockerd of ours left by a run that was killed: stop it first.
	if [ -s "$RUN_DIR/dockerd.pid" ]; then
		local old
		old=$(cat "$RUN_DIR/dockerd.pid")
		if [ "$(cat "/proc/$old/comm" 2>/dev/null)" = dockerd ]; then
			echo "stopping dockerd $old, left by an earlier run"
			DOCKERD_PID=$old stop_dockerd
		fi
	fi
	# In a session of its own: a signal to this run's process group (make
	# compose-test's limit) leaves it up for the teardown, which stops it.
	setsid dockerd --data-root "$CACHE/docker" --exec-root "$RUN_DIR/exec" \
		--pidfile "$RUN_DIR/dockerd.pid" --host "$DOCKER_HOST" \
		--iptables=false --ip-forward=false >"$LOGS/dockerd.log" 2>&1 9>&- &
	DOCKERD_PID=$!
	keep "DOCKERD_PID=$DOCKERD_PID"
	for _ in $(seq 1 600); do
		if docker info >/dev/null 2>&1; then
			note "${installed}dockerd $(docker info -f '{{.ServerVersion}}') started (data root $CACHE/docker, --iptables=false --ip-forward=false)"
			return 0
		fi
		kill -0 "$DOCKERD_PID" 2>/dev/null || { keep DOCKERD_PID=; tail -n 30 "$LOGS/dockerd.log"; fail "dockerd exited at start-up"; }
		sleep 0.1
	done
	tail -n 30 "$LOGS/dockerd.log"
	fail "dockerd did not answer within 60 s"
}

# --- 2. Compose v2

compose_plugin() {
	local v
	if v=$(docker compose version --short 2>/dev/null) && [[ $v == v2.* || $v == 2.* ]]; then
		note "Docker Compose $v"
		return 0
	fi
	local bin=$CACHE/compose/$COMPOSE_VERSION/docker-compose how="cached build"
	if [ ! -x "$bin" ]; then
		how="built from its module"
		local dir
		dir=$(GOFLAGS=-mod=mod go mod download -json "github.com/docker/compose/v2@$COMPOSE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
		[ -d "$dir" ] || fail "go mod download github.com/docker/compose/v2@$COMPOSE_VERSION: no module directory"
		mkdir -p "$(dirname "$bin")"
		(cd "$dir" && GOWORK=off CGO_ENABLED=0 go build -trimpath \
			-ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" \
			-o "$bin.tmp" ./cmd)
		mv "$bin.tmp" "$bin"
	fi
	local plugins=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins
	mkdir -p "$plugins"
	install -m 0755 "$bin" "$plugins/docker-compose"
	v=$(docker compose version --short) || fail "docker compose version: the plugin in $plugins does not run"
	note "Docker Compose $v ($how, in $plugins)"
}

# compose ARGS... is docker compose on the stack with the demo's override,
# reading only our env file: neither the user's .env nor any variable of
# .env.example set in this shell (a provider key, another port) changes it.
compose() {
	local unset=()
	for v in $(sed -n 's/^\([A-Z_][A-Z0-9_]*\)=.*/\1/p' .env.example); do unset+=(-u "$v"); done
	env "${unset[@]}" docker compose -p "$PROJECT" --env-file "$WORK/compose.env" \
		-f compose.yaml -f deploy/compose.demo.yaml "$@"
}

# --- 3. base images

# debian_mirror is the Debian archive apt uses here (debootstrap fetches
# from it; the images' apt-get does too, through the build's host network).
debian_mirror() {
	local m
	m=$(sed -n 's/^URIs:[[:space:]]*\([^ ]*\/debian\)\/*$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
	[ -n "$m" ] || m=$(sed -n 's/^deb[[:space:]]\+\([^ ]*\/debian\)\/*[[:space:]]\+bookworm[[:space:]].*/\1/p' /etc/apt/sources.list 2>/dev/null | head -n 1)
	echo "${m:-http://deb.debian.org/debian}"
}

DEBIAN_TAR=$CACHE/images/debian-bookworm-slim.tar

# debian_tarball makes DEBIAN_TAR: a minbase bookworm root file system,
# trimmed of what the published slim image leaves out too (apt's lists and
# caches, documentation, manuals).
debian_tarball() {
	command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
	local rootfs=$DEBIAN_TAR.rootfs
	rm -rf "$rootfs"
	debootstrap --variant=minbase bookworm "$rootfs" "$(debian_mirror)"
	rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
		"$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log
	mkdir -p "$(dirname "$DEBIAN_TAR")"
	tar --numeric-owner -C "$rootfs" -cf "$DEBIAN_TAR.tmp" .
	mv "$DEBIAN_TAR.tmp" "$DEBIAN_TAR"
	rm -rf "$rootfs"
}

# start_debian_tarball runs debian_tarball in the background when the
# engine has no debian:bookworm-slim and no tarball is cached, so that on a
# cold machine its downloads overlap the Go builds of the next steps;
# base_debian waits for it ($WORK/debootstrap.rc holds its exit status).
start_debian_tarball() {
	if docker image inspect debian:bookworm-slim >/dev/null 2>&1 || [ -s "$DEBIAN_TAR" ]; then
		note "not needed: the Debian base is in the engine or cached"
		return 0
	fi
	(
		(
			set -e
			debian_tarball
		) >>"$LOGS/debootstrap.log" 2>&1
		echo "$?" >"$WORK/debootstrap.rc"
	) &
	keep "DEBOOTSTRAP_PID=$!"
	note "started in the background, beside the next steps"
}

base_debian() {
	if docker image inspect debian:bookworm-slim >/dev/null 2>&1; then
		note "debian:bookworm-slim (in the engine)"
		return 0
	fi
	local how="cached tarball"
	if [ -n "${DEBOOTSTRAP_PID:-}" ]; then
		how="debootstrap --variant=minbase bookworm, in the background"
		while [ ! -s "$WORK/debootstrap.rc" ]; do sleep 0.5; done
		if [ "$(cat "$WORK/debootstrap.rc")" -ne 0 ]; then
			tail -n 30 "$LOGS/debootstrap.log"
			fail "debootstrap failed (all of its output in $LOGS/debootstrap.log)"
		fi
	elif [ ! -s "$DEBIAN_TAR" ]; then
		how="debootstrap --variant=minbase bookworm"
		debian_tarball
	fi
	docker import --change 'CMD ["bash"]' --message "debootstrap --variant=minbase bookworm (make compose-test)" "$DEBIAN_TAR" debian:bookworm-slim
	note "debian:bookworm-slim ($how, $(du -m "$DEBIAN_TAR" | cut -f1) MB)"
}

base_versitygw() {
	if docker image inspect "$VERSITYGW_IMAGE" >/dev/null 2>&1; then
		note "$VERSITYGW_IMAGE (in the engine)"
		return 0
	fi
	local dir=$CACHE/versitygw/$VERSITYGW_VERSION how="cached build"
	if [ ! -x "$dir/versitygw" ]; then
		how="built from its module"
		mkdir -p "$dir"
		GOBIN=$dir CGO_ENABLED=0 go install -trimpath -ldflags '-s -w' "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
	fi
	local ctx=$WORK/versitygw
	mkdir -p "$ctx"
	cp "$dir/versitygw" "$ctx/"
	DOCKER_BUILDKIT=0 docker build --network host --build-arg VERSION="$VERSITYGW_VERSION" \
		-f scripts/compose-test/versitygw.Dockerfile -t "$VERSITYGW_IMAGE" "$ctx"
	note "$VERSITYGW_IMAGE (a stand-in: versitygw $how, on debian:bookworm-slim)"
}

# --- 4. the stack

images() {
	# The classic builder: BuildKit without buildx needs a frontend image.
	DOCKER_BUILDKIT=0 make --no-print-directory images DOCKER_BUILD_FLAGS="--network host" \
		VERSION="$VERSION" REVISION="$REVISION"
	# Older builds of this cache's images: keep :latest and this version.
	local old
	for old in $(docker images --format '{{.Repository}}:{{.Tag}}' 'brain-tools/*'); do
		case ${old##*:} in latest | "$VERSION") ;; *) docker rmi "$old" ;; esac
	done
	docker image prune -f
	note "brain-tools/*:latest and :$VERSION"
}

demo_binaries() {
	CGO_ENABLED=0 go build -o "$DEMO_BIN/fileserver" ./examples/fileserver
	go build -o "$DEMO_BIN/session" ./examples/session
	note "examples/fileserver (static, for the docs container) and examples/session"
}

up() {
	{
		# .env.example with the three tokens it leaves for the user to set.
		sed -e "s/^BRAIN_API_KEY=$/BRAIN_API_KEY=$BRAIN_API_KEY/" \
			-e "s/^BRAIN_TOOLS_KEY=$/BRAIN_TOOLS_KEY=$(rand)/" \
			-e "s/^APPROVAL_OPERATOR_TOKEN=$/APPROVAL_OPERATOR_TOKEN=$APPROVAL_OPERATOR_TOKEN/" .env.example
		echo "DEMO_DOCS_DIR=$(go env GOROOT)/doc"
	} >"$WORK/compose.env"
	keep UP=1
	compose down -v --remove-orphans # what a killed run may have left
	compose up -d --wait --no-build --pull never
	note "$(compose ps -q | wc -l) containers up and healthy"
}

# --- 5. checks

# containers prints one line per container of the stack: service, state,
# health, memory limit (bytes), CPU limit (nano CPUs), pids limit.
containers() {
	local id
	for id in $(compose ps -aq); do
		docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}} {{.HostConfig.Memory}} {{.HostConfig.NanoCpus}} {{if .HostConfig.PidsLimit}}{{.HostConfig.PidsLimit}}{{else}}0{{end}}' "$id"
	done
}

check_health() {
	local svc state health mem cpu pids n=0 bad=0
	while read -r svc state health mem cpu pids; do
		n=$((n + 1))
		echo "$svc: $state, $health, memory $mem, nano CPUs $cpu, pids $pids"
		if [ "$state" != running ] || [ "$health" != healthy ]; then
			echo "  $svc is $state/$health, want running/healthy"
			bad=1
		fi
		if [ "$mem" -le 0 ] || [ "$cpu" -le 0 ] || [ "$pids" -le 0 ]; then
			echo "  $svc runs without a memory, CPU or pids limit"
			bad=1
		fi
	done < <(containers)
	local want
	want=$(compose config --services | wc -l)
	[ "$n" -eq "$want" ] || { echo "$n containers, want one per service ($want)"; bad=1; }
	for url in http://127.0.0.1:8080/healthz http://127.0.0.1:8081/healthz; do
		curl -fsS "$url" || { echo "GET $url failed"; bad=1; }
		echo
	done
	[ "$bad" -eq 0 ] || fail "not every container is healthy and limited"
	note "$n containers running, healthy, with memory, CPU and pids limits; brain and the approval page answer on 127.0.0.1"
}

session() {
	BRAIN_URL=http://127.0.0.1:8080 DOCS_URL=http://docs:8090 BRAIN_TOOLS=$DEMO_TOOLS "$DEMO_BIN/session"
	note "$(tail -n 1 "$LOGS/session.log" | sed 's/^== //') ($(grep -c '^== ' "$LOGS/session.log") steps)"
}

# api METHOD PATH [BODY]: brain's API on its published port, the body on
# stdout; fails on an HTTP error.
api() {
	curl -fsS -X "$1" -H "Authorization: Bearer $BRAIN_API_KEY" -H 'Content-Type: application/json' \
		${3:+--data "$3"} "http://127.0.0.1:8080$2"
}

# sandbox_call SESSION COMMAND TIMEOUT: one sandbox_exec through brain,
# waited for; its ToolCall on stdout.
sandbox_call() {
	local body id
	body=$(printf '{"tool":"sandbox_exec","arguments":{"command":"%s","timeout_seconds":%d},"wait_seconds":30}' "$2" "$3")
	id=$(api POST "/sessions/$1/tool_calls" "$body" | tee "$WORK/call.json" | sed -n 's/^{"id":"\([^"]*\)".*/\1/p')
	while grep -q '"status":"\(queued\|running\)"' "$WORK/call.json"; do
		api GET "/tool_calls/$id?wait_seconds=30" >"$WORK/call.json"
	done
	cat "$WORK/call.json"
	echo
}

# in_sandbox CMD: a shell command in the sandbox container (as its user).
in_sandbox() { compose exec -T sandbox sh -c "$1"; }

check_sandbox() {
	local sid nonce out zombies
	sid=$(api POST /sessions '{"config":{"tools":["sandbox_exec"]}}' | sed -n 's/^{"id":"\([^"]*\)".*/\1/p')
	[ -n "$sid" ] || fail "POST /sessions: no session id"
	nonce=proof-$(rand)
	out=$(sandbox_call "$sid" "echo $nonce > proof.txt && echo wrote $nonce" 30)
	echo "$out"
	if ! grep -q '"status":"succeeded"' <<<"$out" || ! grep -q "wrote $nonce" <<<"$out"; then
		fail "sandbox_exec through brain did not succeed: $out"
	fi
	# The file the command wrote is in the sandbox container's workspaces.
	out=$(in_sandbox 'find /var/lib/brain-sandbox -name proof.txt -exec cat {} +')
	echo "in the sandbox container: $out"
	grep -qx "$nonce" <<<"$out" || fail "the sandbox container holds no proof.txt with $nonce: the command did not run there"

	# A command that times out must leave no zombie under the container's
	# PID 1 (the service): an unreaped one holds a pid until the end.
	out=$(sandbox_call "$sid" "sleep 60" 1)
	echo "$out"
	grep -q '"is_error":true' <<<"$out" || fail "sandbox_exec of sleep 60 with timeout_seconds 1 did not fail: $out"
	sleep 2
	zombies=$(in_sandbox 'grep -l "^State:[[:space:]]*Z" /proc/[0-9]*/status 2>/dev/null | wc -l')
	in_sandbox 'for s in /proc/[0-9]*/status; do sed -n "s/^\(Name\|State\|PPid\):[[:space:]]*//p" "$s" | tr "\n" " "; echo; done'
	api POST "/sessions/$sid/close" >/dev/null
	[ "$zombies" -eq 0 ] || fail "$zombies zombie process(es) under the sandbox container's PID 1 after a timed-out sandbox_exec: the service does not reap orphans as PID 1"
	note "sandbox_exec ran in the sandbox container ($nonce found there); no zombie after a timed-out command"
}

# metrics SERVICE PORT: GET /metrics of a service inside the network, asked
# from the sandbox container (the only image with a shell) with bash's
# /dev/tcp, since the others are not published and have no client.
metrics() {
	compose exec -T sandbox bash -c 'exec 3<>"/dev/tcp/$0/$1" && printf "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n" "$0" >&3 && cat <&3' "$1" "$2"
}

check_versions() {
	local version=$VERSION revision=$REVISION id svc image port line want got gov bad=0
	for id in $(compose ps -q); do
		read -r svc image port < <(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}} {{.Config.Image}} {{range $p, $_ := .Config.ExposedPorts}}{{$p}}{{end}}' "$id")
		[[ $image == brain-tools/* ]] || continue
		port=${port%%/*}
		line=$(compose exec -T "$svc" "/usr/local/bin/$svc" -version)
		want="$svc $version (revision $revision, "
		echo "$svc -version: $line"
		[[ $line == "$want"* ]] || { echo "  want $want..."; bad=1; }
		gov=${line##*, }
		gov=${gov%)}
		got=$(metrics "$svc" "$port" | tr -d '\r' | grep '^build_info{' || true)
		echo "$svc /metrics: $got"
		want="build_info{goversion=\"$gov\",revision=\"$revision\",service=\"$svc\",version=\"$version\"} 1"
		[ "$got" = "$want" ] || { echo "  want $want"; bad=1; }
		got=$(docker image inspect -f '{{index .Config.Labels "org.opencontainers.image.version"}} {{index .Config.Labels "org.opencontainers.image.revision"}}' "brain-tools/$svc:$version")
		echo "brain-tools/$svc:$version labels: $got"
		[ "$got" = "$version $revision" ] || { echo "  want $version $revision"; bad=1; }
	done
	[ "$bad" -eq 0 ] || fail "the versions disagree"
	note "-version, /metrics build_info, the :$version tag and the OCI labels agree for every image"
}

echo "== compose-test: the stack of compose.yaml in a Docker engine, driven by the demo session (logs in $LOGS)"
# The version the images are built with and checked against, taken once:
# a commit made while the test runs changes neither.
VERSION=$(make --no-print-directory -s print-version)
REVISION=$(bash scripts/version.sh revision)
BRAIN_API_KEY=$(rand)
APPROVAL_OPERATOR_TOKEN=$(rand)
export BRAIN_API_KEY APPROVAL_OPERATOR_TOKEN
step engine engine
step debootstrap start_debian_tarball
step compose compose_plugin
step debian base_debian
step versitygw base_versitygw
step images images
step demo-bins demo_binaries
step up up
step health check_health
step versions check_versions
step session session
step sandbox check_sandbox
