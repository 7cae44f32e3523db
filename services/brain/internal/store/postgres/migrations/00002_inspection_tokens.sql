-- Inspection tokens, so that a token brain sent with a call reads the
-- session's events through any replica. Only the SHA-256 of a token is
-- kept (the tool contract: don't store it); a token is valid while its
-- call is unfinished, and its row goes when the call returns.

-- +goose Up
CREATE TABLE inspection_tokens (
	hash       bytea PRIMARY KEY,
	tenant_id  text NOT NULL,
	session_id text NOT NULL,
	call_id    text NOT NULL
);
CREATE INDEX inspection_tokens_session ON inspection_tokens (session_id);

-- +goose Down
DROP TABLE inspection_tokens;
