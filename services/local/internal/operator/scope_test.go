package operator

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/services/local/internal/approval"
)

const (
	aliceToken = "alice-token-0123456789"
	carolToken = "carol-token-0123456789"
)

// scoped has the shared admin token, alice who may decide for acme only,
// and carol, an admin with a personal token.
func scoped() Config {
	return Config{Token: operatorToken,
		Operators:       map[string]string{"alice": aliceToken, "carol": carolToken},
		OperatorTenants: map[string]string{"alice": "acme", "carol": AllTenants}}
}

// TestTenantScoping: an operator of tenant acme never sees nor answers
// globex's approvals — not in the list, its filters, its search or its
// live fragment, not in the detail view, not by a decision POSTed with a
// forged ID, not even as a signal on the live stream — and gets exactly
// the answer an unknown ID gets. Admins see both.
func TestTenantScoping(t *testing.T) {
	s := newStack(t, scoped())
	mine := s.requestApprovalIn("acme", "c1", map[string]any{"action": "Rotate the acme key"})
	theirs := s.requestApprovalIn("globex", "c2", map[string]any{"action": "Wire globex funds"})

	alice := s.client()
	csrf := alice.signIn("", aliceToken)
	for _, path := range []string{"/approvals", "/approvals/rows", "/approvals?tenant=globex", "/approvals?q=Wire", "/approvals?q=" + theirs.ID, "/approvals?state=all", "/approvals?session=sess-1"} {
		// The query itself is echoed in the form; no item of globex is listed.
		body := alice.get(path).body
		if strings.Contains(body, `data-id="`+theirs.ID) || strings.Contains(body, "<dd>globex</dd>") || strings.Contains(body, ">globex</option>") {
			t.Errorf("%s shows globex's approval to alice", path)
		}
	}
	if body := alice.get("/approvals").body; !strings.Contains(body, mine.ID) || !strings.Contains(body, ">1 pending<") || !strings.Contains(body, "(tenant acme)") {
		t.Error("alice's list does not show her own approval, her count or her scope")
	}
	unknown := alice.get("/approval/" + jobs.NewID())
	other := alice.get("/approval/" + theirs.ID)
	if other.status != http.StatusNotFound || other.body != unknown.body {
		t.Errorf("globex's detail for alice: %d, want the unknown ID's 404", other.status)
	}
	forged := alice.post("/approval/"+theirs.ID+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}})
	if forged.status != http.StatusNotFound {
		t.Errorf("decision on globex's approval: %d, want 404", forged.status)
	}
	if a, _ := s.svc.Store().Get(context.Background(), theirs.ID); a.Status != approval.Pending {
		t.Fatalf("alice's forged POST decided globex's approval: %s", a.Status)
	}
	if a := alice.get("/operator/audit"); a.status != http.StatusForbidden || alice.get("/operator/audit.csv").status != http.StatusForbidden {
		t.Errorf("audit log for a tenant operator: %d", a.status)
	}
	// Her own she answers.
	if a := alice.post("/approval/"+mine.ID+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}}); a.status != http.StatusSeeOther {
		t.Fatalf("alice's own decision: %d %s", a.status, a.body)
	}
	if r := mine.wait(t); r.IsError || !strings.Contains(r.Content[0].Text, "alice") {
		t.Fatalf("result %+v", r)
	}

	for _, admin := range []struct{ name, token string }{{"carol", carolToken}, {"dave", operatorToken}} {
		c := s.client()
		c.signIn(admin.name, admin.token)
		if body := c.get("/approvals").body; !strings.Contains(body, theirs.ID) || !strings.Contains(body, "(all tenants)") {
			t.Errorf("%s (admin) does not see globex's approval", admin.name)
		}
		if a := c.get("/operator/audit"); a.status != http.StatusOK || !strings.Contains(a.body, mine.ID) {
			t.Errorf("%s's audit log: %d", admin.name, a.status)
		}
	}
}

