package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/local/internal/browser"
)

// counter is the tool an approval gate guards in these tests: a real tool
// service on loopback that counts the requests it gets for each call ID, so
// a test can tell a call was sent exactly once, or never.
type counter struct {
	*httptest.Server
	mu sync.Mutex
	n  map[string]int
}

func newCounter(t *testing.T) *counter {
	c := &counter{n: map[string]int{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+toolsKey {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var req tool.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.n[req.CallID]++
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(tool.TextResult("restarted with %s", req.Arguments))
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *counter) sent(callID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[callID]
}

// withWaitingTools adds to the local service's bindings: lookup_order, a
// function tool (output_schema {status}), lookup_fast, one that times out
// in 1 s, and restart_db, a tool of cnt gated by require_approval; the
// approvals object names request_approval with timeout seconds, or none
// with apiOnly.
func withWaitingTools(cnt *counter, timeout int, apiOnly bool) func(doc map[string]any) {
	return func(doc map[string]any) {
		fn := func(name string, extra map[string]any) map[string]any {
			b := map[string]any{"name": name, "description": "Look up an order.", "type": "function", "tenants": []string{tenant},
				"input_schema": map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}, "required": []string{"order_id"}}}
			for k, v := range extra {
				b[k] = v
			}
			return b
		}
		tools := doc["tools"].([]json.RawMessage)
		for _, b := range []map[string]any{
			fn("lookup_order", map[string]any{"output_schema": map[string]any{"type": "object",
				"properties": map[string]any{"status": map[string]any{"type": "string"}}, "required": []string{"status"}}}),
			fn("lookup_fast", map[string]any{"timeout_seconds": 1}),
			{"name": "restart_db", "description": "Restart a database.", "url": cnt.URL + "/tools/restart_db", "token_env": "BRAIN_TOOLS_KEY",
				"tenants": []string{tenant}, "require_approval": "always",
				"input_schema": map[string]any{"type": "object", "properties": map[string]any{"db": map[string]any{"type": "string"}}}},
		} {
			data, _ := json.Marshal(b)
			tools = append(tools, data)
		}
		doc["tools"] = tools
		approvals := map[string]any{"timeout_seconds": timeout}
		if !apiOnly {
			approvals["tool"] = "request_approval"
		}
		doc["approvals"] = approvals
	}
}

// refusal reads brain's error body.
func refusal(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("refusal %s: %v", body, err)
	}
	return e.Error.Code + ": " + e.Error.Message
}

