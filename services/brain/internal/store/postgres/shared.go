package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/jackc/pgx/v5"
)

// notifySQL is the NOTIFY of a signal, inside a statement of the write it
// tells of (delivered at commit).
const notifySQL = `pg_notify('` + channel + `', $%d)`

// PutAnswer implements store.Shared: one statement stores the answer only
// while its call waits for input, and signals the replicas.
func (db *DB) PutAnswer(ctx context.Context, a *store.Answer) error {
	payload, err := db.payload(store.Signal{Kind: store.SignalAnswer, CallID: a.CallID})
	if err != nil {
		return err
	}
	var id string
	err = db.pool.QueryRow(ctx, `INSERT INTO call_answers (id, call_id, body, api_key, created_at)
		SELECT $1, $2, $3, $4, $5 FROM tool_calls WHERE id = $2 AND status = 'requires_input'
		RETURNING id, `+fmt.Sprintf(notifySQL, 6), a.ID, a.CallID, string(a.Body), a.APIKey, unixNano(a.CreatedAt), payload).Scan(&id, new(string))
	if errors.Is(err, pgx.ErrNoRows) {
		return db.callRefusal(ctx, "store answer", a.CallID)
	}
	if err != nil {
		return fmt.Errorf("store answer: %w", err)
	}
	a.Status = store.AnswerPending
	return nil
}

const answerColumns = `id, call_id, body, api_key, status, reason, created_at`

func scanAnswer(row pgx.Row) (*store.Answer, error) {
	var (
		a       store.Answer
		body    string
		created int64
	)
	if err := row.Scan(&a.ID, &a.CallID, &body, &a.APIKey, &a.Status, &a.Reason, &created); err != nil {
		return nil, err
	}
	a.Body, a.CreatedAt = json.RawMessage(body), fromUnixNano(created)
	return &a, nil
}

