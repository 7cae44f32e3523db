package e2e

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/local/internal/approval"
)

// With approvals.cancel_tool, brain withdraws the approval of a gated call
// that stops waiting for it another way than the operator's answer: it
// calls approval_cancel with the approval call's ID, then ends that
// call's stream. Local records the approval cancelled by the caller at
// once, not when its reattach grace (a minute here) runs out, and the
// operator who answers it on the page gets 409. Without cancel_tool,
// local is left to notice the dropped stream, as before.

// withCancelTool names local's approval_cancel as approvals.cancel_tool,
// after withWaitingTools set the approvals object.
func withCancelTool(edit func(doc map[string]any)) func(doc map[string]any) {
	return func(doc map[string]any) {
		edit(doc)
		doc["approvals"].(map[string]any)["cancel_tool"] = "approval_cancel"
	}
}

// approvalState is the state local gives approval id and who decided it,
// through approval_status in a session of its own.
func approvalState(t *testing.T, b *brain, id string) (state, operator string) {
	t.Helper()
	st, d := statusOf(t, b, b.session("approval_status"), id)
	op, _ := d["operator"].(string)
	return st, op
}

// wantWithdrawn fails unless, within within, approval id of gated call
// gate is the one cancelled approval the page lists for it, withdrawn by
// the caller (approval_cancel), and operator o's answer to it gets 409.
func wantWithdrawn(t *testing.T, b *brain, o *operator, gate, id string, within time.Duration, what string) {
	t.Helper()
	eventually(t, within, what, func() bool {
		return slices.Equal(approvalsFor(t, o, "cancelled", gate), []string{id})
	})
	if st, op := approvalState(t, b, id); st != "cancelled" || op != approval.CallerOperator {
		t.Errorf("approval %s: %s by %q, want cancelled by %q (approval_cancel)", id, st, op, approval.CallerOperator)
	}
	if code := o.decide(id, "approve", "late"); code != http.StatusConflict {
		t.Errorf("operator answering the withdrawn approval: %d, want 409", code)
	}
}

func TestBrainWithdrawsApproval(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel bool // approvals.cancel_tool set
		// end makes gated call c of session sess stop waiting.
		end func(t *testing.T, b *brain, sess string, c toolCall)
	}{
		{"approved through the API", true, func(t *testing.T, b *brain, _ string, c toolCall) {
			if code := b.do(http.MethodPost, "/tool_calls/"+c.ID+"/respond", map[string]any{"approved": true}, nil); code != 200 && code != 202 {
				t.Fatalf("approve through the API: %d", code)
			}
		}},
		{"denied through the API", true, func(t *testing.T, b *brain, _ string, c toolCall) {
			if code := b.do(http.MethodPost, "/tool_calls/"+c.ID+"/respond", map[string]any{"approved": false}, nil); code != 200 {
				t.Fatalf("deny through the API: %d", code)
			}
		}},
		{"gated call cancelled", true, func(t *testing.T, b *brain, _ string, c toolCall) {
			if code := b.do(http.MethodPost, "/tool_calls/"+c.ID+"/cancel", nil, nil); code != 200 {
				t.Fatalf("cancel: %d", code)
			}
		}},
		{"session interrupted", true, func(t *testing.T, b *brain, sess string, _ toolCall) {
			if code := b.do(http.MethodPost, "/sessions/"+sess+"/interrupt", nil, nil); code != 200 {
				t.Fatalf("interrupt: %d", code)
			}
		}},
		{"approved through the API, no cancel_tool", false, func(t *testing.T, b *brain, _ string, c toolCall) {
			if code := b.do(http.MethodPost, "/tool_calls/"+c.ID+"/respond", map[string]any{"approved": true}, nil); code != 200 && code != 202 {
				t.Fatalf("approve through the API: %d", code)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := startLocal(t, map[string]string{"APPROVAL_REATTACH_GRACE": "1m"})
			cnt := newCounter(t)
			edit := withWaitingTools(cnt, 300, false)
			if tc.cancel {
				edit = withCancelTool(edit)
			}
			b := startBrainWith(t, l, edit)
			sess := b.session("restart_db")
			evs := b.events(sess)
			c := b.call(sess, "restart_db", map[string]any{"db": "orders-1"}, 0)
			p := progressOf(t, next(t, evs, "tool.progress", 10*time.Second))
			o := signIn(t, l.url, "alice")

			tc.end(t, b, sess, c)
			if !tc.cancel {
				// As before: local withdraws only once its grace is over.
				time.Sleep(2 * time.Second)
				if st, _ := approvalState(t, b, p.ApprovalID); st != "running" {
					t.Errorf("approval %s without cancel_tool, 2 s after the answer: %s, want still pending (running)", p.ApprovalID, st)
				}
				return
			}
			wantWithdrawn(t, b, o, c.ID, p.ApprovalID, 5*time.Second, "the approval withdrawn at once")
			ac := b.approvalCalls(sess, c.ID)
			if len(ac) != 1 {
				t.Fatalf("approval calls %+v, want one", ac)
			}
			if got := b.getCall(ac[0].ID, 10); got.Status != "cancelled" {
				t.Errorf("the approval call: %s, want cancelled", got.Status)
			}
			if n := cnt.sent(c.ID); (tc.name == "approved through the API") != (n == 1) || n > 1 {
				t.Errorf("the gated tool got %d requests", n)
			}
		})
	}
}

