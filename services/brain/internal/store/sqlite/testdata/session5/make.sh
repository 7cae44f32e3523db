#!/usr/bin/env bash
# make.sh rebuilds brain.db, brain.db-wal and golden.json: the data dir of a
# brain built from the tag session5-base (the schema before versioned
# migrations), driven through its HTTP API, then killed with SIGKILL while a
# call is in flight — a real crashed data dir. golden.json is what that brain
# answered (sessions, every call, every session's events) just before the
# kill. The upgrade test (../../upgrade_test.go) opens a copy with today's
# store and checks every row against it.
#
#   bash make.sh            (from anywhere; needs git, go, curl, python3)
#
# Ports: brain and local on free loopback ports picked by the script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

git -C "$repo" archive session5-base | tar -x -C "$work"
(cd "$work" && go build -o "$work/bin/" ./services/brain ./services/local)

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
bport=$(port) lport=$(port) dead=$(port)
export BRAIN_API_KEY=gen-api-key-0123456789 OTHER_API_KEY=gen-other-key-0123456789 BRAIN_TOOLS_KEY=gen-tools-key-0123456789

cat >"$work/brain.json" <<JSON
{"api_keys":[{"env":"BRAIN_API_KEY","tenant":"local"},{"env":"OTHER_API_KEY","tenant":"other"}],
 "tools":[
  {"name":"echo","description":"echo","input_schema":{"type":"object","properties":{"text":{"type":"string","maxLength":4096}},"required":["text"],"additionalProperties":false},
   "url":"http://127.0.0.1:$lport/tools/echo","token_env":"BRAIN_TOOLS_KEY","tenants":["local","other"]},
  {"name":"request_approval","description":"approval","input_schema":{"type":"object"},
   "url":"http://127.0.0.1:$lport/tools/request_approval","token_env":"BRAIN_TOOLS_KEY","tenants":["local"],"timeout_seconds":3660},
  {"name":"gone","description":"a tool whose service is not running","input_schema":{"type":"object"},
   "url":"http://127.0.0.1:$dead/tools/gone","token_env":"BRAIN_TOOLS_KEY","tenants":["local"]}
 ]}
JSON

mkdir -p "$work/brain" "$work/local"
ADDR=127.0.0.1:$lport APPROVAL_DATA_DIR="$work/local" APPROVAL_OPERATOR_TOKEN=gen-operator-token-0123456789 \
	"$work/bin/local" >"$work/local.log" 2>&1 &
BRAIN_ADDR=127.0.0.1:$bport BRAIN_DATA_DIR="$work/brain" "$work/bin/brain" -config "$work/brain.json" >"$work/brain.log" 2>&1 &
brain_pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$bport/healthz" >/dev/null && curl -sf "http://127.0.0.1:$lport/healthz" >/dev/null && break; sleep 0.1; done

b="http://127.0.0.1:$bport"
api() { # METHOD PATH [BODY] [KEY]
	curl -sS -X "$1" "$b$2" -H "Authorization: Bearer ${4:-$BRAIN_API_KEY}" -H 'Content-Type: application/json' ${3:+-d "$3"}
}
sid() { python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'; }

# A session with finished calls of each kind, then closed.
s1=$(api POST /sessions '{"harness":"pi","config":{"model":"openai/gpt-4.1-mini","tools":["echo","gone","request_approval"]}}' | sid)
for text in hello "zwei wörter" '\"quoted\" ✓'; do api POST "/sessions/$s1/tool_calls" "{\"tool\":\"echo\",\"arguments\":{\"text\":\"$text\"},\"wait_seconds\":5}" >/dev/null; done
api POST "/sessions/$s1/tool_calls" '{"tool":"echo","arguments":{"text":7},"wait_seconds":5}' >/dev/null     # invalid_arguments
api POST "/sessions/$s1/tool_calls" '{"tool":"gone","wait_seconds":5}' >/dev/null                        # connection_failed
c=$(api POST "/sessions/$s1/tool_calls" '{"tool":"request_approval","arguments":{"action":"deploy"},"wait_seconds":0}' | sid)
sleep 0.3
api POST "/tool_calls/$c/cancel" >/dev/null                                                             # cancelled, unknown outcome
api POST "/sessions/$s1/close" >/dev/null

# A session interrupted with an approval pending, then left interrupted.
s2=$(api POST /sessions '{"config":{"tools":["echo","request_approval"]}}' | sid)
api POST "/sessions/$s2/tool_calls" '{"tool":"echo","arguments":{"text":"before the interrupt"},"wait_seconds":5}' >/dev/null
api POST "/sessions/$s2/tool_calls" '{"tool":"request_approval","arguments":{"action":"wait"},"wait_seconds":0}' >/dev/null
sleep 0.3
api POST "/sessions/$s2/interrupt" >/dev/null

# Another tenant's session.
s3=$(api POST /sessions '{"config":{"tools":["echo"]}}' "$OTHER_API_KEY" | sid)
api POST "/sessions/$s3/tool_calls" '{"tool":"echo","arguments":{"text":"other tenant"},"wait_seconds":5}' "$OTHER_API_KEY" >/dev/null

# An active session with a call in flight when brain is killed.
s4=$(api POST /sessions '{"config":{"tools":["echo","request_approval"]}}' | sid)
api POST "/sessions/$s4/tool_calls" '{"tool":"echo","arguments":{"text":"last finished"},"wait_seconds":5}' >/dev/null
api POST "/sessions/$s4/tool_calls" '{"tool":"request_approval","arguments":{"action":"in flight at the crash"},"wait_seconds":0}' >/dev/null
sleep 0.3

python3 - "$b" "$BRAIN_API_KEY" "$OTHER_API_KEY" "$s1 $s2 $s4" "$s3" >"$here/golden.json" <<'PY'
import json, sys, urllib.request
base, key, other, mine, theirs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5].split()
def get(path, k, accept="application/json"):
    req = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + k, "Accept": accept})
    return json.load(urllib.request.urlopen(req))
out = {"sessions": [], "calls": [], "events": {}}
for k, ids in ((key, mine), (other, theirs)):
    for s in ids:
        out["sessions"].append(get("/sessions/" + s, k))
        out["events"][s] = get("/sessions/%s/events?limit=1000" % s, k)["events"]
    out["calls"] += get("/tool_calls?limit=1000", k)["tool_calls"]
json.dump(out, sys.stdout, indent=1, ensure_ascii=False, sort_keys=True)
print()
PY
kill -KILL "$brain_pid"
wait "$brain_pid" 2>/dev/null || true
cp "$work/brain/brain.db" "$here/brain.db"
if [[ -f "$work/brain/brain.db-wal" ]]; then cp "$work/brain/brain.db-wal" "$here/brain.db-wal"; else rm -f "$here/brain.db-wal"; fi
ls -l "$here"
