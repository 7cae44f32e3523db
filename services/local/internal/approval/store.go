package approval

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/pgbound"
	"github.com/brain-tools/suite/pkg/pglisten"
)

// Store keeps approvals, their decision log, the audit log and the
// operator accounts, on one of two backends with the same behaviour (one
// suite of tests runs on both):
//
//   - SQLite (OpenSQLite, the default): one file. Writes go through a
//     single connection, so they queue in Go rather than spin on SQLite's
//     busy lock; reads use a small pool of their own (WAL mode lets them
//     run beside the writer). Every write is committed with
//     synchronous=FULL before it is acknowledged, so a pending approval
//     and a decision survive a kill of the process and a power cut alike.
//   - PostgreSQL (OpenPostgres): one database that any number of local
//     replicas share. Each write that creates or decides an approval
//     NOTIFYs the others in its transaction (delivered at commit); they
//     learn of it through OnChange and read the table, which stays the
//     truth.
//
// The first decision wins on both: a decision moves an approval only while
// it is still pending, in one conditional UPDATE that concurrent writers
// (two operators, two replicas, the sweepers of every replica) cannot both
// pass.
type Store struct {
	w, r *sql.DB
	d    *dialect
	now  func() time.Time
	// replica, listener and pool (under w and r), with the pool's bound
	// and the logger of its close: PostgreSQL only.
	replica  string
	listener *pglisten.Listener
	pool     *pgxpool.Pool
	bound    time.Duration
	log      *slog.Logger
}

// migrations are the store's schema, one versioned step per file and
// directory per backend, applied in order by goose at open. SQLite's step
// 1 is the schema every approvals.db has had (IF NOT EXISTS: an older
// database upgrades through it unchanged); later steps add to it.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrations embed.FS

// The PostgreSQL backend's goose version table and advisory lock ID.
const (
	postgresVersionTable = "approval_db_version"
	postgresLockID       = 0x617070726f76 // "approv"
)

// migrate brings the database at db up to the newest schema step of
// dialect d, under d's lock (PostgreSQL: replicas starting together apply
// each step once).
func migrate(ctx context.Context, db *sql.DB, d *dialect) error {
	dir, err := fs.Sub(migrations, "migrations/"+d.name)
	if err != nil {
		return err
	}
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	if d.goose == goose.DialectPostgres {
		// A version table and a lock of its own: the approval store may
		// share a database with brain's, whose goose uses the defaults.
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(postgresLockID))
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker), goose.WithTableName(postgresVersionTable))
	}
	p, err := goose.NewProvider(d.goose, db, dir, opts...)
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// OpenSQLite opens (creating when missing) the approvals database at path,
// creating its directory with mode 0700.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open approvals store: %w", err)
	}
	dsn := func(mode string) string {
		q := url.Values{}
		q.Set("_busy_timeout", "10000")
		q.Set("_journal_mode", "WAL")
		q.Set("_synchronous", "FULL")
		q.Set("_foreign_keys", "1")
		q.Set("_txlock", "immediate")
		// 1 MiB of page cache per connection (SQLite's default is 2 MiB):
		// the working set is the pending approvals, and the service's memory
		// budget goes to the streams that wait on them.
		q.Add("_pragma", "cache_size(-1024)")
		if mode == "ro" {
			q.Set("_query_only", "1")
		}
		return "file:" + uriPath.Replace(path) + "?" + q.Encode()
	}
	w, err := sql.Open("sqlite", dsn("rw"))
	if err != nil {
		return nil, fmt.Errorf("open approvals store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	if err := migrate(ctx, w, sqliteDialect); err != nil {
		w.Close()
		return nil, fmt.Errorf("open approvals store %s: migrate schema: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn("ro"))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open approvals store %s: %w", path, err)
	}
	r.SetMaxOpenConns(3)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("open approvals store %s: %w", path, err)
	}
	return &Store{w: w, r: r, d: sqliteDialect, now: time.Now}, nil
}

