package approval

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/jobs"
)

func newReq(call string) NewApproval {
	return NewApproval{TenantID: "t1", SessionID: "s1", CallID: call, Origin: OriginStream, Action: "delete the reports", Details: "rm -rf /srv/reports\n14 files", Timeout: time.Minute}
}

func testCreateIsIdempotentPerCall(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	ctx := context.Background()
	a, created, err := s.Create(ctx, newReq("c1"), 0)
	if err != nil || !created {
		t.Fatalf("first create: %v, created %v", err, created)
	}
	if !jobs.ValidID(a.ID) || a.Status != Pending || a.DetailsHash != HashDetails(a.Action, a.Details) {
		t.Fatalf("created %+v", a)
	}
	b, created, err := s.Create(ctx, newReq("c1"), 0)
	if err != nil || created || b.ID != a.ID {
		t.Fatalf("same call again: id %s (want %s), created %v, err %v", b.ID, a.ID, created, err)
	}
	// Another call, session or tenant is another approval.
	for _, n := range []NewApproval{
		{TenantID: "t1", SessionID: "s1", CallID: "c2", Action: "x", Timeout: time.Minute},
		{TenantID: "t1", SessionID: "s2", CallID: "c1", Action: "x", Timeout: time.Minute},
		{TenantID: "t2", SessionID: "s1", CallID: "c1", Action: "x", Timeout: time.Minute},
	} {
		c, created, err := s.Create(ctx, n, 0)
		if err != nil || !created || c.ID == a.ID {
			t.Fatalf("create %+v: created %v, err %v", n, created, err)
		}
	}
}

func testCreateConcurrentSameCallMakesOneApproval(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	var wg sync.WaitGroup
	ids := make([]string, 20)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, _, err := s.Create(context.Background(), newReq("same"), 0)
			if err != nil {
				t.Error(err)
			}
			ids[i] = a.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("two approvals for one call: %s and %s", ids[0], id)
		}
	}
}

