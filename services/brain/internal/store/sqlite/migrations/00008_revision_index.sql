-- A custom tool keeps at most so many revisions (store.Catalog's
-- UpdateCustomTool counts them in its transaction): the count reads an
-- index of each tool's revisions rather than all of them.

-- +goose Up
CREATE INDEX IF NOT EXISTS tool_revisions_tool ON tool_revisions (tool_id);

-- +goose Down
DROP INDEX IF EXISTS tool_revisions_tool;