// TestLiveStreamScoped: the live stream signals alice for acme's changes
// only; a globex request sends her nothing, not even a count.
func TestLiveStreamScoped(t *testing.T) {
	s := newStack(t, scoped())
	alice := s.client()
	alice.signIn("", aliceToken)
	req, _ := http.NewRequest(http.MethodGet, s.url+"/approvals/live", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req = req.WithContext(ctx)
	resp, err := alice.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data:") {
				events <- sc.Text()
			}
		}
		close(events)
	}()
	next := func(within time.Duration) string {
		select {
		case e := <-events:
			return e
		case <-time.After(within):
			return ""
		}
	}
	if e := next(5 * time.Second); e != `data: {"pending":0}` {
		t.Fatalf("first event %q", e)
	}
	s.requestApprovalIn("globex", "g1", map[string]any{"action": "globex only"})
	if e := next(700 * time.Millisecond); e != "" {
		t.Fatalf("a globex request signalled alice: %q", e)
	}
	s.requestApprovalIn("acme", "a1", map[string]any{"action": "acme's"})
	if e := next(5 * time.Second); e != `data: {"pending":1}` {
		t.Fatalf("after acme's request %q, want a count of 1", e)
	}
}

// TestSharedTokenCannotTakeAccountName: the shared token signs in as an
// admin under a name of its holder's choice, but never an account's name,
// in any case.
func TestSharedTokenCannotTakeAccountName(t *testing.T) {
	s := newStack(t, scoped())
	for _, name := range []string{"alice", "ALICE", "Carol", "shared operator token"} {
		c := s.client()
		form := c.get("/operator/signin")
		a := c.post("/operator/signin", url.Values{"csrf": {csrfOf(t, form.body)}, "name": {name}, "token": {operatorToken}})
		if a.status != http.StatusBadRequest || !strings.Contains(a.body, "Name: ") || c.get("/approvals").status != http.StatusSeeOther {
			t.Errorf("shared token as %q: %d", name, a.status)
		}
	}
	c := s.client()
	c.signIn("dave", operatorToken)
	p := s.requestApprovalIn("globex", "c1", map[string]any{"action": "x"})
	if a := c.post("/approval/"+p.ID+"/decision", url.Values{"csrf": {csrfOf(t, c.get("/approval/"+p.ID).body)}, "decision": {"deny"}}); a.status != http.StatusSeeOther {
		t.Fatalf("shared-token admin on globex: %d", a.status)
	}
	if got, _ := s.svc.Store().Get(context.Background(), p.ID); got.Operator != "dave" {
		t.Fatalf("recorded operator %q", got.Operator)
	}
}

// TestSigninThrottled: after APPROVAL_SIGNIN_ATTEMPTS wrong tokens, further
// sign-ins for that name or from that address get 429 with Retry-After —
// the right token too — until the window lets one more through.
func TestSigninThrottled(t *testing.T) {
	s := newStack(t, Config{Token: operatorToken, Operators: map[string]string{"alice": aliceToken}, OperatorTenants: map[string]string{"alice": "acme"},
		SigninAttempts: 3, SigninWindow: 3 * time.Minute})
	now := time.Now()
	s.page.throttle.now = func() time.Time { return now }
	try := func(name, token string) answer {
		c := s.client()
		form := c.get("/operator/signin")
		return c.post("/operator/signin", url.Values{"csrf": {csrfOf(t, form.body)}, "name": {name}, "token": {token}})
	}
	for i := range 3 {
		if a := try("alice", fmt.Sprintf("wrong-%d-0123456789", i)); a.status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d", i, a.status)
		}
	}
	for _, tc := range []struct{ name, token string }{{"alice", aliceToken}, {"bob", operatorToken}} {
		a := try(tc.name, tc.token)
		if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "60" || !strings.Contains(a.body, "Try again in 60 s") {
			t.Fatalf("%s after 3 failures: %d %q", tc.name, a.status, a.header.Get("Retry-After"))
		}
	}
	now = now.Add(time.Minute) // one attempt back
	if a := try("alice", aliceToken); a.status != http.StatusSeeOther {
		t.Fatalf("after the wait: %d %s", a.status, a.body)
	}
}

