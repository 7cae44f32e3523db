-- Retention (APPROVAL_RETENTION) removes ended approvals with their
-- decision log. The decision log's reference to its approval becomes
-- deferred, so that one transaction removes the approval and then its
-- rows; the log stays append-only for every approval that exists. The
-- audit log keeps every decision for good: it no longer references the
-- approval, which may be gone. Both tables are rebuilt (SQLite cannot
-- change a constraint in place) with every row and seq as it was; DROP
-- TABLE fires no trigger.

-- +goose Up
CREATE TABLE decisions_v3 (
	seq          INTEGER PRIMARY KEY AUTOINCREMENT,
	approval_id  TEXT NOT NULL REFERENCES approvals (id) DEFERRABLE INITIALLY DEFERRED,
	decision     TEXT NOT NULL CHECK (decision IN ('approved','denied','expired','cancelled')),
	operator     TEXT NOT NULL,
	comment      TEXT NOT NULL,
	details_hash TEXT NOT NULL,
	at           INTEGER NOT NULL
);
INSERT INTO decisions_v3 (seq, approval_id, decision, operator, comment, details_hash, at)
	SELECT seq, approval_id, decision, operator, comment, details_hash, at FROM decisions ORDER BY seq;
DROP TABLE decisions;
ALTER TABLE decisions_v3 RENAME TO decisions;
CREATE INDEX decisions_approval ON decisions (approval_id);
-- +goose StatementBegin
CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions
BEGIN SELECT RAISE(ABORT, 'decision log is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions
WHEN EXISTS (SELECT 1 FROM approvals WHERE id = OLD.approval_id)
BEGIN SELECT RAISE(ABORT, 'decision log is append-only'); END;
-- +goose StatementEnd

CREATE TABLE audit_log_v3 (
	seq          INTEGER PRIMARY KEY AUTOINCREMENT,
	at           INTEGER NOT NULL,
	operator     TEXT NOT NULL,
	tenant_id    TEXT NOT NULL,
	approval_id  TEXT NOT NULL,
	decision     TEXT NOT NULL,
	details_hash TEXT NOT NULL,
	comment      TEXT NOT NULL
);
INSERT INTO audit_log_v3 (seq, at, operator, tenant_id, approval_id, decision, details_hash, comment)
	SELECT seq, at, operator, tenant_id, approval_id, decision, details_hash, comment FROM audit_log ORDER BY seq;
DROP TABLE audit_log;
ALTER TABLE audit_log_v3 RENAME TO audit_log;
CREATE INDEX audit_log_tenant ON audit_log (tenant_id, seq);
-- +goose StatementBegin
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
-- +goose StatementEnd

-- Retention's scan: ended approvals by the time they were decided.
CREATE INDEX approvals_ended ON approvals (decided_at) WHERE status != 'pending';
