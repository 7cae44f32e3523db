package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/services/local/internal/approval"
	"github.com/brain-tools/suite/services/local/internal/browser"
	"github.com/brain-tools/suite/services/local/internal/inspect"
)

type step = chromedp.Action[chromedp.Void]

func progressOf(t *testing.T, e event) approval.Progress {
	t.Helper()
	var p approval.Progress
	if err := json.Unmarshal(e.Data, &p); err != nil {
		t.Fatalf("progress data %s: %v", e.Data, err)
	}
	return p
}

// resultData is the data of brain's tool.result event.
type resultData struct {
	Tool       string          `json:"tool"`
	Status     string          `json:"status"`
	ErrorCode  *string         `json:"error_code"`
	DurationMS int64           `json:"duration_ms"`
	Result     json.RawMessage `json:"result"`
}

func resultOf(t *testing.T, e event) (resultData, map[string]any) {
	t.Helper()
	var d resultData
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatalf("result data %s: %v", e.Data, err)
	}
	var r map[string]any
	json.Unmarshal(d.Result, &r)
	return d, r
}

// TestBrainApprovalApprovedInBrowser is the whole path: brain calls
// request_approval, brain's clients see tool.progress live, the operator
// watches the request appear in chromium without reloading, approves with
// a comment, and the tool call in brain finishes with the approval.
func TestBrainApprovalApprovedInBrowser(t *testing.T) {
	l := startLocal(t, nil)
	b := startBrain(t, l)
	ctx := browser.New(t, 90*time.Second)
	run := func(steps ...step) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatal(err)
		}
	}

	run(
		chromedp.Navigate(l.url+"/approvals"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#name"), "alice"),
		chromedp.KeyEvent(kb.Tab),
		chromedp.KeyEvent(operatorToken),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#pending")),
		chromedp.Evaluate[chromedp.Void](`window.__sameDocument = 7`),
		chromedp.WaitVisible(`//span[@id="live-state" and text()="live"]`),
	)

	sess := b.session("request_approval")
	evs := b.events(sess)
	c := b.call(sess, "request_approval", map[string]any{
		"action": "Restart the payments database", "details": "systemctl restart postgresql@14-main on db-2", "timeout_seconds": 300,
	}, 0)
	if c.Status == "succeeded" || c.Status == "failed" {
		t.Fatalf("call finished before anyone answered: %+v", c)
	}
	if e := next(t, evs, "tool.call", 10*time.Second); e.CallID != c.ID {
		t.Fatalf("tool.call for %s, want %s", e.CallID, c.ID)
	}
	pe := next(t, evs, "tool.progress", 10*time.Second)
	p := progressOf(t, pe)
	if pe.CallID != c.ID || p.Status != "waiting_for_operator" || !jobs.ValidID(p.ApprovalID) || p.URL != l.url+"/approval/"+p.ApprovalID {
		t.Fatalf("tool.progress %+v: %+v", pe, p)
	}

	// The request appears in the open list, no reload.
	run(chromedp.WaitVisible(chromedp.CSS(`a[data-id="` + p.ApprovalID + `"]`)))
	if v, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.__sameDocument`)); err != nil || v != 7 {
		t.Fatalf("the list page reloaded (marker %d, %v)", v, err)
	}
	run(
		chromedp.Click(chromedp.CSS(`a[data-id="`+p.ApprovalID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
		chromedp.SendKeys(chromedp.CSS("#comment"), "Go ahead, failover is ready."),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#outcome")),
	)

	re := next(t, evs, "tool.result", 15*time.Second)
	d, r := resultOf(t, re)
	if re.CallID != c.ID || d.Status != "succeeded" || d.ErrorCode != nil || r["is_error"] == true {
		t.Fatalf("tool.result %+v %s", d, d.Result)
	}
	sc, _ := r["structured_content"].(map[string]any)
	if sc["decision"] != "approved" || sc["operator"] != "alice" || sc["comment"] != "Go ahead, failover is ready." || sc["approval_id"] != p.ApprovalID {
		t.Fatalf("structured_content %v", sc)
	}
	final := b.getCall(c.ID, 10)
	if final.Status != "succeeded" || final.Result == nil || !strings.Contains(final.Result.Content[0].Text, "Approved by operator alice") {
		t.Fatalf("ToolCall %+v", final)
	}
}

// TestBrainDeniedAndExpired: a denial is a tool error with the operator's
// comment; an expiry is a tool error that says nobody decided.
func TestBrainDeniedAndExpired(t *testing.T) {
	l := startLocal(t, nil)
	b := startBrain(t, l)
	o := signIn(t, l.url, "bob")
	sess := b.session("request_approval")
	evs := b.events(sess)

	c := b.call(sess, "request_approval", map[string]any{"action": "Open port 22 to the world"}, 0)
	p := progressOf(t, next(t, evs, "tool.progress", 10*time.Second))
	if code := o.decide(p.ApprovalID, "deny", "Use the bastion."); code != http.StatusOK {
		t.Fatalf("deny: %d", code)
	}
	d, r := resultOf(t, next(t, evs, "tool.result", 15*time.Second))
	if d.Status != "failed" || d.ErrorCode == nil || *d.ErrorCode != "tool_error" || r["is_error"] != true || r["unknown_outcome"] == true {
		t.Fatalf("denied tool.result %+v %s", d, d.Result)
	}
	if got := b.getCall(c.ID, 5); !strings.Contains(got.Result.Content[0].Text, "Denied by operator bob") || !strings.Contains(got.Result.Content[0].Text, "Use the bastion.") {
		t.Fatalf("denied ToolCall %+v", got.Result)
	}

	c = b.call(sess, "request_approval", map[string]any{"action": "Scale to zero", "timeout_seconds": 1}, 0)
	next(t, evs, "tool.progress", 10*time.Second)
	d, _ = resultOf(t, next(t, evs, "tool.result", 15*time.Second))
	got := b.getCall(c.ID, 5)
	if d.Status != "failed" || !got.Result.IsError || !strings.Contains(got.Result.Content[0].Text, "Expired: no operator answered") || strings.Contains(got.Result.Content[0].Text, "Denied") {
		t.Fatalf("expired ToolCall %+v", got.Result)
	}
}

