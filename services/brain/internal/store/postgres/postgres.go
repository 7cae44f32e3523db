// Package postgres implements store.Shared on PostgreSQL through
// github.com/jackc/pgx/v5: any number of brain replicas on one database,
// any of them serving any request.
//
// Every write is one transaction that has committed when the method
// returns. A session's event IDs are allocated in the database
// (sessions.last_seq, raised under the session's row lock), so events are
// numbered 1, 2, 3… in commit order whichever replica writes them. Each
// write also NOTIFYs the other replicas (channel "brain", delivered at
// commit, in commit order), which read what they were told of from the
// table: the notification is the signal, the table the truth.
//
// Calls are owned by the replica that created them, under a lease it
// renews (RenewLeases); a replica that dies stops renewing, and another
// takes its calls over (ClaimExpired) to end them, and to send the
// withdrawals left pending on calls it had finished (Call.WithdrawUntil).
// The owner column fences every write for a call (see store.Shared): its
// statement matches the row only while owner is this replica, so a replica
// that lost its calls while paused cannot write for them when it resumes.
package postgres

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"github.com/brain-tools/suite/pkg/pgbound"
	"github.com/brain-tools/suite/pkg/pglisten"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// channel is the NOTIFY channel of every signal.
const channel = "brain"

// maxPayload is the largest notification payload to send.
const maxPayload = pglisten.MaxPayload

// Options configures Open.
type Options struct {
	// URL is the database, a postgres:// URL (libpq's forms, as pgx reads
	// them). Required.
	URL string
	// Replica is this replica's ID, the owner of the calls it creates.
	// Required.
	Replica string
	// Lease is how long a call's claim holds without renewal; a new call
	// is leased until its creation plus Lease. Required.
	Lease time.Duration
	// OnCommit, when set, receives every event this replica appended, after
	// its transaction committed, with IDs rising within a session (an event
	// overtaken by a later one of its session is left out: the reader of
	// the later one reads it from the table). It must not block.
	OnCommit func(store.Event)
	// OnSignal, when set, receives the signals other replicas send,
	// including SignalEvent for each of their commits, in commit order, and
	// SignalResync after the listener reconnected. It must not block.
	OnSignal func(store.Signal)
	// MaxConns caps the pool; 0 means pgxpool's default (4 per CPU, at
	// least 4).
	MaxConns int32
	// StatementTimeout bounds each statement, each taking of a pooled
	// connection (its liveness ping included), and each new connection
	// (the listener's too) when the URL sets no connect_timeout: a
	// database that stops answering (paused, partitioned away) fails the
	// store's methods with context.DeadlineExceeded after it instead of
	// holding them, and the requests behind them, until the client gives
	// up (package pgbound). 0 means pgbound.Default. Migrations are not
	// bounded by it (see Migrate).
	StatementTimeout time.Duration
	// Logger receives the listener's reconnects; nil discards them.
	Logger *slog.Logger
}

// DB is a store.Shared on one PostgreSQL database. Create it with Open.
type DB struct {
	pool *pgxpool.Pool
	o    Options
	log  *slog.Logger

	mu  sync.Mutex
	hwm map[string]int64 // session → highest event ID handed to OnCommit

	listener  *pglisten.Listener
	closeOnce sync.Once
}

var _ store.Shared = (*DB)(nil)

// maxHWM bounds DB.hwm; past it the record starts again empty (an old
// event may then reach OnCommit after a newer one of its session, which a
// reader skips, having read it already).
const maxHWM = 100_000

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Open connects to o.URL, applies the schema versions the database has not
// had yet (under an advisory lock, so that replicas starting together apply
// each once), and starts listening for the other replicas' signals.
func Open(ctx context.Context, o Options) (*DB, error) {
	if o.URL == "" || o.Replica == "" || o.Lease <= 0 {
		return nil, errors.New("open postgres: URL, replica and lease are required")
	}
	cfg, err := pgxpool.ParseConfig(o.URL)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	pgbound.Configure(cfg.ConnConfig, o.StatementTimeout)
	// The migrations run on a pool of their own (Migrate), their
	// statements unbounded: a long one (an index built on a large table)
	// is not a database gone quiet.
	if _, _, err := Migrate(ctx, o.URL, o.StatementTimeout); err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	db := &DB{pool: pool, o: o, log: o.Logger, hwm: map[string]int64{}}
	if db.log == nil {
		db.log = slog.New(slog.DiscardHandler)
	}
	db.listener, err = pglisten.Start(ctx, pglisten.Options{URL: o.URL, Channel: channel, OnNotify: db.onNotify,
		OnResync: func() { db.deliver(store.Signal{Kind: store.SignalResync}) }, Logger: db.log, Timeout: o.StatementTimeout})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	return db, nil
}

