-- Answers given through a replica that does not run the call, and a
-- binding's max_concurrency slots held in the database, so that both work
-- across replicas.
--
-- call_answers: POST /tool_calls/{id}/respond on a replica that does not
-- hold the call stores the answer here (pending) and NOTIFYs; the replica
-- running the call (or the one that takes it over after a lease) takes it
-- (taken), offers it to the call, and settles it: accepted (it was the
-- first answer) or refused, with the reason. The replica that stored it
-- reads the verdict, answers its client, and removes the row.
--
-- tool_calls.holds_slot: the call holds one of its binding's
-- max_concurrency slots for its tenant. Slots are taken in one transaction
-- under an advisory lock per tenant and binding, by the calls queued
-- first (ord); a call gives its slot back when it is done with the tool,
-- and a finished call holds none.

-- +goose Up
CREATE TABLE call_answers (
	id         text PRIMARY KEY,
	call_id    text NOT NULL,
	body       text NOT NULL,
	api_key    text NOT NULL,
	status     text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'taken', 'accepted', 'refused', 'withdrawn')),
	reason     text NOT NULL DEFAULT '',
	created_at bigint NOT NULL
);
CREATE INDEX call_answers_call ON call_answers (call_id, created_at);

ALTER TABLE tool_calls ADD COLUMN holds_slot boolean NOT NULL DEFAULT false;
CREATE INDEX tool_calls_queue ON tool_calls (tenant_id, tool, ord) WHERE status IN ('queued', 'running', 'requires_input');

-- +goose Down
DROP INDEX tool_calls_queue;
ALTER TABLE tool_calls DROP COLUMN holds_slot;
DROP TABLE call_answers;