// TestBrainFunctionTool, through the real brain and local processes: a
// function tool's call waits in requires_input until the application
// answers; a bad result is refused naming the field and the call still
// waits; a good one ends it; an answer after timeout_seconds is 409, and so
// is one after a cancel.
func TestBrainFunctionTool(t *testing.T) {
	l := startLocal(t, nil)
	b := startBrainWith(t, l, withWaitingTools(newCounter(t), 300, true))
	sess := b.session("lookup_order", "lookup_fast", "inspect_session")
	evs := b.events(sess)

	c := b.call(sess, "lookup_order", map[string]any{"order_id": "A-1042"}, 0)
	if c.Status != "requires_input" || c.Prompt == nil || !strings.Contains(*c.Prompt, `{"order_id":"A-1042"}`) || c.ResponseExpiresAt == nil {
		t.Fatalf("function call %+v", c)
	}
	next(t, evs, "tool.requires_input", 10*time.Second)
	for body, want := range map[string]string{
		`{"structured_content":{"status":5}}`:                          `invalid_request: structured_content: does not match tool lookup_order's output_schema: structured_content: at "/status"`,
		`{"content":[{"type":"text","text":"x"}],"isError":true}`:      `invalid_request: isError: unknown field`,
		`{"content":[{"type":"image","data":"AA==","mime_type":"x"}]}`: `invalid_request: content[0].mime_type: must be an image/* type`,
	} {
		if code, data := b.raw(http.MethodPost, "/tool_calls/"+c.ID+"/respond", body); code != 400 || !strings.Contains(refusal(t, data), want) {
			t.Errorf("respond %s: %d %s, want 400 %q", body, code, data, want)
		}
	}
	if got := b.getCall(c.ID, 0); got.Status != "requires_input" {
		t.Fatalf("after refused answers: %s", got.Status)
	}
	var done toolCall
	if code := b.do(http.MethodPost, "/tool_calls/"+c.ID+"/respond", map[string]any{
		"structured_content": map[string]any{"status": "shipped"}, "content": []map[string]string{{"type": "text", "text": "Shipped."}},
	}, &done); code != 200 || done.Status != "succeeded" || done.Result.Content[0].Text != "Shipped." {
		t.Fatalf("answer: %d %+v", code, done)
	}
	re := next(t, evs, "tool.responded", 10*time.Second)
	if !strings.Contains(string(re.Data), `"responder":{"type":"api","api_key":"BRAIN_API_KEY"}`) {
		t.Errorf("tool.responded %s", re.Data)
	}
	d, _ := resultOf(t, next(t, evs, "tool.result", 10*time.Second))
	if d.Status != "succeeded" {
		t.Errorf("tool.result %+v", d)
	}

	late := b.call(sess, "lookup_fast", map[string]any{"order_id": "B"}, 0)
	if got := b.getCall(late.ID, 5); got.Status != "timed_out" || got.UnknownOutcome != true {
		t.Fatalf("after timeout_seconds: %+v", got)
	}
	if code, data := b.raw(http.MethodPost, "/tool_calls/"+late.ID+"/respond", `{"content":[{"type":"text","text":"late"}]}`); code != 409 || !strings.Contains(refusal(t, data), "already timed_out") {
		t.Errorf("answer after the timeout: %d %s", code, data)
	}

	gone := b.call(sess, "lookup_order", map[string]any{"order_id": "C"}, 0)
	var cancelled toolCall
	if b.do(http.MethodPost, "/tool_calls/"+gone.ID+"/cancel", nil, &cancelled); cancelled.Status != "cancelled" {
		t.Fatalf("cancel while waiting: %+v", cancelled)
	}
	if code, data := b.raw(http.MethodPost, "/tool_calls/"+gone.ID+"/respond", `{"content":[{"type":"text","text":"late"}]}`); code != 409 || !strings.Contains(refusal(t, data), "already cancelled") {
		t.Errorf("answer after a cancel: %d %s", code, data)
	}

	// inspect_session, through the real inspection token, shows the wait
	// and the answer.
	insp := b.call(sess, "inspect_session", map[string]any{}, 30)
	if text := insp.Result.Content[0].Text; !strings.Contains(text, "tool.requires_input 3") || !strings.Contains(text, "tool.responded 1") ||
		!strings.Contains(text, "- lookup_order (call "+c.ID+"): succeeded, answered by api BRAIN_API_KEY") {
		t.Errorf("inspect_session:\n%s", text)
	}
}

// TestBrainApprovalGateThroughAPI: a gated call waits with a prompt showing
// its exact arguments; approved through the API the tool gets exactly one
// request, and the approval call brain made for the page is withdrawn (an
// operator answering it then gets 409 — at once with no
// APPROVAL_REATTACH_GRACE, else once the grace passed: to local, brain's
// cancelled call is a dropped stream); denied, the tool gets none and the
// result says who denied it and why. A session cannot loosen the gate.
func TestBrainApprovalGateThroughAPI(t *testing.T) {
	for _, grace := range []string{"0", "1s"} {
		t.Run("grace "+grace, func(t *testing.T) { testBrainApprovalGateThroughAPI(t, grace) })
	}
}

