// Package pglisten keeps one PostgreSQL connection LISTENing on a channel
// and hands every notification to a callback: the signal that replicas
// sharing a database send each other with NOTIFY (brain's store, the
// approval store of the local service).
//
// A notification is a hint, never the truth: PostgreSQL drops those sent
// while the listening connection is down, so after a reconnect the
// listener calls OnResync, and its user reads the table again. A
// notification sent inside a transaction is delivered at commit, in commit
// order, to every listener — the sender's own included, which a user that
// wants only the others' filters out by a sender ID in the payload.
package pglisten

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/brain-tools/suite/pkg/pgbound"
)

// MaxPayload is the largest notification payload to send: PostgreSQL takes
// up to 8000 bytes by default; the rest is room to spare.
const MaxPayload = 7900

// Options configures Start.
type Options struct {
	// URL is the database, a postgres:// URL (libpq's forms, as pgx reads
	// them). Required.
	URL string
	// Channel is the channel to LISTEN on: an SQL identifier of lower-case
	// letters, digits and underscores. Required.
	Channel string
	// OnNotify receives each notification's payload, in the order
	// PostgreSQL delivers them. It must not block. Required.
	OnNotify func(payload string)
	// OnResync, when set, is called after the listener reconnected:
	// notifications sent while it was down are lost. It must not block.
	OnResync func()
	// Logger receives the reconnects; nil discards them.
	Logger *slog.Logger
	// Timeout bounds each connecting and its LISTEN (package pgbound), so
	// that Start and each reconnect on a database that does not answer
	// fail instead of waiting for ever; 0 means pgbound.Default. Waiting
	// for notifications is not bounded: a quiet channel is no silent
	// database.
	Timeout time.Duration
}

// Listener is a running listener. Stop it with Close.
type Listener struct {
	o    Options
	log  *slog.Logger
	stop context.CancelFunc
	done chan struct{}
}

// Start connects, LISTENs, and returns once the first LISTEN succeeded (an
// error otherwise: the database is unreachable or the channel invalid).
// Afterwards a lost connection is reconnected with backoff (50 ms doubling
// to 2 s), each success followed by OnResync.
func Start(ctx context.Context, o Options) (*Listener, error) {
	if o.URL == "" || o.OnNotify == nil || !validChannel(o.Channel) {
		return nil, errors.New("listen: URL, OnNotify and a channel of [a-z0-9_] are required")
	}
	l := &Listener{o: o, log: o.Logger, done: make(chan struct{})}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	conn, err := l.connect(ctx)
	if err != nil {
		close(l.done)
		return nil, fmt.Errorf("listen %s: %w", o.Channel, err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	go l.run(lctx, conn)
	return l, nil
}

func validChannel(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

func (l *Listener) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(l.o.URL)
	if err != nil {
		return nil, err
	}
	pgbound.Configure(cfg, l.o.Timeout)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+l.o.Channel); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

func (l *Listener) run(ctx context.Context, conn *pgx.Conn) {
	defer close(l.done)
	backoff := 50 * time.Millisecond
	for {
		err := l.receive(ctx, conn)
		conn.Close(context.Background())
		for {
			if ctx.Err() != nil {
				return
			}
			l.log.Warn("postgres listener: reconnecting", "channel", l.o.Channel, "err", err, "backoff", backoff.String())
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			if conn, err = l.connect(ctx); err == nil {
				break
			}
		}
		backoff = 50 * time.Millisecond
		if l.o.OnResync != nil {
			l.o.OnResync()
		}
	}
}

func (l *Listener) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.o.OnNotify(n.Payload)
	}
}

// Close stops the listener and waits for it; calling it again is a no-op.
func (l *Listener) Close() {
	if l.stop != nil {
		l.stop()
	}
	<-l.done
}
