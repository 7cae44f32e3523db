// Package pgbound bounds each statement a pgx connection runs, each new
// connection, and in a pgxpool each taking of a connection, so that a
// PostgreSQL server that stops answering — paused, partitioned away, its
// TCP connections left open — fails the statements sent to it with
// context.DeadlineExceeded after a bound instead of holding them, and the
// requests behind them, until their callers give up. It is the bound of a
// statement brain and the approval service run on a database that
// answers: a short indexed statement, not a report.
package pgbound

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/bounded"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Default is the bound Configure gives for 0: far past any statement the
// suite makes, short of a client's patience.
const Default = 10 * time.Second

// Configure bounds every statement of the connections cfg makes to d (0
// means Default), and their connecting to d when cfg has no
// connect_timeout of its own (a connect_timeout of 0 is none). It sets
// cfg.Tracer, which must be unset.
//
// In a pool made from cfg (pgxpool.NewWithConfig after Configure), taking
// a connection is bounded to d as well: waiting for one while all are
// busy, and the liveness ping pgxpool sends a connection idle over a
// second before handing it out, which is no statement of the tracer's.
func Configure(cfg *pgx.ConnConfig, d time.Duration) {
	if d <= 0 {
		d = Default
	}
	BoundConnect(cfg, d)
	cfg.Tracer = tracer(d)
}

// BoundConnect bounds only the connecting of the connections cfg makes,
// to d (0 means Default) when cfg has no connect_timeout of its own: for
// work whose statements may rightly run long (schema migrations) but
// that should not wait for ever on a server that does not answer.
func BoundConnect(cfg *pgx.ConnConfig, d time.Duration) {
	if d <= 0 {
		d = Default
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = d
	}
}

// tracer is a pgx.QueryTracer that gives each statement a deadline d
// away. pgx runs the statement under the context TraceQueryStart returns
// and hands that context to TraceQueryEnd once the statement's rows are
// closed, which releases its timer.
type tracer time.Duration

type cancelKey struct{}

func (d tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(d))
	return context.WithValue(ctx, cancelKey{}, cancel)
}

func (tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	release(ctx)
}

// TraceAcquireStart and TraceAcquireEnd make tracer a
// pgxpool.AcquireTracer: pgxpool takes a connection (waits, pings, dials)
// under the context TraceAcquireStart returns.
func (d tracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return d.TraceQueryStart(ctx, nil, pgx.TraceQueryStartData{})
}

func (tracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	release(ctx)
}

// ClosePool closes pool, waiting for that d at most (0 means Default),
// and reports whether it closed in time. A pool waits for its connections
// in use to come back, and one whose statement was cut short on a server
// that does not answer comes back only after pgx's own 15 s; past d they
// are left to end with the process.
func ClosePool(pool *pgxpool.Pool, d time.Duration) bool {
	if d <= 0 {
		d = Default
	}
	return bounded.Wait(d, pool.Close)
}

// release frees the timer of a context TraceQueryStart gave.
func release(ctx context.Context) {
	if cancel, ok := ctx.Value(cancelKey{}).(context.CancelFunc); ok {
		cancel()
	}
}

// CheckURL reports what is wrong with raw as the database URL of the
// suite's services (named by the environment variable name): a
// postgres:// or postgresql:// URL, the scheme in lower case (pgx takes
// anything else for a key=value string), with at most one @ before its
// host (a raw @ in a password is read as the host's start), that pgxpool
// can parse, pool settings included. The error names the variable and
// pgx's reason, never the URL: pgx's own message quotes it with the
// password masked only up to a stray @.
func CheckURL(name, raw string) error {
	rest, ok := strings.CutPrefix(raw, "postgres://")
	if !ok {
		rest, ok = strings.CutPrefix(raw, "postgresql://")
	}
	if !ok {
		return fmt.Errorf("%s: want a postgres:// or postgresql:// URL (the scheme in lower case)", name)
	}
	authority, _, _ := strings.Cut(rest, "/")
	authority, _, _ = strings.Cut(authority, "?")
	if strings.Count(authority, "@") > 1 {
		return fmt.Errorf("%s: more than one @ before the host: an @ in the user name or password is written %%40", name)
	}
	if _, err := pgxpool.ParseConfig(raw); err != nil {
		msg := err.Error()
		if i := strings.LastIndex(msg, "`: "); strings.HasPrefix(msg, "cannot parse `") && i >= 0 {
			msg = msg[i+3:]
		}
		return fmt.Errorf("%s: cannot parse the URL: %s", name, msg)
	}
	return nil
}
