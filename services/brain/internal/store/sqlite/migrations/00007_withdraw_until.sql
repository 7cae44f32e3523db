-- A pending withdrawal: an approval call that ended before brain had
-- withdrawn its approval keeps, until the approval expires (ns; 0: none),
-- what tells the next brain to send the withdrawal again. The calls that
-- have one are found at start on a partial index of their own.

-- +goose Up
ALTER TABLE tool_calls ADD COLUMN withdraw_until INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS tool_calls_withdrawals ON tool_calls (ord) WHERE withdraw_until <> 0;

-- +goose Down
DROP INDEX IF EXISTS tool_calls_withdrawals;
ALTER TABLE tool_calls DROP COLUMN withdraw_until;
