-- A call's trace span (the ToolCall's span_id; empty when brain was not
-- tracing), and the active sessions of every tenant counted for the
-- sessions_active gauge on a partial index of their own.

-- +goose Up
ALTER TABLE tool_calls ADD COLUMN span_id TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS sessions_active ON sessions (status) WHERE status = 'active';

-- +goose Down
DROP INDEX IF EXISTS sessions_active;
ALTER TABLE tool_calls DROP COLUMN span_id;
