#!/usr/bin/env bash
# mcp-deps.sh installs the Node tools the MCP checks need, pinned by
# scripts/mcp/package-lock.json: Node 22 itself (the "node" package of the
# npm registry, so the machine's own Node may be older), the MCP conformance
# suite and the MCP Inspector CLI. They go to a cache directory, by default
# $HOME/.cache/brain-tools/mcp-node (override with MCP_NODE_DIR), which the
# conformance test in services/local/internal/mcpconformance reads.
#
# Idempotent: nothing is installed when the cache already holds this lock
# file's packages and a Node 22 binary. Needs npm (Debian's "npm" package).
# Prints one line per dependency installed; apt's and npm's output go to
# DEPS_LOG (scripts/install.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/install.sh"
dir="${MCP_NODE_DIR:-$HOME/.cache/brain-tools/mcp-node}"

stamp="$dir/.installed-lock.json"
if [ -x "$dir/node_modules/.bin/node" ] &&
	cmp -s "$here/mcp/package-lock.json" "$stamp" &&
	"$dir/node_modules/.bin/node" --version 2>/dev/null | grep -q '^v22\.'; then
	exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
	apt_install npm
fi

mkdir -p "$dir"
cp "$here/mcp/package.json" "$here/mcp/package-lock.json" "$dir/"
rm -f "$stamp"
# The lock file pins every package (npm install rather than npm ci: ci
# trips over optional platform packages missing from a lock made on Linux);
# package.json's allowScripts lets only the node package run its install
# script, which unpacks the Node binary.
logged "Node 22, the MCP conformance suite and Inspector (npm, in $dir)" \
	env -C "$dir" npm install --no-audit --no-fund --loglevel=error
"$dir/node_modules/.bin/node" --version | grep -q '^v22\.' || {
	echo "mcp-deps.sh: $dir/node_modules/.bin/node is not Node 22 after install" >&2
	exit 1
}
cp "$here/mcp/package-lock.json" "$stamp"
