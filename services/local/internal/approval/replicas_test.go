package approval

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// replicas are two approval services on one PostgreSQL database, as two
// local replicas run.
func replicas(t *testing.T, cfg Config) (a, b *fixture) {
	t.Helper()
	cfg.DatabaseURL = pg.NewDatabase(t)
	return newFixture(t, cfg), newFixture(t, cfg)
}

// TestReplicasShareApprovals: an approval asked through one replica is on
// the other's queue at once (its page subscribers are told), answered
// there, and the stream waiting on the first replica gets the answer; the
// approval_status of either replica reads it.
func TestReplicasShareApprovals(t *testing.T) {
	a, b := replicas(t, Config{})
	ctx := context.Background()
	subB, stop := b.svc.Subscribe(func(tenant string) bool { return tenant == "t1" })
	defer stop()
	subOther, stopOther := b.svc.Subscribe(func(tenant string) bool { return tenant == "t2" })
	defer stopOther()

	ids := make(chan string, 1)
	done := make(chan stream, 1)
	go func() {
		resp := a.post(ctx, "request_approval", request("t1", "s1", "c1", map[string]any{"action": "rotate keys", "timeout_seconds": 60}))
		done <- readStream(t, resp, func(p Progress) { ids <- p.ApprovalID })
	}()
	var id string
	select {
	case id = <-ids:
	case <-time.After(10 * time.Second):
		t.Fatal("no progress from replica a")
	}
	select {
	case <-subB:
	case <-time.After(10 * time.Second):
		t.Fatal("replica b's page was not told of the new approval")
	}
	if got, _, err := b.svc.store.Find(ctx, Query{Scope: Scope{All: true}, Limit: 10}); err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("replica b's queue: %+v %v", got, err)
	}
	if _, err := b.svc.Decide(ctx, id, Approved, "alice", "fine"); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-done:
		if s.err != nil || s.result == nil || s.result.IsError || decision(t, s.result).Operator != "alice" {
			t.Fatalf("stream on replica a: %+v %v", s.result, s.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream on replica a did not learn of the answer given on b")
	}
	for name, f := range map[string]*fixture{"a": a, "b": b} {
		if _, m := callJSON(t, f, "t1", "approval_status", map[string]any{"approval_id": id}); m["state"] != "succeeded" {
			t.Errorf("approval_status on %s: %v", name, m)
		}
	}
	select {
	case <-subOther:
		t.Fatal("a subscriber of another tenant was told of t1's approvals")
	default:
	}
}

// TestReplicasWaitByStatus: approval_status with wait_seconds on one
// replica returns as soon as the other one records the decision.
func TestReplicasWaitByStatus(t *testing.T) {
	a, b := replicas(t, Config{})
	_, m := callJSON(t, a, "t1", "approval_start", map[string]any{"action": "x", "timeout_seconds": 600})
	id := m["approval_id"].(string)
	go func() {
		time.Sleep(300 * time.Millisecond)
		a.svc.Decide(context.Background(), id, Denied, "bob", "no")
	}()
	start := time.Now()
	_, st := callJSON(t, b, "t1", "approval_status", map[string]any{"approval_id": id, "wait_seconds": 15})
	if st["state"] != "failed" || time.Since(start) > 10*time.Second {
		t.Fatalf("status on b after %s: %v", time.Since(start), st)
	}
}

// TestReplicasExpireOnce: both replicas sweep; an approval nobody answers
// expires once (one decision row), and both read it expired.
func TestReplicasExpireOnce(t *testing.T) {
	a, b := replicas(t, Config{SweepInterval: 20 * time.Millisecond})
	_, m := callJSON(t, a, "t1", "approval_start", map[string]any{"action": "x", "timeout_seconds": 1})
	id := m["approval_id"].(string)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := b.svc.store.Get(context.Background(), id)
		if err == nil && got.Status == Expired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not expired: %+v %v", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // every sweeper has had another go
	if log, err := a.svc.store.Log(context.Background(), id); err != nil || len(log) != 1 {
		t.Fatalf("decision log: %+v %v", log, err)
	}
}

