package operator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/brain-tools/suite/services/local/internal/approval"
	"github.com/brain-tools/suite/services/local/internal/browser"
)

// TestBrowserTenantScopedOperator: alice, an operator of tenant acme, in
// chromium at desktop and phone sizes: globex's approvals never show in
// her list, not even when one arrives live; globex's detail view is "not
// found"; a decision POSTed from her page with a forged globex ID is
// refused and decides nothing; acme's arrive live and she answers them.
func TestBrowserTenantScopedOperator(t *testing.T) {
	s := newStack(t, scoped())
	ctx := browser.New(t, 90*time.Second)
	mine := s.requestApprovalIn("acme", "a1", map[string]any{"action": "Rotate the acme signing key", "details": "kubectl -n acme rollout restart deploy/signer", "timeout_seconds": 900})
	s.requestApprovalIn("acme", "a2", map[string]any{"action": "Scale acme workers to 12", "timeout_seconds": 300})
	theirs := s.requestApprovalIn("globex", "g1", map[string]any{"action": "Wire 40,000 EUR from the globex treasury", "timeout_seconds": 600})

	browserSignIn(t, ctx, s, "", aliceToken)
	run(t, ctx, chromedp.WaitVisible(`//span[@id="live-state" and text()="live"]`))
	if got := text(t, ctx, "#pending-count"); got != "2 pending" {
		t.Fatalf("alice's count %q, want her 2", got)
	}
	if n := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('a[data-id="`+theirs.ID+`"]').length`)); n != 0 {
		t.Fatal("globex's approval is in alice's list")
	}
	if got := text(t, ctx, "#scope"); got != "(tenant acme)" {
		t.Fatalf("scope shown %q", got)
	}
	browser.Screenshot(t, ctx, "scoped-list-desktop", browser.Desktop)
	browser.Screenshot(t, ctx, "scoped-list-phone", browser.Phone)

	// Live: a globex request changes nothing on her page; an acme one
	// appears without a reload.
	run(t, ctx, eval(`window.__sameDocument = 1`))
	late := s.requestApprovalIn("globex", "g2", map[string]any{"action": "Delete the globex audit bucket"})
	time.Sleep(time.Second)
	if n := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('a[data-id="`+late.ID+`"]').length`)); n != 0 || text(t, ctx, "#pending-count") != "2 pending" {
		t.Fatal("a globex request reached alice's live list")
	}
	arrived := s.requestApprovalIn("acme", "a3", map[string]any{"action": "Restart acme billing"})
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`a[data-id="`+arrived.ID+`"]`)))
	if get(t, ctx, chromedp.Evaluate[int](`window.__sameDocument`)) != 1 || text(t, ctx, "#pending-count") != "3 pending" {
		t.Fatal("acme's request did not arrive live")
	}

	// A forged POST from her own page, with her own CSRF token.
	status := get(t, ctx, chromedp.Evaluate[int](`fetch("/approval/`+theirs.ID+`/decision", {method: "POST", credentials: "same-origin",
		body: new URLSearchParams({csrf: document.querySelector('form.signout input[name="csrf"]').value, decision: "approve"})}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if status != 404 {
		t.Fatalf("forged decision: HTTP %d, want 404", status)
	}
	if a, _ := s.svc.Store().Get(context.Background(), theirs.ID); a.Status != approval.Pending {
		t.Fatalf("the forged POST decided globex's approval: %s", a.Status)
	}
	run(t, ctx, chromedp.Navigate(theirs.URL), chromedp.WaitVisible(chromedp.CSS("h1")))
	if got := text(t, ctx, "h1"); got != "Not found" {
		t.Fatalf("globex's detail for alice: %q", got)
	}
	browser.Screenshot(t, ctx, "scoped-other-tenant-phone", browser.Phone)

	// Her own she answers, on the phone.
	run(t, ctx,
		chromedp.EmulateViewport(browser.Phone[0], browser.Phone[1]),
		chromedp.Navigate(mine.URL), chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS("#outcome")))
	assertNoHorizontalScroll(t, ctx)
	if r := mine.wait(t); r.IsError || !strings.Contains(r.Content[0].Text, "Approved by operator alice") {
		t.Fatalf("result %+v", r)
	}
}

// TestBrowserExactDisplay: an action with a right-to-left override and
// details with a zero-width space and a look-alike letter are shown with
// each hidden character as a visible, marked code point: "exe.pdf" reads
// "exe.pdf", not "pdf.exe"; the detail view says hidden characters are
// present and the list flags the item.
func TestBrowserExactDisplay(t *testing.T) {
	s := newStack(t, Config{})
	ctx := browser.New(t, 60*time.Second)
	p := s.requestApproval("c-rtl", map[string]any{
		"action":  "Pay invoice \u202Eexe.pdf\u202C now",
		"details": "Send to acc\u200Bount 4411 at p\u0430ypal.com\nrm -rf /srv/re\u200Dports",
	})
	browserSignIn(t, ctx, s, "alice", operatorToken)
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`a[data-id="`+p.ID+`"]`)))
	if got := text(t, ctx, ".hidden-chars"); got != "hidden or look-alike characters" {
		t.Fatalf("list flag %q", got)
	}
	browser.Screenshot(t, ctx, "exact-list-phone", browser.Phone)
	run(t, ctx, chromedp.EmulateViewport(browser.Desktop[0], browser.Desktop[1]), chromedp.Navigate(p.URL), chromedp.WaitVisible(chromedp.CSS("#marks")))
	if got := text(t, ctx, "#marks"); !strings.Contains(got, "2 bidi controls, 2 invisible, 1 look-alike") {
		t.Fatalf("marks %q", got)
	}
	action := get(t, ctx, chromedp.Evaluate[string](`document.querySelector("#action").innerText`))
	if action != "Pay invoice U+202E RLOexe.pdfU+202C PDF now" {
		t.Fatalf("action reads %q", action)
	}
	details := get(t, ctx, chromedp.Evaluate[string](`document.querySelector("#details").innerText`))
	if !strings.Contains(details, "accU+200B ZWSPount") || !strings.Contains(details, "reU+200D ZWJports") || !strings.Contains(details, "pаU+0430ypal.com") {
		t.Fatalf("details read %q", details)
	}
	// Nothing on the page can reorder or hide text any more.
	if hidden := get(t, ctx, chromedp.Evaluate[bool](`/[\u202A-\u202E\u2066-\u2069\u200B-\u200F]/.test(document.body.innerText)`)); hidden {
		t.Fatal("a bidi control or zero-width character is still in the page's text")
	}
	// The marked "exe.pdf" is drawn left to right: e before p.
	order := get(t, ctx, chromedp.Evaluate[bool](`(() => {
		const pre = document.querySelector("#action"), r = document.createRange(), t = [...pre.childNodes].find(n => n.nodeType === 3 && n.textContent.includes("exe.pdf"));
		const i = t.textContent.indexOf("exe.pdf");
		r.setStart(t, i); r.setEnd(t, i + 1); const e = r.getBoundingClientRect().left;
		r.setStart(t, i + 4); r.setEnd(t, i + 5); const p = r.getBoundingClientRect().left;
		return e < p; })()`))
	if !order {
		t.Fatal(`"exe.pdf" is drawn right to left`)
	}
	if got := text(t, ctx, "#hash"); got != approval.HashDetails("Pay invoice \u202Eexe.pdf\u202C now", "Send to acc\u200Bount 4411 at p\u0430ypal.com\nrm -rf /srv/re\u200Dports") {
		t.Fatalf("hash shown %q is not of the bytes sent", got)
	}
	browser.Screenshot(t, ctx, "exact-detail-desktop", browser.Desktop)
	browser.Screenshot(t, ctx, "exact-detail-phone", browser.Phone)
	assertNoHorizontalScroll(t, ctx)
}

// TestBrowserQueueAtVolume: with 1,000 pending, the queue in chromium
// lists the soonest-expiring first, one bounded page at a time, and the
// search finds one approval by a word of its details; the page's height
// is stated (it was 44,000 px for 200 pending).
func TestBrowserQueueAtVolume(t *testing.T) {
	s := newStack(t, Config{})
	ctx := browser.New(t, 90*time.Second)
	perm := rand.Perm(1000)
	soonest := ""
	for i, m := range perm {
		a, _, err := s.svc.Request(context.Background(), approval.NewApproval{TenantID: []string{"acme", "globex", "initech"}[i%3], SessionID: fmt.Sprintf("sess-%02d", i%40),
			CallID: fmt.Sprint("c", i), Origin: approval.OriginJob, Action: fmt.Sprintf("Deploy build %d to production", 4000+i),
			Details: fmt.Sprintf("ticket OPS-%d", 9000+i), Timeout: time.Duration(20+m) * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if m == 0 {
			soonest = a.ID
		}
	}
	browserSignIn(t, ctx, s, "alice", operatorToken)
	run(t, ctx, chromedp.WaitVisible(`//span[@id="live-state" and text()="live"]`))
	if got := get(t, ctx, chromedp.Evaluate[string](`document.querySelector("#pending a.action").dataset.id`)); got != soonest {
		t.Fatalf("first listed %s, want the soonest-expiring %s", got, soonest)
	}
	if got := text(t, ctx, "#pending-count"); got != "1000 pending" {
		t.Fatalf("count %q", got)
	}
	if n := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#pending > li").length`)); n != DefaultPageSize {
		t.Fatalf("%d listed on one page", n)
	}
	for _, size := range [][2]int64{browser.Desktop, browser.Phone} {
		run(t, ctx, chromedp.EmulateViewport(size[0], size[1]), chromedp.Sleep(150*time.Millisecond))
		h := get(t, ctx, chromedp.Evaluate[int](`document.documentElement.scrollHeight`))
		t.Logf("queue page with 1000 pending at %dx%d: %d px tall", size[0], size[1], h)
		if h > 20000 {
			t.Errorf("the page is %d px tall at %dx%d", h, size[0], size[1])
		}
	}
	browser.Screenshot(t, ctx, "queue-1000-desktop", browser.Desktop)
	browser.Screenshot(t, ctx, "queue-1000-phone", browser.Phone)
	assertNoHorizontalScroll(t, ctx)

	// Search by a word of the details, from the phone, by keyboard.
	target := 617
	run(t, ctx,
		chromedp.Focus(chromedp.CSS("#q")),
		chromedp.KeyEvent(fmt.Sprintf("OPS-%d", 9000+target)),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(`//span[@id="pending-count" and text()="1 pending"]`),
	)
	if got := text(t, ctx, "#pending a.action"); got != fmt.Sprintf("Deploy build %d to production", 4000+target) {
		t.Fatalf("search found %q", got)
	}
	browser.Screenshot(t, ctx, "queue-search-phone", browser.Phone)

	// Filter by tenant and page on: every item is initech's.
	run(t, ctx, chromedp.EmulateViewport(browser.Desktop[0], browser.Desktop[1]), chromedp.Navigate(s.url+"/approvals?tenant=initech&page=2"), chromedp.WaitVisible(chromedp.CSS("#pager")))
	if other := get(t, ctx, chromedp.Evaluate[int](`[...document.querySelectorAll("#pending dl.meta div:first-child dd")].filter(d => d.textContent !== "initech").length`)); other != 0 {
		t.Fatalf("%d items of other tenants under tenant=initech", other)
	}
}

