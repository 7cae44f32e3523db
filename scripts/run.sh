#!/usr/bin/env bash
# The main job (`make run`): start the whole suite on loopback, drive one
# session through every tool, print what happened, stop everything.
# `run.sh up` (make up) starts the same suite and keeps it running, with
# its state and keys under bin/up, until Ctrl-C or a service exits;
# `run.sh config` (make config) regenerates examples/brain.json.
# Expects the binaries in ./bin (make build) and the dependencies installed
# (make deps). Services log to $WORK/logs; the logs are printed on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/bin
MODE=${1:-demo}
. scripts/demo-tools.sh

rand() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
if [ "$MODE" = up ]; then
  # Kept between runs: brain's and local's databases, the S3 data, and
  # the keys (made once, 0600), so what a tenant made is there next time.
  WORK=$ROOT/bin/up
  mkdir -p "$WORK/logs" "$WORK/data"
  if [ ! -f "$WORK/keys.env" ]; then
    (umask 077; printf 'BRAIN_API_KEY=%s\nBRAIN_TOOLS_KEY=%s\nAPPROVAL_OPERATOR_TOKEN=%s\nSTORAGE_SECRET_ACCESS_KEY=%s\n' \
      "$(rand)" "$(rand)" "$(rand)" "$(rand)" >"$WORK/keys.env")
  fi
  set -a; . "$WORK/keys.env"; set +a
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/brain-demo.XXXXXX")
  mkdir -p "$WORK/logs" "$WORK/data"
fi
# mktemp makes the directory 0700; the sandbox runs commands as unprivileged
# uids that must be able to reach their workspace below it.
chmod 0711 "$WORK" "$WORK/data"
PIDS=() NAMES=()

export BRAIN_API_KEY=${BRAIN_API_KEY:-$(rand)}
export BRAIN_TOOLS_KEY=${BRAIN_TOOLS_KEY:-$(rand)}
DOCS_ADDR=127.0.0.1:8090