// TestReplicasRetention: with APPROVAL_RETENTION on two replicas, the
// approvals that ended before the limit are removed once, in batches,
// counted by the replicas' retention_removed_total together;
// pending and recent ones stay.
func TestReplicasRetention(t *testing.T) {
	url := pg.NewDatabase(t)
	// Decisions made two hours ago, through a store whose clock says so.
	seed, err := OpenPostgres(context.Background(), PostgresOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	seed.now = func() time.Time { return time.Now().Add(-2 * time.Hour) }
	ctx := context.Background()
	const ended = 2*retentionBatch + 30
	for i := range ended {
		x, _, err := seed.Create(ctx, newReq(fmt.Sprint("old", i)), 0)
		if err == nil {
			_, _, err = seed.Decide(ctx, x.ID, Approved, "alice", "")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	seed.now = time.Now
	pending, _, _ := seed.Create(ctx, newReq("pending"), 0)
	recent, _, _ := seed.Create(ctx, newReq("recent"), 0)
	seed.Decide(ctx, recent.ID, Denied, "bob", "")
	seed.Close()

	cfg := Config{DatabaseURL: url, Retention: time.Hour, RetentionInterval: 50 * time.Millisecond}
	a, b := newFixture(t, cfg), newFixture(t, cfg)
	removed := func() float64 {
		return testutil.ToFloat64(a.svc.removed.WithLabelValues("approval")) + testutil.ToFloat64(b.svc.removed.WithLabelValues("approval"))
	}
	deadline := time.Now().Add(20 * time.Second)
	for removed() < ended && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // more sweeps: nothing else goes
	if got := removed(); got != ended {
		t.Fatalf("removed %v approvals, want %d", got, ended)
	}
	decisions := testutil.ToFloat64(a.svc.removed.WithLabelValues("decision")) + testutil.ToFloat64(b.svc.removed.WithLabelValues("decision"))
	if decisions != ended {
		t.Fatalf("removed %v decision rows, want %d", decisions, ended)
	}
	got, total, err := a.svc.store.Find(ctx, Query{Scope: Scope{All: true}, State: StateAll, Limit: 10})
	if err != nil || total != 2 {
		t.Fatalf("left: %d %+v %v", total, got, err)
	}
	for _, x := range got {
		if x.ID != pending.ID && x.ID != recent.ID {
			t.Errorf("left %+v", x)
		}
	}
	n, err := a.svc.store.Audit(ctx, AuditQuery{Scope: Scope{All: true}}, func(AuditEntry) error { return nil })
	if err != nil || n != ended+1 {
		t.Fatalf("audit log: %d rows, %v", n, err)
	}
}

func TestConfigDatabaseURLAndRetention(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{DatabaseURL: "mysql://x"}, "APPROVAL_DATABASE_URL: want a postgres://"},
		{Config{Retention: time.Second}, "APPROVAL_RETENTION must be 0"},
		{Config{DatabaseTimeout: 99 * time.Millisecond}, "APPROVAL_DATABASE_TIMEOUT must be 0 (10s) or 100ms..10m, got 99ms"},
		{Config{DatabaseTimeout: -time.Second}, "APPROVAL_DATABASE_TIMEOUT must be 0 (10s) or 100ms..10m, got -1s"},
		{Config{DatabaseTimeout: 10*time.Minute + time.Millisecond}, "APPROVAL_DATABASE_TIMEOUT must be 0 (10s) or 100ms..10m, got 10m0.001s"},
		{Config{DatabaseURL: "postgres://postgres@/nonexistent?host=" + pg.Dir}, "APPROVAL_DATABASE_URL"},
	} {
		tc.cfg.DataDir, tc.cfg.PageURL, tc.cfg.SweepInterval = t.TempDir(), "http://x", time.Second
		svc, err := New(context.Background(), tc.cfg, nil)
		if err == nil {
			svc.Close()
			t.Errorf("%+v: started", tc.cfg)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
