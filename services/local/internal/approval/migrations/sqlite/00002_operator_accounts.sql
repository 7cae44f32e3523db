-- Operator accounts scoped to tenants, the audit log's tenant column, and
-- the indexes of the queue's filters. Existing approvals and decisions are
-- kept as they are; each past decision gets its approval's tenant.

-- +goose Up
CREATE TABLE operator_accounts (
	name         TEXT PRIMARY KEY,
	admin        INTEGER NOT NULL CHECK (admin IN (0, 1)),
	-- the tenants a non-admin may see and decide for, one per line
	tenants      TEXT NOT NULL,
	-- hex SHA-256 of the personal token, NULL without one
	token_sha256 TEXT UNIQUE,
	-- the identity an authenticating proxy vouches for, NULL without one
	identity     TEXT UNIQUE,
	updated_at   INTEGER NOT NULL
);

-- The audit log: every decision with who, when, tenant, the hash of what
-- was shown, and the comment; append-only like the decision log it
-- mirrors, and filled from it for the decisions made before this step.
CREATE TABLE audit_log (
	seq          INTEGER PRIMARY KEY AUTOINCREMENT,
	at           INTEGER NOT NULL,
	operator     TEXT NOT NULL,
	tenant_id    TEXT NOT NULL,
	approval_id  TEXT NOT NULL REFERENCES approvals (id),
	decision     TEXT NOT NULL,
	details_hash TEXT NOT NULL,
	comment      TEXT NOT NULL
);
CREATE INDEX audit_log_tenant ON audit_log (tenant_id, seq);
INSERT INTO audit_log (at, operator, tenant_id, approval_id, decision, details_hash, comment)
	SELECT d.at, d.operator, a.tenant_id, d.approval_id, d.decision, d.details_hash, d.comment
	FROM decisions d JOIN approvals a ON a.id = d.approval_id ORDER BY d.seq;
-- +goose StatementBegin
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
-- +goose StatementEnd

-- The queue: pending by tenant in deadline order, and by session.
CREATE INDEX approvals_tenant_pending ON approvals (tenant_id, status, expires_at);
CREATE INDEX approvals_session ON approvals (session_id);
