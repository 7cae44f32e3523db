#!/usr/bin/env bash
# `make bench`: each service measured side by side with its anchor, in one
# run per benchmark so both sides see the same machine. Numbers come from
# `go test -bench`; custom metrics (p50-ms, keep-%, MB/s, peak-MB) are
# reported by the benchmarks themselves. BENCH=regexp limits the set.
set -euo pipefail
cd "$(dirname "$0")/.."
filter=${BENCH:-.}

# bench TITLE PACKAGE REGEXP BENCHTIME
bench() {
  local title=$1 pkg=$2 re=$3 time=$4
  [[ "$title $pkg" =~ $filter ]] || return 0
  printf '\n== %s\n' "$title"
  go test -run '^$' -bench "$re" -benchtime "$time" -count 1 "$pkg" 2>&1 |
    grep -vE '^(goos|goarch|pkg|cpu):|^PASS$' || true
}

go version
echo "cpus: $(nproc), load: $(cut -d' ' -f1-3 /proc/loadavg)"

bench "pkg/service: echo on the service runtime vs a bare net/http handler doing the same JSON work" ./pkg/service 'BenchmarkEchoVsBare' 8000x
bench "pkg/service: echo declared with NewTool (arguments and output checked against their schemas) vs the same work in a literal tool without schemas" ./pkg/service 'BenchmarkEchoDeclared' 8000x
bench "brain: direct echo vs through brain with durable events (c=1, c=32); relay = the extra hop alone; relay+store = the hop plus the two mandated SQLite writes" ./services/brain/internal/server '^BenchmarkToolCall$' 8000x
bench "brain: reads with a million events in the store against one with only the session read (p50 of listing calls and of a session's events, SQLite and PostgreSQL; about 2 minutes, most of it filling the stores)" ./services/brain/internal/server '^BenchmarkGrowth$' 1x
bench "brain: durable event writes (SQLite)" ./services/brain/internal/store/sqlite 'BenchmarkCallWrites' 2000x
bench "pkg: result encoding, encoding/json vs AppendJSON" ./pkg/tool 'BenchmarkResultEncoding' 1s
bench "local: 1,000 approval streams held open, peak memory" ./services/local/internal/e2e 'BenchmarkApprovalStreams' 1x
bench "local: the approval queue's first page with 1,000 pending, size and render time" ./services/local/internal/operator 'BenchmarkQueuePage1000' 200x
bench "sandbox: sandbox_exec true through the service vs bwrap directly" ./services/sandbox/internal/app 'BenchmarkExecTrue' 200x
bench "storage: put+get 256 KiB through the service vs aws-sdk-go-v2 direct" ./services/storage/internal/tools 'BenchmarkPutGet256KiB' 2s
bench "webfetch: go_spec.html to Markdown, whole tool vs converter; loopback fetch p50" ./services/webfetch/internal/webfetch 'BenchmarkGoSpecRatio|BenchmarkLoopbackFetch' 30x
bench "browser: open-and-read of a local page through browser_open (real Chromium) beside web_fetch of the same page, p50/p99" ./services/browser/internal/app 'BenchmarkOpenAndRead' 40x