// Close closes the database (and the PostgreSQL listener). Calling it
// again is a no-op.
func (s *Store) Close() error {
	if s.listener != nil {
		s.listener.Close()
	}
	if s.pool != nil {
		defer func() {
			if !pgbound.ClosePool(s.pool, s.bound) {
				s.log.Warn("the approvals store did not close within a statement's bound (its database does not answer): its connections end with the process")
			}
		}()
	}
	if s.r == s.w {
		return s.w.Close()
	}
	return errors.Join(s.r.Close(), s.w.Close())
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.r.PingContext(ctx)
}

const columns = `id, tenant_id, session_id, call_id, origin, action, details, details_hash, status, created_at, expires_at, decided_at, operator, comment, withdrawn_at`

type scanner interface{ Scan(dest ...any) error }

// scanApproval reads the columns of an approval, then into extra those
// selected after them.
func scanApproval(row scanner, extra ...any) (Approval, error) {
	var a Approval
	var created, expires int64
	var decided, withdrawn sql.NullInt64
	err := row.Scan(append([]any{&a.ID, &a.TenantID, &a.SessionID, &a.CallID, &a.Origin, &a.Action, &a.Details, &a.DetailsHash,
		&a.Status, &created, &expires, &decided, &a.Operator, &a.Comment, &withdrawn}, extra...)...)
	if err != nil {
		return Approval{}, err
	}
	a.CreatedAt = time.UnixMilli(created).UTC()
	a.ExpiresAt = time.UnixMilli(expires).UTC()
	if decided.Valid {
		a.DecidedAt = time.UnixMilli(decided.Int64).UTC()
	}
	if withdrawn.Valid {
		a.WithdrawnAt = time.UnixMilli(withdrawn.Int64).UTC()
	}
	return a, nil
}

// NewApproval is what Create needs to record a request.
type NewApproval struct {
	TenantID, SessionID, CallID string
	Origin                      Origin
	Action, Details             string
	Timeout                     time.Duration
}

// Create records a new pending approval with a fresh 128-bit ID, unless one
// exists for the same tenant, session and call: then it returns that one
// with created false, whatever its status. It never creates a second
// approval for one call. A tenant with maxPending pending approvals already
// gets ErrTooManyPending (maxPending <= 0: no cap); attaching to an existing
// approval is always allowed.
func (s *Store) Create(ctx context.Context, n NewApproval, maxPending int) (a Approval, created bool, err error) {
	now := s.now().UTC().Truncate(time.Millisecond)
	a = Approval{
		ID: jobs.NewID(), TenantID: n.TenantID, SessionID: n.SessionID, CallID: n.CallID, Origin: n.Origin,
		Action: n.Action, Details: n.Details, DetailsHash: HashDetails(n.Action, n.Details),
		Status: Pending, CreatedAt: now, ExpiresAt: now.Add(n.Timeout).Truncate(time.Millisecond),
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Approval{}, false, fmt.Errorf("create approval: %w", err)
	}
	defer tx.Rollback()
	if s.d.lockTenant != "" {
		// Replicas count a tenant's pending approvals one at a time.
		if _, err := tx.ExecContext(ctx, s.d.bind(s.d.lockTenant), n.TenantID); err != nil {
			return Approval{}, false, fmt.Errorf("create approval: %w", err)
		}
	}
	existing, err := scanApproval(tx.QueryRowContext(ctx, s.d.bind(byCallQuery), n.TenantID, n.SessionID, n.CallID))
	switch {
	case err == nil:
		return existing, false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return Approval{}, false, fmt.Errorf("create approval: %w", err)
	}
	if maxPending > 0 {
		var count int
		if err := tx.QueryRowContext(ctx, s.d.bind(`SELECT count(*) FROM approvals WHERE tenant_id = ? AND status = 'pending'`), n.TenantID).Scan(&count); err != nil {
			return Approval{}, false, fmt.Errorf("create approval: %w", err)
		}
		if count >= maxPending {
			return Approval{}, false, fmt.Errorf("create approval: %w (%d pending, limit %d)", ErrTooManyPending, count, maxPending)
		}
	}
	// The same call sent to two replicas at once: one row, and the other
	// attaches to it.
	res, err := tx.ExecContext(ctx, s.d.bind(`INSERT INTO approvals (id, tenant_id, session_id, call_id, origin, action, details, details_hash, status, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (tenant_id, session_id, call_id) DO NOTHING`),
		a.ID, a.TenantID, a.SessionID, a.CallID, a.Origin, a.Action, a.Details, a.DetailsHash, a.CreatedAt.UnixMilli(), a.ExpiresAt.UnixMilli())
	if err != nil {
		return Approval{}, false, fmt.Errorf("create approval: %w", err)
	}
	if rows, err := res.RowsAffected(); err != nil {
		return Approval{}, false, fmt.Errorf("create approval: %w", err)
	} else if rows == 0 {
		tx.Rollback()
		existing, err := scanApproval(s.w.QueryRowContext(ctx, s.d.bind(byCallQuery), a.TenantID, a.SessionID, a.CallID))
		if err != nil {
			return Approval{}, false, fmt.Errorf("create approval: %w", err)
		}
		return existing, false, nil
	}
	if err := s.signal(ctx, tx, ChangeCreated, a); err != nil {
		return Approval{}, false, fmt.Errorf("create approval: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Approval{}, false, fmt.Errorf("create approval: commit: %w", err)
	}
	return a, true, nil
}

// byCallQuery finds the approval one call created; the UNIQUE (tenant_id,
// session_id, call_id) constraint is its index.
const byCallQuery = `SELECT ` + columns + ` FROM approvals WHERE tenant_id = ? AND session_id = ? AND call_id = ?`

// GetByCall returns the approval that call callID (request_approval or
// approval_start) of tenant's session created, and ErrNotFound when there
// is none: a call of another session or another tenant is not found, so
// an agent can only reach its own session's approvals this way.
func (s *Store) GetByCall(ctx context.Context, tenant, session, callID string) (Approval, error) {
	a, err := scanApproval(s.r.QueryRowContext(ctx, s.d.bind(byCallQuery), tenant, session, callID))
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, ErrNotFound
	}
	if err != nil {
		return Approval{}, fmt.Errorf("get approval of call %s: %w", callID, err)
	}
	return a, nil
}

