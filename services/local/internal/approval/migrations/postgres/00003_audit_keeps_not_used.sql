-- The audit log's "not used" mark (an approved or denied approval its
-- caller withdrew afterwards) was read from the approval row, which
-- retention removes while the audit log keeps its decision for good. The
-- mark is now kept beside the audit log, as long: one row per approval
-- withdrawn after its decision, written with approvals.withdrawn_at (the
-- approval's own mark, for its pages while it exists), never updated or
-- deleted. Those marked before this step are copied. The SQLite store's
-- step 5.

-- +goose Up
CREATE TABLE audit_not_used (
	approval_id  text PRIMARY KEY,
	withdrawn_at bigint NOT NULL
);
INSERT INTO audit_not_used (approval_id, withdrawn_at)
	SELECT id, withdrawn_at FROM approvals WHERE withdrawn_at IS NOT NULL;
CREATE TRIGGER audit_not_used_append_only BEFORE UPDATE OR DELETE ON audit_not_used FOR EACH ROW EXECUTE FUNCTION append_only('audit log');
CREATE TRIGGER audit_not_used_no_truncate BEFORE TRUNCATE ON audit_not_used EXECUTE FUNCTION append_only('audit log');