// TestBrowserAuditLog: an admin reads the audit log, filtered by tenant,
// with its export link; the page fits a phone.
func TestBrowserAuditLog(t *testing.T) {
	s := newStack(t, scoped())
	ctx := browser.New(t, 60*time.Second)
	bg := context.Background()
	for i, d := range []struct {
		tenant, who, comment string
		status               approval.Status
	}{
		{"acme", "alice", "checked the backup first", approval.Approved},
		{"globex", "carol", "not during the batch run", approval.Denied},
		{"acme", "carol", "", approval.Approved},
	} {
		a, _, _ := s.svc.Request(bg, approval.NewApproval{TenantID: d.tenant, SessionID: "s", CallID: fmt.Sprint("c", i), Origin: approval.OriginJob, Action: fmt.Sprint("action ", i), Timeout: time.Hour})
		if _, err := s.svc.Decide(bg, a.ID, d.status, d.who, d.comment); err != nil {
			t.Fatal(err)
		}
	}
	browserSignIn(t, ctx, s, "", carolToken)
	run(t, ctx, chromedp.Click(chromedp.CSS("#audit-link")), chromedp.WaitVisible(chromedp.CSS("#audit")))
	if n := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#audit tbody tr").length`)); n != 3 {
		t.Fatalf("%d audit rows", n)
	}
	browser.Screenshot(t, ctx, "audit-desktop", browser.Desktop)
	browser.Screenshot(t, ctx, "audit-phone", browser.Phone)
	assertNoHorizontalScroll(t, ctx)
	run(t, ctx, chromedp.EmulateViewport(browser.Desktop[0], browser.Desktop[1]), chromedp.SendKeys(chromedp.CSS("#tenant"), "globex"), chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(`//a[@id="export" and contains(text(), "1 rows")]`))
	if got := text(t, ctx, "#audit tbody tr td:nth-child(2)"); got != "carol" {
		t.Fatalf("globex's row by %q", got)
	}
}
