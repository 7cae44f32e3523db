package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/brain-tools/suite/services/local/internal/approval"
	"github.com/brain-tools/suite/services/local/internal/browser"
)

// These tests drive the operator page in Debian's chromium as an operator
// would: by keyboard where it matters, at desktop and phone widths.

type step = chromedp.Action[chromedp.Void]

// run takes steps in order, each within stepTimeout; on a failure it
// names the step and shows where the page was, so a step that never
// completes says which one and what the operator would have seen.
func run(t *testing.T, ctx context.Context, steps ...step) {
	t.Helper()
	for i, s := range steps {
		sctx, cancel := context.WithTimeout(ctx, stepTimeout)
		err := chromedp.Do(sctx, s)
		cancel()
		if err != nil {
			t.Fatalf("step %d of %d (%T): %v\n%s", i+1, len(steps), s, err, pageState(ctx))
		}
	}
}

// stepTimeout bounds one browser step, well inside a test's whole session.
const stepTimeout = 20 * time.Second

// pageState is the page's address, live state and visible text, for a
// failure message; empty when the browser no longer answers.
func pageState(ctx context.Context) string {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Evaluate[string](`location.href + "\nlive-state: " + ((document.getElementById("live-state") || {}).textContent || "") + "\n" + document.body.innerText.slice(0, 2000)`))
	if err != nil {
		return "page state unavailable: " + err.Error()
	}
	return s
}

func get[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return strings.TrimSpace(get(t, ctx, chromedp.TextContent(chromedp.CSS(sel))))
}

func eval(js string) step { return chromedp.Evaluate[chromedp.Void](js) }

// browserSignIn signs in through the form, by keyboard: type the name, tab
// to the token, Enter submits.
func browserSignIn(t *testing.T, ctx context.Context, s *stack, name, token string) {
	t.Helper()
	run(t, ctx,
		chromedp.Navigate(s.url+"/approvals"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#name"), name),
		chromedp.KeyEvent(kb.Tab),
		chromedp.KeyEvent(token),
		chromedp.KeyEvent(kb.Enter),
		// Signed in (the list) or refused (the form again, with an alert).
		chromedp.WaitVisible(chromedp.CSS("#pending, .alert.error")),
	)
}

func TestBrowserLiveListApproveWithComment(t *testing.T) {
	s := newStack(t, Config{})
	ctx := browser.New(t, 90*time.Second)

	run(t, ctx, chromedp.Navigate(s.url+"/operator/signin"), chromedp.WaitVisible(chromedp.CSS("#token")))
	browser.Screenshot(t, ctx, "signin-phone", browser.Phone)
	run(t, ctx, chromedp.EmulateViewport(browser.Desktop[0], browser.Desktop[1]))
	browserSignIn(t, ctx, s, "alice", operatorToken)
	run(t, ctx,
		chromedp.WaitVisible(chromedp.CSS("#pending")),
		// A marker that a reload would wipe out.
		eval(`window.__sameDocument = 42`),
		chromedp.WaitVisible(`//span[@id="live-state" and text()="live"]`),
	)
	if got := text(t, ctx, "#pending-count"); got != "0 pending" {
		t.Fatalf("count %q", got)
	}

	// Requests arrive while the page is open; they appear without reload.
	s.requestApproval("call-7", map[string]any{"action": "Rotate the API signing key", "details": "kubectl -n prod rollout restart deploy/signer", "timeout_seconds": 900})
	p := s.requestApproval("call-8", map[string]any{
		"action":          "Delete 14 files in /srv/reports/2025",
		"details":         "rm -v /srv/reports/2025/*.csv\n\nThe files are older than the 90-day retention period.\nBackups: s3://backups/reports/2025 (verified 2026-01-02).",
		"timeout_seconds": 600,
	})
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`a[data-id="`+p.ID+`"]`)))
	if marker := get(t, ctx, chromedp.Evaluate[int](`window.__sameDocument`)); marker != 42 {
		t.Fatal("the page reloaded; the list must update in place")
	}
	if got := text(t, ctx, "#pending-count"); got != "2 pending" {
		t.Fatalf("count %q", got)
	}
	browser.Screenshot(t, ctx, "list-desktop", browser.Desktop)
	browser.Screenshot(t, ctx, "list-phone", browser.Phone)
	assertNoHorizontalScroll(t, ctx)

	// Keyboard: focus the request's link, Enter opens the detail view.
	run(t, ctx,
		chromedp.EmulateViewport(browser.Desktop[0], browser.Desktop[1]),
		chromedp.Focus(chromedp.CSS(`a[data-id="`+p.ID+`"]`)),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
	)
	for sel, want := range map[string]string{
		"#action":  "Delete 14 files in /srv/reports/2025",
		"#details": "rm -v /srv/reports/2025/*.csv\n\nThe files are older than the 90-day retention period.",
		"#tenant":  "acme",
		"#session": "sess-1",
		"#call":    "call-8",
		"#status":  "pending",
	} {
		if got := text(t, ctx, sel); !strings.Contains(got, want) {
			t.Errorf("%s = %q, want %q", sel, got, want)
		}
	}
	for _, sel := range []string{"#requested", "#expires"} {
		if got := text(t, ctx, sel); !strings.HasSuffix(got, "UTC") {
			t.Errorf("%s = %q", sel, got)
		}
	}
	browser.Screenshot(t, ctx, "detail-desktop", browser.Desktop)
	browser.Screenshot(t, ctx, "detail-phone", browser.Phone)
	assertNoHorizontalScroll(t, ctx)

	// Comment, then Tab lands on Approve and Enter sends it.
	run(t, ctx,
		chromedp.Focus(chromedp.CSS("#comment")),
		chromedp.KeyEvent("Checked the backup listing first."),
		chromedp.KeyEvent(kb.Tab),
	)
	if focused := get(t, ctx, chromedp.Evaluate[string](`document.activeElement.id`)); focused != "approve" {
		t.Fatalf("Tab from the comment focused %q, want approve", focused)
	}
	run(t, ctx, chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(chromedp.CSS("#outcome")))
	if got := text(t, ctx, "#status"); got != "approved" {
		t.Fatalf("status after approve %q", got)
	}
	browser.Screenshot(t, ctx, "decided-phone", browser.Phone)
	run(t, ctx, chromedp.Navigate(s.url+"/approvals"), chromedp.WaitVisible(chromedp.CSS("#decided")))
	if got := text(t, ctx, "#pending-count"); got != "1 pending" {
		t.Fatalf("count after the decision %q", got)
	}
	browser.Screenshot(t, ctx, "list-with-decided-desktop", browser.Desktop)

	res := p.wait(t)
	if res.IsError || !strings.Contains(res.Content[0].Text, "Approved by operator alice") || !strings.Contains(res.Content[0].Text, "Checked the backup listing first.") {
		t.Fatalf("tool result %+v", res)
	}
}

