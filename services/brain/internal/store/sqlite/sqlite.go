// Package sqlite implements store.Store on an SQLite file through
// modernc.org/sqlite (pure Go) and database/sql.
//
// Durability: the database runs in WAL mode. Every write method returns only
// after its transaction committed, so an event a caller saw acknowledged
// survives a crash of the brain process (SIGKILL included). Writes go through
// one writer goroutine that commits whatever is queued at that moment in one
// transaction (group commit): under concurrency one commit serves many calls,
// at concurrency 1 a write costs one transaction and no extra wait.
//
// synchronous defaults to NORMAL: in WAL mode a commit then reaches the OS
// (write to the WAL) but is not fsynced until the next checkpoint. That keeps
// every committed transaction across a crash of the process, and the database
// consistent across a power loss or OS crash, which may lose the last
// transactions. Options.Synchronous "FULL" fsyncs every commit for hosts that
// must keep them across power loss too, at the cost of one fsync per commit.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/store"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// Options configures Open.
type Options struct {
	// Synchronous is the SQLite synchronous mode: "NORMAL" (default) or
	// "FULL". See the package doc for what each keeps across which crash.
	Synchronous string
	// OnCommit, when set, receives every appended event after its
	// transaction committed, in ID order, from the single writer goroutine.
	// It must not block (hand the event to a buffered fan-out).
	OnCommit func(store.Event)
	// MaxBatch caps the writes committed in one transaction; default 128.
	MaxBatch int
}

// busyTimeout is how long a connection waits on a lock held by another
// connection (readers during a checkpoint, another process) before SQLITE_BUSY.
const busyTimeout = 5 * time.Second

// DB is a store.Store on one SQLite file. Its zero value is not usable; call
// Open.
type DB struct {
	write    *sql.DB // one connection: the writer goroutine's
	read     *sql.DB
	onCommit func(store.Event)
	maxBatch int

	ops     chan *op
	closeMu sync.RWMutex
	closed  bool
	done    chan struct{}

	batches  atomic.Int64 // transactions run by the writer
	ops64    atomic.Int64 // ops run by the writer
	stopCkpt chan struct{}
	ckptDone chan struct{}

	stmts map[string]*sql.Stmt // writer's prepared statements
	reads map[string]*sql.Stmt // prepared on the read pool

	// The writer goroutine's record of what it knows of each session, so
	// that a tool call's writes need no lookup: known holds what committed,
	// batch what the transaction in progress changed (merged into known on
	// commit, dropped on rollback). A session not in known is looked up
	// once. Only the writer writes the database, so the record stays true.
	known, batch map[string]sessionState
	// ord is the Ord of the last call stored (the writer's, like known),
	// 0 until read; batchOrd the same as the transaction in progress sees it.
	ord, batchOrd int64
}

// sessionState is the writer's record of one session. seq is the ID of its
// last event, 0 when not known yet (looked up on the next append); status
// and tenantID are "" when not known yet (looked up on the next check).
type sessionState struct {
	seq              int64
	tenantID, status string
}

// maxKnown bounds DB.known; past it the record starts again empty.
const maxKnown = 100_000

var _ store.Store = (*DB)(nil)

// op is one write: fn runs inside the batch transaction and returns the
// events it appended, which are published after commit.
type op struct {
	fn     func(tx *sql.Tx) ([]*store.Event, error)
	err    error
	events []*store.Event
	done   chan struct{}
}

