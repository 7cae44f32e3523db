-- When the caller withdrew (approval_cancel) an approval an operator had
-- already approved or denied: the caller had stopped waiting (it was
-- answered another way, or its call ended), so the decision was recorded
-- but not used. NULL for every other approval, and for those decided
-- before this step. Only an approved or denied approval carries one. The
-- SQLite store's step 4.

-- +goose Up
ALTER TABLE approvals ADD COLUMN withdrawn_at bigint CHECK (withdrawn_at IS NULL OR status IN ('approved','denied'));
