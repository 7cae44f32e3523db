-- The audit log's "not used" mark (an approved or denied approval its
-- caller withdrew afterwards) was read from the approval row, which
-- retention removes while the audit log keeps its decision for good. The
-- mark is now kept beside the audit log, as long: one row per approval
-- withdrawn after its decision, written with approvals.withdrawn_at (the
-- approval's own mark, for its pages while it exists), never updated or
-- deleted. Those marked before this step are copied.

-- +goose Up
CREATE TABLE audit_not_used (
	approval_id  TEXT PRIMARY KEY,
	withdrawn_at INTEGER NOT NULL
);
INSERT INTO audit_not_used (approval_id, withdrawn_at)
	SELECT id, withdrawn_at FROM approvals WHERE withdrawn_at IS NOT NULL;
-- +goose StatementBegin
CREATE TRIGGER audit_not_used_no_update BEFORE UPDATE ON audit_not_used
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER audit_not_used_no_delete BEFORE DELETE ON audit_not_used
BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;
-- +goose StatementEnd