// Open opens (creating when missing) the database file at path, applies the
// schema versions it has not had yet (see Migrate), and starts the writer.
func Open(path string, opts Options) (*DB, error) {
	syncMode := strings.ToUpper(opts.Synchronous)
	switch syncMode {
	case "":
		syncMode = "NORMAL"
	case "NORMAL", "FULL":
	default:
		return nil, fmt.Errorf("open sqlite: synchronous: must be NORMAL or FULL, got %q", opts.Synchronous)
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 128
	}
	dsn := func(txlock string) string {
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+syncMode+")")
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", autoCheckpointPages))
		if txlock != "" {
			q.Set("_txlock", txlock)
		}
		return "file:" + uriPath.Replace(path) + "?" + q.Encode()
	}
	write, err := sql.Open("sqlite", dsn("immediate"))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	if _, err := migrate(context.Background(), write); err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	read, err := sql.Open("sqlite", dsn(""))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	read.SetMaxOpenConns(4)
	read.SetMaxIdleConns(4)
	db := &DB{
		write:    write,
		read:     read,
		onCommit: opts.OnCommit,
		maxBatch: opts.MaxBatch,
		ops:      make(chan *op, 1024),
		done:     make(chan struct{}),
		stmts:    map[string]*sql.Stmt{},
		reads:    map[string]*sql.Stmt{},
		stopCkpt: make(chan struct{}),
		ckptDone: make(chan struct{}),
		known:    map[string]sessionState{},
		batch:    map[string]sessionState{},
	}
	for name, q := range writeStmts {
		st, err := write.Prepare(q)
		if err != nil {
			db.write.Close()
			db.read.Close()
			return nil, fmt.Errorf("open sqlite %s: prepare %s: %w", path, name, err)
		}
		db.stmts[name] = st
	}
	for name, q := range readStmts {
		st, err := read.Prepare(q)
		if err != nil {
			db.write.Close()
			db.read.Close()
			return nil, fmt.Errorf("open sqlite %s: prepare %s: %w", path, name, err)
		}
		db.reads[name] = st
	}
	go db.writer()
	go db.checkpointer()
	return db, nil
}

