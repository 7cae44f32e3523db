package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pressly/goose/v3"
)

// migrationFiles are the schema's versions, applied in order by goose
// (github.com/pressly/goose/v3), which records them in goose_db_version.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// eventsPerSession is version 1, in Go: it numbers the events of a database
// made by the first schema (whose only event ID was one sequence for every
// session, which let a tenant count other tenants' events) per session,
// keeping each session's order. On an empty database, or one that brain
// numbered per session already (every database before versioned
// migrations began), it changes nothing; version 2 then makes the schema.
var eventsPerSession = goose.NewGoMigration(1, &goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
	var tables, seqs int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table' AND name = 'events'`).Scan(&tables); err != nil || tables == 0 {
		return err
	}
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('events') WHERE name = 'seq'`).Scan(&seqs); err != nil || seqs > 0 {
		return err
	}
	for _, q := range []string{
		`ALTER TABLE events ADD COLUMN seq INTEGER NOT NULL DEFAULT 0`,
		`UPDATE events SET seq = n.seq FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY session_id ORDER BY id) AS seq FROM events) AS n
			WHERE events.id = n.id`,
		`DROP INDEX IF EXISTS events_session`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("number events per session: %w", err)
		}
	}
	return nil
}}, nil)

// waitingCalls is version 3, in Go: it adds the tool_calls columns of calls
// that wait for an answer or a slot (the ToolCall fields of the peer, seed
// 001): ord, the call's place in the order calls were stored (lists and
// queues follow it; seq, the ID of the call's tool.call event, is numbered
// per session and orders nothing across sessions), who made the call and
// for which call, what a call in requires_input waits for, and whether a
// failed call may be retried (NULL until it failed). Every call keeps its
// row; ord numbers the calls in the order they were created (created_at,
// then ID, which sorts by creation time too); caller_type is api (brain made
// no calls of its own then); a call that already failed gets retryable,
// true only for one cancelled before it was sent. The index that ordered
// lists by seq gives way to one on ord. A database a brain made with these
// columns before versioned migrations (it added them itself) is left as it
// is but for the index, so the version applies to either.
var waitingCalls = goose.NewGoMigration(3, &goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
	var cols int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('tool_calls') WHERE name = 'ord'`).Scan(&cols); err != nil {
		return err
	}
	var steps []string
	if cols == 0 {
		for _, col := range waitingColumns {
			steps = append(steps, `ALTER TABLE tool_calls ADD COLUMN `+col)
		}
		steps = append(steps,
			`UPDATE tool_calls SET ord = n.ord FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY created_at, id) AS ord FROM tool_calls) AS n
				WHERE tool_calls.id = n.id`,
			`UPDATE tool_calls SET retryable = (unknown_outcome = 0 AND error_code = 'cancelled')
				WHERE status IN ('failed', 'cancelled', 'timed_out')`,
		)
	}
	steps = append(steps, `DROP INDEX IF EXISTS tool_calls_tenant`,
		`CREATE INDEX IF NOT EXISTS tool_calls_tenant_ord ON tool_calls (tenant_id, ord)`)
	for _, q := range steps {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("add the fields of calls that wait: %w", err)
		}
	}
	return nil
}}, nil)

// waitingColumns are the columns version 3 adds.
var waitingColumns = []string{
	`ord                 INTEGER NOT NULL DEFAULT 0`,
	`parent_id           TEXT NOT NULL DEFAULT ''`,
	`caller_type         TEXT NOT NULL DEFAULT 'api'`,
	`input_kind          TEXT NOT NULL DEFAULT ''`,
	`prompt              TEXT NOT NULL DEFAULT ''`,
	`response_schema     TEXT`,
	`response_expires_at INTEGER NOT NULL DEFAULT 0`,
	`retryable           INTEGER`,
}

// provider returns the goose provider of the schema on db.
func provider(db *sql.DB) (*goose.Provider, error) {
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectSQLite3, db, files,
		goose.WithGoMigrations(eventsPerSession, waitingCalls), goose.WithDisableGlobalRegistry(true))
}

// migrate applies the versions db has not had yet, each in a transaction
// of its own, and returns those it applied. The caller holds the data
// directory's lock (one brain per directory), so nothing else migrates db
// at the same time; SQLite's write lock would serialize it anyway.
func migrate(ctx context.Context, db *sql.DB) ([]int64, error) {
	p, err := provider(db)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	out := make([]int64, 0, len(res))
	for _, r := range res {
		out = append(out, r.Source.Version)
	}
	return out, nil
}

// Migrate applies to the database file at path (created when missing) the
// schema versions it has not had yet and returns those it applied (none
// when it is up to date) and the version it is at. Open does the same; this
// is `brain migrate`, run before a new brain starts. The caller holds the
// data directory's lock.
func Migrate(ctx context.Context, path string) (applied []int64, version int64, err error) {
	db, err := sql.Open("sqlite", "file:"+uriPath.Replace(path)+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return nil, 0, fmt.Errorf("migrate %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if applied, err = migrate(ctx, db); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	p, err := provider(db)
	if err != nil {
		return nil, 0, fmt.Errorf("migrate %s: %w", path, err)
	}
	if version, err = p.GetDBVersion(ctx); err != nil {
		return nil, 0, fmt.Errorf("migrate %s: %w", path, err)
	}
	return applied, version, nil
}

// ErrNoDatabase is Backup's error for a database that is not there.
var ErrNoDatabase = errors.New("no database there")

// Backup writes a consistent copy of the database at path to dest with
// VACUUM INTO: one read transaction, so a brain running on the database
// goes on writing (WAL) while it runs, and the copy is the database as of
// that transaction, compacted. dest must not exist. The copy is a whole
// database (no WAL beside it): restore it by putting it in place of
// brain.db while brain is stopped.
func Backup(ctx context.Context, path, dest string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup %s: %w", path, ErrNoDatabase)
	} else if err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	if dest == "" {
		return errors.New("backup: the file to write is empty; give its path")
	}
	if _, err := os.Lstat(dest); err == nil {
		return fmt.Errorf("backup to %s: the file exists; give a new file", dest)
	}
	// VACUUM INTO takes "file:…" as a URI (mode=memory writes nowhere)
	// and ":memory:" as no file at all: an absolute path is a file, always.
	abs, err := filepath.Abs(dest)
	if err != nil {
		return fmt.Errorf("backup to %s: %w", dest, err)
	}
	switch fi, err := os.Stat(filepath.Dir(abs)); {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("backup to %s: directory %s does not exist; create it first", dest, filepath.Dir(abs))
	case err != nil:
		return fmt.Errorf("backup to %s: %w", dest, err)
	case !fi.IsDir():
		return fmt.Errorf("backup to %s: %s is not a directory", dest, filepath.Dir(abs))
	}
	db, err := sql.Open("sqlite", "file:"+uriPath.Replace(path)+"?_pragma=busy_timeout(5000)&mode=ro")
	if err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, abs); err != nil {
		os.Remove(abs)
		return fmt.Errorf("backup %s to %s: %w", path, dest, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("backup %s to %s: no file was written", path, dest)
	}
	return nil
}
