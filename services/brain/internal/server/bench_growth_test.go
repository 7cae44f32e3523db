package server

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// growthSessions × growthCalls calls of two events each, plus each
// session's session.created and session.closed: a million events.
const (
	growthSessions = 1000
	growthCalls    = 499
)

// BenchmarkGrowth measures how the cost of reading grows with the store:
// the p50 of listing calls (a tenant's first page, a page deep into the
// list, one session's calls, a status filter) and of reading a session's
// events (its first page, a page near its end), on a store holding a
// million events (1,000 closed sessions of 499 calls each) against one
// holding only the session the reads name (1,000 events), on SQLite and
// on PostgreSQL. The two stores of a backend are read in turns, so load
// from other processes hits both alike.
//
//	go test -run '^$' -bench BenchmarkGrowth -benchtime 1x ./internal/server/
func BenchmarkGrowth(b *testing.B) {
	echo := echoService(b)
	cfg := hostConfig(&testing.T{}, echo.URL)
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			urls := map[string]string{}
			for _, size := range []struct {
				name     string
				sessions int
			}{{"empty", 1}, {"1M", growthSessions}} {
				o := Options{Config: cfg}
				start := time.Now()
				switch backend {
				case "sqlite":
					o.DataDir = b.TempDir()
					srv, err := New(context.Background(), o) // the schema
					if err != nil {
						b.Fatal(err)
					}
					srv.Close()
					fillSQLite(b, filepath.Join(o.DataDir, "brain.db"), size.sessions)
				case "postgres":
					o.DatabaseURL, o.SecretsKey = testDatabase(b), testSecretsKey
					srv, err := New(context.Background(), o)
					if err != nil {
						b.Fatal(err)
					}
					srv.Close()
					fillPostgres(b, o.DatabaseURL, size.sessions)
				}
				fmt.Printf("%s %s: filled in %v\n", backend, size.name, time.Since(start).Round(time.Millisecond))
				srv, err := New(context.Background(), o)
				if err != nil {
					b.Fatal(err)
				}
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				served := make(chan error, 1)
				go func() { served <- srv.Serve(ctx, ln) }()
				b.Cleanup(func() { cancel(); <-served; srv.Close() })
				urls[size.name] = "http://" + ln.Addr().String()
			}
			// The session every read names is ses_000001, in both stores.
			reads := []struct{ name, path string }{
				{"list-first-page", "/tool_calls?limit=100"},
				{"list-after", "/tool_calls?limit=100&after=" + growthCallID(1, 400)},
				{"list-session", "/tool_calls?limit=100&session_id=" + growthSessionID(1)},
				{"list-status", "/tool_calls?limit=100&status=failed"},
				{"events-first-page", "/sessions/" + growthSessionID(1) + "/events?limit=100"},
				{"events-near-end", "/sessions/" + growthSessionID(1) + "/events?limit=100&after=900"},
			}
			client := &http.Client{}
			const n = 200
			for _, rd := range reads {
				lat := map[string][]time.Duration{}
				for i := range 2 * n {
					size := []string{"empty", "1M"}[i%2]
					req, _ := http.NewRequest("GET", urls[size]+rd.path, nil)
					req.Header.Set("Authorization", "Bearer "+apiKeys["t1"])
					req.Header.Set("Accept", "application/json")
					t0 := time.Now()
					res, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						b.Fatalf("GET %s: %d", rd.path, res.StatusCode)
					}
					lat[size] = append(lat[size], time.Since(t0))
				}
				empty, full := summarize(lat["empty"], 0), summarize(lat["1M"], 0)
				b.ReportMetric(float64(empty.p50.Microseconds()), rd.name+"-empty-p50-µs")
				b.ReportMetric(float64(full.p50.Microseconds()), rd.name+"-1M-p50-µs")
				fmt.Printf("%s %-18s p50 %8v on the empty store, %8v with 1M events (×%.1f)\n",
					backend, rd.name, empty.p50.Round(time.Microsecond), full.p50.Round(time.Microsecond), float64(full.p50)/float64(empty.p50))
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

func growthSessionID(s int) string { return fmt.Sprintf("ses_%06d", s) }
func growthCallID(s, c int) string { return fmt.Sprintf("call_%06d_%04d", s, c) }

// fillPostgres fills the database at url: sessions 1..n of tenant t1,
// closed, each with growthCalls succeeded echo calls and its events
// numbered 1..2*growthCalls+2.
func fillPostgres(b *testing.B, url string, n int) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`INSERT INTO sessions (id, tenant_id, status, harness, tools, config, created_at, updated_at, last_seq)
		SELECT 'ses_' || lpad(s::text, 6, '0'), 't1', 'closed', '', '["echo"]', '{"tools":["echo"]}', s, s, 1000
		FROM generate_series(1, $1::int) AS s`,
		`INSERT INTO tool_calls (id, session_id, tenant_id, tool, status, arguments, created_at, started_at, finished_at, result)
		SELECT 'call_' || lpad(s::text, 6, '0') || '_' || lpad(c::text, 4, '0'), 'ses_' || lpad(s::text, 6, '0'),
			't1', 'echo', 'succeeded', '{"text":"hello"}', s, s, s, '{"content":[{"type":"text","text":"hello"}]}'
		FROM generate_series(1, $1::int) AS s, generate_series(1, 499) AS c ORDER BY s, c`,
		`INSERT INTO events (session_id, seq, call_id, type, time, data)
		SELECT 'ses_' || lpad(s::text, 6, '0'), k,
			CASE WHEN k IN (1, 1000) THEN '' ELSE 'call_' || lpad(s::text, 6, '0') || '_' || lpad((k / 2)::text, 4, '0') END,
			CASE WHEN k = 1 THEN 'session.created' WHEN k = 1000 THEN 'session.closed' WHEN k % 2 = 0 THEN 'tool.call' ELSE 'tool.result' END,
			s, '{"tool":"echo","arguments":{"text":"hello"}}'
		FROM generate_series(1, $1::int) AS s, generate_series(1, 1000) AS k`,
	} {
		if _, err := conn.Exec(ctx, q, n); err != nil {
			b.Fatalf("fill: %v", err)
		}
	}
	if _, err := conn.Exec(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
}