// TestBrainWithdrawsOnceLocalIsBack: local is down when the gated call is
// answered through the API; the gated call goes on at once, and brain
// sends the withdrawal again until local is back, keeping the approval
// call running meanwhile — also across its own restart, after which the
// approval call left running is ended and its approval still withdrawn.
func TestBrainWithdrawsOnceLocalIsBack(t *testing.T) {
	for _, restart := range []bool{false, true} {
		name := "brain stays up"
		if restart {
			name = "brain restarts meanwhile"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l := startLocal(t, map[string]string{"APPROVAL_REATTACH_GRACE": "1m"})
			cnt := newCounter(t)
			b := startBrainWith(t, l, withCancelTool(withWaitingTools(cnt, 300, false)))
			sess := b.session("restart_db")
			evs := b.events(sess)
			c := b.call(sess, "restart_db", map[string]any{"db": "orders-1"}, 0)
			p := progressOf(t, next(t, evs, "tool.progress", 10*time.Second))

			l.p.Kill()
			if _, ok := progressWhere(evs, 10*time.Second, func(m map[string]any) bool { return m["status"] == "retrying" }); !ok {
				t.Fatal("brain did not notice local went down")
			}
			if code := b.do(http.MethodPost, "/tool_calls/"+c.ID+"/respond", map[string]any{"approved": true}, nil); code != 200 && code != 202 {
				t.Fatalf("approve through the API: %d", code)
			}
			if got := b.getCall(c.ID, 10); got.Status != "succeeded" || cnt.sent(c.ID) != 1 {
				t.Fatalf("the gated call approved while local is down: %s, sent %d times", got.Status, cnt.sent(c.ID))
			}
			time.Sleep(time.Second) // brain sends the withdrawal meanwhile
			ac := b.approvalCalls(sess, c.ID)
			if len(ac) != 1 || ac[0].Status != "running" {
				t.Fatalf("approval calls while the withdrawal waits for local: %+v, want one, running", ac)
			}
			if restart {
				b.p.Kill()
				l.start()
				b.start()
			} else {
				l.start()
			}
			o := signIn(t, l.url, "alice")
			wantWithdrawn(t, b, o, c.ID, p.ApprovalID, 15*time.Second, "the approval withdrawn once local is back")
			want := "cancelled"
			if restart {
				want = "failed" // brain_restarted
			}
			if got := b.getCall(ac[0].ID, 10); got.Status != want {
				t.Errorf("the approval call once withdrawn: %s (%s), want %s", got.Status, deref(got.ErrorCode), want)
			}
		})
	}
}