// TestThrottleKeys: failures count per name (any case) and per address
// (an IPv6 client by its /64), each on its own.
func TestThrottleKeys(t *testing.T) {
	th := newThrottle(2, time.Minute)
	req := func(addr string) *http.Request { return &http.Request{RemoteAddr: addr} }
	th.fail(signinKeys(req("10.0.0.1:1000"), "Alice")...)
	th.fail(signinKeys(req("10.0.0.2:1000"), "alice")...)
	if th.wait(signinKeys(req("10.0.0.3:1"), "ALICE")...) <= 0 {
		t.Error("alice from a third address is not locked after two failures")
	}
	if th.wait(signinKeys(req("10.0.0.1:1"), "bob")...) > 0 {
		t.Error("one failure locked an address")
	}
	th.fail(signinKeys(req("[2001:db8::1]:1"), "")...)
	th.fail(signinKeys(req("[2001:db8::ffff]:1"), "")...)
	if th.wait(signinKeys(req("[2001:db8::2]:1"), "carol")...) <= 0 {
		t.Error("the same /64 is not one address")
	}
}

// TestIdentityHeader: a proxy in APPROVAL_IDENTITY_PROXIES vouches for an
// operator by the identity header; from any other address the header
// signs nobody in.
func TestIdentityHeader(t *testing.T) {
	for _, tc := range []struct {
		proxies string
		status  int
	}{{"127.0.0.0/8", http.StatusOK}, {"10.0.0.0/8", http.StatusSeeOther}} {
		s := newStack(t, Config{Identities: map[string]string{"dana": "dana@example.com"}, OperatorTenants: map[string]string{"dana": "acme"},
			IdentityHeader: "X-Forwarded-Email", IdentityProxies: []string{tc.proxies}})
		c := s.client()
		req, _ := http.NewRequest(http.MethodGet, s.url+"/approvals", nil)
		req.Header.Set("X-Forwarded-Email", "dana@example.com")
		a := c.do(req)
		if a.status != tc.status {
			t.Fatalf("proxies %s: %d", tc.proxies, a.status)
		}
		if tc.status == http.StatusOK && (!strings.Contains(a.body, "Signed in as <strong>dana</strong>") || c.get("/approvals").status != http.StatusOK) {
			t.Fatalf("proxies %s: not signed in as dana, or not kept", tc.proxies)
		}
		req, _ = http.NewRequest(http.MethodGet, s.url+"/approvals", nil)
		req.Header.Set("X-Forwarded-Email", "mallory@example.com")
		if a := s.client().do(req); a.status != http.StatusSeeOther {
			t.Fatalf("an identity without an account: %d", a.status)
		}
	}
}

