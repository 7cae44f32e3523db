package approval

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUpgradeFromUnversionedDatabase: an approvals.db made before versioned
// migrations (testdata/approvals-v0.sql) opens through the schema steps
// with nothing lost: its approvals and decision log as they were, its past
// decisions in the audit log with their tenants, the new tables there, and
// a second open changes nothing; retention then works on it.
func TestUpgradeFromUnversionedDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "approvals.db")
	old, err := os.ReadFile("testdata/approvals-v0.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(string(old)); err != nil {
		t.Fatal(err)
	}
	db.Close()

	for round := range 2 {
		s, err := OpenSQLite(context.Background(), path)
		if err != nil {
			t.Fatalf("open %d: %v", round, err)
		}
		ctx := context.Background()
		p, err := s.Get(ctx, "aaaaaaaaaaaaaaaaaaaaaaaaaa")
		if err != nil || p.Status != Pending || p.Action != "Rotate the key" || p.TenantID != "acme" {
			t.Fatalf("pending approval after the upgrade: %+v %v", p, err)
		}
		d, err := s.Get(ctx, "bbbbbbbbbbbbbbbbbbbbbbbbbb")
		if err != nil || d.Status != Denied || d.Operator != "bob" || d.Comment != "use the bastion" {
			t.Fatalf("decided approval after the upgrade: %+v %v", d, err)
		}
		if log, err := s.Log(ctx, d.ID); err != nil || len(log) != 1 || log[0].Operator != "bob" {
			t.Fatalf("decision log: %+v %v", log, err)
		}
		// Step 4 on the old file: its decisions were used until a
		// withdrawal after one says otherwise, which it keeps.
		if round == 0 {
			if d.DecisionNotUsed() {
				t.Fatalf("an old decision reads as not used: %+v", d)
			}
			if d, _, err = s.MarkWithdrawn(ctx, d.ID); err != nil || !d.DecisionNotUsed() {
				t.Fatalf("withdrawal after the decision on the upgraded file: %+v %v", d, err)
			}
		} else if !d.DecisionNotUsed() {
			t.Fatalf("the withdrawal after the decision was lost at reopen: %+v", d)
		}
		var audit []AuditEntry
		total, err := s.Audit(ctx, AuditQuery{Scope: Scope{All: true}}, func(e AuditEntry) error { audit = append(audit, e); return nil })
		if err != nil || total != 1 || audit[0].TenantID != "globex" || audit[0].Decision != Denied || audit[0].DetailsHash != "hash-2" {
			t.Fatalf("audit log after the upgrade: %d %+v %v", total, audit, err)
		}
		var version int
		if err := s.r.QueryRow(`SELECT max(version_id) FROM goose_db_version`).Scan(&version); err != nil || version != 5 {
			t.Fatalf("schema version %d: %v", version, err)
		}
		// The old triggers still hold, and the new log has its own.
		if _, err := s.w.Exec(`DELETE FROM decisions`); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Fatalf("delete from decisions: %v", err)
		}
		if _, err := s.w.Exec(`UPDATE audit_log SET operator = 'mallory'`); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Fatalf("update audit_log: %v", err)
		}
		if round == 1 {
			// Retention on the upgraded file: the decided approval goes
			// with its decision log; the audit log keeps its decision.
			rm, err := s.DeleteEnded(ctx, time.Now(), 10)
			if err != nil || rm != (Removed{Approvals: 1, Decisions: 1}) {
				t.Fatalf("retention after the upgrade: %+v %v", rm, err)
			}
			if total, err := s.Audit(ctx, AuditQuery{Scope: Scope{All: true}}, func(AuditEntry) error { return nil }); err != nil || total != 1 {
				t.Fatalf("audit log after retention: %d %v", total, err)
			}
			if _, err := s.Get(ctx, p.ID); err != nil {
				t.Fatalf("the pending approval: %v", err)
			}
		}
		s.Close()
	}
}

