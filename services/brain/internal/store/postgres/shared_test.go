package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/pgbound"
	"github.com/brain-tools/suite/pkg/pgtest"
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
	applied, version, err := Migrate(context.Background(), url, 0)
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
	// A call's writes are its owner's: a creates it, and b, once it took
	// it over, finishes it.
	c, cev := storetest.NewCall("call_1", "ses_1", "t1")
	if err := a.CreateCall(ctx, c, cev); err != nil {
		t.Fatal(err)
	}
	if _, err := a.pool.Exec(ctx, `UPDATE tool_calls SET owner = 'rb' WHERE id = 'call_1'`); err != nil {
		t.Fatal(err)
	}
	f, fev := storetest.Finish(c, store.CallSucceeded, storetest.T0)
	if err := b.FinishCall(ctx, f, fev); err != nil {
		t.Fatal(err)
	}
	if err := a.Notify(ctx, store.Signal{Kind: store.SignalCancel, CallID: "call_1", Data: json.RawMessage(`"stop"`)}); err != nil {
		t.Fatal(err)
	}
	want := []store.Signal{
		{Kind: store.SignalEvent, From: "ra", SessionID: "ses_1", Seq: 1},
		{Kind: store.SignalEvent, From: "ra", SessionID: "ses_1", Seq: 2},
		{Kind: store.SignalCancel, From: "ra", CallID: "call_1", Data: json.RawMessage(`"stop"`)},
	}
	if diff := cmp.Diff(want, sb.wait(t, 3)); diff != "" {
		t.Errorf("B heard (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]store.Signal{{Kind: store.SignalEvent, From: "rb", SessionID: "ses_1", Seq: 3}}, sa.wait(t, 1)); diff != "" {
		t.Errorf("A heard (-want +got):\n%s", diff)
	}
	big := store.Signal{Kind: store.SignalProgress, CallID: "call_1", Data: json.RawMessage(`"` + strings.Repeat("x", 8000) + `"`)}
	if err := a.Notify(ctx, big); !errors.Is(err, store.ErrSignalTooLarge) {
		t.Errorf("Notify of 8 KB: %v, want ErrSignalTooLarge", err)
	}
}

// leaseReplicas opens two replicas on a new database with a 200 ms lease,
// one that will stop renewing (dead) and one that will not (live), and
// makes session ses_1 of tenant t1 for their calls.
func leaseReplicas(t *testing.T) (url string, dead, live *DB) {
	t.Helper()
	url = pg.NewDatabase(t)
	dead = openDB(t, url, "dead", Options{Lease: 200 * time.Millisecond})
	live = openDB(t, url, "live", Options{Lease: 200 * time.Millisecond})
	s, ev := storetest.NewSession("ses_1", "t1")
	if err := dead.CreateSession(context.Background(), s, ev); err != nil {
		t.Fatal(err)
	}
	return url, dead, live
}