// Get returns the approval id, for any tenant: the operator page's view.
func (s *Store) Get(ctx context.Context, id string) (Approval, error) {
	a, err := scanApproval(s.r.QueryRowContext(ctx, s.d.bind(`SELECT `+columns+` FROM approvals WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, ErrNotFound
	}
	if err != nil {
		return Approval{}, fmt.Errorf("get approval %s: %w", id, err)
	}
	return a, nil
}

// GetForTenant returns the approval id when it belongs to tenant, and
// ErrNotFound otherwise: a tool call never sees another tenant's approvals.
func (s *Store) GetForTenant(ctx context.Context, tenant, id string) (Approval, error) {
	a, err := s.Get(ctx, id)
	if err != nil {
		return Approval{}, err
	}
	if a.TenantID != tenant {
		return Approval{}, ErrNotFound
	}
	return a, nil
}

// ListPending returns the pending approvals, oldest first, at most limit.
func (s *Store) ListPending(ctx context.Context, limit int) ([]Approval, error) {
	return s.list(ctx, `SELECT `+columns+` FROM approvals WHERE status = 'pending' ORDER BY created_at, `+s.d.ord+` LIMIT ?`, limit)
}

// ListDecided returns the most recently decided approvals, newest first.
func (s *Store) ListDecided(ctx context.Context, limit int) ([]Approval, error) {
	return s.list(ctx, `SELECT `+columns+` FROM approvals WHERE status != 'pending' ORDER BY decided_at DESC, id LIMIT ?`, limit)
}

// CountPending returns how many approvals are pending.
func (s *Store) CountPending(ctx context.Context) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM approvals WHERE status = 'pending'`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count pending approvals: %w", err)
	}
	return n, nil
}

func (s *Store) list(ctx context.Context, query string, limit int) ([]Approval, error) {
	rows, err := s.r.QueryContext(ctx, s.d.bind(query), limit)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	defer rows.Close()
	var out []Approval
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, fmt.Errorf("list approvals: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	return out, nil
}

// Decide moves the pending approval id to decision (approved, denied,
// expired or cancelled) and appends the decision to the log, in one
// transaction. The first decision wins: on an approval that is no longer
// pending it returns *DecidedError with the approval as it stands. An
// answer (approved or denied) that comes at or after expires_at expires the
// approval instead and returns *DecidedError with status expired.
// changed reports whether this call changed the approval.
func (s *Store) Decide(ctx context.Context, id string, decision Status, operator, comment string) (a Approval, changed bool, err error) {
	if decision == Pending || decision == "" {
		return Approval{}, false, fmt.Errorf("decide approval %s: %q is not a decision", id, decision)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Approval{}, false, fmt.Errorf("decide approval %s: %w", id, err)
	}
	defer tx.Rollback()
	byID := s.d.bind(`SELECT ` + columns + ` FROM approvals WHERE id = ?`)
	a, err = scanApproval(tx.QueryRowContext(ctx, byID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, false, ErrNotFound
	}
	if err != nil {
		return Approval{}, false, fmt.Errorf("decide approval %s: %w", id, err)
	}
	if a.Status.Final() {
		return a, false, &DecidedError{Current: a}
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	late := (decision == Approved || decision == Denied) && !now.Before(a.ExpiresAt)
	if late {
		decision, operator, comment = Expired, SystemOperator, "no answer before the approval expired"
	}
	a.Status, a.DecidedAt, a.Operator, a.Comment = decision, now, operator, comment
	// Only while still pending: of two decisions at once (two replicas,
	// two sweepers), the second waits for the first's row lock and then
	// changes nothing.
	res, err := tx.ExecContext(ctx, s.d.bind(`UPDATE approvals SET status = ?, decided_at = ?, operator = ?, comment = ? WHERE id = ? AND status = 'pending'`),
		a.Status, now.UnixMilli(), a.Operator, a.Comment, id)
	if err != nil {
		return Approval{}, false, fmt.Errorf("decide approval %s: %w", id, err)
	}
	if rows, err := res.RowsAffected(); err != nil {
		return Approval{}, false, fmt.Errorf("decide approval %s: %w", id, err)
	} else if rows == 0 {
		cur, err := scanApproval(tx.QueryRowContext(ctx, byID, id))
		if err != nil {
			return Approval{}, false, fmt.Errorf("decide approval %s: %w", id, err)
		}
		return cur, false, &DecidedError{Current: cur}
	}
	if _, err := tx.ExecContext(ctx, s.d.bind(`INSERT INTO decisions (approval_id, decision, operator, comment, details_hash, at) VALUES (?, ?, ?, ?, ?, ?)`),
		id, a.Status, a.Operator, a.Comment, a.DetailsHash, now.UnixMilli()); err != nil {
		return Approval{}, false, fmt.Errorf("decide approval %s: log: %w", id, err)
	}
	if _, err := tx.ExecContext(ctx, s.d.bind(`INSERT INTO audit_log (at, operator, tenant_id, approval_id, decision, details_hash, comment) VALUES (?, ?, ?, ?, ?, ?, ?)`),
		now.UnixMilli(), a.Operator, a.TenantID, id, a.Status, a.DetailsHash, a.Comment); err != nil {
		return Approval{}, false, fmt.Errorf("decide approval %s: audit log: %w", id, err)
	}
	if err := s.signal(ctx, tx, ChangeDecided, a); err != nil {
		return Approval{}, false, fmt.Errorf("decide approval %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return Approval{}, false, fmt.Errorf("decide approval %s: commit: %w", id, err)
	}
	if late {
		return a, true, &DecidedError{Current: a}
	}
	return a, true, nil
}

// MarkWithdrawn records on approval id, when an operator approved or
// denied it, that its caller withdrew it afterwards (approval_cancel): the
// caller had stopped waiting, so the decision was recorded but not used.
// Only the first withdrawal counts: marked reports whether this call set
// WithdrawnAt, and a later one leaves it as it is. A pending, expired or
// cancelled approval is left unchanged (marked false). It returns the
// approval as it then stands.
func (s *Store) MarkWithdrawn(ctx context.Context, id string) (a Approval, marked bool, err error) {
	now := s.now().UTC().Truncate(time.Millisecond)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Approval{}, false, fmt.Errorf("mark approval %s withdrawn: %w", id, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, s.d.bind(`UPDATE approvals SET withdrawn_at = ? WHERE id = ? AND status IN ('approved','denied') AND withdrawn_at IS NULL`),
		now.UnixMilli(), id)
	if err != nil {
		return Approval{}, false, fmt.Errorf("mark approval %s withdrawn: %w", id, err)
	}
	rows, err := res.RowsAffected()
	if err != nil {
		return Approval{}, false, fmt.Errorf("mark approval %s withdrawn: %w", id, err)
	}
	a, err = scanApproval(tx.QueryRowContext(ctx, s.d.bind(`SELECT `+columns+` FROM approvals WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, false, ErrNotFound
	}
	if err != nil {
		return Approval{}, false, fmt.Errorf("mark approval %s withdrawn: %w", id, err)
	}
	if rows == 0 {
		return a, false, nil
	}
	// The audit log keeps the mark as long as the decision, after
	// retention has removed the approval.
	if _, err := tx.ExecContext(ctx, s.d.bind(`INSERT INTO audit_not_used (approval_id, withdrawn_at) VALUES (?, ?)`), id, now.UnixMilli()); err != nil {
		return Approval{}, false, fmt.Errorf("mark approval %s withdrawn: audit log: %w", id, err)
	}
	// The other replicas' pages show the mark.
	if err := s.signal(ctx, tx, ChangeDecided, a); err != nil {
		return Approval{}, false, fmt.Errorf("mark approval %s withdrawn: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return Approval{}, false, fmt.Errorf("mark approval %s withdrawn: commit: %w", id, err)
	}
	return a, true, nil
}

// ExpireDue expires every pending approval whose expires_at has passed and
// returns them.
func (s *Store) ExpireDue(ctx context.Context) ([]Approval, error) {
	now := s.now().UTC().Truncate(time.Millisecond)
	rows, err := s.r.QueryContext(ctx, s.d.bind(`SELECT id FROM approvals WHERE status = 'pending' AND expires_at <= ?`), now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("expire approvals: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("expire approvals: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("expire approvals: %w", err)
	}
	var out []Approval
	for _, id := range ids {
		a, changed, err := s.Decide(ctx, id, Expired, SystemOperator, "no answer before the approval expired")
		if errors.Is(err, ErrDecided) {
			if changed {
				out = append(out, a)
			}
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, a)
	}
	return out, nil
}

// NextExpiry returns the earliest expires_at of the pending approvals, and
// false when none is pending.
func (s *Store) NextExpiry(ctx context.Context) (time.Time, bool, error) {
	var ms sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT min(expires_at) FROM approvals WHERE status = 'pending'`).Scan(&ms); err != nil {
		return time.Time{}, false, fmt.Errorf("next expiry: %w", err)
	}
	if !ms.Valid {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(ms.Int64).UTC(), true, nil
}

// Log returns the decision log of approval id, oldest first.
func (s *Store) Log(ctx context.Context, id string) ([]LogEntry, error) {
	rows, err := s.r.QueryContext(ctx, s.d.bind(`SELECT seq, approval_id, decision, operator, comment, details_hash, at FROM decisions WHERE approval_id = ? ORDER BY seq`), id)
	if err != nil {
		return nil, fmt.Errorf("decision log of %s: %w", id, err)
	}
	defer rows.Close()
	var out []LogEntry
	for rows.Next() {
		var e LogEntry
		var at int64
		if err := rows.Scan(&e.Seq, &e.ApprovalID, &e.Decision, &e.Operator, &e.Comment, &e.DetailsHash, &at); err != nil {
			return nil, fmt.Errorf("decision log of %s: %w", id, err)
		}
		e.At = time.UnixMilli(at).UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("decision log of %s: %w", id, err)
	}
	return out, nil
}

// uriPath escapes the characters a file: URI gives a meaning (RFC 8089,
// SQLite's URI filenames), so that a data directory named "d#x" or
// "d?mode=ro" holds the database instead of changing where it goes.
var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