var writeStmts = map[string]string{
	"insertEvent":   `INSERT INTO events (session_id, seq, call_id, type, time, data) VALUES (?, ?, ?, ?, ?, ?)`,
	"lastSeq":       `SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?`,
	"insertSession": `INSERT INTO sessions (id, tenant_id, status, harness, tools, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
	"insertCall": `INSERT INTO tool_calls (id, seq, session_id, tenant_id, tool, status, arguments, created_at, started_at,
			ord, parent_id, caller_type, input_kind, prompt, response_schema, response_expires_at, revision_id, span_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	"lastOrd": `SELECT COALESCE(MAX(ord), 0) FROM tool_calls`,
	"updateCall": `UPDATE tool_calls SET status = ?, started_at = ?, input_kind = ?, prompt = ?, response_schema = ?, response_expires_at = ?
		WHERE id = ? AND status = ?`,
	"finishCall": `UPDATE tool_calls SET status = ?, finished_at = ?, error_code = ?, error_message = ?, unknown_outcome = ?, result = ?,
			retryable = ?, prompt = ?, response_schema = ?, response_expires_at = ?, withdraw_until = ?
		WHERE id = ? AND status IN ('queued', 'running', 'requires_input')`,
	"sessionStatus": `SELECT tenant_id, status FROM sessions WHERE id = ?`,
	"callStatus":    `SELECT status FROM tool_calls WHERE id = ?`,
}

var readStmts = map[string]string{
	"session": `SELECT id, tenant_id, status, harness, tools, config, created_at, updated_at
		FROM sessions WHERE id = ? AND tenant_id = ?`,
	"call":   `SELECT ` + callColumns + ` FROM tool_calls WHERE id = ? AND tenant_id = ?`,
	"events": `SELECT seq, session_id, call_id, type, time, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
}

// writer runs every write op; it commits whatever is queued together.
//
// Under concurrency the writer yields once before it drains the queue, so
// writers that are about to enqueue join this transaction instead of paying
// for their own (a commit costs more than the ops in it). It yields only when
// the previous batch held more than one op: a lone caller never waits.
func (db *DB) writer() {
	defer close(db.done)
	batch := make([]*op, 0, db.maxBatch)
	prev := 1
	for first := range db.ops {
		batch = append(batch[:0], first)
		for round := 0; round < 2 && len(batch) < db.maxBatch; round++ {
			if prev > 1 {
				runtime.Gosched()
			}
		fill:
			for len(batch) < db.maxBatch {
				select {
				case o, ok := <-db.ops:
					if !ok {
						break fill
					}
					batch = append(batch, o)
				default:
					break fill
				}
			}
			if prev <= 1 {
				break
			}
		}
		prev = len(batch)
		db.commit(batch)
		db.batches.Add(1)
		db.ops64.Add(int64(len(batch)))
	}
}

// commit runs batch in one transaction. An op refuses (store.ErrNotFound,
// *store.StateError, and the catalog's store.ErrNameTaken,
// *store.RevisionError, *store.LimitError) only before it wrote anything, so refused ops need no
// savepoint. Any other error rolls the batch back and its ops are retried
// one transaction each, so one failing op does not fail the others.
func (db *DB) commit(batch []*op) {
	err := db.runBatch(batch)
	if err != nil && len(batch) > 1 {
		for _, o := range batch {
			o.err, o.events = nil, nil
			if err := db.runBatch([]*op{o}); err != nil {
				o.err = err
			}
			db.publish(o)
		}
		return
	}
	for _, o := range batch {
		if err != nil {
			o.err, o.events = err, nil
		}
		db.publish(o)
	}
}

// publish hands a committed op's events to the hook and wakes its caller.
func (db *DB) publish(o *op) {
	if o.err == nil && db.onCommit != nil {
		for _, ev := range o.events {
			db.onCommit(*ev)
		}
	}
	close(o.done)
}

func refusal(err error) bool {
	var (
		se *store.StateError
		re *store.RevisionError
		le *store.LimitError
	)
	return errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrCallsInFlight) || errors.Is(err, store.ErrNameTaken) ||
		errors.As(err, &se) || errors.As(err, &re) || errors.As(err, &le)
}

// runBatch runs ops in one transaction; refused ops keep their error, any
// other error rolls everything back and is returned.
func (db *DB) runBatch(batch []*op) error {
	clear(db.batch)
	db.batchOrd = db.ord
	tx, err := db.write.Begin()
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	wrote := false
	for _, o := range batch {
		o.events, o.err = o.fn(tx)
		if o.err != nil {
			if !refusal(o.err) {
				tx.Rollback()
				return o.err
			}
			o.events = nil
			continue
		}
		wrote = true
	}
	if !wrote {
		return tx.Rollback()
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if len(db.known)+len(db.batch) > maxKnown {
		clear(db.known)
	}
	for id, st := range db.batch {
		db.known[id] = st
	}
	db.ord = db.batchOrd
	return nil
}

// checkpointInterval is how often the checkpointer copies the WAL into the
// database. Checkpoints (and their fsyncs) run off the writer, so commits
// never wait for one; the writer's own auto-checkpoint stays as a backstop
// at a size the checkpointer keeps the WAL well under.
const (
	checkpointInterval  = 200 * time.Millisecond
	autoCheckpointPages = 10000
)

func (db *DB) checkpointer() {
	defer close(db.ckptDone)
	t := time.NewTicker(checkpointInterval)
	defer t.Stop()
	last := int64(-1)
	for {
		select {
		case <-db.stopCkpt:
			return
		case <-t.C:
		}
		if n := db.batches.Load(); n != last {
			last = n
			// PASSIVE: never waits for readers or the writer.
			_, _ = db.read.Exec("PRAGMA wal_checkpoint(PASSIVE)")
		}
	}
}

var errClosed = errors.New("sqlite store is closed")

// do queues fn for the writer and waits until its transaction ended. A
// cancelled ctx stops the wait only while the op is still queued; once the
// writer has it, do waits for the commit so the caller learns the outcome.
func (db *DB) do(ctx context.Context, fn func(tx *sql.Tx) ([]*store.Event, error)) error {
	o := &op{fn: fn, done: make(chan struct{})}
	db.closeMu.RLock()
	if db.closed {
		db.closeMu.RUnlock()
		return errClosed
	}
	select {
	case db.ops <- o:
		db.closeMu.RUnlock()
	case <-ctx.Done():
		db.closeMu.RUnlock()
		return ctx.Err()
	}
	<-o.done
	return o.err
}

func (db *DB) stmt(tx *sql.Tx, name string) *sql.Stmt {
	return tx.Stmt(db.stmts[name])
}

// state returns the writer's record of session id, as the transaction in
// progress sees it.
func (db *DB) state(id string) sessionState {
	if st, ok := db.batch[id]; ok {
		return st
	}
	return db.known[id]
}

// sessionStatus returns the status of session id of tenantID, or
// store.ErrNotFound (as it is: an op returns it to refuse).
func (db *DB) sessionStatus(tx *sql.Tx, tenantID, id string) (string, error) {
	st := db.state(id)
	if st.status == "" {
		err := db.stmt(tx, "sessionStatus").QueryRow(id).Scan(&st.tenantID, &st.status)
		if errors.Is(err, sql.ErrNoRows) {
			return "", store.ErrNotFound
		}
		if err != nil {
			return "", fmt.Errorf("read session status: %w", err)
		}
		db.batch[id] = st
	}
	if st.tenantID != tenantID {
		return "", store.ErrNotFound
	}
	return st.status, nil
}

func (db *DB) appendEvent(tx *sql.Tx, ev *store.Event) error {
	st := db.state(ev.SessionID)
	if st.seq == 0 {
		if err := db.stmt(tx, "lastSeq").QueryRow(ev.SessionID).Scan(&st.seq); err != nil {
			return fmt.Errorf("append %s event: %w", ev.Type, err)
		}
	}
	st.seq++
	if _, err := db.stmt(tx, "insertEvent").Exec(ev.SessionID, st.seq, ev.CallID, ev.Type, ev.Time.UnixNano(), string(ev.Data)); err != nil {
		return fmt.Errorf("append %s event: %w", ev.Type, err)
	}
	db.batch[ev.SessionID] = st
	ev.ID = st.seq
	return nil
}

// CreateSession implements store.Store.
func (db *DB) CreateSession(ctx context.Context, s *store.Session, evs ...*store.Event) error {
	tools, err := marshalStrings(s.Tools)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		if _, err := db.stmt(tx, "insertSession").Exec(s.ID, s.TenantID, s.Status, s.Harness, tools, string(s.Config),
			s.CreatedAt.UnixNano(), s.UpdatedAt.UnixNano()); err != nil {
			return nil, fmt.Errorf("create session: %w", err)
		}
		st := db.state(s.ID)
		st.tenantID, st.status = s.TenantID, s.Status
		db.batch[s.ID] = st
		for _, ev := range evs {
			if err := db.appendEvent(tx, ev); err != nil {
				return nil, fmt.Errorf("create session: %w", err)
			}
		}
		return evs, nil
	})
}

// SetSessionStatus implements store.Store.
func (db *DB) SetSessionStatus(ctx context.Context, tenantID, id string, from []string, to string, at time.Time, ev *store.Event) error {
	return db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		cur, err := db.sessionStatus(tx, tenantID, id)
		if err != nil {
			return nil, err
		}
		ok := false
		for _, f := range from {
			ok = ok || f == cur
		}
		if !ok {
			return nil, &store.StateError{What: "session", Status: cur}
		}
		var busy bool
		if err := tx.QueryRow(`SELECT EXISTS (SELECT 1 FROM tool_calls WHERE session_id = ?
			AND status IN ('queued', 'running', 'requires_input'))`, id).Scan(&busy); err != nil {
			return nil, fmt.Errorf("set session status: %w", err)
		}
		if busy {
			return nil, store.ErrCallsInFlight
		}
		if _, err := tx.Exec(`UPDATE sessions SET status = ?, updated_at = ? WHERE id = ?`, to, at.UnixNano(), id); err != nil {
			return nil, fmt.Errorf("set session status: %w", err)
		}
		st := db.state(id)
		st.status = to
		db.batch[id] = st
		if err := db.appendEvent(tx, ev); err != nil {
			return nil, fmt.Errorf("set session status: %w", err)
		}
		return []*store.Event{ev}, nil
	})
}

// CreateCall implements store.Store. The call's seq is the ID of its
// tool.call event (evs[0]); its ord is one more than the last call's.
func (db *DB) CreateCall(ctx context.Context, c *store.Call, evs ...*store.Event) error {
	if len(evs) == 0 {
		return errors.New("create tool call: no tool.call event")
	}
	schema := nullText(c.ResponseSchema)
	caller := c.CallerType
	if caller == "" {
		caller = store.CallerAPI
	}
	return db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		cur, err := db.sessionStatus(tx, c.TenantID, c.SessionID)
		if err != nil {
			return nil, err
		}
		if cur != store.SessionActive {
			return nil, &store.StateError{What: "session", Status: cur}
		}
		if db.batchOrd == 0 {
			if err := db.stmt(tx, "lastOrd").QueryRow().Scan(&db.batchOrd); err != nil {
				return nil, fmt.Errorf("create tool call: %w", err)
			}
		}
		for _, ev := range evs {
			if err := db.appendEvent(tx, ev); err != nil {
				return nil, fmt.Errorf("create tool call: %w", err)
			}
		}
		ord := db.batchOrd + 1
		if _, err := db.stmt(tx, "insertCall").Exec(c.ID, evs[0].ID, c.SessionID, c.TenantID, c.Tool, c.Status, string(c.Arguments),
			c.CreatedAt.UnixNano(), unixNano(c.StartedAt), ord, c.ParentID, caller, c.InputKind, c.Prompt, schema,
			unixNano(c.ResponseExpiresAt), c.RevisionID, c.SpanID); err != nil {
			return nil, fmt.Errorf("create tool call: %w", err)
		}
		db.batchOrd = ord
		c.Ord, c.CallerType = ord, caller
		return evs, nil
	})
}

// UpdateCall implements store.Store.
func (db *DB) UpdateCall(ctx context.Context, c *store.Call, from []string, evs ...*store.Event) error {
	if store.Terminal(c.Status) {
		return fmt.Errorf("update tool call: %s is a final status; FinishCall records it", c.Status)
	}
	schema := nullText(c.ResponseSchema)
	return db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		var cur string
		err := db.stmt(tx, "callStatus").QueryRow(c.ID).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("update tool call: %w", err)
		}
		if !slices.Contains(from, cur) {
			return nil, &store.StateError{What: "tool call", Status: cur}
		}
		if _, err := db.stmt(tx, "updateCall").Exec(c.Status, unixNano(c.StartedAt), c.InputKind, c.Prompt, schema,
			unixNano(c.ResponseExpiresAt), c.ID, cur); err != nil {
			return nil, fmt.Errorf("update tool call: %w", err)
		}
		for _, ev := range evs {
			if err := db.appendEvent(tx, ev); err != nil {
				return nil, fmt.Errorf("update tool call: %w", err)
			}
		}
		return evs, nil
	})
}

// FinishCall implements store.Store.
func (db *DB) FinishCall(ctx context.Context, c *store.Call, evs ...*store.Event) error {
	var result, retryable any
	if c.Result != nil {
		result = string(c.Result)
	}
	if c.Retryable != nil {
		retryable = *c.Retryable
	}
	schema := nullText(c.ResponseSchema)
	return db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		res, err := db.stmt(tx, "finishCall").Exec(c.Status, unixNano(c.FinishedAt), c.ErrorCode, c.ErrorMessage,
			c.UnknownOutcome, result, retryable, c.Prompt, schema, unixNano(c.ResponseExpiresAt), unixNano(c.WithdrawUntil), c.ID)
		if err != nil {
			return nil, fmt.Errorf("finish tool call: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, fmt.Errorf("finish tool call: %w", err)
		} else if n == 0 {
			var cur string
			err := db.stmt(tx, "callStatus").QueryRow(c.ID).Scan(&cur)
			if errors.Is(err, sql.ErrNoRows) {
				return nil, store.ErrNotFound
			}
			if err != nil {
				return nil, fmt.Errorf("finish tool call: %w", err)
			}
			return nil, &store.StateError{What: "tool call", Status: cur}
		}
		for _, ev := range evs {
			if err := db.appendEvent(tx, ev); err != nil {
				return nil, fmt.Errorf("finish tool call: %w", err)
			}
		}
		return evs, nil
	})
}

// ActiveSessions counts the sessions of every tenant that are active (the
// sessions_active gauge), on the partial index of active sessions.
func (db *DB) ActiveSessions(ctx context.Context) (int, error) {
	var n int
	if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM sessions WHERE status = 'active'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count active sessions: %w", err)
	}
	return n, nil
}

// Session implements store.Store.
func (db *DB) Session(ctx context.Context, tenantID, id string) (*store.Session, error) {
	var (
		s              store.Session
		tools, config  string
		created, updat int64
	)
	err := db.reads["session"].QueryRowContext(ctx, id, tenantID).
		Scan(&s.ID, &s.TenantID, &s.Status, &s.Harness, &tools, &config, &created, &updat)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	if s.Tools, err = unmarshalStrings(tools); err != nil {
		return nil, fmt.Errorf("read session %s: tools: %w", id, err)
	}
	s.Config = []byte(config)
	s.CreatedAt, s.UpdatedAt = fromUnixNano(created), fromUnixNano(updat)
	return &s, nil
}

const callColumns = `id, session_id, tenant_id, tool, status, arguments, created_at, started_at, finished_at,
	error_code, error_message, unknown_outcome, result, ord, parent_id, caller_type, input_kind, prompt, response_schema,
	response_expires_at, retryable, revision_id, span_id, withdraw_until`

type scanner interface{ Scan(dest ...any) error }

func scanCall(sc scanner) (*store.Call, error) {
	var (
		c                                   store.Call
		args                                string
		created, started, finished, expires int64
		withdraw                            int64
		result, schema                      sql.NullString
		retryable                           sql.NullBool
	)
	if err := sc.Scan(&c.ID, &c.SessionID, &c.TenantID, &c.Tool, &c.Status, &args, &created, &started, &finished,
		&c.ErrorCode, &c.ErrorMessage, &c.UnknownOutcome, &result, &c.Ord, &c.ParentID, &c.CallerType, &c.InputKind,
		&c.Prompt, &schema, &expires, &retryable, &c.RevisionID, &c.SpanID, &withdraw); err != nil {
		return nil, err
	}
	c.Arguments = []byte(args)
	c.CreatedAt, c.StartedAt, c.FinishedAt = fromUnixNano(created), fromUnixNano(started), fromUnixNano(finished)
	c.ResponseExpiresAt, c.WithdrawUntil = fromUnixNano(expires), fromUnixNano(withdraw)
	if result.Valid {
		c.Result = []byte(result.String)
	}
	if schema.Valid {
		c.ResponseSchema = []byte(schema.String)
	}
	if retryable.Valid {
		c.Retryable = &retryable.Bool
	}
	return &c, nil
}

// Call implements store.Store.
func (db *DB) Call(ctx context.Context, tenantID, id string) (*store.Call, error) {
	c, err := scanCall(db.reads["call"].QueryRowContext(ctx, id, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read tool call: %w", err)
	}
	return c, nil
}

// Calls implements store.Store.
func (db *DB) Calls(ctx context.Context, f store.CallFilter) ([]*store.Call, error) {
	q := `SELECT ` + callColumns + ` FROM tool_calls WHERE tenant_id = ?`
	args := []any{f.TenantID}
	for _, w := range []struct{ col, v string }{{"session_id", f.SessionID}, {"tool", f.Tool}, {"status", f.Status}} {
		if w.v != "" {
			q += ` AND ` + w.col + ` = ?`
			args = append(args, w.v)
		}
	}
	if f.After != "" {
		q += ` AND ord > (SELECT ord FROM tool_calls WHERE id = ? AND tenant_id = ?)`
		args = append(args, f.After, f.TenantID)
	}
	limit := f.Limit
	if limit <= 0 || limit > store.MaxListLimit+1 {
		limit = store.MaxListLimit + 1
	}
	q += ` ORDER BY ord LIMIT ?`
	args = append(args, limit)
	return db.queryCalls(ctx, "list tool calls", q, args...)
}

// UnfinishedCalls implements store.Store.
func (db *DB) UnfinishedCalls(ctx context.Context) ([]*store.Call, error) {
	return db.queryCalls(ctx, "list unfinished tool calls",
		`SELECT `+callColumns+` FROM tool_calls WHERE status IN ('queued', 'running', 'requires_input') ORDER BY ord`)
}

// PendingWithdrawals implements store.Store, on the partial index of the
// calls that have one.
func (db *DB) PendingWithdrawals(ctx context.Context) ([]*store.Call, error) {
	return db.queryCalls(ctx, "list pending withdrawals",
		`SELECT `+callColumns+` FROM tool_calls WHERE withdraw_until <> 0 ORDER BY ord`)
}

// ClearWithdrawal implements store.Store.
func (db *DB) ClearWithdrawal(ctx context.Context, id string) error {
	return db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		if _, err := tx.Exec(`UPDATE tool_calls SET withdraw_until = 0 WHERE id = ? AND withdraw_until <> 0`, id); err != nil {
			return nil, fmt.Errorf("clear withdrawal of tool call %s: %w", id, err)
		}
		// The op wrote; nothing to publish.
		return []*store.Event{}, nil
	})
}

func (db *DB) queryCalls(ctx context.Context, opName, q string, args ...any) ([]*store.Call, error) {
	rows, err := db.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", opName, err)
	}
	defer rows.Close()
	var out []*store.Call
	for rows.Next() {
		c, err := scanCall(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", opName, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", opName, err)
	}
	return out, nil
}

// Events implements store.Store.
func (db *DB) Events(ctx context.Context, sessionID string, after int64, limit int) ([]store.Event, error) {
	if limit <= 0 || limit > store.MaxListLimit+1 {
		limit = store.MaxListLimit + 1
	}
	rows, err := db.reads["events"].QueryContext(ctx, sessionID, after, limit)
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

// Stats reports the transactions the writer committed and the write ops in
// them (their ratio is the mean group-commit batch).
func (db *DB) Stats() (transactions, ops int64) {
	return db.batches.Load(), db.ops64.Load()
}

// Close implements store.Store: queued writes are committed first.
func (db *DB) Close() error {
	db.closeMu.Lock()
	if db.closed {
		db.closeMu.Unlock()
		return nil
	}
	db.closed = true
	close(db.ops)
	db.closeMu.Unlock()
	<-db.done
	close(db.stopCkpt)
	<-db.ckptDone
	for _, st := range db.stmts {
		st.Close()
	}
	for _, st := range db.reads {
		st.Close()
	}
	return errors.Join(db.read.Close(), db.write.Close())
}

func marshalStrings(v []string) (string, error) {
	if v == nil {
		v = []string{}
	}
	b, err := json.Marshal(v)
	return string(b), err
}

func unmarshalStrings(s string) ([]string, error) {
	var v []string
	err := json.Unmarshal([]byte(s), &v)
	return v, err
}

// nullText is raw as a TEXT value, NULL when empty.
func nullText(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return string(raw)
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

// uriPath escapes the characters a file: URI gives a meaning (RFC 8089,
// SQLite's URI filenames), so that a data directory named "d#x" or
// "d?mode=ro" holds the database instead of changing where it goes.
var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// DeleteEnded implements store.Store. It runs on the writer like every
// write, as one op of at most limit deletes, so a batch costs the callers
// it shares a transaction with about a millisecond.
func (db *DB) DeleteEnded(ctx context.Context, before time.Time, limit int) (store.Removed, error) {
	if limit <= 0 {
		return store.Removed{}, fmt.Errorf("delete ended sessions: limit must be positive, got %d", limit)
	}
	var rm store.Removed
	err := db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		rm = store.Removed{}
		rows, err := tx.Query(`SELECT id FROM sessions s WHERE status IN ('interrupted', 'closed') AND updated_at < ?
			AND NOT EXISTS (SELECT 1 FROM tool_calls c WHERE c.session_id = s.id AND c.withdraw_until <> 0)
			ORDER BY updated_at LIMIT ?`, before.UnixNano(), limit)
		if err != nil {
			return nil, fmt.Errorf("delete ended sessions: %w", err)
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("delete ended sessions: %w", err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("delete ended sessions: %w", err)
		}
		left := int64(limit)
		for _, id := range ids {
			n, err := execCount(tx, `DELETE FROM events WHERE id IN (SELECT id FROM events WHERE session_id = ? ORDER BY seq LIMIT ?)`, id, left)
			if err != nil {
				return nil, fmt.Errorf("delete ended session %s: events: %w", id, err)
			}
			rm.Events += n
			if left -= n; left <= 0 {
				break
			}
			n, err = execCount(tx, `DELETE FROM tool_calls WHERE id IN (SELECT id FROM tool_calls WHERE session_id = ? LIMIT ?)`, id, left)
			if err != nil {
				return nil, fmt.Errorf("delete ended session %s: tool calls: %w", id, err)
			}
			rm.Calls += n
			if left -= n; left <= 0 {
				break
			}
			// The session's tool set goes with it (counted as the session).
			if _, err := tx.Exec(`DELETE FROM session_tools WHERE session_id = ?`, id); err != nil {
				return nil, fmt.Errorf("delete ended session %s: tool set: %w", id, err)
			}
			if _, err := tx.Exec(`DELETE FROM sessions WHERE id = ?`, id); err != nil {
				return nil, fmt.Errorf("delete ended session %s: %w", id, err)
			}
			rm.Sessions++
			left--
			delete(db.known, id)
			db.batch[id] = sessionState{}
		}
		// The op wrote; nothing to publish.
		return []*store.Event{}, nil
	})
	return rm, err
}

func execCount(tx *sql.Tx, q string, args ...any) (int64, error) {
	res, err := tx.Exec(q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