cleanup() {
  local status=${1:-$?}
  trap - EXIT
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$status" -ne 0 ]; then
    if [ "$MODE" = up ]; then echo "the suite stopped (exit $status); service logs:" >&2; else echo "demo failed (exit $status); service logs:" >&2; fi
    for f in "$WORK"/logs/*.log; do echo "--- $(basename "$f")" >&2; tail -n 20 "$f" >&2; done
  fi
  [ "$MODE" = up ] || rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT INT TERM
# Ctrl-C is how make up ends: not a failure. Its services run in sessions
# of their own (setsid), so that the terminal's SIGINT reaches this script
# alone, which stops them: had they had it too, each would exit 0 and bash
# would take that as the SIGINT handled, run no trap, and see a service
# that exited.
DETACH=()
if [ "$MODE" = up ]; then
  # make passes a SIGTERM on as well: the suite is stopped once.
  trap 'trap "" INT TERM; echo; echo "stopping the suite"; cleanup 0' INT TERM
  DETACH=(setsid)
fi

# start NAME HEALTH_URL CMD... starts CMD in the background, logging to
# $WORK/logs/NAME.log, and waits up to 20 s for HEALTH_URL to answer 200.
# in_use HOST:PORT is true when something already listens there.
in_use() { (exec 3<>"/dev/tcp/${1%:*}/${1#*:}") 2>/dev/null; }

# free NAME HOST:PORT refuses to go on when another process holds the port:
# its health endpoint would otherwise pass for ours.
free() {
  if in_use "$2"; then
    echo "$1: $2 is already in use by another process; stop it (or the other demo) and run again" >&2
    return 1
  fi
}

start() {
  local name=$1 health=$2; shift 2
  local hostport=${health#http://}; hostport=${hostport%%/*}
  free "$name" "$hostport"
  "${DETACH[@]}" "$@" >"$WORK/logs/$name.log" 2>&1 &
  PIDS+=($!) NAMES+=("$name")
  local pid=$!
  for _ in $(seq 1 200); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "$name exited at start-up:" >&2; cat "$WORK/logs/$name.log" >&2; return 1
    fi
    if curl -fsS -o /dev/null "$health" 2>/dev/null; then
      printf '  %-10s up   (%s, pid %d)\n' "$name" "${health%/*}" "$pid"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "$name exited at start-up:" >&2; cat "$WORK/logs/$name.log" >&2; return 1
    fi
    sleep 0.1
  done
  echo "$name did not become healthy at $health within 20 s" >&2
  return 1
}

# wait_port NAME HOST:PORT PID waits up to 20 s for a TCP listener (for servers
# without a health endpoint that answers 200, like versitygw).
wait_port() {
  local name=$1 addr=$2 pid=$3
  for _ in $(seq 1 200); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "$name exited at start-up:" >&2; cat "$WORK/logs/$name.log" >&2; return 1
    fi
    if in_use "$addr"; then
      printf '  %-10s up   (%s)\n' "$name" "$addr"; return 0
    fi
    sleep 0.1
  done
  echo "$name is not listening on $addr after 20 s" >&2; cat "$WORK/logs/$name.log" >&2; return 1
}

echo "== starting the suite on loopback (work dir $WORK)"
start docs "http://$DOCS_ADDR/" "$BIN/fileserver" -addr "$DOCS_ADDR" -dir "$(go env GOROOT)/doc"

# The local S3 server the storage service runs on by default.
export STORAGE_BUCKET=brain-tools STORAGE_ACCESS_KEY_ID=local-access-key STORAGE_SECRET_ACCESS_KEY=${STORAGE_SECRET_ACCESS_KEY:-$(rand)}
free versitygw 127.0.0.1:7070
VERSITYGW_ADDR=127.0.0.1:7070 "${DETACH[@]}" services/storage/versitygw.sh "$WORK/data/s3" >"$WORK/logs/versitygw.log" 2>&1 &
PIDS+=($!) NAMES+=(versitygw)
wait_port versitygw 127.0.0.1:7070 "${PIDS[-1]}"

export APPROVAL_OPERATOR_TOKEN=${APPROVAL_OPERATOR_TOKEN:-$(rand)}
ADDR=127.0.0.1:8081 APPROVAL_DATA_DIR="$WORK/data/local" APPROVAL_PAGE_URL=http://127.0.0.1:8081 INSPECT_BRAIN_URLS=http://127.0.0.1:8080 \
  start local http://127.0.0.1:8081/healthz "$BIN/local"

ADDR=127.0.0.1:8082 SANDBOX_ROOT="$WORK/data/sandbox" \
  start sandbox http://127.0.0.1:8082/healthz "$BIN/sandbox"

ADDR=127.0.0.1:8083 STORAGE_PROVIDER=s3-compatible STORAGE_ENDPOINT=http://127.0.0.1:7070 \
  start storage http://127.0.0.1:8083/healthz "$BIN/storage"

# Without a provider key the search service still runs and says so on
# /healthz; the session leaves web_search out.
ADDR=127.0.0.1:8084 start search http://127.0.0.1:8084/healthz "$BIN/search"
if [ -z "${BRAVE_API_KEY:-}${TAVILY_API_KEY:-}" ]; then
  if [ "$MODE" = up ]; then
    echo "  search     unconfigured: web_search is in the catalog but its calls fail until BRAVE_API_KEY or TAVILY_API_KEY is set and the suite restarted"
  else
    echo "  search     unconfigured: the demo skips web_search; set BRAVE_API_KEY or TAVILY_API_KEY to call it"
  fi
  SEARCH=
else
  SEARCH=,web_search
fi

# The demo's pages live on a loopback server: the operator allow-list is
# the only way past the SSRF guard of web_fetch and of the browser, and it
# names exactly that. web_fetch renders through the browser when asked.
ADDR=127.0.0.1:8086 BROWSER_ALLOW="${DOCS_ADDR%:*}" BROWSER_PORTS="80,443,${DOCS_ADDR#*:}" \
  start browser http://127.0.0.1:8086/healthz "$BIN/browser"
ADDR=127.0.0.1:8085 WEBFETCH_ALLOW="${DOCS_ADDR%:*}" WEBFETCH_PORTS="80,443,${DOCS_ADDR#*:}" WEBFETCH_BROWSER_URL=http://127.0.0.1:8086 \
  start webfetch http://127.0.0.1:8085/healthz "$BIN/webfetch"

if [ "$MODE" = config ]; then
  # make config: regenerate the host config from what the services publish.
  "$BIN/genconfig" -host examples/brain.host.json http://127.0.0.1:8081 http://127.0.0.1:8082 http://127.0.0.1:8083 \
    http://127.0.0.1:8084 http://127.0.0.1:8085 http://127.0.0.1:8086 >examples/brain.json
  echo "wrote examples/brain.json ($(grep -c '"name"' examples/brain.json) tools)"
  exit 0
fi

# The committed host config should be what the services publish now, with
# what the host adds (examples/brain.host.json: the function tool, the gate
# on storage_delete, the approvals tool).
"$BIN/genconfig" -host examples/brain.host.json http://127.0.0.1:8081 http://127.0.0.1:8082 http://127.0.0.1:8083 \
  http://127.0.0.1:8084 http://127.0.0.1:8085 http://127.0.0.1:8086 >"$WORK/published.json"
if ! cmp -s "$WORK/published.json" examples/brain.json; then
  echo "  warning: examples/brain.json differs from the bindings the services publish: run make config" >&2
fi

# The demo's tenant makes a custom tool and gives a session an MCP server,
# both the local service on loopback: tenants' urls go through brain's SSRF
# guard, and the operator allow-list names exactly that address.
BRAIN_ADDR=127.0.0.1:8080 BRAIN_DATA_DIR="$WORK/data/brain" BRAIN_TENANT_URL_ALLOW=127.0.0.1 \
  start brain http://127.0.0.1:8080/healthz "$BIN/brain" -config examples/brain.json

if [ "$MODE" = up ]; then
  cat <<EOT

The suite is up on loopback until Ctrl-C (state and logs: $WORK):
  brain            http://127.0.0.1:8080     Authorization: Bearer $BRAIN_API_KEY
  operator page    http://127.0.0.1:8081/    operator token: $APPROVAL_OPERATOR_TOKEN
  Go docs          http://$DOCS_ADDR/        (allowed for web_fetch and the browser)
  keys             $WORK/keys.env
Try (in any shell): . "$WORK/keys.env" && curl -H "Authorization: Bearer \$BRAIN_API_KEY" http://127.0.0.1:8080/catalog
EOT
  # Until Ctrl-C (the trap stops everything), or until a service exits:
  # then say which and fail, with the logs.
  set +e
  wait -n "${PIDS[@]}"
  status=$?
  set -e
  for i in "${!PIDS[@]}"; do
    if ! kill -0 "${PIDS[$i]}" 2>/dev/null; then echo "${NAMES[$i]} exited (status $status); stopping the suite" >&2; fi
  done
  exit 1
fi

echo
BRAIN_URL=http://127.0.0.1:8080 DOCS_URL="http://$DOCS_ADDR" \
  BRAIN_TOOLS="${BRAIN_TOOLS:-$DEMO_TOOLS$SEARCH}" \
  "$BIN/session"
