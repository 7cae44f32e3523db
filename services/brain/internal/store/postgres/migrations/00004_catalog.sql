-- What tenants make through the API (store.Catalog): custom tools with
-- their immutable revisions, sealed secrets, toolsets, and the tool set of
-- each session given one with PUT; and the revision a tool call ran with.
-- The same tables as the SQLite schema's version 5. IDs sort by creation
-- time, so ORDER BY id lists oldest first. A custom tool's revisions
-- outlive it: calls name them.

-- +goose Up
CREATE TABLE custom_tools (
	id          text PRIMARY KEY,
	tenant_id   text NOT NULL,
	name        text NOT NULL,
	revision_id text NOT NULL,
	created_at  bigint NOT NULL,
	updated_at  bigint NOT NULL,
	UNIQUE (tenant_id, name)
);
CREATE INDEX custom_tools_tenant ON custom_tools (tenant_id, id);
CREATE TABLE tool_revisions (
	id         text PRIMARY KEY,
	tool_id    text NOT NULL,
	tenant_id  text NOT NULL,
	definition text NOT NULL,
	created_at bigint NOT NULL
);
CREATE TABLE secrets (
	tenant_id  text NOT NULL,
	name       text NOT NULL,
	sealed     bytea NOT NULL,
	created_at bigint NOT NULL,
	updated_at bigint NOT NULL,
	PRIMARY KEY (tenant_id, name)
);
CREATE TABLE toolsets (
	id          text PRIMARY KEY,
	tenant_id   text NOT NULL,
	name        text NOT NULL,
	description text NOT NULL DEFAULT '',
	tools       text NOT NULL,
	created_at  bigint NOT NULL,
	updated_at  bigint NOT NULL
);
CREATE INDEX toolsets_tenant ON toolsets (tenant_id, id);
CREATE TABLE session_tools (
	session_id text PRIMARY KEY,
	tenant_id  text NOT NULL,
	entries    text NOT NULL,
	updated_at bigint NOT NULL
);
ALTER TABLE tool_calls ADD COLUMN revision_id text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tool_calls DROP COLUMN revision_id;
DROP TABLE session_tools;
DROP TABLE toolsets;
DROP TABLE secrets;
DROP TABLE tool_revisions;
DROP TABLE custom_tools;