// testAuditLogRecordsEveryDecision: each decision, an operator's or the
// system's, is in the audit log with its tenant, and the log reads by
// scope, tenant and operator, newest first.
func testAuditLogRecordsEveryDecision(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	ctx := context.Background()
	for i, tenant := range []string{"acme", "globex", "acme"} {
		r := newReq(fmt.Sprint("c", i))
		r.TenantID = tenant
		a, _, err := s.Create(ctx, r, 0)
		if err != nil {
			t.Fatal(err)
		}
		who := []string{"alice", "bob", SystemOperator}[i]
		if _, _, err := s.Decide(ctx, a.ID, []Status{Approved, Denied, Expired}[i], who, "because "+who); err != nil {
			t.Fatal(err)
		}
	}
	read := func(q AuditQuery) (string, int) {
		var got []string
		total, err := s.Audit(ctx, q, func(e AuditEntry) error {
			got = append(got, e.TenantID+"/"+e.Operator+"/"+string(e.Decision))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, " "), total
	}
	for _, tc := range []struct {
		q     AuditQuery
		want  string
		total int
	}{
		{AuditQuery{Scope: Scope{All: true}}, "acme/system/expired globex/bob/denied acme/alice/approved", 3},
		{AuditQuery{Scope: Scope{Tenants: []string{"acme"}}}, "acme/system/expired acme/alice/approved", 2},
		{AuditQuery{Scope: Scope{}}, "", 0},
		{AuditQuery{Scope: Scope{All: true}, Operator: "bob"}, "globex/bob/denied", 1},
		{AuditQuery{Scope: Scope{All: true}, Tenant: "acme", Limit: 1, Offset: 1}, "acme/alice/approved", 2},
	} {
		if got, total := read(tc.q); got != tc.want || total != tc.total {
			t.Errorf("%+v: %q (%d), want %q (%d)", tc.q, got, total, tc.want, tc.total)
		}
	}
}

func testSyncAccounts(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	ctx := context.Background()
	first := []Account{
		{Name: "alice", Tenants: []string{"acme"}, TokenHash: HashToken("alice-token-0123456789")},
		{Name: "root", Admin: true, Identity: "root@example.com"},
	}
	if err := s.SyncAccounts(ctx, first); err != nil {
		t.Fatal(err)
	}
	a, err := s.AccountByToken(ctx, "alice-token-0123456789")
	if err != nil || a.Name != "alice" || a.Admin || !a.Sees("acme") || a.Sees("globex") {
		t.Fatalf("alice: %+v %v", a, err)
	}
	if r, err := s.AccountByIdentity(ctx, "root@example.com"); err != nil || !r.Admin || !r.Sees("anything") {
		t.Fatalf("root: %+v %v", r, err)
	}
	if a, err := s.AccountByName(ctx, "ALICE"); err != nil || a.Name != "alice" {
		t.Fatalf("by name in another case: %+v %v", a, err)
	}
	// The configuration changes: alice's scope grows, root is gone.
	if err := s.SyncAccounts(ctx, []Account{{Name: "alice", Tenants: []string{"acme", "globex"}, TokenHash: HashToken("alice-token-0123456789")}}); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.AccountByToken(ctx, "alice-token-0123456789"); !a.Sees("globex") {
		t.Fatalf("alice after the change: %+v", a)
	}
	if _, err := s.AccountByIdentity(ctx, "root@example.com"); !errors.Is(err, ErrNoAccount) {
		t.Fatalf("removed account: %v", err)
	}
	if _, err := s.AccountByToken(ctx, "not-a-token-0123456789"); !errors.Is(err, ErrNoAccount) {
		t.Fatalf("unknown token: %v", err)
	}
	// Two accounts cannot share a token.
	dup := []Account{{Name: "a", TokenHash: "x"}, {Name: "b", TokenHash: "x"}}
	if err := s.SyncAccounts(ctx, dup); err == nil {
		t.Fatal("two accounts with one token were stored")
	}
	if a, _ := s.AccountByToken(ctx, "alice-token-0123456789"); a.Name != "alice" {
		t.Fatal("a failed sync changed the stored accounts")
	}
}

// testFind: the queue's selection — scope, state, filters, text search
// (with % and _ taken literally), deadline order, pages — and no pending
// approval already past its expiry.
func testFind(t *testing.T, be storeBackend) {
	s := be.fresh(t)
	ctx := context.Background()
	now := time.Now()
	s.now = func() time.Time { return now }
	mk := func(tenant, session, call, action string, timeout time.Duration) Approval {
		a, _, err := s.Create(ctx, NewApproval{TenantID: tenant, SessionID: session, CallID: call, Origin: OriginJob, Action: action, Details: "details of " + action, Timeout: timeout}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	mk("acme", "s1", "c1", "Rotate the key", 30*time.Minute)
	mk("acme", "s2", "c2", "Delete 100% of _tmp", 5*time.Minute)
	mk("globex", "s3", "c3", "Open port 22", 10*time.Minute)
	mk("acme", "s1", "c4", "Already due", time.Second)
	d := mk("acme", "s1", "c5", "Decided one", time.Hour)
	if _, _, err := s.Decide(ctx, d.ID, Approved, "alice", ""); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second) // "Already due" is past its expiry, not yet swept
	all := Scope{All: true}
	for _, tc := range []struct {
		q     Query
		want  string
		total int
	}{
		{Query{Scope: all, Limit: 10}, "Delete 100% of _tmp|Open port 22|Rotate the key", 3},
		{Query{Scope: Scope{Tenants: []string{"acme"}}, Limit: 10}, "Delete 100% of _tmp|Rotate the key", 2},
		{Query{Scope: Scope{}, Limit: 10}, "", 0},
		{Query{Scope: all, Tenant: "globex", Limit: 10}, "Open port 22", 1},
		{Query{Scope: all, Session: "s1", Limit: 10}, "Rotate the key", 1},
		{Query{Scope: all, Text: "100%", Limit: 10}, "Delete 100% of _tmp", 1},
		{Query{Scope: all, Text: "0%", Limit: 10}, "Delete 100% of _tmp", 1},
		{Query{Scope: all, Text: "_t", Limit: 10}, "Delete 100% of _tmp", 1},
		{Query{Scope: all, Text: "x_y", Limit: 10}, "", 0},
		{Query{Scope: all, Text: "ROTATE", Limit: 10}, "Rotate the key", 1},
		{Query{Scope: all, Text: "details of open", Limit: 10}, "Open port 22", 1},
		{Query{Scope: all, Text: "s3", Limit: 10}, "Open port 22", 1},
		{Query{Scope: all, Sort: "newest", Limit: 10}, "Open port 22|Delete 100% of _tmp|Rotate the key", 3},
		{Query{Scope: all, Limit: 1, Offset: 1}, "Open port 22", 3},
		{Query{Scope: all, State: StateDecided, Limit: 10}, "Decided one", 1},
		{Query{Scope: all, State: StateAll, Sort: "oldest", Limit: 10}, "Rotate the key|Delete 100% of _tmp|Open port 22|Already due|Decided one", 5},
	} {
		got, total, err := s.Find(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, a := range got {
			names = append(names, a.Action)
		}
		if strings.Join(names, "|") != tc.want || total != tc.total {
			t.Errorf("%+v: %q (%d), want %q (%d)", tc.q, strings.Join(names, "|"), total, tc.want, tc.total)
		}
	}
	var bad *ErrBadQuery
	if _, _, err := s.Find(ctx, Query{Scope: all, State: "open"}); !errors.As(err, &bad) || bad.Field != "state" {
		t.Fatalf("bad state: %v", err)
	}
	if _, _, err := s.Find(ctx, Query{Scope: all, Sort: "random"}); !errors.As(err, &bad) || bad.Field != "sort" {
		t.Fatalf("bad sort: %v", err)
	}
	if n, _ := s.CountPendingIn(ctx, Scope{Tenants: []string{"acme"}}); n != 2 {
		t.Fatalf("pending for acme: %d", n)
	}
	mk("Zeta", "s9", "c9", "Upper-case tenant", time.Hour)
	for _, tc := range []struct {
		scope Scope
		want  string
	}{
		{all, "Zeta acme globex"}, // byte order, as the filter lists them
		{Scope{Tenants: []string{"globex", "nobody"}}, "globex"},
		{Scope{}, ""},
	} {
		if got, err := s.Tenants(ctx, tc.scope); err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("tenants of %+v: %q %v, want %q", tc.scope, got, err, tc.want)
		}
	}
}

// TestRestartExpiresAtOnce: an approval that expired while the service was
// down is expired when the service opens, before the first sweep, so
// nothing offers it as pending in the meantime.
func TestRestartExpiresAtOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, PageURL: "http://x", SweepInterval: time.Hour}
	svc, err := New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := svc.Request(context.Background(), NewApproval{TenantID: "t", SessionID: "s", CallID: "c", Origin: OriginJob, Action: "x", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	svc.Close()
	time.Sleep(1100 * time.Millisecond) // the downtime outlasts the approval
	svc, err = New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	got, err := svc.Store().Get(context.Background(), a.ID)
	if err != nil || got.Status != Expired || got.Operator != SystemOperator {
		t.Fatalf("after the restart: %+v %v", got, err)
	}
}