// claimRace has three replicas of their own claim expired calls at once
// and returns every call claimed, so that a call claimed twice shows.
func claimRace(t *testing.T, url string) []*store.Call {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		claimed []*store.Call
	)
	for range 3 {
		other := openDB(t, url, "claimer", Options{})
		wg.Go(func() {
			calls, err := other.ClaimExpired(context.Background(), time.Now(), time.Now().Add(time.Minute), 10)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			claimed = append(claimed, calls...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return claimed
}

// createCalls creates calls ids in session ses_1 of tenant t1 through db,
// which owns them.
func createCalls(t *testing.T, db *DB, ids ...string) {
	t.Helper()
	for _, id := range ids {
		c, cev := storetest.NewCall(id, "ses_1", "t1")
		if err := db.CreateCall(context.Background(), c, cev); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLeaseTakeover: a call whose owner stopped renewing is claimed by one
// replica alone once its lease ran out, never by its owner; a renewed one
// is not.
func TestLeaseTakeover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, dead, live := leaseReplicas(t)
	createCalls(t, dead, "call_dead")
	createCalls(t, live, "call_live")
	if got, err := live.ClaimExpired(ctx, time.Now(), time.Now().Add(time.Minute), 10); err != nil || len(got) != 0 {
		t.Fatalf("claim before the leases ran out: %d calls, %v", len(got), err)
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := live.RenewLeases(ctx, time.Now().Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	// A replica's own calls are its own to renew, however late: were it
	// to claim them, it would take up calls it is running.
	if got, err := dead.ClaimExpired(ctx, time.Now(), time.Now().Add(time.Minute), 10); err != nil || len(got) != 0 {
		t.Fatalf("a replica claimed %d of its own calls (%v)", len(got), err)
	}
	var claimed []string
	for _, c := range claimRace(t, url) {
		claimed = append(claimed, c.ID)
	}
	if diff := cmp.Diff([]string{"call_dead"}, claimed); diff != "" {
		t.Errorf("claimed (-want +got):\n%s", diff)
	}
}

// TestReleaseClaims: a call a replica claimed and gives up is claimed
// again at once, by any replica; a call it does not own is left alone.
func TestReleaseClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, dead, live := leaseReplicas(t)
	createCalls(t, dead, "call_a", "call_b")
	createCalls(t, live, "call_live")
	if _, err := live.RenewLeases(ctx, time.Now().Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	claimer := openDB(t, url, "claimer", Options{})
	got, err := claimer.ClaimExpired(ctx, time.Now(), time.Now().Add(time.Minute), 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("first claim: %d calls, %v", len(got), err)
	}
	if again, err := live.ClaimExpired(ctx, time.Now(), time.Now().Add(time.Minute), 10); err != nil || len(again) != 0 {
		t.Fatalf("claim of claimed calls: %d calls, %v", len(again), err)
	}
	// call_live is live's: the claimer's release leaves it leased.
	if err := claimer.ReleaseClaims(ctx, []string{"call_a", "call_live", "call_unknown"}); err != nil {
		t.Fatal(err)
	}
	if _, err := claimer.RenewLeases(ctx, time.Now().Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	var claimed []string
	for _, c := range claimRace(t, url) {
		claimed = append(claimed, c.ID)
	}
	if diff := cmp.Diff([]string{"call_a"}, claimed); diff != "" {
		t.Errorf("claimed after the release (-want +got):\n%s", diff)
	}
	if err := claimer.ReleaseClaims(ctx, nil); err != nil {
		t.Errorf("release of none: %v", err)
	}
}

// TestLeaseTakesPendingWithdrawals: an approval call finished with a
// pending withdrawal stays leased to the replica that finished it, which
// renews it with its calls; once a replica died, its pending withdrawals
// are claimed by another, once, and a live replica's are not. A cleared
// one is leased to nobody.
func TestLeaseTakesPendingWithdrawals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, dead, live := leaseReplicas(t)
	for _, r := range []struct {
		db       *DB
		id       string
		withdraw bool
	}{{dead, "call_dead", true}, {dead, "call_done", false}, {live, "call_live", true}} {
		c, cev := storetest.NewCall(r.id, "ses_1", "t1")
		c.CallerType = store.CallerSystem
		if err := r.db.CreateCall(ctx, c, cev); err != nil {
			t.Fatal(err)
		}
		f, fev := storetest.Finish(c, store.CallCancelled, time.Now())
		if r.withdraw {
			f.WithdrawUntil = time.Now().Add(time.Hour)
		}
		if err := r.db.FinishCall(ctx, f, fev); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := live.RenewLeases(ctx, time.Now().Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	// A replica's own calls are its own to renew, however late: were it
	// to claim them, it would take up calls it is running.
	if got, err := dead.ClaimExpired(ctx, time.Now(), time.Now().Add(time.Minute), 10); err != nil || len(got) != 0 {
		t.Fatalf("a replica claimed %d of its own calls (%v)", len(got), err)
	}
	var claimed []string
	for _, c := range claimRace(t, url) {
		if c.WithdrawUntil.IsZero() {
			t.Errorf("claimed %s without its pending withdrawal", c.ID)
		}
		claimed = append(claimed, c.ID)
	}
	if diff := cmp.Diff([]string{"call_dead"}, claimed); diff != "" {
		t.Errorf("claimed (-want +got):\n%s", diff)
	}
	// The replica that claimed it clears it.
	if err := openDB(t, url, "claimer", Options{}).ClearWithdrawal(ctx, "call_dead"); err != nil {
		t.Fatal(err)
	}
	var owner string
	var lease int64
	if err := live.pool.QueryRow(ctx, `SELECT owner, lease_until FROM tool_calls WHERE id = 'call_dead'`).Scan(&owner, &lease); err != nil {
		t.Fatal(err)
	}
	if owner != "" || lease != 0 {
		t.Errorf("a cleared withdrawal's call is leased to %q until %d, want nobody", owner, lease)
	}
}

// TestClaimTakesApprovalCallsWithTheirGate: a gated call waiting for its
// approval is claimed with the approval call it has running (caller
// system, the same owner), even while that call's own lease has not run
// out yet, and such an approval call is never claimed on its own, so the
// replica that takes the gated call up can send the approval call again;
// an approval call whose gated call no longer waits is claimed alone.
func TestClaimTakesApprovalCallsWithTheirGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pg.NewDatabase(t)
	// One dead replica, whose calls got leases of different lengths: made
	// before and after its last renewal.
	short := openDB(t, url, "dead", Options{Lease: 200 * time.Millisecond})
	long := openDB(t, url, "dead", Options{Lease: time.Hour})
	s, ev := storetest.NewSession("ses_1", "t1")
	if err := short.CreateSession(ctx, s, ev); err != nil {
		t.Fatal(err)
	}
	create := func(db *DB, id, status, parent string) { createCallAs(t, db, id, status, parent) }
	create(short, "call_gate", store.CallRequiresInput, "")
	create(long, "call_approval", store.CallRunning, "call_gate") // its lease runs for an hour
	create(long, "call_gate2", store.CallRequiresInput, "")
	create(short, "call_approval2", store.CallRunning, "call_gate2") // expired, its gate not
	create(short, "call_done", store.CallRequiresInput, "")
	create(short, "call_orphan", store.CallRunning, "call_done")
	f, fev := storetest.Finish(&store.Call{ID: "call_done", SessionID: "ses_1", TenantID: "t1"}, store.CallFailed, storetest.T0)
	if err := short.FinishCall(ctx, f, fev); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	claimer := openDB(t, url, "claimer", Options{})
	var ids []string
	for {
		calls, err := claimer.ClaimExpired(ctx, time.Now(), time.Now().Add(time.Minute), 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(calls) == 0 {
			break
		}
		var batch []string
		for _, c := range calls {
			batch = append(batch, c.ID)
		}
		slices.Sort(batch)
		ids = append(ids, strings.Join(batch, "+"))
	}
	slices.Sort(ids)
	if diff := cmp.Diff([]string{"call_approval+call_gate", "call_orphan"}, ids); diff != "" {
		t.Errorf("claimed, one batch a line (-want +got):\n%s", diff)
	}
}

// TestAdmitAcrossReplicas: replicas admitting at once never hand out more
// than Max slots of a queue, and the slots go to the calls stored first;
// a slot given back goes to the next; Queued and QueuePosition count only
// the calls still waiting; another tenant's queue is apart.
func TestAdmitAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pg.NewDatabase(t)
	dbs := []*DB{openDB(t, url, "r1", Options{}), openDB(t, url, "r2", Options{}), openDB(t, url, "r3", Options{})}
	s, ev := storetest.NewSession("ses_1", "t1")
	if err := dbs[0].CreateSession(ctx, s, ev); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 6 {
		c, cev := storetest.NewCall(fmt.Sprintf("call_%d", i), "ses_1", "t1")
		c.Status, c.StartedAt = store.CallQueued, time.Time{}
		if err := dbs[i%3].CreateCall(ctx, c, cev); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	q := store.Queue{TenantID: "t1", Tool: "echo", Max: 2}
	var wg sync.WaitGroup
	got := make([][]string, len(dbs))
	for i, db := range dbs {
		wg.Go(func() {
			var err error
			if got[i], err = db.Admit(ctx, q, ""); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range got {
		if diff := cmp.Diff(ids[:2], got[i]); diff != "" {
			t.Errorf("replica %d: holding (-want +got):\n%s", i, diff)
		}
	}
	if n, err := dbs[1].Queued(ctx, q); err != nil || n != 4 {
		t.Errorf("Queued: %d, %v; want 4", n, err)
	}
	for _, tc := range []struct {
		id   string
		want int
	}{{ids[0], 0}, {ids[2], 1}, {ids[5], 4}, {"call_none", 0}} {
		if n, err := dbs[2].QueuePosition(ctx, q, tc.id); err != nil || n != tc.want {
			t.Errorf("QueuePosition(%s): %d, %v; want %d", tc.id, n, err, tc.want)
		}
	}
	if got, err := dbs[0].Admit(ctx, store.Queue{TenantID: "t2", Tool: "echo", Max: 2}, ""); err != nil || len(got) != 0 {
		t.Errorf("another tenant's queue: %v, %v", got, err)
	}
	// ids[0] goes running (it still holds its slot), then gives it back.
	c0, _ := storetest.NewCall(ids[0], "ses_1", "t1")
	if err := dbs[0].UpdateCall(ctx, c0, []string{store.CallQueued}); err != nil {
		t.Fatal(err)
	}
	if got, err := dbs[1].Admit(ctx, q, ""); err != nil || !cmp.Equal(got, ids[1:2]) {
		t.Errorf("with %s running on its slot: holding %v, %v; want %v", ids[0], got, err, ids[1:2])
	}
	if got, err := dbs[0].Admit(ctx, q, ids[0]); err != nil || !cmp.Equal(got, ids[1:3]) {
		t.Errorf("after %s gave its slot back: holding %v, %v; want %v", ids[0], got, err, ids[1:3])
	}
}

// TestQueuedCallsAdmittedInOrd: calls of one queue from many sessions (each
// its own row lock) stored at once through several replicas, each admitting
// as soon as it is stored, as brain does, leave the slots with the calls of
// lowest ord: no call is admitted while one before it is still being
// written.
func TestQueuedCallsAdmittedInOrd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pg.NewDatabase(t)
	dbs := []*DB{openDB(t, url, "r1", Options{}), openDB(t, url, "r2", Options{}), openDB(t, url, "r3", Options{})}
	const sessions = 12
	for i := range sessions {
		s, ev := storetest.NewSession(fmt.Sprintf("ses_%d", i), "t1")
		if err := dbs[0].CreateSession(ctx, s, ev); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 20 {
		tool := fmt.Sprintf("tool%d", round)
		q := store.Queue{TenantID: "t1", Tool: tool, Max: 2}
		calls := make([]*store.Call, sessions)
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				c, cev := storetest.NewCall(fmt.Sprintf("call_%d_%d", round, i), fmt.Sprintf("ses_%d", i), "t1")
				c.Tool, c.Status, c.StartedAt = tool, store.CallQueued, time.Time{}
				db := dbs[i%len(dbs)]
				if err := db.CreateCall(ctx, c, cev); err != nil {
					t.Error(err)
					return
				}
				calls[i] = c
				if _, err := db.Admit(ctx, q, ""); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		slices.SortFunc(calls, func(a, b *store.Call) int { return int(a.Ord - b.Ord) })
		got, err := dbs[0].Admit(ctx, q, "")
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{calls[0].ID, calls[1].ID}; !slices.Equal(got, want) {
			t.Fatalf("round %d: the slots went to %v; want the two of lowest ord %v", round, got, want)
		}
	}
}

// TestAnswersAcrossReplicas: an answer is stored only for a call waiting
// for input; the call's replica takes the pending ones oldest first, once;
// a taken answer cannot be withdrawn, a pending one can; settling records
// the verdict.
func TestAnswersAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pg.NewDatabase(t)
	runner, other := openDB(t, url, "runner", Options{}), openDB(t, url, "other", Options{})
	s, ev := storetest.NewSession("ses_1", "t1")
	if err := runner.CreateSession(ctx, s, ev); err != nil {
		t.Fatal(err)
	}
	waiting, wev := storetest.NewCall("call_wait", "ses_1", "t1")
	waiting.Status, waiting.InputKind = store.CallRequiresInput, store.InputFunction
	running, rev := storetest.NewCall("call_run", "ses_1", "t1")
	for _, c := range []struct {
		c  *store.Call
		ev *store.Event
	}{{waiting, wev}, {running, rev}} {
		if err := runner.CreateCall(ctx, c.c, c.ev); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(id, call string, at time.Time) *store.Answer {
		return &store.Answer{ID: id, CallID: call, Body: json.RawMessage(`{"content":[]}`), APIKey: "KEY_ONE", CreatedAt: at}
	}
	var se *store.StateError
	if err := other.PutAnswer(ctx, answer("ans_run", "call_run", storetest.T0)); !errors.As(err, &se) || se.Status != store.CallRunning {
		t.Errorf("answer to a running call: %v, want a StateError naming running", err)
	}
	if err := other.PutAnswer(ctx, answer("ans_none", "call_none", storetest.T0)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("answer to no call: %v, want ErrNotFound", err)
	}
	for i, id := range []string{"ans_2", "ans_1", "ans_3"} {
		if err := other.PutAnswer(ctx, answer(id, "call_wait", storetest.T0.Add(time.Duration([]int{2, 1, 3}[i])*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := other.WithdrawAnswer(ctx, "ans_3"); err != nil || !ok {
		t.Fatalf("withdraw a pending answer: %v, %v", ok, err)
	}
	if pending, err := runner.PendingAnswers(ctx); err != nil || !cmp.Equal(pending, []string{"call_wait"}) {
		t.Errorf("PendingAnswers: %v, %v", pending, err)
	}
	taken, err := runner.TakeAnswers(ctx, "call_wait")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, a := range taken {
		order = append(order, a.ID+":"+a.Status)
	}
	if diff := cmp.Diff([]string{"ans_1:taken", "ans_2:taken"}, order); diff != "" {
		t.Errorf("taken (-want +got):\n%s", diff)
	}
	if again, err := runner.TakeAnswers(ctx, "call_wait"); err != nil || len(again) != 0 {
		t.Errorf("taken twice: %d, %v", len(again), err)
	}
	if ok, err := other.WithdrawAnswer(ctx, "ans_1"); err != nil || ok {
		t.Errorf("withdraw a taken answer: %v, %v; want false", ok, err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(runner.SettleAnswer(ctx, "ans_1", "call_wait", store.AnswerAccepted, ""))
	must(runner.SettleAnswer(ctx, "ans_2", "call_wait", store.AnswerRefused, "was already answered"))
	if err := runner.SettleAnswer(ctx, "ans_2", "call_wait", store.AnswerTaken, ""); err == nil {
		t.Error("settled as taken: no error")
	}
	for id, want := range map[string]string{"ans_1": "accepted:", "ans_2": "refused:was already answered", "ans_3": "withdrawn:"} {
		a, err := other.GetAnswer(ctx, id)
		if err != nil || a.Status+":"+a.Reason != want {
			t.Errorf("answer %s: %+v, %v; want %s", id, a, err, want)
		}
	}
	must(other.DeleteAnswer(ctx, "ans_1"))
	if _, err := other.GetAnswer(ctx, "ans_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted answer: %v, want ErrNotFound", err)
	}
}

// TestWritesFencedByOwner: once another replica claimed a paused
// replica's calls, every write of the paused one for them is refused with
// store.ErrNotOwner and changes nothing — its step, its result, its
// answers, a new approval call for its gated call, its slot, its pending
// withdrawal — while the new owner's go through; and its next renewal
// reports them as no longer its own (found by a tester: a replica resumed
// after SIGSTOP recorded an operator's decision and sent a gated call that
// another replica had taken over).
func TestWritesFencedByOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, paused, _ := leaseReplicas(t)
	create := func(id, status, parent string) *store.Call { return createCallAs(t, paused, id, status, parent) }
	gate := create("call_gate", store.CallRequiresInput, "")
	approval := create("call_approval", store.CallRunning, "call_gate")
	running := create("call_running", store.CallRunning, "")
	withdrawing := create("call_withdrawing", store.CallRunning, "")
	f, fev := storetest.Finish(withdrawing, store.CallCancelled, storetest.T0)
	f.WithdrawUntil = time.Now().Add(time.Hour)
	if err := paused.FinishCall(ctx, f, fev); err != nil {
		t.Fatal(err)
	}
	mine := []string{"call_gate", "call_approval", "call_running", "call_withdrawing", "call_unstored"}
	if lost, err := paused.RenewLeases(ctx, time.Now().Add(200*time.Millisecond), mine); err != nil || len(lost) != 0 {
		t.Fatalf("renewal while it owns its calls: lost %v, %v", lost, err)
	}
	time.Sleep(300 * time.Millisecond)
	taker := openDB(t, url, "taker", Options{})
	claimed, err := taker.ClaimExpired(ctx, time.Now(), time.Now().Add(time.Minute), 10)
	if err != nil || len(claimed) != 4 {
		t.Fatalf("claim: %d calls, %v; want 4", len(claimed), err)
	}

	wantNotOwner := func(what string, err error) {
		t.Helper()
		var se *store.StateError
		if !errors.Is(err, store.ErrNotOwner) || !errors.As(err, &se) {
			t.Errorf("%s by the replica that lost the call: %v, want ErrNotOwner", what, err)
		}
	}
	approved := *gate
	approved.Status, approved.StartedAt = store.CallRunning, time.Now()
	responded := &store.Event{Type: store.EventToolResponded, SessionID: "ses_1", CallID: gate.ID, Time: time.Now(), Data: json.RawMessage(`{}`)}
	wantNotOwner("UpdateCall", paused.UpdateCall(ctx, &approved, []string{store.CallRequiresInput}, responded))
	done, dev := storetest.Finish(approval, store.CallSucceeded, storetest.T0)
	wantNotOwner("FinishCall", paused.FinishCall(ctx, done, dev))
	ended, eev := storetest.Finish(running, store.CallSucceeded, storetest.T0)
	wantNotOwner("FinishCall", paused.FinishCall(ctx, ended, eev))
	again, aev := storetest.NewCall("call_approval_again", "ses_1", "t1")
	again.ParentID, again.CallerType = gate.ID, store.CallerSystem
	wantNotOwner("CreateCall of an approval call", paused.CreateCall(ctx, again, aev))
	wantNotOwner("ClearWithdrawal", paused.ClearWithdrawal(ctx, withdrawing.ID))
	if err := paused.PutAnswer(ctx, &store.Answer{ID: "ans_1", CallID: gate.ID, Body: json.RawMessage(`{"approved":true}`),
		APIKey: "KEY", CreatedAt: time.Now()}); err != nil {
		t.Fatalf("an answer stored through any replica: %v", err)
	}
	if got, err := paused.TakeAnswers(ctx, gate.ID); err != nil || len(got) != 0 {
		t.Errorf("answers taken by the replica that lost the call: %d, %v; want none", len(got), err)
	}
	lost, err := paused.RenewLeases(ctx, time.Now().Add(time.Minute), mine)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lost)
	if diff := cmp.Diff([]string{"call_approval", "call_gate", "call_running", "call_withdrawing"}, lost); diff != "" {
		t.Errorf("calls the renewal reports as not its own (-want +got):\n%s", diff)
	}

	// Nothing of it was written; the new owner writes.
	for _, id := range []string{gate.ID, approval.ID, running.ID} {
		if c, err := taker.Call(ctx, "t1", id); err != nil || store.Terminal(c.Status) || c.Status == store.CallRunning && id == gate.ID {
			t.Errorf("call %s after the refused writes: %+v, %v", id, c, err)
		}
	}
	if _, err := taker.Call(ctx, "t1", again.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused approval call was stored: %v", err)
	}
	if p, _ := taker.PendingWithdrawals(ctx); len(p) != 1 {
		t.Errorf("pending withdrawals after the refused clear: %d, want 1", len(p))
	}
	evs, err := taker.Events(ctx, "ses_1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == store.EventToolResponded || ev.Type == store.EventToolResult && ev.CallID != withdrawing.ID {
			t.Errorf("event %s of %s stored by the replica that lost the call", ev.Type, ev.CallID)
		}
	}
	if err := taker.UpdateCall(ctx, &approved, []string{store.CallRequiresInput}, responded); err != nil {
		t.Errorf("UpdateCall by the new owner: %v", err)
	}
	if got, err := taker.TakeAnswers(ctx, gate.ID); err != nil || len(got) != 1 {
		t.Errorf("answers taken by the new owner: %d, %v; want 1", len(got), err)
	}
	if err := taker.FinishCall(ctx, done, dev); err != nil {
		t.Errorf("FinishCall by the new owner: %v", err)
	}
	if err := taker.ClearWithdrawal(ctx, withdrawing.ID); err != nil {
		t.Errorf("ClearWithdrawal by the new owner: %v", err)
	}
}

// TestSlotReleaseFencedByOwner: a capped call a replica lost keeps its
// slot: the lost replica's release (Admit) gives back nothing.
func TestSlotReleaseFencedByOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, paused, _ := leaseReplicas(t)
	q := store.Queue{TenantID: "t1", Tool: "echo", Max: 1}
	for _, id := range []string{"call_1", "call_2"} {
		c, cev := storetest.NewCall(id, "ses_1", "t1")
		c.Status = store.CallQueued
		if err := paused.CreateCall(ctx, c, cev); err != nil {
			t.Fatal(err)
		}
	}
	if holding, err := paused.Admit(ctx, q, ""); err != nil || !cmp.Equal(holding, []string{"call_1"}) {
		t.Fatalf("admit: %v, %v", holding, err)
	}
	time.Sleep(300 * time.Millisecond)
	taker := openDB(t, url, "taker", Options{})
	if claimed, err := taker.ClaimExpired(ctx, time.Now(), time.Now().Add(time.Minute), 10); err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %d calls, %v", len(claimed), err)
	}
	if holding, err := paused.Admit(ctx, q, "call_1"); err != nil || !cmp.Equal(holding, []string{"call_1"}) {
		t.Errorf("after the lost replica's release: holding %v, %v; want call_1 still", holding, err)
	}
	if holding, err := taker.Admit(ctx, q, "call_1"); err != nil || !cmp.Equal(holding, []string{"call_2"}) {
		t.Errorf("after the owner's release: holding %v, %v; want call_2", holding, err)
	}
}

// createCallAs stores, through db (as its replica), call id of session
// ses_1 of t1 with status: requires_input waits for an approval; with
// parent it is that gated call's approval call.
func createCallAs(t *testing.T, db *DB, id, status, parent string) *store.Call {
	t.Helper()
	c, cev := storetest.NewCall(id, "ses_1", "t1")
	c.Status, c.ParentID = status, parent
	if status == store.CallRequiresInput {
		c.InputKind, c.Prompt, c.ResponseExpiresAt = store.InputApproval, "approve?", time.Now().Add(time.Hour)
	}
	if parent != "" {
		c.CallerType = store.CallerSystem
	}
	if err := db.CreateCall(context.Background(), c, cev); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStatementTimeout: a database that stops answering (every byte held,
// as a paused server's) fails each method — on a pooled connection and on
// a new one — once Options.StatementTimeout has passed, with
// context.DeadlineExceeded, instead of holding its caller until the
// caller's context ends; once it answers again, so does the store.
func TestStatementTimeout(t *testing.T) {
	t.Parallel()
	const bound = 300 * time.Millisecond
	gate, url := pg.Gate(t, pg.NewDatabase(t))
	db := openDB(t, url, "r1", Options{StatementTimeout: bound, MaxConns: 2})
	s, ev := storetest.NewSession("ses_1", "t1")
	if err := db.CreateSession(context.Background(), s, ev); err != nil {
		t.Fatal(err)
	}
	createCalls(t, db, "call_1")
	// A quiet replica: pgxpool pings a connection idle over a second
	// before handing it out, and that ping is bounded too.
	time.Sleep(1100 * time.Millisecond)
	gate.Shut()
	ops := []struct {
		name string
		op   func(ctx context.Context) error
	}{
		{"read a call", func(ctx context.Context) error { _, err := db.Call(ctx, "t1", "call_1"); return err }},
		{"create a call", func(ctx context.Context) error {
			c, cev := storetest.NewCall("call_2", "ses_1", "t1")
			return db.CreateCall(ctx, c, cev)
		}},
		// Both pooled connections were broken off by the reads above: a
		// third statement needs a new connection, which is bounded too.
		{"read on a new connection", func(ctx context.Context) error { _, err := db.Call(ctx, "t1", "call_1"); return err }},
	}
	for _, op := range ops {
		pgtest.FailsWithin(t, bound, op.name, op.op)
	}
	gate.Open()
	if _, err := db.Call(context.Background(), "t1", "call_1"); err != nil {
		t.Errorf("once the database answers again: %v", err)
	}
}

// TestMigrateSilentDatabase: `brain migrate` (and start-up, which
// migrates first) on a database that does not answer fails once the
// connect bound (pgbound.Default) has passed, instead of waiting for ever
// without a word (found by a tester).
func TestMigrateSilentDatabase(t *testing.T) {
	t.Parallel()
	gate, url := pg.Gate(t, pg.NewDatabase(t))
	gate.Shut()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, _, err := Migrate(ctx, url, 0)
	if took := time.Since(start); err == nil || took > pgbound.Default+5*time.Second {
		t.Errorf("migrate on a silent database: %v after %s, want an error after about %s", err, took, pgbound.Default)
	}
	if _, err := Open(ctx, Options{URL: url, Replica: "r1", Lease: time.Minute}); err == nil || ctx.Err() != nil {
		t.Errorf("open on a silent database: %v (context: %v), want an error before the context's end", err, ctx.Err())
	}
}