func testDecideFirstAnswerWins(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	ctx := context.Background()
	a, _, _ := s.Create(ctx, newReq("c1"), 0)
	got, changed, err := s.Decide(ctx, a.ID, Approved, "alice", "looks right")
	if err != nil || !changed || got.Status != Approved || got.Operator != "alice" || got.Comment != "looks right" || got.DecidedAt.IsZero() {
		t.Fatalf("decide = %+v, %v, %v", got, changed, err)
	}
	later, changed, err := s.Decide(ctx, a.ID, Denied, "bob", "no")
	var de *DecidedError
	if !errors.As(err, &de) || changed || later.Status != Approved || de.Current.Operator != "alice" {
		t.Fatalf("second answer: %+v, changed %v, err %v", later, changed, err)
	}
	if !strings.Contains(err.Error(), "already decided: approved by alice") {
		t.Fatalf("error %q", err)
	}
	log, err := s.Log(ctx, a.ID)
	if err != nil || len(log) != 1 || log[0].Decision != Approved || log[0].Operator != "alice" || log[0].DetailsHash != a.DetailsHash {
		t.Fatalf("log = %+v, %v", log, err)
	}
	if _, _, err := s.Decide(ctx, jobs.NewID(), Approved, "alice", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

func testDecideConcurrentOneWinner(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	ctx := context.Background()
	a, _, _ := s.Create(ctx, newReq("c1"), 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	winners := 0
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := Approved
			if i%2 == 1 {
				d = Denied
			}
			_, changed, err := s.Decide(ctx, a.ID, d, "op", "")
			if changed {
				mu.Lock()
				winners++
				mu.Unlock()
			} else if !errors.Is(err, ErrDecided) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	log, _ := s.Log(ctx, a.ID)
	if winners != 1 || len(log) != 1 {
		t.Fatalf("%d winners, %d log rows; want 1 and 1", winners, len(log))
	}
}

func testLateAnswerExpires(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	ctx := context.Background()
	now := time.Now()
	s.now = func() time.Time { return now }
	a, _, _ := s.Create(ctx, newReq("c1"), 0)
	now = now.Add(time.Minute) // exactly expires_at: too late
	got, changed, err := s.Decide(ctx, a.ID, Approved, "alice", "ok")
	var de *DecidedError
	if !errors.As(err, &de) || !changed || got.Status != Expired || got.Operator != SystemOperator {
		t.Fatalf("late answer = %+v, changed %v, err %v", got, changed, err)
	}
	if !strings.Contains(err.Error(), "expired at") || !strings.Contains(err.Error(), "can no longer be answered") {
		t.Fatalf("error %q", err)
	}
	log, _ := s.Log(ctx, a.ID)
	if len(log) != 1 || log[0].Decision != Expired {
		t.Fatalf("log %+v", log)
	}
}

func testCancelledCannotBeAnswered(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	ctx := context.Background()
	a, _, _ := s.Create(ctx, newReq("c1"), 0)
	if _, _, err := s.Decide(ctx, a.ID, Cancelled, SystemOperator, "stream closed"); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.Decide(ctx, a.ID, Approved, "alice", "")
	if !errors.Is(err, ErrDecided) || !strings.Contains(err.Error(), "was cancelled") {
		t.Fatalf("answer after cancel: %v", err)
	}
}

func testExpireDue(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	ctx := context.Background()
	now := time.Now()
	s.now = func() time.Time { return now }
	short := newReq("short")
	short.Timeout = time.Second
	a, _, _ := s.Create(ctx, short, 0)
	b, _, _ := s.Create(ctx, newReq("long"), 0)
	if next, ok, err := s.NextExpiry(ctx); err != nil || !ok || !next.Equal(a.ExpiresAt) {
		t.Fatalf("next expiry = %v %v %v, want %v", next, ok, err, a.ExpiresAt)
	}
	now = now.Add(2 * time.Second)
	expired, err := s.ExpireDue(ctx)
	if err != nil || len(expired) != 1 || expired[0].ID != a.ID || expired[0].Status != Expired {
		t.Fatalf("expired = %+v, %v", expired, err)
	}
	pending, _ := s.ListPending(ctx, 10)
	if len(pending) != 1 || pending[0].ID != b.ID {
		t.Fatalf("pending = %+v", pending)
	}
	decided, _ := s.ListDecided(ctx, 10)
	if len(decided) != 1 || decided[0].ID != a.ID {
		t.Fatalf("decided = %+v", decided)
	}
}

func testDecisionLogIsAppendOnly(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	ctx := context.Background()
	a, _, _ := s.Create(ctx, newReq("c1"), 0)
	s.Decide(ctx, a.ID, Denied, "alice", "no")
	if _, err := s.w.ExecContext(ctx, `UPDATE decisions SET decision = 'approved'`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("update of the log: %v", err)
	}
	if _, err := s.w.ExecContext(ctx, `DELETE FROM decisions`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("delete from the log: %v", err)
	}
}

func testStoreSurvivesReopen(t *testing.T, be storeBackend) {
	loc := be.new(t)
	ctx := context.Background()
	s1 := be.open(t, loc)
	a, _, _ := s1.Create(ctx, newReq("c1"), 0)
	s1.Close()
	s2 := be.open(t, loc)
	got, err := s2.GetForTenant(ctx, "t1", a.ID)
	if err != nil || got.Status != Pending || got.Details != a.Details || !got.ExpiresAt.Equal(a.ExpiresAt) {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
	if _, err := s2.GetForTenant(ctx, "t2", a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other tenant: %v", err)
	}
}

func testMaxPendingPerTenant(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	ctx := context.Background()
	a, _, err := s.Create(ctx, newReq("c1"), 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, newReq("c2"), 2); err != nil {
		t.Fatalf("second of two: %v", err)
	}
	_, _, err = s.Create(ctx, newReq("c3"), 2)
	if !errors.Is(err, ErrTooManyPending) || !strings.Contains(err.Error(), "2 pending, limit 2") {
		t.Fatalf("third: %v", err)
	}
	// Attaching to an existing approval is not a new one.
	if b, created, err := s.Create(ctx, newReq("c1"), 2); err != nil || created || b.ID != a.ID {
		t.Fatalf("attach at the cap: %v", err)
	}
	// The cap is per tenant.
	other := newReq("c3")
	other.TenantID = "t2"
	if _, _, err := s.Create(ctx, other, 2); err != nil {
		t.Fatalf("other tenant: %v", err)
	}
	// A decided approval frees its place.
	s.Decide(ctx, a.ID, Denied, "alice", "")
	if _, _, err := s.Create(ctx, newReq("c3"), 2); err != nil {
		t.Fatalf("after a decision: %v", err)
	}
}

// TestOpenStorePathWithURICharacters: a directory whose name holds
// characters a file: URI gives a meaning (#, ?, %) still holds the store.
func TestOpenStorePathWithURICharacters(t *testing.T) {
	for _, name := range []string{"d#x", "d?mode=ro", "d%41"} {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "approvals.db")
		s, err := OpenSQLite(context.Background(), path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s.Close()
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: the store is not at %s: %v", name, path, err)
		}
	}
}

// testGetByCall finds an approval by the call that created it, scoped to
// the tenant and session, before and after the store is closed and opened
// again (a restart of the service).
func testGetByCall(t *testing.T, be storeBackend) {
	loc := be.new(t)
	ctx := context.Background()
	s1 := be.open(t, loc)
	mine, _, err := s1.Create(ctx, newReq("c1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	// The same call_id in another session and another tenant: other
	// approvals, never the one of t1/s1.
	otherSession, _, _ := s1.Create(ctx, NewApproval{TenantID: "t1", SessionID: "s2", CallID: "c1", Action: "x", Timeout: time.Minute}, 0)
	otherTenant, _, _ := s1.Create(ctx, NewApproval{TenantID: "t2", SessionID: "s1", CallID: "c1", Action: "x", Timeout: time.Minute}, 0)
	// Calls made only elsewhere: c3 in t1's session s3, c9 in t2's s9.
	for _, n := range []NewApproval{
		{TenantID: "t1", SessionID: "s3", CallID: "c3", Action: "x", Timeout: time.Minute},
		{TenantID: "t2", SessionID: "s9", CallID: "c9", Action: "x", Timeout: time.Minute},
	} {
		if _, _, err := s1.Create(ctx, n, 0); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name                    string
		tenant, session, callID string
		want                    string // approval ID; "" for ErrNotFound
	}{
		{"same tenant, session and call", "t1", "s1", "c1", mine.ID},
		{"same call in another session of the tenant", "t1", "s2", "c1", otherSession.ID},
		{"same call of another tenant", "t2", "s1", "c1", otherTenant.ID},
		{"call made in another session of the tenant", "t1", "s1", "c3", ""},
		{"call made in another tenant's session", "t1", "s1", "c9", ""},
		{"another tenant's session and call", "t1", "s9", "c9", ""},
		{"unknown call", "t1", "s1", "c2", ""},
		{"call_id is not a prefix match", "t1", "s1", "c", ""},
		{"call_id is case-sensitive", "t1", "s1", "C1", ""},
	}
	s2 := s1
	for round, name := range []string{"open", "reopened"} {
		if round == 1 {
			s1.Close() // DB.Close is idempotent: the cleanup's second Close is a no-op
			s2 = be.open(t, loc)
		}
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				a, err := s2.GetByCall(ctx, tt.tenant, tt.session, tt.callID)
				if tt.want == "" {
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("GetByCall = %+v, %v; want ErrNotFound", a, err)
					}
					return
				}
				if err != nil || a.ID != tt.want || a.TenantID != tt.tenant || a.SessionID != tt.session || a.Status != Pending {
					t.Fatalf("GetByCall = %+v, %v; want %s", a, err, tt.want)
				}
			})
		}
	}
}

// testGetByCallUsesTheIndex: the lookup by call is a search of the unique
// (tenant_id, session_id, call_id) index, not a scan of every approval.
func TestGetByCallUsesTheIndex(t *testing.T) {
	s := sqliteBackend.fresh(t)
	rows, err := s.r.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+byCallQuery, "t1", "s1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if len(plan) != 1 || !strings.Contains(plan[0], "SEARCH approvals USING INDEX") || !strings.Contains(plan[0], "call_id=?") {
		t.Fatalf("query plan %q: want one index search on tenant_id, session_id and call_id", plan)
	}
}

