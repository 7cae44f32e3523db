package server

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/brain-tools/suite/services/brain/internal/store"
)

// execSQL runs statements on b's store from outside brain, as an operator
// or a failing database would: SQLite's file (its writes wait on brain's
// for up to 5 s) or the PostgreSQL database.
func execSQL(t *testing.T, b *brain, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	if b.dbURL != "" {
		conn, err := pgx.Connect(ctx, b.dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		for _, q := range stmts {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		return
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(b.dir, "brain.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestFinalWriteRetried: a call's final write that the store fails (here a
// trigger in the real database refuses it, as an unreachable database or
// a full disk would) is tried again until the store takes it: the call
// ends recorded as it ended, with one tool.result, not left running in
// the store (on PostgreSQL its replica would renew it as long as it
// lives).
func TestFinalWriteRetried(t *testing.T) {
	if testStore == storeReplicas {
		t.Skip("changes the store under one brain in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	t.Parallel()
	ct := newCountingTools(t)
	b := startBrain(t, func(o *Options) { o.Config = waitingConfig(t, ct.URL, false, 60) })
	s := b.session("t1", "held")
	_, run := b.call("t1", s.ID, "held", map[string]any{}, 0)
	receive(t, ct.arrived, 5*time.Second, "the held call did not reach its tool")

	if b.dbURL != "" {
		execSQL(t, b, `CREATE TABLE zz_fail (on_ boolean)`, `INSERT INTO zz_fail VALUES (true)`,
			`CREATE FUNCTION zz_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN IF EXISTS (SELECT 1 FROM zz_fail) THEN RAISE EXCEPTION 'injected: the disk is full'; END IF; RETURN NEW; END $$`,
			`CREATE TRIGGER zz_refuse BEFORE UPDATE ON tool_calls FOR EACH ROW WHEN (NEW.status <> OLD.status) EXECUTE FUNCTION zz_refuse()`)
	} else {
		execSQL(t, b, `CREATE TABLE zz_fail (on_ INTEGER)`, `INSERT INTO zz_fail VALUES (1)`,
			`CREATE TRIGGER zz_refuse BEFORE UPDATE ON tool_calls WHEN NEW.status <> OLD.status AND EXISTS (SELECT 1 FROM zz_fail)
			BEGIN SELECT RAISE(ABORT, 'injected: the disk is full'); END`)
	}
	ct.release <- struct{}{}
	// Until the store takes the result, the call is running, on every
	// replica alike: a waiter is not told an end the store has not got.
	if status, c := b.getCall("t1", run.ID, 1); status != http.StatusAccepted || c.Status != "running" {
		t.Fatalf("the call while the store refused its result: %d %s %s, want 202 running", status, c.Status, deref(c.ErrorCode))
	}
	execSQL(t, b, `DELETE FROM zz_fail`)

	deadline := time.Now().Add(10 * time.Second)
	for {
		_, c := b.getCall("t1", run.ID, 0)
		if c.Status == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call in the store 10 s after it took writes again: %s, want succeeded", c.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var results int
	for _, e := range b.events("t1", s.ID) {
		if e.Type == "tool.result" && e.CallID == run.ID {
			results++
		}
	}
	if results != 1 {
		t.Errorf("%d tool.result events for the call, want 1", results)
	}
}

// TestFinalWriteAtShutdown: brain stopping while the store refuses a
// call's final write does not wait for the store: it tries once more,
// closes without an error of the call's, and leaves the call running as
// stored for the next brain, which ends it brain_restarted.
func TestFinalWriteAtShutdown(t *testing.T) {
	if testStore == storeReplicas {
		t.Skip("stops one brain in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	t.Parallel()
	ct := newCountingTools(t)
	cfg := waitingConfig(t, ct.URL, false, 60)
	dir := t.TempDir()
	srv, err := New(context.Background(), Options{Config: cfg, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	b := &brain{t: t, url: "http://" + ln.Addr().String(), srv: srv, dir: dir}
	s := b.session("t1", "held")
	_, run := b.call("t1", s.ID, "held", map[string]any{}, 0)
	receive(t, ct.arrived, 5*time.Second, "the held call did not reach its tool")
	execSQL(t, b, `CREATE TRIGGER zz_refuse BEFORE UPDATE ON tool_calls WHEN NEW.status <> OLD.status BEGIN SELECT RAISE(ABORT, 'injected: the disk is full'); END`)
	ct.release <- struct{}{}
	if status, c := b.getCall("t1", run.ID, 1); status != http.StatusAccepted || c.Status != "running" {
		t.Fatalf("the call while the store refused its result: %d %s", status, c.Status)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if err := srv.Close(); err == nil || !strings.Contains(err.Error(), "the store did not take the result of 1 call(s), left as stored for recovery: "+run.ID) {
		t.Errorf("close: %v, want an error naming the call left as stored", err)
	}
	// A brain starting on the store while it still refuses says so and
	// does not start (nor wait for the store).
	if again, err := New(context.Background(), Options{Config: cfg, DataDir: dir}); err == nil || !strings.Contains(err.Error(), run.ID) {
		if again != nil {
			again.Close()
		}
		t.Errorf("a start with the store refusing the recovery: %v, want an error naming %s", err, run.ID)
	}
	execSQL(t, b, `DROP TRIGGER zz_refuse`)

	next := startBrain(t, func(o *Options) { o.DataDir, o.DatabaseURL = dir, "" })
	if _, c := next.getCall("t1", run.ID, 0); c.Status != "failed" || deref(c.ErrorCode) != "brain_restarted" {
		t.Errorf("the call after a restart: %s %s, want failed brain_restarted", c.Status, deref(c.ErrorCode))
	}
}

// committedThenLost is a store whose next CreateCall of a call of tool
// commits and then reports a lost connection, as a database that crashed
// (or failed over) between its commit and its answer does.
type committedThenLost struct {
	store.Store
	tool string
	arm  atomic.Bool
	id   atomic.Pointer[string]
}

func (s *committedThenLost) CreateCall(ctx context.Context, c *store.Call, evs ...*store.Event) error {
	err := s.Store.CreateCall(ctx, c, evs...)
	if err == nil && c.Tool == s.tool && s.arm.CompareAndSwap(true, false) {
		id := c.ID
		s.id.Store(&id)
		return fmt.Errorf("create tool call: %w", io.ErrUnexpectedEOF)
	}
	return err
}

// TestCreateCommittedThenLost: a call whose write committed though brain
// was told it failed (a connection lost with its commit) is answered as
// not sent, and ends so in the store soon after: not sent, not left
// running (on PostgreSQL its replica would renew its lease for as long as
// it lives), its slot (max_concurrency) free again, and its session
// closed at once.
func TestCreateCommittedThenLost(t *testing.T) {
	if testStore == storeReplicas {
		t.Skip("wraps the store of one brain in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	t.Parallel()
	lossy := &committedThenLost{tool: "held"}
	b, ct := startWaitingBrain(t, false, 60, func(o *Options) {
		o.wrapStore = func(s store.Store) store.Store { lossy.Store = s; return lossy }
	})
	s := b.session("t1", "held")
	lossy.arm.Store(true)
	r := b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", map[string]any{"tool": "held", "arguments": map[string]any{}, "wait_seconds": 0})
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("the create whose answer was lost: %d %s, want 503", r.status, r.body)
	}
	id := *lossy.id.Load()
	deadline := time.Now().Add(15 * time.Second)
	var c CallJSON
	for {
		_, c = b.getCall("t1", id, 0)
		if c.Status != "running" && c.Status != "queued" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stored call 15 s after its write was reported failed: %s, want it ended", c.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c.Status != "failed" || deref(c.ErrorCode) != "cancelled" || c.UnknownOutcome || ct.count(id) != 0 {
		t.Fatalf("the stored call: %s %s unknown_outcome %v, sent %d times; want failed, cancelled, not sent", c.Status, deref(c.ErrorCode), c.UnknownOutcome, ct.count(id))
	}
	// Both slots of held are free: two calls reach the tool at once.
	for range 2 {
		b.call("t1", s.ID, "held", map[string]any{}, 0)
	}
	for range 2 {
		receive(t, ct.arrived, 10*time.Second, "a held call did not reach its tool: the lost create kept a slot")
	}
	ct.release <- struct{}{}
	ct.release <- struct{}{}
	if r := b.do("POST", "/sessions/"+s.ID+"/close", "t1", map[string]any{}); r.status != http.StatusOK {
		t.Fatalf("close the session: %d %s", r.status, r.body)
	}
	var results int
	for _, e := range b.events("t1", s.ID) {
		if e.Type == "tool.result" && e.CallID == id {
			results++
		}
	}
	if results != 1 {
		t.Errorf("%d tool.result events for the lost create, want 1", results)
	}
}

// endThenLost is a store whose next SetSessionStatus commits and then
// reports a lost connection, or (lost false) fails before it commits.
type endThenLost struct {
	store.Store
	arm, lost atomic.Bool
}

func (s *endThenLost) SetSessionStatus(ctx context.Context, tenantID, id string, from []string, to string, at time.Time, ev *store.Event) error {
	if !s.arm.CompareAndSwap(true, false) {
		return s.Store.SetSessionStatus(ctx, tenantID, id, from, to, at, ev)
	}
	if s.lost.Load() {
		if err := s.Store.SetSessionStatus(ctx, tenantID, id, from, to, at, ev); err != nil {
			return err
		}
	}
	return fmt.Errorf("set session status: %w", io.ErrUnexpectedEOF)
}

// TestEndCommittedThenLost: a close or interrupt whose write committed
// though brain was told the connection was lost answers 200, as it is
// done (a 503 would have the client send it again, to a 409); one whose
// write did not commit answers 503, and the session stays as it was.
func TestEndCommittedThenLost(t *testing.T) {
	if testStore == storeReplicas {
		t.Skip("wraps the store of one brain in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	t.Parallel()
	lossy := &endThenLost{}
	b := startBrain(t, func(o *Options) {
		o.wrapStore = func(s store.Store) store.Store { lossy.Store = s; return lossy }
	})
	for _, tt := range []struct {
		action, status string
		lost           bool
		want           int
		after          string
	}{
		{"close", "closed", true, http.StatusOK, "closed"},
		{"interrupt", "interrupted", true, http.StatusOK, "interrupted"},
		{"close", "closed", false, http.StatusServiceUnavailable, "active"},
	} {
		s := b.session("t1", "echo")
		lossy.lost.Store(tt.lost)
		lossy.arm.Store(true)
		r := b.do("POST", "/sessions/"+s.ID+"/"+tt.action, "t1", map[string]any{})
		var got SessionJSON
		if r.status == http.StatusOK {
			r.json(t, &got)
		}
		if r.status != tt.want || r.status == http.StatusOK && got.Status != tt.status {
			t.Errorf("%s whose write was lost (committed %v): %d %s, want %d", tt.action, tt.lost, r.status, r.body, tt.want)
		}
		if got := b.do("GET", "/sessions/"+s.ID, "t1", nil); !strings.Contains(string(got.body), `"status":"`+tt.after+`"`) {
			t.Errorf("%s (committed %v): the session after: %s, want %s", tt.action, tt.lost, got.body, tt.after)
		}
	}
}