// TakeAnswers implements store.Shared: only the call's owner takes its
// answers (a replica that lost the call leaves them to the one that took
// it over).
func (db *DB) TakeAnswers(ctx context.Context, callID string) ([]*store.Answer, error) {
	// The first answer stored is offered first.
	rows, err := db.pool.Query(ctx, `WITH t AS (UPDATE call_answers SET status = 'taken'
		WHERE id IN (SELECT id FROM call_answers WHERE call_id = $1 AND status = 'pending' FOR UPDATE SKIP LOCKED)
			AND EXISTS (SELECT 1 FROM tool_calls WHERE id = $1 AND owner = $2)
		RETURNING `+answerColumns+`) SELECT `+answerColumns+` FROM t ORDER BY created_at, id`, callID, db.o.Replica)
	if err != nil {
		return nil, fmt.Errorf("take answers: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Answer, error) { return scanAnswer(r) })
	if err != nil {
		return nil, fmt.Errorf("take answers: %w", err)
	}
	return out, nil
}

// PendingAnswers implements store.Shared.
func (db *DB) PendingAnswers(ctx context.Context) ([]string, error) {
	ids, err := queryIDs(ctx, db.pool, `SELECT DISTINCT call_id FROM call_answers WHERE status = 'pending'`)
	if err != nil {
		return nil, fmt.Errorf("list pending answers: %w", err)
	}
	return ids, nil
}

// SettleAnswer implements store.Shared.
func (db *DB) SettleAnswer(ctx context.Context, id, callID, status, reason string) error {
	if status != store.AnswerAccepted && status != store.AnswerRefused {
		return fmt.Errorf("settle answer %s: %q is not accepted or refused", id, status)
	}
	idJSON, _ := json.Marshal(id)
	payload, err := db.payload(store.Signal{Kind: store.SignalAnswerSettled, CallID: callID, Data: idJSON})
	if err != nil {
		return err
	}
	if _, err := db.pool.Exec(ctx, `WITH u AS (UPDATE call_answers SET status = $2, reason = $3 WHERE id = $1 RETURNING id)
		SELECT `+fmt.Sprintf(notifySQL, 4)+` FROM u`, id, status, reason, payload); err != nil {
		return fmt.Errorf("settle answer %s: %w", id, err)
	}
	return nil
}

// GetAnswer implements store.Shared.
func (db *DB) GetAnswer(ctx context.Context, id string) (*store.Answer, error) {
	a, err := scanAnswer(db.pool.QueryRow(ctx, `SELECT `+answerColumns+` FROM call_answers WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read answer %s: %w", id, err)
	}
	return a, nil
}

// WithdrawAnswer implements store.Shared.
func (db *DB) WithdrawAnswer(ctx context.Context, id string) (bool, error) {
	tag, err := db.pool.Exec(ctx, `UPDATE call_answers SET status = 'withdrawn' WHERE id = $1 AND status = 'pending'`, id)
	if err != nil {
		return false, fmt.Errorf("withdraw answer %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// DeleteAnswer implements store.Shared.
func (db *DB) DeleteAnswer(ctx context.Context, id string) error {
	if _, err := db.pool.Exec(ctx, `DELETE FROM call_answers WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete answer %s: %w", id, err)
	}
	return nil
}

// slotLock is the SQL call that takes the lock of the queue of tenant and
// tool (SQL expressions) until the transaction ends.
func slotLock(tenant, tool string) string {
	return `pg_advisory_xact_lock(hashtext('brain/slots'), hashtext(` + tenant + ` || '/' || ` + tool + `))`
}

// queueFilter selects the unfinished calls of a queue ($1 tenant, $2 tool).
const queueFilter = `tenant_id = $1 AND tool = $2 AND status IN ('queued', 'running', 'requires_input')`

// Admit implements store.Shared. The advisory lock makes the count and the
// hand-out one step for the queue across replicas; slots go by ord.
func (db *DB) Admit(ctx context.Context, q store.Queue, release string) ([]string, error) {
	var holding, admitted []string
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT `+slotLock("$1", "$2"), q.TenantID, q.Tool); err != nil {
			return err
		}
		if release != "" {
			// Only the call's owner gives its slot back: a call another
			// replica took over holds its slot there.
			if _, err := tx.Exec(ctx, `UPDATE tool_calls SET holds_slot = false WHERE id = $1 AND holds_slot AND owner = $2`,
				release, db.o.Replica); err != nil {
				return err
			}
		}
		var err error
		if admitted, err = queryIDs(ctx, tx, `WITH held AS (SELECT count(*) AS n FROM tool_calls WHERE `+queueFilter+` AND holds_slot)
			UPDATE tool_calls SET holds_slot = true WHERE id IN (
				SELECT id FROM tool_calls WHERE `+queueFilter+` AND status = 'queued' AND NOT holds_slot AND id <> $4
				ORDER BY ord LIMIT greatest($3 - (SELECT n FROM held), 0))
			RETURNING id`, q.TenantID, q.Tool, q.Max, release); err != nil {
			return err
		}
		if holding, err = queryIDs(ctx, tx, `SELECT id FROM tool_calls WHERE `+queueFilter+` AND status = 'queued' AND holds_slot ORDER BY ord`, q.TenantID, q.Tool); err != nil {
			return err
		}
		if len(admitted) == 0 {
			return nil
		}
		sig := store.Signal{Kind: store.SignalSlots, SessionID: q.TenantID, CallID: q.Tool}
		sig.Data, _ = json.Marshal(admitted)
		payload, err := db.payload(sig)
		if errors.Is(err, store.ErrSignalTooLarge) {
			sig.Data = nil // the receivers ask the store
			payload, err = db.payload(sig)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("admit queued calls of %s: %w", q.Tool, err)
	}
	return holding, nil
}

// Queued implements store.Shared.
func (db *DB) Queued(ctx context.Context, q store.Queue) (int, error) {
	var n int
	if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM tool_calls WHERE `+queueFilter+` AND status = 'queued' AND NOT holds_slot`,
		q.TenantID, q.Tool).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queued calls of %s: %w", q.Tool, err)
	}
	return n, nil
}

// QueuePosition implements store.Shared.
func (db *DB) QueuePosition(ctx context.Context, q store.Queue, id string) (int, error) {
	var n int
	if err := db.pool.QueryRow(ctx, `SELECT CASE WHEN c.status = 'queued' AND NOT c.holds_slot THEN
			(SELECT count(*) FROM tool_calls WHERE `+queueFilter+` AND status = 'queued' AND NOT holds_slot AND ord < c.ord) + 1 ELSE 0 END
		FROM tool_calls c WHERE c.id = $3`, q.TenantID, q.Tool, id).Scan(&n); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("queue position: %w", err)
	}
	return n, nil
}
