#!/usr/bin/env bash
# deps.sh installs what brain's PostgreSQL store tests and the approval
# service's need: Debian's PostgreSQL server (postgresql-15: initdb, postgres,
# psql, pg_dump, pg_restore under /usr/lib/postgresql/15/bin). pkg/pgtest
# starts a server of its own per test binary; nothing is started here.
# Idempotent: installs only what is missing.
set -euo pipefail

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && [[ -z "${PGTEST_BIN:-}" ]]; then
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15
fi
if [[ -n "${PGTEST_BIN:-}" ]]; then
	"$PGTEST_BIN/postgres" --version
else
	"$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)/postgres" --version
fi
