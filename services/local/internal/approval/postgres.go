package approval

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/pgbound"
	"github.com/brain-tools/suite/pkg/pglisten"
)

// channel is the NOTIFY channel of the approval store's changes.
const channel = "approvals"

// Kinds of Change.
const (
	// ChangeCreated: a new pending approval was stored.
	ChangeCreated = "created"
	// ChangeDecided: an approval reached its final status.
	ChangeDecided = "decided"
	// ChangeResync: the listener reconnected and may have missed changes;
	// whoever waits on the store reads it again. Never sent, only
	// delivered.
	ChangeResync = "resync"
)

// Change is what one replica tells the others of an approval it created or
// decided (a hint: the table is the truth, so it names the approval and its
// tenant, not what changed). TenantID is empty when it did not fit a
// notification; the receiver reads it from the approval.
type Change struct {
	Kind     string `json:"k"`
	ID       string `json:"id,omitempty"`
	TenantID string `json:"t,omitempty"`
	From     string `json:"f,omitempty"` // the replica that made it
}

// PostgresOptions configures OpenPostgres.
type PostgresOptions struct {
	// URL is the database, a postgres:// or postgresql:// URL. Required.
	URL string
	// OnChange, when set, receives the changes other replicas commit, in
	// commit order, and ChangeResync after the listener reconnected. It
	// must not block.
	OnChange func(Change)
	// Logger receives the listener's reconnects; nil discards them.
	Logger *slog.Logger
	// StatementTimeout bounds each statement, each taking of a pooled
	// connection (its liveness ping included) and each new connection, the
	// listener's too (package pgbound); 0 means pgbound.Default. The
	// schema steps at open are bounded only while connecting.
	StatementTimeout time.Duration
}

// OpenPostgres opens the approval store in the PostgreSQL database at
// o.URL, applies the schema steps it has not had yet (under an advisory
// lock: replicas starting together apply each once), and listens for the
// other replicas' changes.
func OpenPostgres(ctx context.Context, o PostgresOptions) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(o.URL)
	if err != nil {
		return nil, fmt.Errorf("open approvals store: %w", err)
	}
	// The schema steps run unbounded, on a connection of their own: a long
	// one is not a database gone quiet. Connecting is bounded, so that
	// start-up on a database that does not answer fails instead of
	// waiting for ever.
	mcfg := pcfg.ConnConfig.Copy()
	pgbound.BoundConnect(mcfg, o.StatementTimeout)
	mdb := stdlib.OpenDB(*mcfg)
	err = migrate(ctx, mdb, postgresDialect)
	mdb.Close()
	if err != nil {
		return nil, fmt.Errorf("open approvals store: migrate schema: %w", err)
	}
	// Every other statement is bounded, and so is taking a connection: a
	// database that stops answering fails a page's read or an answer with
	// a 503 after the bound. pgxpool keeps the connections (database/sql
	// keeps none idle), because its liveness ping of an idle connection
	// is bounded and database/sql's is not.
	pgbound.Configure(pcfg.ConnConfig, o.StatementTimeout)
	// Waiting streams hold no connection; page reads and writes are short.
	pcfg.MaxConns = 10
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("open approvals store: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{w: db, r: db, d: postgresDialect, now: time.Now, replica: jobs.NewID(), pool: pool, bound: o.StatementTimeout, log: log}
	onChange := o.OnChange
	if onChange == nil {
		onChange = func(Change) {}
	}
	s.listener, err = pglisten.Start(ctx, pglisten.Options{URL: o.URL, Channel: channel, Logger: o.Logger, Timeout: o.StatementTimeout,
		OnNotify: func(payload string) {
			var c Change
			if json.Unmarshal([]byte(payload), &c) != nil || c.From == s.replica {
				return
			}
			onChange(c)
		},
		OnResync: func() { onChange(Change{Kind: ChangeResync}) },
	})
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open approvals store: %w", err)
	}
	return s, nil
}

// signal tells the other replicas, at tx's commit, that approval a was
// created or decided. A no-op on SQLite (one process).
func (s *Store) signal(ctx context.Context, tx *sql.Tx, kind string, a Approval) error {
	if s.listener == nil {
		return nil
	}
	payload, err := json.Marshal(Change{Kind: kind, ID: a.ID, TenantID: a.TenantID, From: s.replica})
	if err != nil {
		return err
	}
	if len(payload) > pglisten.MaxPayload {
		// A tenant ID too long for one notification: the receivers read
		// it from the approval.
		if payload, err = json.Marshal(Change{Kind: kind, ID: a.ID, From: s.replica}); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, string(payload)); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}
