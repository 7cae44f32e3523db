package approval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/pgtest"
	"github.com/brain-tools/suite/pkg/servicetest"
)

// pg is the PostgreSQL server of this test binary (pkg/pgtest): every store
// test runs on SQLite and on PostgreSQL.
var pg *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, "approval", &pg) }

// storeBackend is a store backend under test: new makes an empty place for a
// store (a file path, a database URL), open opens the store there (closed
// when the test ends), and fresh is both.
type storeBackend struct {
	name string
	new  func(t testing.TB) string
	open func(t testing.TB, loc string) *Store
}

func (be storeBackend) fresh(t testing.TB) *Store { return be.open(t, be.new(t)) }

var (
	sqliteBackend = storeBackend{
		name: "sqlite",
		new:  func(t testing.TB) string { return filepath.Join(t.TempDir(), "approvals.db") },
		open: func(t testing.TB, path string) *Store {
			t.Helper()
			s, err := OpenSQLite(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	postgresBackend = storeBackend{
		name: "postgres",
		new:  func(t testing.TB) string { return pg.NewDatabase(t) },
		open: func(t testing.TB, url string) *Store {
			t.Helper()
			s, err := OpenPostgres(context.Background(), PostgresOptions{URL: url})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	backends = []storeBackend{sqliteBackend, postgresBackend}
)

// TestStore is the store suite: every case on every backend.
func TestStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(*testing.T, storeBackend)
	}{
		{"CreateIsIdempotentPerCall", testCreateIsIdempotentPerCall},
		{"CreateConcurrentSameCallMakesOneApproval", testCreateConcurrentSameCallMakesOneApproval},
		{"DecideFirstAnswerWins", testDecideFirstAnswerWins},
		{"DecideConcurrentOneWinner", testDecideConcurrentOneWinner},
		{"LateAnswerExpires", testLateAnswerExpires},
		{"CancelledCannotBeAnswered", testCancelledCannotBeAnswered},
		{"ExpireDue", testExpireDue},
		{"DecisionLogIsAppendOnly", testDecisionLogIsAppendOnly},
		{"StoreSurvivesReopen", testStoreSurvivesReopen},
		{"MaxPendingPerTenant", testMaxPendingPerTenant},
		{"GetByCall", testGetByCall},
		{"AuditLogRecordsEveryDecision", testAuditLogRecordsEveryDecision},
		{"SyncAccounts", testSyncAccounts},
		{"Find", testFind},
		{"DeleteEnded", testDeleteEnded},
		{"TwoStoresOneWinner", testTwoStoresOneWinner},
		{"MarkWithdrawnAfterDecision", testMarkWithdrawnAfterDecision},
	} {
		for _, b := range backends {
			t.Run(b.name+"/"+tc.name, func(t *testing.T) { tc.f(t, b) })
		}
	}
}

// testDeleteEnded: retention removes exactly the approvals that ended
// before the limit, oldest first, a batch at a time, with their decision
// log rows; pending ones and those that ended later stay, and the audit
// log keeps every decision.
func testDeleteEnded(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	now := t0
	s.now = func() time.Time { return now }
	var old []string
	decide := func(call string, d Status) Approval {
		a, _, err := s.Create(ctx, newReq(call), 0)
		if err != nil {
			t.Fatal(err)
		}
		if d != Pending {
			if a, _, err = s.Decide(ctx, a.ID, d, "alice", ""); err != nil {
				t.Fatal(err)
			}
		}
		now = now.Add(time.Second)
		return a
	}
	for i, d := range []Status{Approved, Denied, Expired, Cancelled, Approved} {
		old = append(old, decide(fmt.Sprint("old", i), d).ID)
	}
	pendingOld := decide("pending-old", Pending)
	cutoff := now
	recent := decide("recent", Approved)

	var batches []Removed
	for {
		rm, err := s.DeleteEnded(ctx, cutoff, 2)
		if err != nil {
			t.Fatal(err)
		}
		if rm.Approvals == 0 {
			break
		}
		batches = append(batches, rm)
	}
	if want := []Removed{{2, 2}, {2, 2}, {1, 1}}; fmt.Sprint(batches) != fmt.Sprint(want) {
		t.Fatalf("batches %v, want %v", batches, want)
	}
	for _, id := range old {
		if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("ended approval %s still there: %v", id, err)
		}
		if log, err := s.Log(ctx, id); err != nil || len(log) != 0 {
			t.Errorf("decision log of %s: %d rows, %v", id, len(log), err)
		}
	}
	for _, id := range []string{pendingOld.ID, recent.ID} {
		if _, err := s.Get(ctx, id); err != nil {
			t.Errorf("approval %s removed: %v", id, err)
		}
	}
	total, err := s.Audit(ctx, AuditQuery{Scope: Scope{All: true}}, func(AuditEntry) error { return nil })
	if err != nil || total != 6 {
		t.Fatalf("audit log: %d rows (%v), want every decision: 6", total, err)
	}
	// The log of an approval that exists is still append-only.
	if _, err := s.w.ExecContext(ctx, `DELETE FROM decisions`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("delete from the decision log: %v", err)
	}
	if _, err := s.DeleteEnded(ctx, cutoff, 0); err == nil {
		t.Fatal("limit 0 accepted")
	}
}

// testTwoStoresOneWinner: two stores on one database (two replicas) answer
// one approval at once; exactly one answer wins, the other sees it.
func testTwoStoresOneWinner(t *testing.T, be storeBackend) {
	loc := be.new(t)
	s1, s2 := be.open(t, loc), be.open(t, loc)
	ctx := context.Background()
	for round := range 10 {
		a, _, err := s1.Create(ctx, newReq(fmt.Sprint("c", round)), 0)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		results := make([]error, 2)
		changed := make([]bool, 2)
		for i, s := range []*Store{s1, s2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, changed[i], results[i] = s.Decide(ctx, a.ID, []Status{Approved, Denied}[i], fmt.Sprint("op", i), "")
			}()
		}
		wg.Wait()
		if changed[0] == changed[1] {
			t.Fatalf("round %d: changed %v, errors %v: want one winner", round, changed, results)
		}
		loser := 0
		if changed[0] {
			loser = 1
		}
		var de *DecidedError
		if !errors.As(results[loser], &de) || de.Current.Operator != fmt.Sprint("op", 1-loser) {
			t.Fatalf("round %d: the loser got %v", round, results[loser])
		}
		if log, _ := s2.Log(ctx, a.ID); len(log) != 1 {
			t.Fatalf("round %d: %d decisions logged", round, len(log))
		}
	}
}

// TestPostgresBesideBrain: the approval store can share a database with
// another goose-versioned schema (brain's): its version table is its own.
func TestPostgresBesideBrain(t *testing.T) {
	url := pg.NewDatabase(t)
	name := url[strings.LastIndex(url[:strings.Index(url, "?")], "/")+1 : strings.Index(url, "?")]
	if _, err := pg.Psql(name, "-c", `CREATE TABLE goose_db_version (id serial PRIMARY KEY, version_id bigint NOT NULL, is_applied boolean NOT NULL, tstamp timestamp DEFAULT now());
		INSERT INTO goose_db_version (version_id, is_applied) VALUES (0, true), (1, true), (2, true), (3, true), (4, true)`); err != nil {
		t.Fatal(err)
	}
	s := postgresBackend.open(t, url)
	if _, _, err := s.Create(context.Background(), newReq("c1"), 0); err != nil {
		t.Fatalf("the approval schema was not applied beside another one at version 4: %v", err)
	}
}

// TestPostgresStatementTimeout: a database that stops answering (every
// byte held, as a paused server's) fails the store's reads and writes once
// the statement bound has passed, with context.DeadlineExceeded (a 503 to
// the page or the tool's caller), instead of holding them until their
// caller gives up; once it answers again, so does the store.
func TestPostgresStatementTimeout(t *testing.T) {
	t.Parallel()
	const bound = 300 * time.Millisecond
	gate, s := gatedStore(t, bound)
	// A quiet replica: a connection idle over a second is pinged before
	// it is handed out, and that ping is bounded too.
	time.Sleep(1100 * time.Millisecond)
	gate.Shut()
	ops := []struct {
		name string
		op   func(ctx context.Context) error
	}{
		{"count pending", func(ctx context.Context) error { _, err := s.CountPending(ctx); return err }},
		{"read one", func(ctx context.Context) error { _, err := s.Get(ctx, "apr_none"); return err }},
	}
	for _, op := range ops {
		pgtest.FailsWithin(t, bound, op.name, op.op)
	}
	gate.Open()
	if _, err := s.CountPending(context.Background()); err != nil {
		t.Errorf("once the database answers again: %v", err)
	}
}

// TestToolsWhileDatabaseSilent: a tool call whose store does not answer
// says so, to retry shortly, and is logged as a warning; it was "internal
// error" logged as an error (a tester's finding). APPROVAL_DATABASE_TIMEOUT
// sets the bound.
func TestToolsWhileDatabaseSilent(t *testing.T) {
	t.Parallel()
	gate, url := pg.Gate(t, pg.NewDatabase(t))
	var logs servicetest.LogBuffer
	// The bound also holds the fixture's start-up work (expiring the
	// approvals a restart left), on a database that still answers: 300 ms
	// failed it once on a loaded CI machine.
	f := newFixtureLogged(t, Config{DatabaseURL: url, DatabaseTimeout: time.Second}, slog.New(slog.NewJSONHandler(&logs, nil)))
	_, m := callJSON(t, f, "t1", "approval_start", map[string]any{"action": "rotate keys"})
	id, _ := m["approval_id"].(string)
	gate.Shut()
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"approval_status", map[string]any{"approval_id": id}},
		{"approval_cancel", map[string]any{"approval_id": id}},
		{"approval_start", map[string]any{"action": "deploy"}},
		{"request_approval", map[string]any{"action": "deploy"}},
	} {
		res, _ := callJSON(t, f, "t1", tc.tool, tc.args)
		if !res.IsError || !(len(res.Content) == 1 && strings.Contains(res.Content[0].Text, "the approvals database did not answer; retry shortly")) {
			t.Errorf("%s while the database is silent: %+v, want it to say the database did not answer", tc.tool, res)
		}
	}
	gate.Open()
	if strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), `"level":"WARN"`) {
		t.Errorf("the silent database is not logged as a warning only:\n%s", logs.String())
	}
}

// TestPostgresCloseWhileSilent: the store closes within its bound when the
// database went silent while a connection was in use, instead of after
// pgx's own 15 s for that connection.
func TestPostgresCloseWhileSilent(t *testing.T) {
	t.Parallel()
	const bound = 300 * time.Millisecond
	gate, s := gatedStore(t, bound)
	defer gate.Open()
	gate.Shut()
	inUse := make(chan error, 1)
	go func() { _, err := s.CountPending(context.Background()); inUse <- err }()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	s.Close()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("close with the database silent took %s, want about %s", took, bound)
	}
	if err := <-inUse; err == nil {
		t.Error("a read on the silent database succeeded")
	}
}

// gatedStore opens a PostgreSQL store of a new database through a
// pgtest.Gate, its statements bound by bound, once it has answered a
// read; the store is closed when t ends (Close is idempotent).
func gatedStore(t *testing.T, bound time.Duration) (*pgtest.Gate, *Store) {
	t.Helper()
	gate, url := pg.Gate(t, pg.NewDatabase(t))
	s, err := OpenPostgres(context.Background(), PostgresOptions{URL: url, StatementTimeout: bound})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.CountPending(context.Background()); err != nil {
		t.Fatal(err)
	}
	return gate, s
}
