-- A pending withdrawal: an approval call that ended before brain had
-- withdrawn its approval keeps, until the approval expires (ns; 0: none),
-- what tells another brain to send the withdrawal again. Such a call stays
-- leased to its owner, which is sending it, as an unfinished call is: when
-- the owner dies, another replica claims it once the lease ran out.

-- +goose Up
ALTER TABLE tool_calls ADD COLUMN withdraw_until bigint NOT NULL DEFAULT 0;
CREATE INDEX tool_calls_withdrawals ON tool_calls (lease_until) WHERE withdraw_until <> 0;

-- +goose Down
DROP INDEX tool_calls_withdrawals;
ALTER TABLE tool_calls DROP COLUMN withdraw_until;