func testBrainApprovalGateThroughAPI(t *testing.T, grace string) {
	l := startLocal(t, map[string]string{"APPROVAL_REATTACH_GRACE": grace})
	cnt := newCounter(t)
	b := startBrainWith(t, l, withWaitingTools(cnt, 300, false))

	code, data := b.raw(http.MethodPost, "/sessions", map[string]any{"config": map[string]any{"tools": []string{"restart_db"}, "require_approval": map[string]any{"restart_db": "never"}}})
	if code != 400 || !strings.Contains(refusal(t, data), `config.require_approval.restart_db: "never" would loosen the binding's require_approval "always"`) {
		t.Errorf("loosening session: %d %s", code, data)
	}

	sess := b.session("restart_db")
	evs := b.events(sess)
	c := b.call(sess, "restart_db", json.RawMessage(`{"db":"payments-2"}`), 0)
	if c.Status != "requires_input" || c.Prompt == nil || !strings.Contains(*c.Prompt, `tool restart_db with these arguments? {"db":"payments-2"}`) {
		t.Fatalf("gated call %+v", c)
	}
	child := next(t, evs, "tool.call", 10*time.Second)
	for child.CallID == c.ID {
		child = next(t, evs, "tool.call", 10*time.Second)
	}
	p := progressOf(t, next(t, evs, "tool.progress", 10*time.Second))
	if cc := b.getCall(child.CallID, 0); cc.Tool != "request_approval" || cc.CallerType != "system" || cc.ParentID == nil || *cc.ParentID != c.ID {
		t.Fatalf("approval call %+v", cc)
	}
	var ok toolCall
	if code := b.do(http.MethodPost, "/tool_calls/"+c.ID+"/respond", map[string]any{"approved": true}, &ok); code != 202 && code != 200 {
		t.Fatalf("approve: %d", code)
	}
	if got := b.getCall(c.ID, 10); got.Status != "succeeded" || cnt.sent(c.ID) != 1 {
		t.Fatalf("approved call %+v; the tool got %d requests", got, cnt.sent(c.ID))
	}
	if cc := b.getCall(child.CallID, 10); cc.Status != "cancelled" {
		t.Errorf("the approval call after the answer through the API: %s", cc.Status)
	}
	o := signIn(t, l.url, "carol")
	if grace != "0" {
		eventually(t, 10*time.Second, "local withdrew the approval once the grace passed", func() bool {
			return slices.Equal(approvalsFor(t, o, "cancelled", c.ID), []string{p.ApprovalID})
		})
	}
	if code := o.decide(p.ApprovalID, "approve", "late"); code != http.StatusConflict {
		t.Errorf("operator answering the withdrawn approval: %d, want 409", code)
	}

	d := b.call(sess, "restart_db", map[string]any{"db": "payments-1"}, 0)
	var denied toolCall
	b.do(http.MethodPost, "/tool_calls/"+d.ID+"/respond", map[string]any{"approved": false, "comment": "Not during business hours."}, &denied)
	text := denied.Result.Content[0].Text
	if denied.Status != "failed" || *denied.ErrorCode != "approval_denied" || !denied.Result.IsError || denied.UnknownOutcome || cnt.sent(d.ID) != 0 ||
		!strings.Contains(text, "the application (API key BRAIN_API_KEY) denied it") || !strings.Contains(text, "Not during business hours.") {
		t.Fatalf("denied: %+v (the tool got %d)", denied, cnt.sent(d.ID))
	}
	if code, data := b.raw(http.MethodPost, "/tool_calls/"+d.ID+"/respond", `{"approved":true}`); code != 409 {
		t.Errorf("answer after the denial: %d %s", code, data)
	}
}

