package e2e

import (
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/brain-tools/suite/services/local/internal/browser"
)

// TestReplicasAnswerOnTheOtherPage: two real local processes on one
// PostgreSQL database. brain asks for an approval through replica a; an
// operator watching replica b's page in chromium sees it appear without a
// reload, opens it and approves it there, and brain's call through a
// finishes with that answer. Then two operators answer one approval at the
// same moment, one on each replica: one wins, the other gets 409.
func TestReplicasAnswerOnTheOtherPage(t *testing.T) {
	url := pg.NewDatabase(t)
	a := startLocal(t, map[string]string{"APPROVAL_DATABASE_URL": url})
	b := startLocal(t, map[string]string{"APPROVAL_DATABASE_URL": url})
	br := startBrain(t, a)
	ctx := browser.New(t, 90*time.Second)
	run := func(steps ...step) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	run(
		chromedp.Navigate(b.url+"/approvals"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#name"), "bea"),
		chromedp.KeyEvent(kb.Tab),
		chromedp.KeyEvent(operatorToken),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#pending")),
		chromedp.Evaluate[chromedp.Void](`window.__sameDocument = 11`),
		chromedp.WaitVisible(`//span[@id="live-state" and text()="live"]`),
	)

	sess := br.session("request_approval")
	evs := br.events(sess)
	c := br.call(sess, "request_approval", map[string]any{"action": "Fail over the orders database", "details": "patronictl failover orders", "timeout_seconds": 300}, 0)
	p := progressOf(t, next(t, evs, "tool.progress", 10*time.Second))
	if !strings.HasPrefix(p.URL, a.url+"/approval/") {
		t.Fatalf("progress url %q: want replica a's page", p.URL)
	}

	// On replica b's page, live: the list learns of it from a.
	run(chromedp.WaitVisible(chromedp.CSS(`a[data-id="` + p.ApprovalID + `"]`)))
	if v, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__sameDocument`)); err != nil || v != 11 {
		t.Fatalf("the list page reloaded (marker %d, %v)", v, err)
	}
	run(
		chromedp.Focus(chromedp.CSS(`a[data-id="`+p.ApprovalID+`"]`)),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.SendKeys(chromedp.CSS("#comment"), "Answered on replica b."),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#outcome")),
	)
	browser.Screenshot(t, ctx, "replica-b-decided-desktop", browser.Desktop)

	d, r := resultOf(t, next(t, evs, "tool.result", 15*time.Second))
	sc, _ := r["structured_content"].(map[string]any)
	if d.Status != "succeeded" || sc["operator"] != "bea" || sc["comment"] != "Answered on replica b." {
		t.Fatalf("the call through replica a: %+v %v", d, sc)
	}
	if final := br.getCall(c.ID, 5); final.Status != "succeeded" {
		t.Fatalf("ToolCall %+v", final)
	}

	// Two answers at once, one per replica: one winner, one 409.
	for round := range 5 {
		br.call(sess, "request_approval", map[string]any{"action": "Drop the staging schema", "timeout_seconds": 300}, 0)
		id := progressOf(t, next(t, evs, "tool.progress", 10*time.Second)).ApprovalID
		ops := []*operator{signIn(t, a.url, "ann"), signIn(t, b.url, "ben")}
		codes := make([]int, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, o := range ops {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				codes[i], errs[i] = o.tryDecide(id, []string{"approve", "deny"}[i], "")
			}()
		}
		close(start)
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		got := append([]int(nil), codes...)
		sort.Ints(got)
		if got[0] != http.StatusOK || got[1] != http.StatusConflict {
			t.Fatalf("round %d: answers on a and b: %v, want one 200 (after the 303) and one 409", round, codes)
		}
		winner := "ann"
		if codes[1] == http.StatusOK {
			winner = "ben"
		}
		_, r := resultOf(t, next(t, evs, "tool.result", 15*time.Second))
		if sc, _ := r["structured_content"].(map[string]any); sc["operator"] != winner {
			t.Fatalf("round %d: result %v, want the winner %s's answer", round, sc, winner)
		}
	}
}