func TestBrowserDeny(t *testing.T) {
	s := newStack(t, Config{})
	ctx := browser.New(t, 60*time.Second)
	browserSignIn(t, ctx, s, "bob", operatorToken)
	p := s.requestApproval("c-deny", map[string]any{"action": "Open port 22 to 0.0.0.0/0"})
	run(t, ctx,
		chromedp.WaitVisible(chromedp.CSS(`a[data-id="`+p.ID+`"]`)),
		chromedp.Click(chromedp.CSS(`a[data-id="`+p.ID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#deny")),
		chromedp.SendKeys(chromedp.CSS("#comment"), "Use the bastion host instead."),
		chromedp.Click(chromedp.CSS("#deny")),
		chromedp.WaitVisible(chromedp.CSS("#outcome")),
	)
	if got := text(t, ctx, "#status"); got != "denied" {
		t.Fatalf("status %q", got)
	}
	res := p.wait(t)
	if !res.IsError || !strings.Contains(res.Content[0].Text, "Denied by operator bob") || !strings.Contains(res.Content[0].Text, "Use the bastion host instead.") {
		t.Fatalf("tool result %+v", res)
	}
}

// TestBrowserLiveListLeavesEqualRowsAlone: a change the filtered list
// does not show still wakes the page, and the page must not swap its rows
// for equal ones (a click in progress would land on a node that is gone),
// while a change it does show still appears.
func TestBrowserLiveListLeavesEqualRowsAlone(t *testing.T) {
	s := newStack(t, Config{})
	ctx := browser.New(t, 60*time.Second)
	// Count the list fetches the page has finished handling: the counter
	// moves in a setTimeout, after the promise chain that swaps the rows.
	// Installed before any page script, so the first fetch counts too.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.__handled = 0;
		(function () {
			var f = window.fetch;
			window.fetch = function (u) {
				return f.apply(this, arguments).then(function (r) {
					if (String(u).indexOf("/approvals/rows") !== 0) { return r; }
					var text = r.text.bind(r);
					r.text = function () { return text().then(function (t) { setTimeout(function () { window.__handled++; }, 0); return t; }); };
					return r;
				});
			};
		})();`}); err != nil {
		t.Fatal(err)
	}
	handled := func(n int) step {
		return chromedp.Poll[chromedp.Void](fmt.Sprintf("window.__handled >= %d", n), chromedp.WithPollingInterval(20*time.Millisecond))
	}
	browserSignIn(t, ctx, s, "alice", operatorToken)
	a := s.requestApproval("c-rotate", map[string]any{"action": "Rotate the signing key"})
	run(t, ctx,
		chromedp.Navigate(s.url+"/approvals?q=Rotate"),
		chromedp.WaitVisible(chromedp.CSS(`a[data-id="`+a.ID+`"]`)),
		// The server rendered this row; the "changed" the live stream
		// sends as it opens fetches equal rows, which must not replace it.
		eval(`document.querySelector('a[data-id="`+a.ID+`"]').__mark = 1`),
		handled(1),
	)
	before := get(t, ctx, chromedp.Evaluate[int](`window.__handled`))
	// Another approval of the tenant wakes the page; the filter hides it.
	s.requestApproval("c-other", map[string]any{"action": "Delete the reports"})
	run(t, ctx, handled(before+1))
	if got := get(t, ctx, chromedp.Evaluate[int](`document.querySelector('a[data-id="`+a.ID+`"]').__mark || 0`)); got != 1 {
		t.Fatal("the page swapped its rows for equal ones")
	}
	b := s.requestApproval("c-rotate-2", map[string]any{"action": "Rotate the backup key"})
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS(`a[data-id="`+b.ID+`"]`)))
	if got := text(t, ctx, "#pending-count"); got != "2 pending" {
		t.Fatalf("count %q", got)
	}
}

func TestBrowserExpiredAndAlreadyDecided(t *testing.T) {
	s := newStack(t, Config{})
	ctx := browser.New(t, 60*time.Second)
	browserSignIn(t, ctx, s, "alice", operatorToken)

	// Already decided: another operator answers while this page is open.
	p := s.requestApproval("c-race", map[string]any{"action": "Restart billing"})
	run(t, ctx, chromedp.Navigate(p.URL), chromedp.WaitVisible(chromedp.CSS("#approve")))
	if _, err := s.svc.Decide(context.Background(), p.ID, approval.Denied, "bob", "not during the batch run"); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := text(t, ctx, "#error"); !strings.Contains(got, "Already decided: this request was denied by bob") {
		t.Fatalf("error %q", got)
	}
	if got := text(t, ctx, "#status"); got != "denied" {
		t.Fatalf("status shown %q, want the first answer", got)
	}
	browser.Screenshot(t, ctx, "already-decided-desktop", browser.Desktop)

	// Expired: the page still shows the form, the answer comes too late.
	e := s.requestApproval("c-exp", map[string]any{"action": "Scale down the cluster", "timeout_seconds": 1})
	run(t, ctx, chromedp.Navigate(e.URL), chromedp.WaitVisible(chromedp.CSS("#approve")))
	if r := e.wait(t); !r.IsError || !strings.Contains(r.Content[0].Text, "Expired") {
		t.Fatalf("expiry result %+v", r)
	}
	run(t, ctx, chromedp.Click(chromedp.CSS("#approve")), chromedp.WaitVisible(chromedp.CSS("#error")))
	if got := text(t, ctx, "#error"); !strings.Contains(got, "expired at") || !strings.Contains(got, "can no longer be answered") {
		t.Fatalf("error %q", got)
	}
	if got := text(t, ctx, "#status"); got != "expired" {
		t.Fatalf("status %q", got)
	}
}

func TestBrowserRefusals(t *testing.T) {
	s := newStack(t, Config{})
	ctx := browser.New(t, 60*time.Second)

	// A wrong operator token is refused and signs nobody in.
	browserSignIn(t, ctx, s, "mallory", "not-the-operator-token")
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS(".alert.error")))
	if got := text(t, ctx, ".alert.error"); got != "Wrong operator token." {
		t.Fatalf("wrong token message %q", got)
	}
	run(t, ctx, chromedp.Navigate(s.url+"/approvals"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if loc := get(t, ctx, chromedp.Location()); !strings.Contains(loc, "/operator/signin") {
		t.Fatalf("after a wrong token, /approvals went to %q", loc)
	}

	// A POST without the CSRF token is refused and decides nothing.
	browserSignIn(t, ctx, s, "alice", operatorToken)
	p := s.requestApproval("c-csrf", map[string]any{"action": "Wipe staging"})
	run(t, ctx,
		chromedp.Navigate(p.URL),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		eval(`document.querySelector('form.decide input[name="csrf"]').remove()`),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS(".alert.error")),
	)
	if got := text(t, ctx, ".alert.error"); !strings.Contains(got, "CSRF token is missing or wrong") {
		t.Fatalf("csrf message %q", got)
	}
	if a, _ := s.svc.Store().Get(context.Background(), p.ID); a.Status != approval.Pending {
		t.Fatalf("a POST without CSRF decided the approval: %s", a.Status)
	}
}

func TestBrowserDecisionWithoutJavaScript(t *testing.T) {
	s := newStack(t, Config{})
	ctx := browser.New(t, 60*time.Second)
	if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	browserSignIn(t, ctx, s, "alice", operatorToken)
	p := s.requestApproval("c-nojs", map[string]any{"action": "Merge release branch"})
	run(t, ctx,
		chromedp.Navigate(s.url+"/approvals"),
		chromedp.WaitVisible(chromedp.CSS(`a[data-id="`+p.ID+`"]`)),
		chromedp.Click(chromedp.CSS(`a[data-id="`+p.ID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.SendKeys(chromedp.CSS("#comment"), "ok without JS"),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#outcome")),
	)
	if res := p.wait(t); res.IsError || !strings.Contains(res.Content[0].Text, "ok without JS") {
		t.Fatalf("tool result %+v", res)
	}
}

// assertNoHorizontalScroll checks the page fits the viewport's width.
func assertNoHorizontalScroll(t *testing.T, ctx context.Context) {
	t.Helper()
	if fits := get(t, ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`)); !fits {
		t.Error("the page scrolls sideways at this width")
	}
}