// migrate applies the missing schema versions of the database of pool
// under goose's PostgreSQL advisory lock.
func migrate(ctx context.Context, pool *pgxpool.Pool) (applied []int64, version int64, err error) {
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, 0, fmt.Errorf("migrate: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, 0, fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, files,
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return nil, 0, fmt.Errorf("migrate: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("migrate: %w", err)
	}
	for _, r := range res {
		applied = append(applied, r.Source.Version)
	}
	if version, err = p.GetDBVersion(ctx); err != nil {
		return nil, 0, fmt.Errorf("migrate: %w", err)
	}
	return applied, version, nil
}

// Migrate applies to the database at url the schema versions it has not
// had yet, under the advisory lock Open takes too, and returns those it
// applied (none when it was up to date) and the version it is at: `brain
// migrate`. Connecting is bounded to connectTimeout (0 means
// pgbound.Default), the statements are not.
func Migrate(ctx context.Context, url string, connectTimeout time.Duration) (applied []int64, version int64, err error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, 0, fmt.Errorf("migrate postgres: %w", err)
	}
	// Statements unbounded (a migration may rightly take long), the
	// connecting bounded: a database that does not answer is an error,
	// not a start-up or `brain migrate` that waits for ever in silence.
	pgbound.BoundConnect(cfg.ConnConfig, connectTimeout)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("migrate postgres: %w", err)
	}
	defer pool.Close()
	return migrate(ctx, pool)
}

// onNotify hands a notification of another replica to OnSignal.
func (db *DB) onNotify(payload string) {
	var sig store.Signal
	if err := json.Unmarshal([]byte(payload), &sig); err != nil {
		db.log.Warn("postgres listener: unreadable notification", "err", err)
		return
	}
	if sig.From == db.o.Replica {
		return
	}
	db.deliver(sig)
}

func (db *DB) deliver(sig store.Signal) {
	if db.o.OnSignal != nil {
		db.o.OnSignal(sig)
	}
}

// Replica implements store.Shared.
func (db *DB) Replica() string { return db.o.Replica }

// Notify implements store.Shared.
func (db *DB) Notify(ctx context.Context, sig store.Signal) error {
	payload, err := db.payload(sig)
	if err != nil {
		return err
	}
	if _, err := db.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", sig.Kind, err)
	}
	return nil
}

func (db *DB) payload(sig store.Signal) (string, error) {
	sig.From = db.o.Replica
	b, err := json.Marshal(sig)
	if err != nil {
		return "", fmt.Errorf("notify %s: %w", sig.Kind, err)
	}
	if len(b) > maxPayload {
		return "", fmt.Errorf("notify %s: %d bytes, limit %d: %w", sig.Kind, len(b), maxPayload, store.ErrSignalTooLarge)
	}
	return string(b), nil
}

// tx runs fn in one transaction and, once it committed, hands the events
// fn appended to OnCommit.
func (db *DB) tx(ctx context.Context, op string, fn func(tx pgx.Tx) ([]*store.Event, error)) error {
	var evs []*store.Event
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		var err error
		evs, err = fn(tx)
		return err
	})
	if err != nil {
		if refusal(err) {
			return err
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	db.publish(evs)
	return nil
}

func refusal(err error) bool {
	var se *store.StateError
	return errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrCallsInFlight) || errors.As(err, &se)
}

func (db *DB) publish(evs []*store.Event) {
	if db.o.OnCommit == nil || len(evs) == 0 {
		return
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if len(db.hwm) > maxHWM {
		clear(db.hwm)
	}
	for _, ev := range evs {
		if ev.ID <= db.hwm[ev.SessionID] {
			continue
		}
		db.hwm[ev.SessionID] = ev.ID
		db.o.OnCommit(*ev)
	}
}

// appendEvents numbers evs of one session from first and inserts them,
// then notifies the other replicas of the last.
func (db *DB) appendEvents(ctx context.Context, tx pgx.Tx, first int64, evs ...*store.Event) error {
	for i, ev := range evs {
		ev.ID = first + int64(i)
		if _, err := tx.Exec(ctx, `INSERT INTO events (session_id, seq, call_id, type, time, data) VALUES ($1, $2, $3, $4, $5, $6)`,
			ev.SessionID, ev.ID, ev.CallID, ev.Type, unixNano(ev.Time), string(ev.Data)); err != nil {
			return fmt.Errorf("append %s event: %w", ev.Type, err)
		}
	}
	last := evs[len(evs)-1]
	payload, err := db.payload(store.Signal{Kind: store.SignalEvent, SessionID: last.SessionID, Seq: last.ID})
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload); err != nil {
		return fmt.Errorf("notify event: %w", err)
	}
	return nil
}

