package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/google/go-cmp/cmp"
)

// With approvals.cancel_tool, a gated call that stops waiting for its
// approval other than by the approval call's own decision (answered
// through the API, cancelled, its session interrupted or closed, expired)
// withdraws that approval: brain sends the cancel tool {"call_id": the
// approval call's ID} in the gated call's tenant and session, again after
// the approval resend pauses while it fails on the way there, and the
// approval call stays running until the withdrawal is through, then ends
// cancelled (see withdrawal, endApproval, withdraw). "cancel" on the
// counting tools plays the cancel tool: each request waits for the test
// to answer it.

// withdrawConfigJSON is waitingConfigJSON's document, with approve as
// approvals.tool, plus "cancel", a binding of the counting tools named as
// approvals.cancel_tool when cancelTool is set.
func withdrawConfigJSON(t *testing.T, url string, cancelTool bool, approvalTimeout int) ([]byte, map[string]string) {
	t.Helper()
	data, env := waitingConfigJSON(url, true, approvalTimeout)
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	doc["tools"] = append(doc["tools"].([]any), map[string]any{"name": "cancel", "description": "cancel tool",
		"tenants": []string{"t1", "t2"}, "input_schema": map[string]any{"type": "object"},
		"url": url + "/tools/cancel", "token_env": "BRAIN_TOOLS_KEY"})
	if cancelTool {
		doc["approvals"].(map[string]any)["cancel_tool"] = "cancel"
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data, env
}

// startWithdrawBrain starts a brain with the counting tools and
// withdrawConfigJSON's host config, on the store BRAIN_TEST_STORE names
// (as three replicas too).
func startWithdrawBrain(t *testing.T, cancelTool bool, approvalTimeout int) (*brain, *countingTools) {
	t.Helper()
	ct := newCountingTools(t)
	doc, env := withdrawConfigJSON(t, ct.URL, cancelTool, approvalTimeout)
	if testStore == storeReplicas {
		return startReplicasWith(t, doc, env, 3, false), ct
	}
	cfg, err := config.Parse(doc, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("host config: %v", err)
	}
	return startBrain(t, func(o *Options) { o.Config = cfg }), ct
}

// nextCancel returns the next request of the cancel tool, failing after
// within.
func nextCancel(t *testing.T, ct *countingTools, within time.Duration) cancelReq {
	t.Helper()
	return receive(t, ct.cancels, within, "the cancel tool got no request")
}

// withdrawOK answers withdrawal w of approval call child "ok", then fails
// unless child ends cancelled and no other withdrawal follows.
func withdrawOK(t *testing.T, b *brain, ct *countingTools, w cancelReq, child string) {
	t.Helper()
	w.answer <- "ok"
	if _, c := b.getCall("t1", child, 10); c.Status != "cancelled" {
		t.Errorf("the approval call after its approval was withdrawn: %+v", c)
	}
	noCancel(t, ct, 1500*time.Millisecond)
}

// noCancel fails when the cancel tool gets a request within d.
func noCancel(t *testing.T, ct *countingTools, d time.Duration) {
	t.Helper()
	select {
	case c := <-ct.cancels:
		c.answer <- "ok"
		t.Errorf("the cancel tool got a request: %+v", c.req)
	case <-time.After(d):
	}
}

// wantWithdrawal fails unless c is brain's withdrawal of approval call
// child, made for gated call gate of session session of t1: arguments
// exactly {"call_id": child}, in the gated call's tenant and session,
// with a call ID of its own.
func wantWithdrawal(t *testing.T, c cancelReq, session, gate, child string) {
	t.Helper()
	var args map[string]any
	if err := json.Unmarshal(c.req.Arguments, &args); err != nil {
		t.Fatalf("withdrawal arguments %s: %v", c.req.Arguments, err)
	}
	if diff := cmp.Diff(map[string]any{"call_id": child}, args); diff != "" {
		t.Errorf("withdrawal arguments (-want +got):\n%s", diff)
	}
	if c.req.TenantID != "t1" || c.req.SessionID != session {
		t.Errorf("withdrawal in tenant %q session %q, want t1 and the gated call's session %s", c.req.TenantID, c.req.SessionID, session)
	}
	if c.req.CallID == "" || c.req.CallID == child || c.req.CallID == gate {
		t.Errorf("withdrawal call ID %q, want one of its own (approval call %s, gated call %s)", c.req.CallID, child, gate)
	}
}

// denyGatedThroughAPI calls the gated tool in session (of t1), denies the
// gated call through the API once its approval call is sent, and returns
// the gated call, its approval call and brain's withdrawal of it,
// unanswered, after checking it is one (wantWithdrawal).
func denyGatedThroughAPI(t *testing.T, b *brain, ct *countingTools, session string) (gate, child string, w cancelReq) {
	t.Helper()
	_, c := b.call("t1", session, "gated", map[string]any{}, 0)
	child = nextApprovalReq(t, ct, 5*time.Second).req.CallID
	if r := b.respond("t1", c.ID, `{"approved":false}`); r.status != 200 {
		t.Fatalf("deny through the API: %d %s", r.status, r.body)
	}
	w = nextCancel(t, ct, 5*time.Second)
	wantWithdrawal(t, w, session, c.ID, child)
	return c.ID, child, w
}

// withdrawWays are the ways a gated call stops waiting for its approval
// other than by the approval call's decision: end makes gated call gate of
// session do so. sessionEnds says the approval call is cancelled with the
// session, at once, not after the withdrawal (a session ends only once
// its calls have); timeout is approvals.timeout_seconds. A nil end leaves
// the gated call to expire.
var withdrawWays = []struct {
	name        string
	timeout     int
	sessionEnds bool
	end         func(t *testing.T, b *brain, session, gate string)
}{
	{"approved through the API", 60, false, func(t *testing.T, b *brain, _, gate string) {
		if r := b.respond("t1", gate, `{"approved":true}`); r.status != 200 && r.status != 202 {
			t.Fatalf("approve through the API: %d %s", r.status, r.body)
		}
	}},
	{"denied through the API", 60, false, func(t *testing.T, b *brain, _, gate string) {
		if r := b.respond("t1", gate, `{"approved":false}`); r.status != 200 {
			t.Fatalf("deny through the API: %d %s", r.status, r.body)
		}
	}},
	{"gated call cancelled", 60, false, func(t *testing.T, b *brain, _, gate string) {
		if r := b.do("POST", "/tool_calls/"+gate+"/cancel", "t1", nil); r.status != 200 {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
	}},
	{"gated call expired", 2, false, nil}, // nil: the gated call waits until it expires
	{"session interrupted", 60, true, func(t *testing.T, b *brain, session, _ string) {
		if r := b.do("POST", "/sessions/"+session+"/interrupt", "t1", nil); r.status != 200 {
			t.Fatalf("interrupt: %d %s", r.status, r.body)
		}
	}},
	{"session closed", 60, true, func(t *testing.T, b *brain, session, _ string) {
		if r := b.do("POST", "/sessions/"+session+"/close", "t1", nil); r.status != 200 {
			t.Fatalf("close: %d %s", r.status, r.body)
		}
	}},
}

// TestApprovalWithdrawn: for each way a gated call stops waiting other
// than by its approval call's decision, with approvals.cancel_tool the
// cancel tool gets exactly one request, brain's withdrawal of that
// approval call's approval, and the approval call stays running until it
// is answered (unless its session ended), then ends cancelled. Without
// cancel_tool nothing is withdrawn, and the approval call ends cancelled
// at once.
func TestApprovalWithdrawn(t *testing.T) {
	t.Parallel()
	for _, way := range withdrawWays {
		for _, cancelTool := range []bool{true, false} {
			name := way.name
			if !cancelTool {
				name += " without cancel_tool"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b, ct := startWithdrawBrain(t, cancelTool, way.timeout)
				s := b.session("t1", "gated")
				_, gate := b.call("t1", s.ID, "gated", map[string]any{"db": "payments"}, 0)
				child := nextApprovalReq(t, ct, 5*time.Second).req.CallID
				within := 5 * time.Second
				if way.end == nil {
					within += time.Duration(way.timeout) * time.Second
				} else {
					way.end(t, b, s.ID, gate.ID)
				}
				if !cancelTool {
					if _, c := b.getCall("t1", child, 10); c.Status != "cancelled" {
						t.Errorf("the approval call: %+v", c)
					}
					noCancel(t, ct, 1500*time.Millisecond)
					return
				}
				w := nextCancel(t, ct, within)
				wantWithdrawal(t, w, s.ID, gate.ID, child)
				if !way.sessionEnds {
					if _, c := b.getCall("t1", child, 0); c.Status != "running" {
						t.Errorf("the approval call while its approval is withdrawn: %s, want running", c.Status)
					}
				}
				withdrawOK(t, b, ct, w, child)
			})
		}
	}
}

// TestApprovalDecisionNotWithdrawn: the operator's own decision, through
// the approval call (approved, denied, expired on the page), withdraws
// nothing; the next gated call of the session, answered through the API,
// still withdraws its own approval call's approval, and only that one.
func TestApprovalDecisionNotWithdrawn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ decision, status, code string }{
		{"approved", "succeeded", ""},
		{"denied", "failed", "approval_denied"},
		{"expired", "failed", "approval_expired"},
	} {
		t.Run(tc.decision, func(t *testing.T) {
			t.Parallel()
			b, ct := startWithdrawBrain(t, true, 60)
			s := b.session("t1", "gated")
			_, gate := b.call("t1", s.ID, "gated", map[string]any{}, 0)
			a := nextApprovalReq(t, ct, 5*time.Second)
			a.decide <- tc.decision + "|alice|"
			if _, c := b.getCall("t1", gate.ID, 10); c.Status != tc.status || deref(c.ErrorCode) != tc.code {
				t.Fatalf("gated call decided %s on the page: %+v", tc.decision, c)
			}
			if _, c := b.getCall("t1", a.req.CallID, 10); c.Status == "running" || c.Status == "cancelled" {
				t.Errorf("the approval call that decided: %s", c.Status)
			}
			noCancel(t, ct, 1500*time.Millisecond)

			_, child, w := denyGatedThroughAPI(t, b, ct, s.ID)
			withdrawOK(t, b, ct, w, child)
		})
	}
}

