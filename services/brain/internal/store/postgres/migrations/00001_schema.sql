-- brain's schema on PostgreSQL, shared by every brain replica. Times are
-- nanoseconds since the Unix epoch (0 = unset), as in the SQLite store, so
-- both keep the same precision. JSON documents are text: stored and
-- returned byte for byte (jsonb would reorder keys).
--
-- sessions.last_seq is the ID of the session's newest event: a write that
-- appends an event raises it in its transaction, which locks the session's
-- row, so a session's events are numbered 1, 2, 3… in commit order by
-- whichever replica writes them, with no gap and no duplicate.
--
-- tool_calls.owner is the replica running a call and lease_until (ns) how
-- long that replica's claim holds without renewal; a call whose lease ran
-- out belongs to a replica that died, and another one ends it
-- (brain_restarted). ord orders lists and a binding's queue. The fields of
-- calls that wait (parent_id … retryable) are those of the SQLite schema's
-- version 3.

-- +goose Up
CREATE TABLE sessions (
	id         text PRIMARY KEY,
	tenant_id  text NOT NULL,
	status     text NOT NULL,
	harness    text NOT NULL DEFAULT '',
	tools      text NOT NULL,
	config     text NOT NULL,
	created_at bigint NOT NULL,
	updated_at bigint NOT NULL,
	last_seq   bigint NOT NULL DEFAULT 0
);
CREATE INDEX sessions_ended ON sessions (updated_at) WHERE status IN ('interrupted', 'closed');

CREATE TABLE tool_calls (
	id              text PRIMARY KEY,
	ord             bigint GENERATED ALWAYS AS IDENTITY,
	session_id      text NOT NULL,
	tenant_id       text NOT NULL,
	tool            text NOT NULL,
	status          text NOT NULL,
	arguments       text NOT NULL,
	created_at      bigint NOT NULL,
	started_at      bigint NOT NULL DEFAULT 0,
	finished_at     bigint NOT NULL DEFAULT 0,
	error_code      text NOT NULL DEFAULT '',
	error_message   text NOT NULL DEFAULT '',
	unknown_outcome boolean NOT NULL DEFAULT false,
	result          text,
	parent_id           text NOT NULL DEFAULT '',
	caller_type         text NOT NULL DEFAULT 'api',
	input_kind          text NOT NULL DEFAULT '',
	prompt              text NOT NULL DEFAULT '',
	response_schema     text,
	response_expires_at bigint NOT NULL DEFAULT 0,
	retryable           boolean,
	owner           text NOT NULL DEFAULT '',
	lease_until     bigint NOT NULL DEFAULT 0
);
CREATE INDEX tool_calls_tenant_ord ON tool_calls (tenant_id, ord);
CREATE INDEX tool_calls_session ON tool_calls (session_id, ord);
CREATE INDEX tool_calls_unfinished ON tool_calls (lease_until) WHERE status IN ('queued', 'running', 'requires_input');

CREATE TABLE events (
	session_id text NOT NULL,
	seq        bigint NOT NULL,
	call_id    text NOT NULL DEFAULT '',
	type       text NOT NULL,
	time       bigint NOT NULL,
	data       text NOT NULL,
	PRIMARY KEY (session_id, seq)
);

-- +goose Down
DROP TABLE events;
DROP TABLE tool_calls;
DROP TABLE sessions;
