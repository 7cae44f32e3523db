package pgbound_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/pgbound"
	"github.com/brain-tools/suite/pkg/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

var pg *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, "pgbound", &pg) }

// TestConfigure: a statement to a server that stops answering fails after
// the bound with context.DeadlineExceeded, and so does a new connection;
// a statement that answers in time is untouched, and a bound of 0 is
// Default.
func TestConfigure(t *testing.T) {
	const bound = 200 * time.Millisecond
	gate, url := pg.Gate(t, pg.NewDatabase(t))
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pgbound.Configure(cfg, bound)
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("a statement that answers: %d, %v", n, err)
	}
	gate.Shut()
	steps := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"statement", func(ctx context.Context) error { _, err := conn.Exec(ctx, "SELECT 1"); return err }},
		{"connect", func(ctx context.Context) error {
			c, err := pgx.ConnectConfig(ctx, cfg)
			if err == nil {
				c.Close(ctx)
			}
			return err
		}},
	}
	for _, s := range steps {
		pgtest.FailsWithin(t, bound, s.name, s.run)
	}
	gate.Open()

	for _, tc := range []struct {
		name      string
		url       string
		configure func(*pgx.ConnConfig)
		connect   time.Duration
		traced    bool
	}{
		{"bound 0 is Default", url, func(c *pgx.ConnConfig) { pgbound.Configure(c, 0) }, pgbound.Default, true},
		{"the URL's connect_timeout stands", url + "&connect_timeout=3", func(c *pgx.ConnConfig) { pgbound.Configure(c, bound) }, 3 * time.Second, true},
		{"connect only", url, func(c *pgx.ConnConfig) { pgbound.BoundConnect(c, bound) }, bound, false},
		{"connect only, 0 is Default", url, func(c *pgx.ConnConfig) { pgbound.BoundConnect(c, 0) }, pgbound.Default, false},
	} {
		cfg, err := pgx.ParseConfig(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		tc.configure(cfg)
		if cfg.ConnectTimeout != tc.connect || (cfg.Tracer != nil) != tc.traced {
			t.Errorf("%s: connect timeout %s, statements bounded %v; want %s, %v", tc.name, cfg.ConnectTimeout, cfg.Tracer != nil, tc.connect, tc.traced)
		}
	}
}

// TestConfigurePool: in a pgxpool, taking a connection is bounded too. A
// connection idle for over a second is pinged before it is handed out, and
// that ping is no statement of the tracer's: on a server that stopped
// answering it would hold the first request of a quiet replica until its
// client left.
func TestConfigurePool(t *testing.T) {
	const bound = 200 * time.Millisecond
	gate, url := pg.Gate(t, pg.NewDatabase(t))
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	pgbound.Configure(cfg.ConnConfig, bound)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	exec := func(ctx context.Context) error { _, err := pool.Exec(ctx, "SELECT 1"); return err }
	if err := exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // pgxpool pings what was idle over 1 s
	gate.Shut()
	pgtest.FailsWithin(t, bound, "a statement on a connection idle over a second", exec)
	// Every connection busy: waiting for one is bounded as well.
	gate.Open()
	held := make([]*pgxpool.Conn, 0, cfg.MaxConns)
	for range cfg.MaxConns {
		c, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	pgtest.FailsWithin(t, bound, "waiting for a connection of a full pool", exec)
	for _, c := range held {
		c.Release()
	}
	if err := exec(context.Background()); err != nil {
		t.Errorf("once the database answers: %v", err)
	}
}

// TestClosePool: closing a pool whose server went silent while a
// connection was in use waits the bound, not pgx's own 15 s for that
// connection (a brain replica took 18 s to stop with a 2 s bound).
func TestClosePool(t *testing.T) {
	const bound = 200 * time.Millisecond
	gate, url := pg.Gate(t, pg.NewDatabase(t))
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pgbound.Configure(cfg.ConnConfig, bound)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	defer gate.Open()
	gate.Shut()
	inUse := make(chan error, 1)
	go func() { _, err := pool.Exec(context.Background(), "SELECT 1"); inUse <- err }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	closed := pgbound.ClosePool(pool, bound)
	if took := time.Since(start); closed || took > 5*time.Second {
		t.Errorf("ClosePool with a connection in use on a silent server: closed %v after %s, want false after about %s", closed, took, bound)
	}
	if err := <-inUse; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the statement in use: %v, want the bound's deadline", err)
	}
	// A pool with nothing in use closes in time, and says so.
	quiet, err := pgxpool.NewWithConfig(context.Background(), cfg.Copy())
	if err != nil {
		t.Fatal(err)
	}
	if !pgbound.ClosePool(quiet, bound) {
		t.Error("a pool with nothing in use did not close within the bound")
	}
}

// TestCheckURL: a database URL is taken only as pgx will take it, and a
// refusal names the variable and the fault, never the password.
func TestCheckURL(t *testing.T) {
	tests := []struct {
		url, want string // want "" = taken
	}{
		{"postgres://u:pw@127.0.0.1:5432/brain", ""},
		{"postgresql://127.0.0.1/brain?sslmode=disable", ""},
		{"postgres:///brain?host=/tmp/pg", ""},
		{"", "want a postgres:// or postgresql:// URL"},
		{"mysql://u:pw@h/db", "want a postgres:// or postgresql:// URL"},
		{"POSTGRES://u:pw@h/db", "the scheme in lower case"},
		{"host=h dbname=db", "want a postgres:// or postgresql:// URL"},
		{"postgres://u:secretpw@127.0.0.1:abc/brain", "invalid port"},
		{"postgres://u:secretpw@127.0.0.1:99999/brain", "invalid port"},
		{"postgres://u:sec%ZZretpw@h/db", "invalid percent-encoded token"},
		{"postgres://u:secretpw@h/db?sslmode=sometimes", "sslmode is invalid"},
		{"postgres://u:pw@secret@127.0.0.1:5432/db", "more than one @ before the host"},
		{"postgres://u:pw@secret@127.0.0.1:99999/db", "more than one @ before the host"},
		{"postgres://u:pw%40secret@127.0.0.1:5432/db?application_name=a@b", ""},
		{"postgres://u:secretpw@h/db?pool_max_conns=abc", "pool_max_conns"},
		{"postgres://u:secretpw@h/db?pool_max_conns=0", "pool_max_conns"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := pgbound.CheckURL("BRAIN_DATABASE_URL", tt.url)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "BRAIN_DATABASE_URL: ") {
				t.Fatalf("got %v, want BRAIN_DATABASE_URL: …%s…", err, tt.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the refusal shows the password: %v", err)
			}
		})
	}
}