// TestQueueAtVolume: with 1,000 pending the queue's page lists 50, the
// soonest deadline first, counts them all, pages through them, clamps the
// page size and stays small; the search finds one by text.
func TestQueueAtVolume(t *testing.T) {
	s := newStack(t, Config{})
	ctx := context.Background()
	timeouts := rand.Perm(1000)
	for i, m := range timeouts {
		if _, _, err := s.svc.Request(ctx, approval.NewApproval{TenantID: []string{"acme", "globex"}[i%2], SessionID: fmt.Sprint("s", i%7), CallID: fmt.Sprint("c", i),
			Action: fmt.Sprintf("action %d expiring in %d min", i, 10+m), Timeout: time.Duration(10+m) * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	soonest := 0
	for i, m := range timeouts {
		if m == 0 {
			soonest = i
		}
	}
	c := s.client()
	c.signIn("alice", operatorToken)
	list := c.get("/approvals")
	if n := strings.Count(list.body, `<li class="card pending">`); n != DefaultPageSize {
		t.Fatalf("%d on the first page, want %d", n, DefaultPageSize)
	}
	first := strings.Index(list.body, `<li class="card pending">`)
	if !strings.Contains(list.body[first:first+400], fmt.Sprintf("action %d expiring in 10 min", soonest)) {
		t.Fatalf("the first item is not the soonest-expiring: %.400s", list.body[first:])
	}
	if !strings.Contains(list.body, ">1000 pending<") || !strings.Contains(list.body, "Page 1 of 20") {
		t.Fatal("the queue does not count 1000 in 20 pages")
	}
	if len(list.body) > 64<<10 {
		t.Fatalf("the first page is %d bytes with 1000 pending, over 64 KiB", len(list.body))
	}
	last := c.get("/approvals?page=20")
	if n := strings.Count(last.body, `<li class="card pending">`); n != DefaultPageSize || !strings.Contains(last.body, "expiring in 1009 min") {
		t.Fatalf("page 20 holds %d, or not the latest deadline", n)
	}
	if big := c.get("/approvals?per=1000"); strings.Count(big.body, `<li class="card pending">`) != MaxPageSize || !strings.Contains(big.body, "per must be from 10 to 100") {
		t.Fatalf("per=1000 was not clamped to %d", MaxPageSize)
	}
	found := c.get("/approvals?q=" + url.QueryEscape(fmt.Sprintf("action %d expiring", timeouts[500]*0+500)))
	if n := strings.Count(found.body, `<li class="card pending">`); n != 1 || !strings.Contains(found.body, ">1 pending<") {
		t.Fatalf("search for one action found %d", n)
	}
	tenant := c.get("/approvals?tenant=globex&session=s3&per=100")
	if strings.Contains(tenant.body, "<dd>acme</dd>") || !strings.Contains(tenant.body, "<dd>globex</dd>") {
		t.Fatal("the tenant filter let another tenant through")
	}
}

// TestExpiredDuringDowntimeNotOffered: an approval past its expiry that no
// sweep has expired yet (the service just restarted) is shown expired,
// with no form, and left out of the pending queue.
func TestExpiredDuringDowntimeNotOffered(t *testing.T) {
	s := newStackSweeping(t, Config{}, time.Hour)
	a, _, err := s.svc.Request(context.Background(), approval.NewApproval{TenantID: "acme", SessionID: "s", CallID: "c", Origin: approval.OriginJob, Action: "Reboot the gateway", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := s.client()
	c.signIn("alice", operatorToken)
	time.Sleep(1100 * time.Millisecond)
	if list := c.get("/approvals"); strings.Contains(list.body, `<li class="card pending">`) || !strings.Contains(list.body, ">0 pending<") {
		t.Fatal("the queue offers an approval past its expiry")
	}
	d := c.get("/approval/" + a.ID)
	if strings.Contains(d.body, `id="approve"`) || !strings.Contains(d.body, `id="status">expired<`) {
		t.Fatalf("the detail view offers the form of an expired approval")
	}
}

// TestAuditExport: the CSV export holds every selected decision, with a
// comment a spreadsheet would run as a formula defused.
func TestAuditExport(t *testing.T) {
	s := newStack(t, scoped())
	ctx := context.Background()
	for i, tenant := range []string{"acme", "globex"} {
		a, _, _ := s.svc.Request(ctx, approval.NewApproval{TenantID: tenant, SessionID: "s", CallID: fmt.Sprint("c", i), Origin: approval.OriginJob, Action: "x", Timeout: time.Hour})
		if _, err := s.svc.Decide(ctx, a.ID, approval.Approved, "carol", `=HYPERLINK("http://evil","x")`); err != nil {
			t.Fatal(err)
		}
	}
	c := s.client()
	c.signIn("", carolToken)
	a := c.get("/operator/audit.csv?tenant=globex")
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "text/csv; charset=utf-8" || !strings.Contains(a.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("export: %d %v", a.status, a.header)
	}
	rows, err := csv.NewReader(strings.NewReader(a.body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0][3] != "tenant_id" || rows[1][3] != "globex" || rows[1][2] != "carol" || rows[1][7] != `'=HYPERLINK("http://evil","x")` {
		t.Fatalf("export rows %q", rows)
	}
}
