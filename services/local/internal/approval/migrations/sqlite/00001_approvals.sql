-- The approvals and their append-only decision log, as every approvals.db
-- has held them since the first release. IF NOT EXISTS throughout: a
-- database made before versioned migrations already has them and upgrades
-- through this step unchanged.

-- +goose Up
CREATE TABLE IF NOT EXISTS approvals (
	id           TEXT PRIMARY KEY,
	tenant_id    TEXT NOT NULL,
	session_id   TEXT NOT NULL,
	call_id      TEXT NOT NULL,
	origin       TEXT NOT NULL,
	action       TEXT NOT NULL,
	details      TEXT NOT NULL,
	details_hash TEXT NOT NULL,
	status       TEXT NOT NULL CHECK (status IN ('pending','approved','denied','expired','cancelled')),
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	decided_at   INTEGER,
	operator     TEXT NOT NULL DEFAULT '',
	comment      TEXT NOT NULL DEFAULT '',
	UNIQUE (tenant_id, session_id, call_id)
);
CREATE INDEX IF NOT EXISTS approvals_pending ON approvals (status, expires_at);
CREATE INDEX IF NOT EXISTS approvals_decided ON approvals (decided_at);

CREATE TABLE IF NOT EXISTS decisions (
	seq          INTEGER PRIMARY KEY AUTOINCREMENT,
	approval_id  TEXT NOT NULL REFERENCES approvals (id),
	decision     TEXT NOT NULL CHECK (decision IN ('approved','denied','expired','cancelled')),
	operator     TEXT NOT NULL,
	comment      TEXT NOT NULL,
	details_hash TEXT NOT NULL,
	at           INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_approval ON decisions (approval_id);

-- The decision log is append-only: SQLite itself refuses to change or
-- remove a row, whatever the code above it does.
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS decisions_no_update BEFORE UPDATE ON decisions
BEGIN SELECT RAISE(ABORT, 'decision log is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS decisions_no_delete BEFORE DELETE ON decisions
BEGIN SELECT RAISE(ABORT, 'decision log is append-only'); END;
-- +goose StatementEnd