// nextSeq raises session id's last_seq by n, when the session is the
// tenant's and in one of statuses (any when empty), and returns the first
// of the n new IDs; store.ErrNotFound or *store.StateError otherwise.
func nextSeq(ctx context.Context, tx pgx.Tx, tenantID, id string, n int, statuses ...string) (int64, error) {
	var (
		last   int64
		status string
	)
	err := tx.QueryRow(ctx, `SELECT last_seq, status FROM sessions WHERE id = $1 AND tenant_id = $2 FOR UPDATE`, id, tenantID).Scan(&last, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, store.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	if len(statuses) > 0 && !contains(statuses, status) {
		return 0, &store.StateError{What: "session", Status: status}
	}
	if _, err := tx.Exec(ctx, `UPDATE sessions SET last_seq = $2 WHERE id = $1`, id, last+int64(n)); err != nil {
		return 0, err
	}
	return last + 1, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// CreateSession implements store.Store.
func (db *DB) CreateSession(ctx context.Context, s *store.Session, evs ...*store.Event) error {
	tools, err := json.Marshal(nonNil(s.Tools))
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return db.tx(ctx, "create session", func(tx pgx.Tx) ([]*store.Event, error) {
		if _, err := tx.Exec(ctx, `INSERT INTO sessions (id, tenant_id, status, harness, tools, config, created_at, updated_at, last_seq)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, s.ID, s.TenantID, s.Status, s.Harness, string(tools), string(s.Config),
			unixNano(s.CreatedAt), unixNano(s.UpdatedAt), len(evs)); err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return nil, nil
		}
		return evs, db.appendEvents(ctx, tx, 1, evs...)
	})
}

// SetSessionStatus implements store.Store.
func (db *DB) SetSessionStatus(ctx context.Context, tenantID, id string, from []string, to string, at time.Time, ev *store.Event) error {
	return db.tx(ctx, "set session status", func(tx pgx.Tx) ([]*store.Event, error) {
		seq, err := nextSeq(ctx, tx, tenantID, id, 1, from...)
		if err != nil {
			return nil, err
		}
		var busy bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tool_calls WHERE session_id = $1
			AND status IN ('queued', 'running', 'requires_input'))`, id).Scan(&busy); err != nil {
			return nil, err
		}
		if busy {
			return nil, store.ErrCallsInFlight
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET status = $2, updated_at = $3 WHERE id = $1`, id, to, unixNano(at)); err != nil {
			return nil, err
		}
		return []*store.Event{ev}, db.appendEvents(ctx, tx, seq, ev)
	})
}

// appendEventsSQL is the part of a call's write statement that numbers
// and inserts its events: CTE s (the session's row, last_seq already raised
// by the count) gives them the IDs last_seq-n+1..last_seq, in the order of
// the arrays $types, $times, $datas and $calls (the statement's %[1]s… %[4]s),
// and the other replicas are told of the last. It ends the statement: its
// row is (session_id, first ID).
const appendEventsSQL = `, e AS (
	INSERT INTO events (session_id, seq, call_id, type, time, data)
	SELECT s.id, s.last_seq - cardinality(%[1]s::text[]) + x.i, x.call_id, x.type, x.time, x.data
	FROM s, unnest(%[1]s::text[], %[2]s::bigint[], %[3]s::text[], %[4]s::text[]) WITH ORDINALITY AS x(type, time, data, call_id, i)
)
SELECT s.id, s.last_seq - cardinality(%[1]s::text[]) + 1,
	pg_notify('` + channel + `', json_build_object('k', 'event', 'f', %[5]s::text, 's', s.id, 'q', s.last_seq)::text)%[6]s
FROM s%[7]s`

// eventArrays returns the columns of evs as appendEventsSQL's arrays.
func eventArrays(evs []*store.Event) (types []string, times []int64, datas, calls []string) {
	// Empty, not nil: a nil slice is SQL NULL, whose cardinality is NULL.
	types, times, datas, calls = []string{}, []int64{}, []string{}, []string{}
	for _, ev := range evs {
		types, times = append(types, ev.Type), append(times, unixNano(ev.Time))
		datas, calls = append(datas, string(ev.Data)), append(calls, ev.CallID)
	}
	return
}

// setIDs numbers evs from first, as the statement did.
func setIDs(evs []*store.Event, session string, first int64) {
	for i, ev := range evs {
		ev.SessionID, ev.ID = session, first+int64(i)
	}
}

// createCallSQL is CreateCall in one statement (one round trip, the
// session's row locked only while it runs): the session's last_seq is
// raised only while it is the tenant's and active, the events take the new
// IDs, the call is inserted, and the other replicas are told. No row back:
// refused (the caller asks why).
//
// A queued call first takes its queue's lock (the one Admit takes), so the
// queue's calls get their ord in the order they commit: otherwise a call
// could commit, and be admitted, while one with a lower ord is still
// being written, and the slot would go out of order. A call with a parent
// (an approval call) is made only while this replica owns the parent,
// whose row it locks (FOR SHARE) against a claim until it commits.
var createCallSQL = `WITH s AS (
	UPDATE sessions SET last_seq = last_seq + cardinality($3::text[]) WHERE id = $1 AND tenant_id = $2 AND status = 'active'
		AND ($14::text = '' OR EXISTS (SELECT 1 FROM tool_calls p WHERE p.id = $14 AND p.owner = $7 FOR SHARE))
		AND CASE WHEN $10::text = 'queued' THEN (SELECT true FROM ` + slotLock("$2", "$9::text") + `) ELSE true END
	RETURNING id, last_seq
), c AS (
	INSERT INTO tool_calls (id, session_id, tenant_id, tool, status, arguments, created_at, started_at, parent_id, caller_type,
		input_kind, prompt, response_schema, response_expires_at, owner, lease_until, revision_id, span_id)
	SELECT $8, $1, $2, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $7, $20, $21, $22 FROM s RETURNING ord
)` + fmt.Sprintf(appendEventsSQL, "$3", "$4", "$5", "$6", "$7", ", c.ord", ", c")

// CreateCall implements store.Store: the call is owned by this replica,
// leased until now plus Options.Lease; c.Ord is set.
func (db *DB) CreateCall(ctx context.Context, c *store.Call, evs ...*store.Event) error {
	if len(evs) == 0 {
		return errors.New("create tool call: no tool.call event")
	}
	caller := c.CallerType
	if caller == "" {
		caller = store.CallerAPI
	}
	types, times, datas, calls := eventArrays(evs)
	var (
		session, notified string
		first, ord        int64
	)
	err := db.pool.QueryRow(ctx, createCallSQL, c.SessionID, c.TenantID, types, times, datas, calls, db.o.Replica,
		c.ID, c.Tool, c.Status, string(c.Arguments), unixNano(c.CreatedAt), unixNano(c.StartedAt), c.ParentID, caller,
		c.InputKind, c.Prompt, nullText(c.ResponseSchema), unixNano(c.ResponseExpiresAt),
		time.Now().Add(db.o.Lease).UnixNano(), c.RevisionID, c.SpanID).Scan(&session, &first, &notified, &ord)
	if errors.Is(err, pgx.ErrNoRows) {
		if c.ParentID != "" {
			if err := db.ownedRefusal(ctx, "create tool call", c.ParentID); errors.Is(err, store.ErrNotOwner) {
				return err
			}
		}
		return db.sessionRefusal(ctx, c.TenantID, c.SessionID)
	}
	if err != nil {
		return fmt.Errorf("create tool call: %w", err)
	}
	setIDs(evs, session, first)
	c.Ord, c.CallerType = ord, caller
	db.publish(evs)
	return nil
}

// sessionRefusal says why a write to the tenant's session id was refused:
// store.ErrNotFound, or *store.StateError naming its status.
func (db *DB) sessionRefusal(ctx context.Context, tenantID, id string) error {
	var status string
	err := db.pool.QueryRow(ctx, `SELECT status FROM sessions WHERE id = $1 AND tenant_id = $2`, id, tenantID).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("create tool call: %w", err)
	}
	return &store.StateError{What: "session", Status: status}
}

// callRefusal says why a write to call id was refused: store.ErrNotFound,
// or *store.StateError naming its status.
func (db *DB) callRefusal(ctx context.Context, op, id string) error {
	var cur string
	err := db.pool.QueryRow(ctx, `SELECT status FROM tool_calls WHERE id = $1`, id).Scan(&cur)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return &store.StateError{What: "tool call", Status: cur}
}

// ownedRefusal says why a write of this replica to call id, fenced by its
// owner, was refused: store.ErrNotFound; *store.StateError naming its
// status, with NotOwner when the call is not this replica's (another
// replica claimed it, or it finished: a write refused so was this
// replica's, for a call it runs, so someone else ended it).
func (db *DB) ownedRefusal(ctx context.Context, op, id string) error {
	var cur, owner string
	err := db.pool.QueryRow(ctx, `SELECT status, owner FROM tool_calls WHERE id = $1`, id).Scan(&cur, &owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return &store.StateError{What: "tool call", Status: cur, NotOwner: owner != db.o.Replica}
}

// updateCallSQL is UpdateCall in one statement: the call moves on only
// from one of the statuses $2, and only while this replica ($13) owns it
// (its row lock first, then its session's).
var updateCallSQL = `WITH c AS (
	UPDATE tool_calls SET status = $3, started_at = $4, input_kind = $5, prompt = $6, response_schema = $7, response_expires_at = $8
	WHERE id = $1 AND status = ANY($2::text[]) AND owner = $13 RETURNING session_id
), s AS (
	UPDATE sessions SET last_seq = last_seq + cardinality($9::text[]) WHERE id = (SELECT session_id FROM c) RETURNING id, last_seq
)` + fmt.Sprintf(appendEventsSQL, "$9", "$10", "$11", "$12", "$13", "", "")

// UpdateCall implements store.Store.
func (db *DB) UpdateCall(ctx context.Context, c *store.Call, from []string, evs ...*store.Event) error {
	if store.Terminal(c.Status) {
		return fmt.Errorf("update tool call: %s is a final status; FinishCall records it", c.Status)
	}
	types, times, datas, calls := eventArrays(evs)
	var (
		session, notified string
		first             int64
	)
	err := db.pool.QueryRow(ctx, updateCallSQL, c.ID, from, c.Status, unixNano(c.StartedAt), c.InputKind, c.Prompt,
		nullText(c.ResponseSchema), unixNano(c.ResponseExpiresAt), types, times, datas, calls, db.o.Replica).Scan(&session, &first, &notified)
	if errors.Is(err, pgx.ErrNoRows) {
		return db.ownedRefusal(ctx, "update tool call", c.ID)
	}
	if err != nil {
		return fmt.Errorf("update tool call: %w", err)
	}
	setIDs(evs, session, first)
	db.publish(evs)
	return nil
}

// finishCallSQL is FinishCall in one statement: the call moves to its
// final state only while unfinished and this replica's ($16; its row lock
// first, then its session's), its events take the next IDs, and the other
// replicas are told. No row back: refused. A call finished with a pending withdrawal
// ($17) keeps its owner and lease: the owner is sending the withdrawal,
// and another replica takes it over should the owner die.
var finishCallSQL = `WITH c AS (
	UPDATE tool_calls SET status = $2, finished_at = $3, error_code = $4, error_message = $5, unknown_outcome = $6,
		result = $7, retryable = $8, prompt = $9, response_schema = $10, response_expires_at = $11, withdraw_until = $17::bigint,
		owner = CASE WHEN $17::bigint = 0 THEN '' ELSE owner END, lease_until = CASE WHEN $17::bigint = 0 THEN 0 ELSE lease_until END,
		holds_slot = false
	WHERE id = $1 AND status IN ('queued', 'running', 'requires_input') AND owner = $16 RETURNING session_id
), s AS (
	UPDATE sessions SET last_seq = last_seq + cardinality($12::text[]) WHERE id = (SELECT session_id FROM c) RETURNING id, last_seq
)` + fmt.Sprintf(appendEventsSQL, "$12", "$13", "$14", "$15", "$16", "", "")

// FinishCall implements store.Store.
func (db *DB) FinishCall(ctx context.Context, c *store.Call, evs ...*store.Event) error {
	if len(evs) == 0 {
		return errors.New("finish tool call: no tool.result event")
	}
	types, times, datas, calls := eventArrays(evs)
	var (
		session, notified string
		first             int64
	)
	err := db.pool.QueryRow(ctx, finishCallSQL, c.ID, c.Status, unixNano(c.FinishedAt), c.ErrorCode, c.ErrorMessage,
		c.UnknownOutcome, nullText(c.Result), c.Retryable, c.Prompt, nullText(c.ResponseSchema), unixNano(c.ResponseExpiresAt),
		types, times, datas, calls, db.o.Replica, unixNano(c.WithdrawUntil)).Scan(&session, &first, &notified)
	if errors.Is(err, pgx.ErrNoRows) {
		return db.ownedRefusal(ctx, "finish tool call", c.ID)
	}
	if err != nil {
		return fmt.Errorf("finish tool call: %w", err)
	}
	setIDs(evs, session, first)
	db.publish(evs)
	return nil
}

// nullText is a JSON document as a nullable text column.
func nullText(raw json.RawMessage) *string {
	if len(raw) == 0 {
		return nil
	}
	s := string(raw)
	return &s
}

// ActiveSessions counts the sessions of every tenant that are active (the
// sessions_active gauge), on the partial index of active sessions.
func (db *DB) ActiveSessions(ctx context.Context) (int, error) {
	var n int
	if err := db.pool.QueryRow(ctx, `SELECT COUNT(*) FROM sessions WHERE status = 'active'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count active sessions: %w", err)
	}
	return n, nil
}

// Session implements store.Store.
func (db *DB) Session(ctx context.Context, tenantID, id string) (*store.Session, error) {
	var (
		s               store.Session
		tools, config   string
		created, update int64
	)
	err := db.pool.QueryRow(ctx, `SELECT id, tenant_id, status, harness, tools, config, created_at, updated_at
		FROM sessions WHERE id = $1 AND tenant_id = $2`, id, tenantID).
		Scan(&s.ID, &s.TenantID, &s.Status, &s.Harness, &tools, &config, &created, &update)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	if err := json.Unmarshal([]byte(tools), &s.Tools); err != nil {
		return nil, fmt.Errorf("read session %s: tools: %w", id, err)
	}
	s.Config = []byte(config)
	s.CreatedAt, s.UpdatedAt = fromUnixNano(created), fromUnixNano(update)
	return &s, nil
}

// leased is the SQL condition of a call row that a replica holds on a
// lease (owner, lease_until): one unfinished, or one finished with a
// withdrawal pending, which its owner is sending.
const leased = `(status IN ('queued', 'running', 'requires_input') OR withdraw_until <> 0)`

const callColumns = `id, session_id, tenant_id, tool, status, arguments, created_at, started_at, finished_at,
	error_code, error_message, unknown_outcome, result, ord, parent_id, caller_type, input_kind, prompt, response_schema,
	response_expires_at, retryable, revision_id, span_id, withdraw_until`

func scanCall(row pgx.Row) (*store.Call, error) {
	var (
		c                                   store.Call
		args                                string
		created, started, finished, expires int64
		withdraw                            int64
		result, schema                      *string
	)
	if err := row.Scan(&c.ID, &c.SessionID, &c.TenantID, &c.Tool, &c.Status, &args, &created, &started, &finished,
		&c.ErrorCode, &c.ErrorMessage, &c.UnknownOutcome, &result, &c.Ord, &c.ParentID, &c.CallerType, &c.InputKind,
		&c.Prompt, &schema, &expires, &c.Retryable, &c.RevisionID, &c.SpanID, &withdraw); err != nil {
		return nil, err
	}
	c.Arguments = []byte(args)
	c.CreatedAt, c.StartedAt, c.FinishedAt = fromUnixNano(created), fromUnixNano(started), fromUnixNano(finished)
	c.ResponseExpiresAt, c.WithdrawUntil = fromUnixNano(expires), fromUnixNano(withdraw)
	if result != nil {
		c.Result = []byte(*result)
	}
	if schema != nil {
		c.ResponseSchema = []byte(*schema)
	}
	return &c, nil
}

// Call implements store.Store.
func (db *DB) Call(ctx context.Context, tenantID, id string) (*store.Call, error) {
	c, err := scanCall(db.pool.QueryRow(ctx, `SELECT `+callColumns+` FROM tool_calls WHERE id = $1 AND tenant_id = $2`, id, tenantID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read tool call: %w", err)
	}
	return c, nil
}

// Calls implements store.Store.
func (db *DB) Calls(ctx context.Context, f store.CallFilter) ([]*store.Call, error) {
	q := `SELECT ` + callColumns + ` FROM tool_calls WHERE tenant_id = $1`
	args := []any{f.TenantID}
	for _, w := range []struct{ col, v string }{{"session_id", f.SessionID}, {"tool", f.Tool}, {"status", f.Status}} {
		if w.v != "" {
			args = append(args, w.v)
			q += fmt.Sprintf(` AND %s = $%d`, w.col, len(args))
		}
	}
	if f.After != "" {
		args = append(args, f.After)
		q += fmt.Sprintf(` AND ord > (SELECT ord FROM tool_calls WHERE id = $%d AND tenant_id = $1)`, len(args))
	}
	limit := f.Limit
	if limit <= 0 || limit > store.MaxListLimit+1 {
		limit = store.MaxListLimit + 1
	}
	args = append(args, limit)
	q += fmt.Sprintf(` ORDER BY ord LIMIT $%d`, len(args))
	return db.queryCalls(ctx, "list tool calls", q, args...)
}

// UnfinishedCalls implements store.Store.
func (db *DB) UnfinishedCalls(ctx context.Context) ([]*store.Call, error) {
	return db.queryCalls(ctx, "list unfinished tool calls",
		`SELECT `+callColumns+` FROM tool_calls WHERE status IN ('queued', 'running', 'requires_input') ORDER BY ord`)
}

// PendingWithdrawals implements store.Store.
func (db *DB) PendingWithdrawals(ctx context.Context) ([]*store.Call, error) {
	return db.queryCalls(ctx, "list pending withdrawals",
		`SELECT `+callColumns+` FROM tool_calls WHERE withdraw_until <> 0 ORDER BY ord`)
}

// ClearWithdrawal implements store.Store: a finished call without a
// pending withdrawal is leased to nobody. Only the call's owner clears it:
// a withdrawal another replica took over is that replica's to clear.
func (db *DB) ClearWithdrawal(ctx context.Context, id string) error {
	tag, err := db.pool.Exec(ctx, `UPDATE tool_calls SET withdraw_until = 0,
			owner = CASE WHEN status IN ('queued', 'running', 'requires_input') THEN owner ELSE '' END,
			lease_until = CASE WHEN status IN ('queued', 'running', 'requires_input') THEN lease_until ELSE 0 END
		WHERE id = $1 AND withdraw_until <> 0 AND owner = $2`, id, db.o.Replica)
	if err != nil {
		return fmt.Errorf("clear withdrawal of tool call %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		var owner string
		err := db.pool.QueryRow(ctx, `SELECT owner FROM tool_calls WHERE id = $1 AND withdraw_until <> 0`, id).Scan(&owner)
		if err == nil && owner != db.o.Replica {
			return fmt.Errorf("clear withdrawal of tool call %s: %w", id, &store.StateError{What: "tool call", Status: "withdrawing", NotOwner: true})
		}
	}
	return nil
}

func (db *DB) queryCalls(ctx context.Context, op, q string, args ...any) ([]*store.Call, error) {
	rows, err := db.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	var out []*store.Call
	for rows.Next() {
		c, err := scanCall(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// RenewLeases implements store.Shared: one statement renews, and reads
// which of running are not this replica's (as they were when it began; a
// claim that commits meanwhile shows at the next renewal, and the writes
// are fenced anyway).
func (db *DB) RenewLeases(ctx context.Context, until time.Time, running []string) ([]string, error) {
	if running == nil {
		running = []string{} // a nil slice is SQL NULL
	}
	lost, err := queryIDs(ctx, db.pool, `WITH r AS (UPDATE tool_calls SET lease_until = $2 WHERE owner = $1 AND `+leased+`)
		SELECT id FROM tool_calls WHERE id = ANY($3) AND owner <> $1`, db.o.Replica, until.UnixNano(), running)
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	return lost, nil
}

// queryIDs runs q, a query of one text column (IDs), on the pool or in a
// transaction, and returns its values.
func queryIDs(ctx context.Context, on interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, q string, args ...any) ([]string, error) {
	rows, err := on.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ClaimExpired implements store.Shared. SKIP LOCKED: two replicas claiming
// at once take different calls, never the same one. A gated call waiting
// in requires_input is claimed with the approval calls (caller system) it
// has running under the same owner, whose leases may run out a little
// later (made after the last renewal), and those are never claimed
// without it: the replica that takes the gated call up sends its approval
// call again (see the server's takeUp). A finished call with a pending
// withdrawal is claimed as an unfinished one is: the replica that takes it
// sends the withdrawal. A replica never claims its own calls (their
// lease ran out while its renewal was held up: it is running them, and
// its next renewal extends them).
func (db *DB) ClaimExpired(ctx context.Context, now, until time.Time, limit int) ([]*store.Call, error) {
	return db.queryCalls(ctx, "claim expired tool calls", `WITH picked AS (
		SELECT id, owner, status FROM tool_calls c WHERE `+leased+`
			AND lease_until < $2 AND owner <> $1
			AND NOT (status = 'running' AND caller_type = 'system' AND EXISTS (SELECT 1 FROM tool_calls p
				WHERE p.id = c.parent_id AND p.status = 'requires_input' AND p.owner = c.owner))
			ORDER BY lease_until LIMIT $4 FOR UPDATE SKIP LOCKED)
		UPDATE tool_calls SET owner = $1, lease_until = $3
		WHERE `+leased+` AND (id IN (SELECT id FROM picked)
			OR status = 'running' AND caller_type = 'system' AND (parent_id, owner) IN (SELECT id, owner FROM picked WHERE status = 'requires_input'))
		RETURNING `+callColumns, db.o.Replica, now.UnixNano(), until.UnixNano(), limit)
}

// ReleaseClaims implements store.Shared.
func (db *DB) ReleaseClaims(ctx context.Context, ids []string) error {
	if _, err := db.pool.Exec(ctx, `UPDATE tool_calls SET owner = '', lease_until = 0
		WHERE owner = $1 AND id = ANY($2) AND `+leased, db.o.Replica, ids); err != nil {
		return fmt.Errorf("release claims: %w", err)
	}
	return nil
}

// PutToken implements store.Shared.
func (db *DB) PutToken(ctx context.Context, hash [32]byte, tenantID, sessionID, callID string) error {
	if _, err := db.pool.Exec(ctx, `INSERT INTO inspection_tokens (hash, tenant_id, session_id, call_id) VALUES ($1, $2, $3, $4)`,
		hash[:], tenantID, sessionID, callID); err != nil {
		return fmt.Errorf("put inspection token: %w", err)
	}
	return nil
}

// DeleteToken implements store.Shared.
func (db *DB) DeleteToken(ctx context.Context, hash [32]byte) error {
	if _, err := db.pool.Exec(ctx, `DELETE FROM inspection_tokens WHERE hash = $1`, hash[:]); err != nil {
		return fmt.Errorf("delete inspection token: %w", err)
	}
	return nil
}

// Token implements store.Shared: a token whose call finished (returned,
// or ended by a replica that took it over) is not valid, row or not.
func (db *DB) Token(ctx context.Context, hash [32]byte) (tenantID, sessionID, callID string, err error) {
	err = db.pool.QueryRow(ctx, `SELECT t.tenant_id, t.session_id, t.call_id FROM inspection_tokens t
		JOIN tool_calls c ON c.id = t.call_id WHERE t.hash = $1 AND c.status IN ('queued', 'running', 'requires_input')`,
		hash[:]).Scan(&tenantID, &sessionID, &callID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", "", store.ErrNotFound
	}
	if err != nil {
		return "", "", "", fmt.Errorf("read inspection token: %w", err)
	}
	return tenantID, sessionID, callID, nil
}

// Events implements store.Store.
func (db *DB) Events(ctx context.Context, sessionID string, after int64, limit int) ([]store.Event, error) {
	if limit <= 0 || limit > store.MaxListLimit+1 {
		limit = store.MaxListLimit + 1
	}
	rows, err := db.pool.Query(ctx, `SELECT seq, session_id, call_id, type, time, data FROM events
		WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sessionID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var (
			ev   store.Event
			t    int64
			data string
		)
		if err := rows.Scan(&ev.ID, &ev.SessionID, &ev.CallID, &ev.Type, &t, &data); err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		ev.Time, ev.Data = fromUnixNano(t), []byte(data)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

// DeleteEnded implements store.Store. SKIP LOCKED: replicas running
// retention at once remove different sessions.
func (db *DB) DeleteEnded(ctx context.Context, before time.Time, limit int) (store.Removed, error) {
	if limit <= 0 {
		return store.Removed{}, fmt.Errorf("delete ended sessions: limit must be positive, got %d", limit)
	}
	var rm store.Removed
	err := db.tx(ctx, "delete ended sessions", func(tx pgx.Tx) ([]*store.Event, error) {
		rm = store.Removed{}
		ids, err := queryIDs(ctx, tx, `SELECT id FROM sessions s WHERE status IN ('interrupted', 'closed') AND updated_at < $1
			AND NOT EXISTS (SELECT 1 FROM tool_calls c WHERE c.session_id = s.id AND c.withdraw_until <> 0)
			ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED`, before.UnixNano(), limit)
		if err != nil {
			return nil, err
		}
		left := int64(limit)
		for _, id := range ids {
			tag, err := tx.Exec(ctx, `DELETE FROM events WHERE session_id = $1 AND seq IN
				(SELECT seq FROM events WHERE session_id = $1 ORDER BY seq LIMIT $2)`, id, left)
			if err != nil {
				return nil, err
			}
			rm.Events += tag.RowsAffected()
			if left -= tag.RowsAffected(); left <= 0 {
				break
			}
			if _, err := tx.Exec(ctx, `DELETE FROM call_answers WHERE call_id IN (SELECT id FROM tool_calls WHERE session_id = $1)`, id); err != nil {
				return nil, err
			}
			tag, err = tx.Exec(ctx, `DELETE FROM tool_calls WHERE id IN (SELECT id FROM tool_calls WHERE session_id = $1 LIMIT $2)`, id, left)
			if err != nil {
				return nil, err
			}
			rm.Calls += tag.RowsAffected()
			if left -= tag.RowsAffected(); left <= 0 {
				break
			}
			if _, err := tx.Exec(ctx, `DELETE FROM inspection_tokens WHERE session_id = $1`, id); err != nil {
				return nil, err
			}
			// The session's tool set goes with it (counted as the session).
			if _, err := tx.Exec(ctx, `DELETE FROM session_tools WHERE session_id = $1`, id); err != nil {
				return nil, err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, id); err != nil {
				return nil, err
			}
			rm.Sessions++
			left--
		}
		return nil, nil
	})
	return rm, err
}

// Close stops the listener and closes the pool, waiting for that a
// statement's bound at most (pgbound.ClosePool); calling it again is a
// no-op.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.listener.Close()
		if !pgbound.ClosePool(db.pool, db.o.StatementTimeout) {
			db.log.Warn("the store did not close within a statement's bound (its database does not answer): its connections end with the process")
		}
	})
	return nil
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