// TestApprovalWithdrawalResent: a withdrawal that fails on the way there
// (503, 429) is sent again, the same request, after the approval resend
// pauses (0.5 s, then 1 s, each jittered down to half of it at the least)
// or, when the cancel tool sent a Retry-After, after that many seconds;
// and the approval call stays running until one is through, then ends
// cancelled. A Retry-After past the approval's expiry leaves the
// withdrawal waiting until that expiry, then ending without another
// request. Any other answer of the cancel tool (a 4xx) ends the withdrawal
// after one request, and the approval call is cancelled then.
func TestApprovalWithdrawalResent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout int      // approvals.timeout_seconds
		answers []string // of the requests in turn; the last ends the withdrawal
	}{
		{"503 twice", 60, []string{"503", "503", "ok"}},
		{"429", 60, []string{"429", "ok"}},
		{"503 with Retry-After 2", 60, []string{"503 after 2", "ok"}},
		{"429 with Retry-After 1, then 503", 60, []string{"429 after 1", "503", "ok"}},
		{"Retry-After past the approval's expiry", 3, []string{"503 after 3600"}},
		{"404", 60, []string{"404"}},
		{"400", 60, []string{"400"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, ct := startWithdrawBrain(t, true, tc.timeout)
			s := b.session("t1", "gated")
			_, gate := b.call("t1", s.ID, "gated", map[string]any{}, 0)
			child := nextApprovalReq(t, ct, 5*time.Second).req.CallID
			if r := b.respond("t1", gate.ID, `{"approved":false}`); r.status != 200 {
				t.Fatalf("deny through the API: %d %s", r.status, r.body)
			}
			var first cancelReq
			var last time.Time
			step := approvalResendMin // the backoff before jitter, doubling with each resend
			for i, answer := range tc.answers {
				w := nextCancel(t, ct, 5*time.Second)
				got := time.Now()
				if i == 0 {
					first = w
					wantWithdrawal(t, w, s.ID, gate.ID, child)
				} else {
					if w.req.CallID != first.req.CallID || w.req.TenantID != first.req.TenantID ||
						w.req.SessionID != first.req.SessionID || string(w.req.Arguments) != string(first.req.Arguments) {
						t.Errorf("request %d %+v, want the first again, %+v", i+1, w.req, first.req)
					}
					pause := step / 2 // equal jitter: at least half the step
					if _, after, ok := strings.Cut(tc.answers[i-1], " after "); ok {
						n, _ := strconv.Atoi(after)
						pause = time.Duration(n) * time.Second
					}
					if gap := got.Sub(last); gap < pause {
						t.Errorf("request %d came %s after the answer to the one before (%s), want %s or more", i+1, gap, tc.answers[i-1], pause)
					}
					step *= 2
				}
				if _, c := b.getCall("t1", child, 0); c.Status != "running" {
					t.Errorf("the approval call at withdrawal request %d: %s, want running", i+1, c.Status)
				}
				last = time.Now()
				w.answer <- answer
			}
			if _, c := b.getCall("t1", child, 10); c.Status != "cancelled" {
				t.Errorf("the approval call after the withdrawal ended: %+v", c)
			}
			noCancel(t, ct, 2500*time.Millisecond)
		})
	}
}

