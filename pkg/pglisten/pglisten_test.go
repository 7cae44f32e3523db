package pglisten

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/pgtest"
	"github.com/jackc/pgx/v5"
)

var srv *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, "pglisten", &srv) }

// TestNotifyAndResync: notifications committed by another connection
// arrive in commit order; after the listening connection is killed, the
// listener reconnects, says so (OnResync) and receives what follows.
func TestNotifyAndResync(t *testing.T) {
	url := srv.NewDatabase(t)
	ctx := context.Background()
	got := make(chan string, 10)
	resync := make(chan struct{}, 10)
	l, err := Start(ctx, Options{URL: url, Channel: "test_ch",
		OnNotify: func(p string) { got <- p }, OnResync: func() { resync <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	notify := func(payload string) {
		t.Helper()
		if _, err := conn.Exec(ctx, `SELECT pg_notify('test_ch', $1)`, payload); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want string) {
		t.Helper()
		select {
		case p := <-got:
			if p != want {
				t.Fatalf("payload %q, want %q", p, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification %q within 10 s", want)
		}
	}
	// Inside a transaction: nothing until it commits, then both in order.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"one", "two"} {
		if _, err := tx.Exec(ctx, `SELECT pg_notify('test_ch', $1)`, p); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case p := <-got:
		t.Fatalf("notification %q before the commit", p)
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	expect("one")
	expect("two")

	// Kill the listener's connection: it comes back and says so.
	tag, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("terminate the listener: %v (%d rows)", err, tag.RowsAffected())
	}
	select {
	case <-resync:
	case <-time.After(10 * time.Second):
		t.Fatal("no resync within 10 s of a lost connection")
	}
	notify("three")
	expect("three")
}

func TestStartRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no URL", Options{Channel: "c", OnNotify: func(string) {}}, "required"},
		{"bad channel", Options{URL: srv.URL("postgres"), Channel: "Bad-Name", OnNotify: func(string) {}}, "channel"},
		{"no callback", Options{URL: srv.URL("postgres"), Channel: "c"}, "OnNotify"},
		{"unknown database", Options{URL: srv.URL("nonexistent"), Channel: "c", OnNotify: func(string) {}}, "nonexistent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Start(ctx, tc.o)
			if err == nil {
				l.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to name %q", err, tc.want)
			}
		})
	}
}

// TestStartSilentDatabase: Start (and each reconnect, which connects the
// same way) on a database that does not answer fails after Timeout
// instead of waiting for ever.
func TestStartSilentDatabase(t *testing.T) {
	const bound = 200 * time.Millisecond
	gate, url := srv.Gate(t, srv.URL("postgres"))
	gate.Shut()
	pgtest.FailsWithin(t, bound, "start", func(ctx context.Context) error {
		l, err := Start(ctx, Options{URL: url, Channel: "c", OnNotify: func(string) {}, Timeout: bound})
		if err == nil {
			l.Close()
		}
		return err
	})
}
