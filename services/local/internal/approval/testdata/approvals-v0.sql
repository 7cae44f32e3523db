-- The schema of approvals.db before versioned migrations (the first release),
-- with a pending and a decided approval: TestUpgradeFromUnversionedDatabase
-- opens such a file and checks that nothing is lost.
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
CREATE TRIGGER IF NOT EXISTS decisions_no_update BEFORE UPDATE ON decisions
BEGIN SELECT RAISE(ABORT, 'decision log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS decisions_no_delete BEFORE DELETE ON decisions
BEGIN SELECT RAISE(ABORT, 'decision log is append-only'); END;

INSERT INTO approvals VALUES ('aaaaaaaaaaaaaaaaaaaaaaaaaa', 'acme', 's1', 'c1', 'request_approval', 'Rotate the key', 'kubectl rollout restart', 'hash-1', 'pending', 1700000000000, 4102444800000, NULL, '', '');
INSERT INTO approvals VALUES ('bbbbbbbbbbbbbbbbbbbbbbbbbb', 'globex', 's2', 'c2', 'approval_start', 'Delete 14 files', '', 'hash-2', 'denied', 1700000000000, 1700000600000, 1700000100000, 'bob', 'use the bastion');
INSERT INTO decisions (approval_id, decision, operator, comment, details_hash, at) VALUES ('bbbbbbbbbbbbbbbbbbbbbbbbbb', 'denied', 'bob', 'use the bastion', 'hash-2', 1700000100000);

