-- Retention (BRAIN_RETENTION) deletes ended sessions with their calls and
-- events: it finds them by the time they ended, and a session's calls by
-- their session (which GET /tool_calls?session_id= also reads).

-- +goose Up
CREATE INDEX IF NOT EXISTS sessions_ended ON sessions (updated_at) WHERE status IN ('interrupted', 'closed');
CREATE INDEX IF NOT EXISTS tool_calls_session ON tool_calls (session_id, ord);

-- +goose Down
DROP INDEX IF EXISTS tool_calls_session;
DROP INDEX IF EXISTS sessions_ended;
