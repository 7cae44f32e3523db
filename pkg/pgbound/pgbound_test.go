package pgbound_test

import (
	"context"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/pgbound"
	"github.com/brain-tools/suite/pkg/pgtest"
	"github.com/jackc/pgx/v5"
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
