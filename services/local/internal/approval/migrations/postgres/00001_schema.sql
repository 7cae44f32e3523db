-- The approval store on PostgreSQL, shared by any number of local
-- replicas: the schema the SQLite store has reached at its step 3, in one
-- step. Times are Unix milliseconds, as there. ord gives rows the order
-- they were stored in (SQLite's rowid).

-- +goose Up
CREATE TABLE approvals (
	ord          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
	id           text PRIMARY KEY,
	tenant_id    text NOT NULL,
	session_id   text NOT NULL,
	call_id      text NOT NULL,
	origin       text NOT NULL,
	action       text NOT NULL,
	details      text NOT NULL,
	details_hash text NOT NULL,
	status       text NOT NULL CHECK (status IN ('pending','approved','denied','expired','cancelled')),
	created_at   bigint NOT NULL,
	expires_at   bigint NOT NULL,
	decided_at   bigint,
	operator     text NOT NULL DEFAULT '',
	comment      text NOT NULL DEFAULT '',
	UNIQUE (tenant_id, session_id, call_id)
);
CREATE INDEX approvals_pending ON approvals (status, expires_at);
CREATE INDEX approvals_decided ON approvals (decided_at);
CREATE INDEX approvals_tenant_pending ON approvals (tenant_id, status, expires_at);
CREATE INDEX approvals_session ON approvals (session_id);
CREATE INDEX approvals_ended ON approvals (decided_at) WHERE status != 'pending';

-- The decision log: append-only for every approval that exists; retention
-- removes an ended approval first, then its rows (the reference is checked
-- at commit).
CREATE TABLE decisions (
	seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	approval_id  text NOT NULL REFERENCES approvals (id) DEFERRABLE INITIALLY DEFERRED,
	decision     text NOT NULL CHECK (decision IN ('approved','denied','expired','cancelled')),
	operator     text NOT NULL,
	comment      text NOT NULL,
	details_hash text NOT NULL,
	at           bigint NOT NULL
);
CREATE INDEX decisions_approval ON decisions (approval_id);

-- The audit log: every decision, for good.
CREATE TABLE audit_log (
	seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at           bigint NOT NULL,
	operator     text NOT NULL,
	tenant_id    text NOT NULL,
	approval_id  text NOT NULL,
	decision     text NOT NULL,
	details_hash text NOT NULL,
	comment      text NOT NULL
);
CREATE INDEX audit_log_tenant ON audit_log (tenant_id, seq);

CREATE TABLE operator_accounts (
	name         text PRIMARY KEY,
	admin        integer NOT NULL CHECK (admin IN (0, 1)),
	tenants      text NOT NULL,
	token_sha256 text UNIQUE,
	identity     text UNIQUE,
	updated_at   bigint NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION '% is append-only', TG_ARGV[0];
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION decisions_no_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM approvals WHERE id = OLD.approval_id) THEN
		RAISE EXCEPTION 'decision log is append-only';
	END IF;
	RETURN OLD;
END $$;
-- +goose StatementEnd
CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions FOR EACH ROW EXECUTE FUNCTION append_only('decision log');
CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions FOR EACH ROW EXECUTE FUNCTION decisions_no_delete();
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log FOR EACH ROW EXECUTE FUNCTION append_only('audit log');
CREATE TRIGGER decisions_no_truncate BEFORE TRUNCATE ON decisions EXECUTE FUNCTION append_only('decision log');
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log EXECUTE FUNCTION append_only('audit log');