// TestBrainInterruptCancelsApproval: interrupting the session drops the
// stream, the approval is cancelled — at once with no grace, else once
// APPROVAL_REATTACH_GRACE passed with no stream back (brain does not send
// an interrupted call again) —, and the operator can no longer answer.
func TestBrainInterruptCancelsApproval(t *testing.T) {
	for _, grace := range []string{"0", "1s"} {
		t.Run("grace "+grace, func(t *testing.T) { testBrainInterruptCancelsApproval(t, grace) })
	}
}

func testBrainInterruptCancelsApproval(t *testing.T, grace string) {
	l := startLocal(t, map[string]string{"APPROVAL_REATTACH_GRACE": grace})
	b := startBrain(t, l)
	sess := b.session("request_approval")
	evs := b.events(sess)
	b.call(sess, "request_approval", map[string]any{"action": "Rebuild the search index"}, 0)
	p := progressOf(t, next(t, evs, "tool.progress", 10*time.Second))

	b.do(http.MethodPost, "/sessions/"+sess+"/interrupt", nil, nil)
	d, _ := resultOf(t, next(t, evs, "tool.result", 15*time.Second))
	if d.Status != "cancelled" {
		t.Fatalf("tool.result after interrupt %+v", d)
	}

	// The caller comes back in another session and asks.
	other := b.session("approval_status")
	st := b.call(other, "approval_status", map[string]any{"approval_id": p.ApprovalID, "wait_seconds": 10}, 30)
	var s map[string]any
	json.Unmarshal(st.Result.StructuredContent, &s)
	inner, _ := s["result"].(map[string]any)
	sc, _ := inner["structured_content"].(map[string]any)
	if s["state"] != "cancelled" || sc["decision"] != "cancelled" || sc["operator"] != approval.SystemOperator {
		t.Fatalf("approval_status after interrupt: %s", st.Result.StructuredContent)
	}
	o := signIn(t, l.url, "alice")
	if code := o.decide(p.ApprovalID, "approve", "too late"); code != http.StatusConflict {
		t.Fatalf("answer to a cancelled approval: %d, want 409", code)
	}
}

// TestBrainInspectSession runs inspect_session with the real inspection
// token brain issues.
func TestBrainInspectSession(t *testing.T) {
	l := startLocal(t, nil)
	b := startBrain(t, l)
	sess := b.session("echo", "inspect_session")
	for _, text := range []string{"one", "two"} {
		if c := b.call(sess, "echo", map[string]any{"text": text}, 10); c.Status != "succeeded" {
			t.Fatalf("echo: %+v", c)
		}
	}
	c := b.call(sess, "inspect_session", map[string]any{"last_n": 5}, 30)
	if c.Status != "succeeded" || c.Result == nil {
		t.Fatalf("inspect_session: %+v %v", c, c.ErrorMessage)
	}
	var s inspect.Summary
	if err := json.Unmarshal(c.Result.StructuredContent, &s); err != nil {
		t.Fatal(err)
	}
	if s.SessionID != sess || s.Counts["tool.call"] != 3 || s.Counts["tool.result"] != 2 || s.CallsTotal != 3 || len(s.Calls) != 3 {
		t.Fatalf("summary %+v", s)
	}
	for i, want := range []string{"echo", "echo", "inspect_session"} {
		got := s.Calls[i]
		if got.Tool != want {
			t.Fatalf("call %d = %+v, want %s", i, got, want)
		}
		if want == "echo" && (got.Status != "succeeded" || got.DurationMS == nil || got.FinishedAt == "") {
			t.Fatalf("echo call %+v", got)
		}
	}
	if s.Calls[2].Status != "running" || s.Calls[2].CallID != c.ID {
		t.Fatalf("own call %+v (id %s)", s.Calls[2], c.ID)
	}
	if !strings.Contains(c.Result.Content[0].Text, "3 tool calls, oldest first") {
		t.Fatalf("text %q", c.Result.Content[0].Text)
	}
	// The local service logs the call but never the token it carried. It
	// logs after it has answered, so the line may lag the answer a little.
	logs := l.p.Output()
	for deadline := time.Now().Add(5 * time.Second); len(readLines(logs, `"tool":"inspect_session"`)) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		logs = l.p.Output()
	}
	if len(readLines(logs, `"tool":"inspect_session"`)) == 0 {
		t.Fatalf("no log line for the call:\n%s", logs)
	}
	if strings.Contains(logs, "inspection_token") {
		t.Fatalf("the local service logged an inspection token field:\n%s", logs)
	}
}