// fillSQLite fills the SQLite file at path as fillPostgres does.
func fillSQLite(b *testing.B, path string, n int) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	series := func(name string, n int) string {
		return fmt.Sprintf(`CREATE TEMP TABLE %s AS WITH RECURSIVE r(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM r WHERE v < %d) SELECT v FROM r`, name, n)
	}
	for _, q := range []string{
		series("gs", n), series("gc", growthCalls), series("ge", 2*growthCalls+2),
		`BEGIN`,
		`INSERT INTO sessions (id, tenant_id, status, harness, tools, config, created_at, updated_at)
		SELECT printf('ses_%06d', s.v), 't1', 'closed', '', '["echo"]', '{"tools":["echo"]}', s.v, s.v FROM gs AS s`,
		`INSERT INTO tool_calls (id, seq, ord, session_id, tenant_id, tool, status, arguments, created_at, started_at, finished_at, result)
		SELECT printf('call_%06d_%04d', s.v, c.v), 2 * c.v, (s.v - 1) * 499 + c.v, printf('ses_%06d', s.v),
			't1', 'echo', 'succeeded', '{"text":"hello"}', s.v, s.v, s.v, '{"content":[{"type":"text","text":"hello"}]}'
		FROM gs AS s, gc AS c ORDER BY s.v, c.v`,
		`INSERT INTO events (session_id, seq, call_id, type, time, data)
		SELECT printf('ses_%06d', s.v), e.v,
			CASE WHEN e.v IN (1, 1000) THEN '' ELSE printf('call_%06d_%04d', s.v, e.v / 2) END,
			CASE WHEN e.v = 1 THEN 'session.created' WHEN e.v = 1000 THEN 'session.closed' WHEN e.v % 2 = 0 THEN 'tool.call' ELSE 'tool.result' END,
			s.v, '{"tool":"echo","arguments":{"text":"hello"}}'
		FROM gs AS s, ge AS e ORDER BY s.v, e.v`,
		`COMMIT`,
		`ANALYZE`,
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatalf("fill: %v\n%s", err, q)
		}
	}
}