// testMarkWithdrawnAfterDecision: the caller's withdrawal of an approval an
// operator already approved or denied marks it (the decision was not
// used) with the time of the first withdrawal, shown in the audit log too;
// a withdrawal sent again changes nothing; a pending, expired or
// cancelled approval is left as it is.
func testMarkWithdrawnAfterDecision(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	now := t0
	s.now = func() time.Time { return now }
	for _, tt := range []struct {
		name   string
		decide Status // Pending: left pending
		marked bool
	}{
		{"approved", Approved, true},
		{"denied", Denied, true},
		{"pending", Pending, false},
		{"expired", Expired, false},
		{"cancelled", Cancelled, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, _, err := s.Create(ctx, newReq("mark-"+tt.name), 0)
			if err != nil {
				t.Fatal(err)
			}
			if tt.decide != Pending {
				if a, _, err = s.Decide(ctx, a.ID, tt.decide, "alice", "fine"); err != nil {
					t.Fatal(err)
				}
			}
			now = now.Add(time.Second)
			first := now
			got, marked, err := s.MarkWithdrawn(ctx, a.ID)
			if err != nil || marked != tt.marked || got.Status != a.Status || got.Operator != a.Operator || !got.DecidedAt.Equal(a.DecidedAt) {
				t.Fatalf("mark = %+v, marked %v, err %v; want marked %v, the approval as it was", got, marked, err, tt.marked)
			}
			want := time.Time{}
			if tt.marked {
				want = first
			}
			if !got.WithdrawnAt.Equal(want) || got.DecisionNotUsed() != tt.marked {
				t.Fatalf("withdrawn at %v, want %v", got.WithdrawnAt, want)
			}
			// Sent again, later: the first withdrawal's time stays.
			now = now.Add(time.Second)
			again, marked, err := s.MarkWithdrawn(ctx, a.ID)
			if err != nil || marked || !again.WithdrawnAt.Equal(want) {
				t.Fatalf("mark again = %v, marked %v, err %v; want %v kept", again.WithdrawnAt, marked, err, want)
			}
			if read, err := s.Get(ctx, a.ID); err != nil || !read.WithdrawnAt.Equal(want) || read.Status != a.Status {
				t.Fatalf("read back: %+v %v", read, err)
			}
			var entry *AuditEntry
			if _, err := s.Audit(ctx, AuditQuery{Scope: Scope{All: true}}, func(e AuditEntry) error {
				if e.ApprovalID == a.ID {
					entry = &e
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if tt.decide == Pending {
				if entry != nil {
					t.Fatalf("audit row of a pending approval: %+v", entry)
				}
				return
			}
			if entry == nil || !entry.WithdrawnAt.Equal(want) {
				t.Fatalf("audit row %+v, want withdrawn at %v", entry, want)
			}
		})
	}
	// Retention removes the approvals; the audit log keeps each decision
	// with its mark.
	if rm, err := s.DeleteEnded(ctx, now.Add(time.Hour), 100); err != nil || rm.Approvals != 4 {
		t.Fatalf("retention: removed %+v, %v; want the 4 ended approvals", rm, err)
	}
	marks := map[Status]bool{}
	if _, err := s.Audit(ctx, AuditQuery{Scope: Scope{All: true}}, func(e AuditEntry) error {
		if e.Decision == Approved || e.Decision == Denied {
			marks[e.Decision] = !e.WithdrawnAt.IsZero()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !marks[Approved] || !marks[Denied] {
		t.Errorf("after retention, the audit log's not-used marks: %v, want approved and denied marked", marks)
	}
	if _, _, err := s.MarkWithdrawn(ctx, jobs.NewID()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown approval: %v", err)
	}
}
