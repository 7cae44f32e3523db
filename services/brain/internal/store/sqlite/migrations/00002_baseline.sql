-- The schema brain created before versioned migrations (tag session5-base),
-- written so that it applies to an empty database and is a no-op on a
-- database that brain made then. Text primary keys are WITHOUT ROWID tables
-- (no separate key index); events.seq numbers a session's events from 1 in
-- commit order and is the event ID the API shows (the single writer hands
-- it out, so the index need not check uniqueness on every insert).

-- +goose Up
CREATE TABLE IF NOT EXISTS sessions (
	id         TEXT PRIMARY KEY,
	tenant_id  TEXT NOT NULL,
	status     TEXT NOT NULL,
	harness    TEXT NOT NULL DEFAULT '',
	tools      TEXT NOT NULL,
	config     TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tool_calls (
	id              TEXT PRIMARY KEY,
	seq             INTEGER NOT NULL,
	session_id      TEXT NOT NULL,
	tenant_id       TEXT NOT NULL,
	tool            TEXT NOT NULL,
	status          TEXT NOT NULL,
	arguments       TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	started_at      INTEGER NOT NULL DEFAULT 0,
	finished_at     INTEGER NOT NULL DEFAULT 0,
	error_code      TEXT NOT NULL DEFAULT '',
	error_message   TEXT NOT NULL DEFAULT '',
	unknown_outcome INTEGER NOT NULL DEFAULT 0,
	result          TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tool_calls_tenant ON tool_calls (tenant_id, seq);
CREATE TABLE IF NOT EXISTS events (
	id         INTEGER PRIMARY KEY,
	session_id TEXT NOT NULL,
	seq        INTEGER NOT NULL,
	call_id    TEXT NOT NULL DEFAULT '',
	type       TEXT NOT NULL,
	time       INTEGER NOT NULL,
	data       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_session_seq ON events (session_id, seq);

-- +goose Down
-- The baseline is where every database starts; it is never undone.
SELECT 1;
