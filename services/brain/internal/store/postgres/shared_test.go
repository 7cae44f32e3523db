package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/brain-tools/suite/services/brain/internal/store/storetest"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
)

// TestMigrationsOnceUnderConcurrentStart: replicas starting together on a
// new database apply each schema version once (goose's advisory lock), and
// Migrate afterwards has nothing to do.
func TestMigrationsOnceUnderConcurrentStart(t *testing.T) {
	t.Parallel()
	url := pg.NewDatabase(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			db, err := Open(context.Background(), Options{URL: url, Replica: "r", Lease: time.Minute})
			if err == nil {
				db.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows, versions int
	if err := conn.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0`).Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	if rows != versions || versions == 0 {
		t.Errorf("goose_db_version: %d rows for %d versions, want one each", rows, versions)
	}
	applied, version, err := Migrate(context.Background(), url)
	if err != nil || len(applied) != 0 || version != int64(versions) {
		t.Errorf("Migrate after start = %v, %d, %v; want nothing applied, version %d", applied, version, err, versions)
	}
}

// signals collects what a replica's OnSignal receives.
type signals struct {
	mu  sync.Mutex
	got []store.Signal
	c   chan struct{}
}

func newSignals() *signals { return &signals{c: make(chan struct{}, 1000)} }

func (s *signals) add(sig store.Signal) {
	s.mu.Lock()
	s.got = append(s.got, sig)
	s.mu.Unlock()
	s.c <- struct{}{}
}

// wait returns the signals once n arrived, failing after 5 s.
func (s *signals) wait(t *testing.T, n int) []store.Signal {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		s.mu.Lock()
		if len(s.got) >= n {
			out := append([]store.Signal(nil), s.got...)
			s.mu.Unlock()
			return out
		}
		s.mu.Unlock()
		select {
		case <-s.c:
		case <-deadline:
			t.Fatalf("%d signals within 5 s, want %d", len(s.got), n)
		}
	}
}

// TestSignalsBetweenReplicas: what replica A commits reaches B as event
// signals in commit order, and Notify carries other signals; a replica
// never hears itself.
func TestSignalsBetweenReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pg.NewDatabase(t)
	sa, sb := newSignals(), newSignals()
	a := openDB(t, url, "ra", Options{OnSignal: sa.add})
	b := openDB(t, url, "rb", Options{OnSignal: sb.add})
	s, ev := storetest.NewSession("ses_1", "t1")
	if err := a.CreateSession(ctx, s, ev); err != nil {
		t.Fatal(err)
	}
	c, cev := storetest.NewCall("call_1", "ses_1", "t1")
	if err := b.CreateCall(ctx, c, cev); err != nil {
		t.Fatal(err)
	}
	f, fev := storetest.Finish(c, store.CallSucceeded, storetest.T0)
	if err := a.FinishCall(ctx, f, fev); err != nil {
		t.Fatal(err)
	}
	if err := a.Notify(ctx, store.Signal{Kind: store.SignalCancel, CallID: "call_1", Data: json.RawMessage(`"stop"`)}); err != nil {
		t.Fatal(err)
	}
	want := []store.Signal{
		{Kind: store.SignalEvent, From: "ra", SessionID: "ses_1", Seq: 1},
		{Kind: store.SignalEvent, From: "ra", SessionID: "ses_1", Seq: 3},
		{Kind: store.SignalCancel, From: "ra", CallID: "call_1", Data: json.RawMessage(`"stop"`)},
	}
	if diff := cmp.Diff(want, sb.wait(t, 3)); diff != "" {
		t.Errorf("B heard (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]store.Signal{{Kind: store.SignalEvent, From: "rb", SessionID: "ses_1", Seq: 2}}, sa.wait(t, 1)); diff != "" {
		t.Errorf("A heard (-want +got):\n%s", diff)
	}
	big := store.Signal{Kind: store.SignalProgress, CallID: "call_1", Data: json.RawMessage(`"` + strings.Repeat("x", 8000) + `"`)}
	if err := a.Notify(ctx, big); !errors.Is(err, store.ErrSignalTooLarge) {
		t.Errorf("Notify of 8 KB: %v, want ErrSignalTooLarge", err)
	}
}

// TestLeaseTakeover: a call whose owner stopped renewing is claimed by one
// replica alone once its lease ran out; a renewed one is not.
func TestLeaseTakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pg.NewDatabase(t)
	dead := openDB(t, url, "dead", Options{Lease: 200 * time.Millisecond})
	live := openDB(t, url, "live", Options{Lease: 200 * time.Millisecond})
	s, ev := storetest.NewSession("ses_1", "t1")
	if err := dead.CreateSession(ctx, s, ev); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		db *DB
		id string
	}{{dead, "call_dead"}, {live, "call_live"}} {
		c, cev := storetest.NewCall(r.id, "ses_1", "t1")
		if err := r.db.CreateCall(ctx, c, cev); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := live.ClaimExpired(ctx, time.Now(), time.Now().Add(time.Minute), 10); err != nil || len(got) != 0 {
		t.Fatalf("claim before the leases ran out: %d calls, %v", len(got), err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := live.RenewLeases(ctx, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed []string
	)
	for range 3 {
		other := openDB(t, url, "claimer", Options{})
		wg.Go(func() {
			calls, err := other.ClaimExpired(ctx, time.Now(), time.Now().Add(time.Minute), 10)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			for _, c := range calls {
				claimed = append(claimed, c.ID)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if diff := cmp.Diff([]string{"call_dead"}, claimed); diff != "" {
		t.Errorf("claimed (-want +got):\n%s", diff)
	}
}
