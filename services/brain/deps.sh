#!/usr/bin/env bash
# deps.sh installs what brain's PostgreSQL store tests and benchmarks need:
# Debian's PostgreSQL server (postgresql-15: initdb, postgres, psql,
# pg_dump, pg_restore under /usr/lib/postgresql/15/bin). pkg/pgtest starts a
# server of its own per test binary; nothing is started here. Idempotent:
# installs only what is missing, on one line; apt's output goes to DEPS_LOG
# (scripts/install.sh). PGTEST_BIN, when set, names binaries to use instead.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/install.sh"

if [[ -z "${PGTEST_BIN:-}" ]] && ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
	apt_install postgresql-15
fi