// TestRecoverWithdrawsLeftApproval: brain died while a gated call waited
// for its approval, whose wait ran out before the next brain took the
// calls up while the approval tool still holds the approval. The approval
// call left running ends brain_restarted, and, with
// approvals.cancel_tool, its approval is withdrawn once: nobody is left to
// act on its answer. Without cancel_tool nothing is withdrawn.
func TestRecoverWithdrawsLeftApproval(t *testing.T) {
	t.Parallel()
	for _, cancelTool := range []bool{true, false} {
		t.Run(map[bool]string{true: "cancel_tool", false: "no cancel_tool"}[cancelTool], func(t *testing.T) {
			t.Parallel()
			ct := newCountingTools(t)
			// The approval stays pending on the approval tool well past
			// the gated call's wait (as it does by up to a second, its
			// timeout_seconds rounded up): the next brain, however slow to
			// start, finds it still to withdraw.
			gate, child, opt := seedGate(t, time.Now().Add(300*time.Millisecond), time.Now().Add(30*time.Second))
			time.Sleep(400 * time.Millisecond)
			doc, env := withdrawConfigJSON(t, ct.URL, cancelTool, 60)
			cfg, err := config.Parse(doc, func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			b := startBrain(t, func(o *Options) { o.Config = cfg }, opt)
			if cancelTool {
				w := nextCancel(t, ct, 10*time.Second)
				wantWithdrawal(t, w, "ses_gate", gate, child)
				w.answer <- "ok"
			}
			if _, c := b.getCall("t1", child, 10); deref(c.ErrorCode) != "brain_restarted" {
				t.Errorf("approval call: %+v", c)
			}
			noCancel(t, ct, 1500*time.Millisecond)
		})
	}
}

// restartableWithdrawConfig is the host config of startWithdrawBrain
// (with a cancel tool, a 60 s approval timeout) for one brain in this
// process that a test stops and starts again on the same store: the
// option each start takes, with a 1 s lease so that on PostgreSQL the
// next brain takes the stopped one's calls over quickly.
func restartableWithdrawConfig(t *testing.T) (*countingTools, func(*Options)) {
	t.Helper()
	ct := newCountingTools(t)
	doc, env := withdrawConfigJSON(t, ct.URL, true, 60)
	cfg, err := config.Parse(doc, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return ct, func(o *Options) { o.Config, o.Lease = cfg, time.Second }
}

// leaveWithdrawal starts a restartable brain (restartableWithdrawConfig),
// makes a gated call, ends its wait with POST path (fmt verbs %[1]s the
// session ID, %[2]s the gated call's; body, when not nil), answers the
// withdrawal that follows 503, and stops that brain: the withdrawal of
// approval call child is left for the next one.
func leaveWithdrawal(t *testing.T, path string, body any) (ct *countingTools, withCfg func(*Options), b *brain, child string) {
	t.Helper()
	ct, withCfg = restartableWithdrawConfig(t)
	b = startBrain(t, withCfg)
	s := b.session("t1", "gated")
	_, gate := b.call("t1", s.ID, "gated", map[string]any{}, 0)
	child = nextApprovalReq(t, ct, 5*time.Second).req.CallID
	if r := b.do("POST", fmt.Sprintf(path, s.ID, gate.ID), "t1", body); r.status != 200 {
		t.Fatalf("POST %s: %d %s", fmt.Sprintf(path, s.ID, gate.ID), r.status, r.body)
	}
	w := nextCancel(t, ct, 5*time.Second)
	wantWithdrawal(t, w, s.ID, gate.ID, child)
	w.answer <- "503"
	if err := b.srv.Close(); err != nil {
		t.Fatal(err)
	}
	return ct, withCfg, b, child
}

// denyPath and denyBody answer a gated call's approval through the API.
const denyPath, denyBody = "/tool_calls/%[2]s/respond", `{"approved":false}`

// TestApprovalWithdrawalSurvivesRestarts: a gated call answered through
// the API while the cancel tool is unreachable (503) leaves its approval
// to withdraw. Each brain that stops before the withdrawal is through
// must leave it to the next one: the approval stays pending on the
// operator's page, answerable, until someone withdraws it. Two restarts
// in a row (a rolling deploy while local is down) must not lose it. On
// PostgreSQL the next brain is a new replica, which takes the stopped
// one's withdrawal over once its lease (1 s) ran out.
func TestApprovalWithdrawalSurvivesRestarts(t *testing.T) {
	t.Parallel()
	if testStore == storeReplicas {
		t.Skip("restarts one brain in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	ct, withCfg, b, child := leaveWithdrawal(t, denyPath, denyBody)
	for i := 1; i <= 2; i++ {
		if i > 1 {
			if err := b.srv.Close(); err != nil {
				t.Fatal(err)
			}
		}
		b = startBrain(t, withCfg, sameStore(b))
		t.Logf("restart %d", i)
		w := nextCancel(t, ct, 10*time.Second)
		if got := string(w.req.Arguments); got != `{"call_id":"`+child+`"}` {
			t.Fatalf("brain %d after the restart sent the cancel tool %s, want the withdrawal of %s", i+1, got, child)
		}
		if i == 1 {
			w.answer <- "503" // still unreachable: the next brain must take it up again
		} else {
			w.answer <- "ok"
		}
	}
}

// TestApprovalWithdrawalDroppedWithoutCancelTool: a withdrawal a brain
// left unsent when it stopped (the cancel tool answered 503), when the
// next brain's host config names no cancel tool any more, is not sent
// (there is nothing to send it with) and is dropped with a warning that
// names the approval call: its approval stays answerable on the approval
// tool's page until it expires, and the operator is to find out why. It is
// left two ways: on an approval call still running, its gated call
// answered through the API (the next brain ends it brain_restarted), and
// stored pending on an approval call that ended with its session.
func TestApprovalWithdrawalDroppedWithoutCancelTool(t *testing.T) {
	t.Parallel()
	if testStore == storeReplicas {
		t.Skip("restarts one brain in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	for _, tc := range []struct {
		name, path  string
		body        any
		childStatus string // the approval call's, once the next brain took it up
	}{
		{"answered", denyPath, denyBody, "failed"},
		{"interrupted", "/sessions/%[1]s/interrupt", nil, "cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ct, _, b, child := leaveWithdrawal(t, tc.path, tc.body)

			doc, env := withdrawConfigJSON(t, ct.URL, false, 60)
			cfg, err := config.Parse(doc, func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			next := startBrain(t, func(o *Options) {
				o.Config, o.Lease = cfg, time.Second
				o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			}, sameStore(b))
			// On PostgreSQL the next brain is a new replica: it takes the
			// stopped one's calls over once their lease (1 s) ran out.
			for deadline := time.Now().Add(10 * time.Second); !logs.warned(map[string]string{"approval_call_id": child, "msg": "no cancel tool"}); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no WARN naming approval call %s 10 s after a brain without a cancel tool started; logs:\n%s", child, logs.String())
				}
			}
			noCancel(t, ct, time.Second)
			if _, c := next.getCall("t1", child, 5); c.Status != tc.childStatus {
				t.Errorf("approval call %s after the next brain took it up: %s, want %s", child, c.Status, tc.childStatus)
			}
			pending, err := next.srv.store.PendingWithdrawals(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(pending) != 0 {
				t.Errorf("withdrawals still pending after the next brain dropped them: %d, want none", len(pending))
			}
		})
	}
}

// TestApprovalWithdrawalAfterSessionEndSurvivesRestart: a session
// interrupted or closed while its gated call waits ends the approval call
// cancelled at once, before its approval is withdrawn, with the
// withdrawal stored pending on it. When the cancel tool is unreachable
// (503) and brain then restarts, the next brain must send the withdrawal:
// otherwise the approval stays pending on the operator's page,
// answerable, until it expires.
func TestApprovalWithdrawalAfterSessionEndSurvivesRestart(t *testing.T) {
	t.Parallel()
	if testStore == storeReplicas {
		t.Skip("restarts one brain in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	for _, end := range []string{"interrupt", "close"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			ct, withCfg, b, child := leaveWithdrawal(t, "/sessions/%[1]s/"+end, nil)
			startBrain(t, withCfg, sameStore(b))
			w := nextCancel(t, ct, 10*time.Second)
			if got := string(w.req.Arguments); got != `{"call_id":"`+child+`"}` {
				t.Fatalf("the next brain sent the cancel tool %s, want the withdrawal of %s", got, child)
			}
			w.answer <- "ok"
		})
	}
}

// TestApprovalWithdrawalStopsAtExpiry: a cancel tool that takes the
// withdrawal and never answers does not hold it (and the approval call,
// running until the withdrawal is over) past the approval's expiry: the
// request is given up when the approval expires, the approval call ends
// cancelled then, and nothing is sent after.
func TestApprovalWithdrawalStopsAtExpiry(t *testing.T) {
	t.Parallel()
	const timeout = 2 // approvals.timeout_seconds
	b, ct := startWithdrawBrain(t, true, timeout)
	s := b.session("t1", "gated")
	_, child, _ := denyGatedThroughAPI(t, b, ct, s.ID)
	// The withdrawal is never answered: the cancel tool hangs.
	start := time.Now()
	if _, c := b.getCall("t1", child, 10); c.Status != "cancelled" {
		t.Fatalf("the approval call %s after the withdrawal was sent: %s, want cancelled once its approval expired", time.Since(start), c.Status)
	}
	if d := time.Since(start); d > timeout*time.Second+time.Second {
		t.Errorf("the approval call ended %s after the withdrawal was sent, want by its approval's expiry (%d s)", d, timeout)
	}
	noCancel(t, ct, 1500*time.Millisecond)
}

// TestApprovalWithdrawalFindsItDecided: a withdrawal the cancel tool
// answers with the approval decided (an operator answered it as the API
// answered the gated call) is logged as such, one WARN naming the approval
// call, the gated call, the decision and the operator, and not as a
// withdrawal; one answered cancelled, or by a cancel tool that says
// nothing of the approval, is logged as withdrawn. Either way one request
// ends the withdrawal, and the approval call ends cancelled.
func TestApprovalWithdrawalFindsItDecided(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, answer       string
		decision, operator string // of the WARN; "" for none
	}{
		{"approved by an operator", "succeeded|approved|alice", "approved", "alice"},
		{"denied by an operator", "failed|denied|bob", "denied", "bob"},
		{"expired", "failed|expired|system", "expired", "system"},
		{"withdrawn", "cancelled|cancelled|caller", "", ""},
		{"another cancel tool", "ok", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ct := newCountingTools(t)
			doc, env := withdrawConfigJSON(t, ct.URL, true, 60)
			cfg, err := config.Parse(doc, func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			b := startBrain(t, func(o *Options) {
				o.Config = cfg
				o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			})
			s := b.session("t1", "gated")
			gate, child, w := denyGatedThroughAPI(t, b, ct, s.ID)
			w.answer <- tc.answer
			if _, c := b.getCall("t1", child, 10); c.Status != "cancelled" {
				t.Errorf("the approval call after the withdrawal ended: %+v", c)
			}
			noCancel(t, ct, 1500*time.Millisecond)

			decided := map[string]string{"approval_call_id": child, "msg": "already ended"}
			withdrew := strings.Contains(logs.String(), `"msg":"withdrew the approval of an approval call its gated call no longer waits for"`)
			if tc.decision == "" {
				if logs.warned(decided) || !withdrew {
					t.Fatalf("a withdrawal logged as decided (or not as withdrawn); logs:\n%s", logs.String())
				}
				return
			}
			decided["gated_call_id"], decided["decision"], decided["operator"] = gate, tc.decision, tc.operator
			if !logs.warned(decided) {
				t.Errorf("no WARN %v; logs:\n%s", decided, logs.String())
			}
			if withdrew {
				t.Errorf("an approval decided before the withdrawal logged as withdrawn; logs:\n%s", logs.String())
			}
		})
	}
}