// TestBrainApprovalGateOnThePage: the operator answers a gated call on the
// real approval page in chromium — the request appears live, shows the
// exact arguments, the operator approves with a comment — and the gated
// call is sent once, recorded as answered by that operator; a denial on
// the page sends nothing and tells the model who and why.
func TestBrainApprovalGateOnThePage(t *testing.T) {
	l := startLocal(t, nil)
	cnt := newCounter(t)
	b := startBrainWith(t, l, withWaitingTools(cnt, 300, false))
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
		chromedp.WaitVisible(`//span[@id="live-state" and text()="live"]`),
	)
	sess := b.session("restart_db")
	evs := b.events(sess)
	c := b.call(sess, "restart_db", json.RawMessage(`{"db":"orders-7"}`), 0)
	p := progressOf(t, next(t, evs, "tool.progress", 10*time.Second))
	run(
		chromedp.WaitVisible(chromedp.CSS(`a[data-id="`+p.ApprovalID+`"]`)),
		chromedp.Click(chromedp.CSS(`a[data-id="`+p.ApprovalID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
	)
	details, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	run(
		chromedp.SendKeys(chromedp.CSS("#comment"), "Failover is ready."),
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#outcome")),
	)
	if !strings.Contains(details, "Call tool restart_db") || !strings.Contains(details, `{"db":"orders-7"}`) || !strings.Contains(details, c.ID) {
		t.Errorf("the page does not show the gated call's exact arguments:\n%s", details)
	}
	if got := b.getCall(c.ID, 15); got.Status != "succeeded" || cnt.sent(c.ID) != 1 {
		t.Fatalf("approved on the page: %+v; the tool got %d", got, cnt.sent(c.ID))
	}
	var responded event
	for e := next(t, evs, "tool.responded", 10*time.Second); ; e = next(t, evs, "tool.responded", 10*time.Second) {
		if e.CallID == c.ID {
			responded = e
			break
		}
	}
	if !strings.Contains(string(responded.Data), `"responder":{"type":"operator","name":"alice"`) || !strings.Contains(string(responded.Data), `"comment":"Failover is ready."`) {
		t.Errorf("tool.responded %s", responded.Data)
	}

	d := b.call(sess, "restart_db", map[string]any{"db": "orders-8"}, 0)
	pd := progressOf(t, next(t, evs, "tool.progress", 10*time.Second))
	run(
		chromedp.Navigate(pd.URL),
		chromedp.WaitVisible(chromedp.CSS("#deny")),
		chromedp.SendKeys(chromedp.CSS("#comment"), "Use the replica."),
		chromedp.Click(chromedp.CSS("#deny")),
		chromedp.WaitVisible(chromedp.CSS("#outcome")),
	)
	got := b.getCall(d.ID, 15)
	if got.Status != "failed" || *got.ErrorCode != "approval_denied" || cnt.sent(d.ID) != 0 ||
		!strings.Contains(got.Result.Content[0].Text, `operator alice denied it, saying: "Use the replica."`) {
		t.Fatalf("denied on the page: %+v; the tool got %d", got, cnt.sent(d.ID))
	}

	// Arguments longer than request_approval's details reach the operator
	// too: their beginning, under a notice saying they are not all shown.
	long := map[string]any{"db": strings.Repeat("ü", 20000)}
	e := b.call(sess, "restart_db", long, 0)
	pe := progressOf(t, next(t, evs, "tool.progress", 10*time.Second))
	run(
		chromedp.Navigate(pe.URL),
		chromedp.WaitVisible(chromedp.CSS("#approve")),
	)
	details, err = chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(details, "TOO LONG TO SHOW IN FULL") || !strings.Contains(details, e.ID) || !strings.Contains(details, `{"db":"üüü`) {
		t.Errorf("the page of a call with long arguments:\n%.2000s", details)
	}
	run(
		chromedp.Click(chromedp.CSS("#approve")),
		chromedp.WaitVisible(chromedp.CSS("#outcome")),
	)
	if got := b.getCall(e.ID, 15); got.Status != "succeeded" || cnt.sent(e.ID) != 1 {
		t.Fatalf("long arguments approved on the page: %s; the tool got %d", got.Status, cnt.sent(e.ID))
	}
}

// TestBrainApprovalGateExpires: nobody answers within
// approvals.timeout_seconds: the gated call ends failed, approval_expired,
// retryable, never sent; an answer after it is 409.
func TestBrainApprovalGateExpires(t *testing.T) {
	l := startLocal(t, nil)
	cnt := newCounter(t)
	b := startBrainWith(t, l, withWaitingTools(cnt, 1, false))
	sess := b.session("restart_db")
	c := b.call(sess, "restart_db", map[string]any{}, 0)
	got := b.getCall(c.ID, 10)
	if got.Status != "failed" || *got.ErrorCode != "approval_expired" || got.Retryable == nil || !*got.Retryable || got.UnknownOutcome || cnt.sent(c.ID) != 0 {
		t.Fatalf("expired: %+v; the tool got %d", got, cnt.sent(c.ID))
	}
	if code, data := b.raw(http.MethodPost, "/tool_calls/"+c.ID+"/respond", `{"approved":true}`); code != 409 || !strings.Contains(refusal(t, data), "already failed") {
		t.Errorf("answer after the expiry: %d %s", code, data)
	}
}
