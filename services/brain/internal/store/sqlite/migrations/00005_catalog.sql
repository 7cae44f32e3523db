-- What tenants make through the API (store.Catalog): custom tools with
-- their immutable revisions, sealed secrets, toolsets, and the tool set of
-- each session given one with PUT; and the revision a tool call ran with.
-- IDs sort by creation time, so ORDER BY id lists oldest first. A custom
-- tool's revisions outlive it: calls name them.

-- +goose Up
CREATE TABLE custom_tools (
	id          TEXT PRIMARY KEY,
	tenant_id   TEXT NOT NULL,
	name        TEXT NOT NULL,
	revision_id TEXT NOT NULL,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	UNIQUE (tenant_id, name)
) WITHOUT ROWID;
CREATE INDEX custom_tools_tenant ON custom_tools (tenant_id, id);
CREATE TABLE tool_revisions (
	id         TEXT PRIMARY KEY,
	tool_id    TEXT NOT NULL,
	tenant_id  TEXT NOT NULL,
	definition TEXT NOT NULL,
	created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE secrets (
	tenant_id  TEXT NOT NULL,
	name       TEXT NOT NULL,
	sealed     BLOB NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, name)
) WITHOUT ROWID;
CREATE TABLE toolsets (
	id          TEXT PRIMARY KEY,
	tenant_id   TEXT NOT NULL,
	name        TEXT NOT NULL,
	description TEXT NOT NULL DEFAULT '',
	tools       TEXT NOT NULL,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX toolsets_tenant ON toolsets (tenant_id, id);
CREATE TABLE session_tools (
	session_id TEXT PRIMARY KEY,
	tenant_id  TEXT NOT NULL,
	entries    TEXT NOT NULL,
	updated_at INTEGER NOT NULL
) WITHOUT ROWID;
ALTER TABLE tool_calls ADD COLUMN revision_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tool_calls DROP COLUMN revision_id;
DROP TABLE session_tools;
DROP TABLE toolsets;
DROP TABLE secrets;
DROP TABLE tool_revisions;
DROP TABLE custom_tools;
