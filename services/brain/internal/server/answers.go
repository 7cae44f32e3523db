package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/julienschmidt/httprouter"
)

// MaxCommentChars is the longest comment an approval answer may carry, in
// characters (as the approval page's).
const MaxCommentChars = 2000

// answerKind is what ended a call's wait for input.
type answerKind int

const (
	answerGiven     answerKind = iota // an application's or an operator's answer
	answerExpired                     // response_expires_at passed with no answer
	answerCancelled                   // the call was cancelled, or its session ended
	answerParked                      // brain is shutting down: the call stays waiting, as stored
	answerTakenOver                   // another replica took the call over (invoke.ErrTakenOver): left to it
)

// answer is what ended a call's wait for input: the first one offered
// wins (running.offer). For answerGiven, by says who gave it; an approval
// answer has approved and comment, a function tool's answer the outcome
// its result makes. done is closed once the answer's effect is stored
// (call is the call then, err the store's refusal).
type answer struct {
	kind     answerKind
	by       responder
	approved bool
	comment  string
	outcome  invoke.Outcome // a function tool's answer
	function bool
	expired  string // for answerExpired: who saw it expire ("" = brain's clock)

	done chan struct{}
	call *store.Call
	err  error
}

func newAnswer(kind answerKind) *answer { return &answer{kind: kind, done: make(chan struct{})} }

func (a *answer) given() bool { return a.kind == answerGiven }

// recorded tells whoever gave the answer that it has been stored.
func (a *answer) recorded(c *store.Call, err error) {
	a.call, a.err = c, err
	close(a.done)
}

// event is the tool.responded event of an answer given to call c.
func (a *answer) event(c *store.Call) *store.Event {
	d := respondedData{Tool: c.Tool, Kind: c.InputKind, Responder: a.by}
	if !a.function {
		d.Approved, d.Comment = &a.approved, optString(a.comment)
	}
	return &store.Event{Type: store.EventToolResponded, SessionID: c.SessionID, CallID: c.ID, Time: time.Now().UTC(), Data: mustJSON(d)}
}

// responder is who answered a call that waited for input.
type responder struct {
	// Type is "api" (an application, through POST /tool_calls/{id}/respond)
	// or "operator" (a person, on the approval page, through the approval
	// call).
	Type string `json:"type"`
	// APIKey names the environment variable of the API key that answered.
	APIKey string `json:"api_key,omitempty"`
	// Name is the operator's name, as the approval tool reported it.
	Name string `json:"name,omitempty"`
	// CallID is the approval call through which the operator answered.
	CallID string `json:"call_id,omitempty"`
}

// String is who answered, for the model: "operator alice", "the
// application (API key BRAIN_API_KEY)".
func (r responder) String() string {
	if r.Type == "operator" {
		return "operator " + r.Name
	}
	return fmt.Sprintf("the application (API key %s)", r.APIKey)
}

// approvalResponseSchema is the response_schema of an approval gate.
var approvalResponseSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"approved":{"type":"boolean"},`+
	`"comment":{"type":"string","maxLength":%d}},"required":["approved"],"additionalProperties":false}`, MaxCommentChars))

// functionResponseSchema is the response_schema of a function tool's call:
// the contract's result object, with the binding's output_schema for
// structured_content (which a result with is_error bypasses, so the schema
// says it of successes only).
func functionResponseSchema(t *config.Tool) json.RawMessage {
	structured := json.RawMessage(`{}`)
	if t != nil && len(t.OutputSchema) > 0 {
		structured = t.OutputSchema
	}
	const block = `{"oneOf":[` +
		`{"type":"object","properties":{"type":{"const":"text"},"text":{"type":"string"}},"required":["type","text"],"additionalProperties":false},` +
		`{"type":"object","properties":{"type":{"const":"image"},"data":{"type":"string","contentEncoding":"base64"},` +
		`"mime_type":{"type":"string","pattern":"^image/"}},"required":["type","data","mime_type"],"additionalProperties":false}]}`
	return json.RawMessage(`{"type":"object","properties":{"content":{"type":"array","minItems":1,"items":` + block + `},` +
		`"structured_content":{},"is_error":{"type":"boolean"},"unknown_outcome":{"type":"boolean"}},"additionalProperties":false,` +
		`"anyOf":[{"required":["content"]},{"required":["structured_content"]}],` +
		`"if":{"properties":{"is_error":{"const":true}},"required":["is_error"]},` +
		`"else":{"properties":{"structured_content":` + string(structured) + `}}}`)
}

// approvalPrompt shows the tool and its exact arguments.
func approvalPrompt(c *store.Call) string {
	return fmt.Sprintf("Approve calling tool %s with these arguments? %s\nAnswer {\"approved\": true} to send the call, "+
		"or {\"approved\": false, \"comment\": \"why\"} to refuse it.", c.Tool, c.Arguments)
}

// functionPrompt asks the application for the function tool's result.
func functionPrompt(c *store.Call) string {
	return fmt.Sprintf("Function tool %s was called with these arguments: %s\nAnswer with its result: "+
		"{\"content\": [{\"type\": \"text\", \"text\": \"...\"}], \"structured_content\": ..., \"is_error\": false}.", c.Tool, c.Arguments)
}

// approvalDetails is what the operator sees of a gated call on the approval
// page: where the call comes from, and its exact arguments, as the call's
// record has them (GET /tool_calls/{id}: compact JSON, whatever spacing the
// caller sent). When they do not fit in maxChars characters (the approval
// tool's details maxLength; 0 for none), a notice comes first, saying how
// long they are, how many characters follow and their SHA-256, then their
// beginning, ending in "…": the operator knows what is not shown, may
// check the record against the sum, and may deny it.
func approvalDetails(c *store.Call, maxChars int) string {
	args := appendRaw(nil, c.Arguments)
	head := fmt.Sprintf("brain asks before it sends this call.\nTool: %s\nTenant: %s\nSession: %s\nCall: %s\n", c.Tool, c.TenantID, c.SessionID, c.ID)
	full := head + "Arguments (exact JSON):\n" + string(args)
	if maxChars <= 0 || utf8.RuneCountInString(full) <= maxChars {
		return full
	}
	total, sum := utf8.RuneCount(args), sha256.Sum256(args)
	notice := func(shown int) string {
		return fmt.Sprintf("Arguments: TOO LONG TO SHOW IN FULL. They are %d characters; only the first %d follow, then \"…\". "+
			"SHA-256 of the whole JSON: %x. The whole arguments are in the call's record, as hashed (GET /tool_calls/%s: arguments).\n", total, shown, sum, c.ID)
	}
	// shown has no more digits than total, so the notice written with
	// total is at least as long as the one written with shown.
	shown := max(0, maxChars-utf8.RuneCountInString(head)-utf8.RuneCountInString(notice(total))-1)
	end := 0
	for range shown {
		_, n := utf8.DecodeRune(args[end:])
		end += n
	}
	return head + notice(shown) + string(args[:end]) + "…"
}

// errAnswered is the cancel cause of an approval call whose gated call was
// answered another way, or ended.
var errAnswered = errors.New("the gated call no longer waits for this approval")

// awaitApproval waits for the answer to a gated call: through the API, or,
// when the host config names an approval tool, from the operator through
// an approval call made for it (or, after a restart, the one taken up with
// it: rc.approval). It returns approved true once the approval is recorded
// (the call then goes on); otherwise how the call ended: denied (failed,
// approval_denied), expired (failed, approval_expired, retryable),
// cancelled, or parked at shutdown — none of them sent.
func (s *Server) awaitApproval(ctx context.Context, rc *running) (ended, bool) {
	c := rc.snapshot()
	child := rc.approval
	if child == nil {
		child = s.startApproval(ctx, rc, c)
	}
	a, child := s.awaitAnswer(ctx, rc, c.ResponseExpiresAt, child, func() *running { return s.startApproval(ctx, rc, c) })
	if child != nil {
		if a.kind != answerParked && a.kind != answerTakenOver {
			// Parked, the gated call leaves its approval call to the
			// shutdown, which parks it too (sendApproval); taken over, to
			// the replica that took both over (claimed together), which
			// sends it again. Otherwise the approval call ends once the
			// answer is stored; its approval is withdrawn first unless it
			// was what decided.
			ct := s.withdrawal(child, a)
			defer s.endApproval(child, ct)
		}
		close(child.decided)
	}
	t := rc.t
	switch a.kind {
	case answerParked, answerTakenOver:
		return ended{park: true}, false
	case answerCancelled:
		return ended{out: invoke.Cancelled(t, false, context.Cause(ctx))}, false
	case answerExpired:
		who := "nobody answered"
		if a.expired != "" {
			who = a.expired
		}
		return ended{out: invoke.RefusedRetryable(invoke.CodeApprovalExpired, fmt.Sprintf(
			"tool %s: the call was not sent: %s its approval request before %s (approvals.timeout_seconds). Nobody denied it either.",
			t.Name, who, c.ResponseExpiresAt.Format(time.RFC3339)))}, false
	}
	if !a.approved {
		msg := fmt.Sprintf("tool %s: the call was not sent: %s denied it", t.Name, a.by)
		if a.comment != "" {
			msg += fmt.Sprintf(", saying: %q", a.comment)
		}
		return ended{out: invoke.Refused(invoke.CodeApprovalDenied, msg+"."), answer: a}, false
	}
	// Approved: the answer is stored with the call's next step, so the call
	// goes on even if brain stops right after (queued or running).
	next := c
	next.Prompt, next.ResponseSchema, next.ResponseExpiresAt = "", nil, time.Time{}
	if rc.q != nil {
		next.Status = store.CallQueued
	} else {
		next.Status, next.StartedAt = store.CallRunning, time.Now().UTC()
	}
	err := s.store.UpdateCall(context.WithoutCancel(ctx), &next, []string{store.CallRequiresInput}, a.event(&c))
	if err != nil {
		s.takenOver(rc, err)
		a.recorded(nil, err)
		return ended{out: storeRefusal(t, err)}, false
	}
	rc.set(next)
	if rc.q != nil {
		// Stored queued: it waits for a slot in its stored order, as a
		// call queued at start does (admit then waits for it).
		rc.q.join(rc, false)
	}
	a.recorded(&next, nil)
	return ended{}, true
}

// awaitAnswer waits until rc has an answer and returns it: one given
// (through respond, or, with child, by the operator through that approval
// call), the expiry at expires, or what the end of ctx makes of the wait:
// parked at shutdown, cancelled otherwise. The first offered wins. When the
// approval tool withdrew child's approval without anybody deciding it
// (operatorAnswer), ask makes a new approval call; the approval call last
// made is returned with the answer.
func (s *Server) awaitAnswer(ctx context.Context, rc *running, expires time.Time, child *running, ask func() *running) (*answer, *running) {
	expiry := time.NewTimer(time.Until(expires))
	defer expiry.Stop()
	var childDone <-chan struct{}
	if child != nil {
		childDone = child.done
	}
	for rc.standingAnswer() == nil {
		select {
		case <-rc.answered:
		case <-expiry.C:
			rc.offer(newAnswer(answerExpired))
		case <-ctx.Done():
			kind := answerCancelled
			switch cause := context.Cause(ctx); {
			case errors.Is(cause, errShutdown):
				kind = answerParked
			case errors.Is(cause, invoke.ErrTakenOver):
				kind = answerTakenOver
			}
			rc.offer(newAnswer(kind))
		case <-childDone:
			childDone = nil
			a, again := s.operatorAnswer(child)
			if a != nil {
				rc.offer(a)
			} else if again && ask != nil && rc.standingAnswer() == nil {
				if child = ask(); child != nil {
					childDone = child.done
				}
			}
		}
	}
	return rc.standingAnswer(), child
}

// startApproval makes the approval call of gated call c, when the host
// config names an approval tool allowed for its tenant: a child call
// (caller system, parent c) in c's session, with the action, the exact
// arguments and the time left to answer. It returns nil when there is no
// such tool or the call could not start (logged; the gated call can still
// be answered through the API).
func (s *Server) startApproval(ctx context.Context, rc *running, c store.Call) *running {
	approvals := s.config().Approvals
	at := approvals.Tool
	if at == nil || !at.Allowed(c.TenantID) {
		return nil
	}
	secs := int(math.Ceil(time.Until(c.ResponseExpiresAt).Seconds()))
	if secs < 1 {
		return nil
	}
	args := mustJSON(map[string]any{"action": "Call tool " + c.Tool, "details": approvalDetails(&c, approvals.DetailsMaxChars), "timeout_seconds": secs})
	child, err := s.start(context.Background(), callSpec{tenant: c.TenantID, sessionID: c.SessionID, t: at, args: args,
		parent: c.ID, caller: store.CallerSystem, ctx: ctx, gate: rc})
	if err != nil {
		s.log.Warn("approval call not started; the gated call waits for an answer through the API", "call_id", c.ID, "tool", c.Tool, "err", err)
		return nil
	}
	return child
}

// decision is what brain reads of an approval tool's result.
type decision struct {
	Decision string `json:"decision"`
	Operator string `json:"operator"`
	Comment  string `json:"comment"`
}

// operatorAnswer reads the decision of a finished approval call: approved
// (the call succeeded) or denied by an operator, or expired. Any other end
// (cancelled, failed) decides nothing, and nil is returned: the gated call
// still waits for an answer through the API. again reports an approval the
// approval tool itself withdrew (cancelled, by "system") without anybody
// deciding it: local's request_approval does so when a stream it answers
// drops (brain died, or the connection broke) before the approval call was
// sent again. No operator can answer that approval any more, so a new
// approval call asks again without leaving two pending.
func (s *Server) operatorAnswer(child *running) (a *answer, again bool) {
	f := child.final
	if f == nil || f.Result == nil {
		return nil, false
	}
	var r struct {
		StructuredContent json.RawMessage `json:"structured_content"`
	}
	var d decision
	if json.Unmarshal(f.Result, &r) != nil || len(r.StructuredContent) == 0 || json.Unmarshal(r.StructuredContent, &d) != nil {
		if f.Status != store.CallCancelled {
			s.log.Warn("approval call ended without a decision; the gated call waits for an answer through the API",
				"call_id", f.ID, "parent_id", f.ParentID, "status", f.Status, "error_code", f.ErrorCode)
		}
		return nil, false
	}
	by := responder{Type: "operator", Name: d.Operator, CallID: f.ID}
	switch {
	case d.Decision == "approved" && f.Status == store.CallSucceeded:
		a := newAnswer(answerGiven)
		a.by, a.approved, a.comment = by, true, d.Comment
		return a, false
	case d.Decision == "denied":
		a := newAnswer(answerGiven)
		a.by, a.comment = by, d.Comment
		return a, false
	case d.Decision == "expired":
		a := newAnswer(answerExpired)
		a.by, a.expired = by, "no operator answered"
		return a, false
	case d.Decision == "cancelled" && d.Operator == "system":
		s.log.Warn("the approval tool withdrew the approval without a decision (a stream of it dropped); asking again with a new approval call",
			"call_id", f.ID, "parent_id", f.ParentID, "comment", d.Comment)
		return nil, true
	}
	s.log.Warn("approval call decided nothing", "call_id", f.ID, "parent_id", f.ParentID, "decision", d.Decision, "status", f.Status)
	return nil, false
}

// The pause before an approval call is sent again (sendApproval), and
// before a withdrawal is (withdraw), when the tool did not say how long to
// wait: from approvalResendMin, doubling, up to approvalResendMax, each
// with equal jitter (see resendPause).
const (
	approvalResendMin = 500 * time.Millisecond
	approvalResendMax = 5 * time.Second
)

// resendPause is the pause before the next resend. The zero value starts
// at approvalResendMin and draws its jitter from math/rand/v2.
type resendPause struct {
	step time.Duration       // the backoff of the next resend before jitter; 0 before the first
	draw func(n int64) int64 // uniform in [0, n); nil means rand.Int64N
}

// next returns the pause before the next resend of a request that ended
// with o, at most left (the time until nothing is resent any more). When
// the tool answered a 429 or 503 with a Retry-After (o.RetryAfter) it is
// that, as the tool asked: not shortened, not jittered (a tool that wants
// its callers spread says so in its Retry-After), and capped only by left
// — a Retry-After past it makes the resender wait out the time left, and
// then send nothing more. The time left is bounded by the approval's
// timeout_seconds (at most a day), so that is the longest pause there is.
// Otherwise it is the backoff step with equal jitter: uniform in
// [step/2, step], so that brains and calls that failed together do not
// resend in lockstep. Either way the step doubles for the resend after,
// up to approvalResendMax.
func (p *resendPause) next(o invoke.Outcome, left time.Duration) time.Duration {
	if p.step == 0 {
		p.step = approvalResendMin
	}
	d := o.RetryAfter
	if d <= 0 {
		draw := p.draw
		if draw == nil {
			draw = rand.Int64N
		}
		half := p.step / 2
		d = half + time.Duration(draw(int64(p.step-half)+1))
	}
	p.step = min(2*p.step, approvalResendMax)
	return min(d, left)
}

// sendApproval sends approval call rc to its tool and, while its gated
// call (rc.gate) still waits for the answer (until its
// response_expires_at; the gated call cancels ctx once it no longer
// waits), sends it again when it ended without a decision for a reason
// of the connection or of the service (resendable), after the pause the
// tool asked for with Retry-After or else a jittered one that doubles up
// to approvalResendMax (resendPause.next). The request is the same each
// time — call ID, arguments — so the approval tool attaches it to the
// approval it recorded (local's request_approval is idempotent per tenant, session
// and call ID), and the operator who answers that approval on the page,
// before or after the tool service restarted, decides the gated call. The
// call stays one call, running; each resend is logged and shown as a
// tool.progress {"status":"retrying"} of the approval call. At shutdown
// the call is left running as stored, as its gated call is left waiting,
// and the next brain sends it again (takeUp): had it been recorded
// cancelled, the next brain would make another approval call, and, with
// local down or the call between two requests, a second approval beside
// the first, still pending.
func (s *Server) sendApproval(ctx context.Context, rc *running) ended {
	var pause resendPause
	for attempt := 2; ; attempt++ {
		out := s.send(ctx, rc)
		if rc.withdrawing.Load() {
			return s.withdrawn(ctx, rc)
		}
		if errors.Is(context.Cause(ctx), errShutdown) && (out.ErrorCode == invoke.CodeCancelled || resendable(out)) {
			return ended{park: true}
		}
		left := time.Until(rc.gate.waitsUntil())
		if !resendable(out) || ctx.Err() != nil || left <= 0 {
			return ended{out: out}
		}
		d := pause.next(out, left)
		c := rc.snapshot()
		s.log.Warn("approval call ended without a decision; sending it again with the same call ID",
			"call_id", c.ID, "parent_id", c.ParentID, "tool", c.Tool, "attempt", attempt, "in", d.String(),
			"error_code", out.ErrorCode, "err", out.ErrorMessage)
		data := mustJSON(resendProgress{Status: "retrying", Attempt: attempt, ErrorCode: out.ErrorCode, RetryInMS: d.Milliseconds()})
		s.publishProgress(ctx, c.SessionID, c.ID, data)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if errors.Is(context.Cause(ctx), errShutdown) {
				return ended{park: true}
			}
			return ended{out: invoke.Cancelled(rc.t, out.Sent, context.Cause(ctx))}
		}
		if rc.withdrawing.Load() {
			return s.withdrawn(ctx, rc)
		}
		if !time.Now().Before(rc.gate.waitsUntil()) {
			return ended{out: out} // nothing is sent once the gated call no longer waits
		}
	}
}

// withdrawal is the cancel tool that withdraws the approval of approval
// call child, whose gated call stopped waiting with answer a: nil when a
// is child's own decision, or when the host config names no cancel tool
// allowed for child's tenant. Otherwise child is marked withdrawing from
// now on: it stays running until endApproval has withdrawn its approval,
// and then ends cancelled (sendApproval), so that until then it is what a
// restart finds to withdraw (takeUp). Should child end first (its session
// ended), it is stored with the withdrawal pending (pendingWithdrawal).
func (s *Server) withdrawal(child *running, a *answer) *config.Tool {
	c := child.snapshot()
	ct := s.cancelTool(c.TenantID)
	if ct == nil || a.by.CallID == child.id {
		return nil
	}
	child.withdrawUntil = approvalExpiry(&c, s.config().Approvals.Timeout)
	child.withdrawing.Store(true)
	return ct
}

// endApproval ends approval call child once its gated call no longer waits
// for it: with cancel tool ct (withdrawal), on a goroutine, its approval
// is withdrawn first and then its stream ended, so that no operator can
// answer it meanwhile and the approval tool records why it ended; without,
// the stream is ended at once, and the approval tool is left to notice.
// At shutdown a withdrawal stops and child is left to the shutdown, which
// parks it for the next brain to withdraw — or, when child ended first,
// left pending on it (pendingWithdrawal); once over, that is cleared.
func (s *Server) endApproval(child *running, ct *config.Tool) {
	if ct == nil {
		child.cancel(errAnswered)
		return
	}
	c := child.snapshot()
	s.background.Go(func() {
		if !s.withdraw(s.callsCtx, ct, &c, child.withdrawUntil) {
			return
		}
		child.withdrawn.Store(true)
		child.cancel(errAnswered)
		<-child.done
		if f := child.final; f != nil && !f.WithdrawUntil.IsZero() {
			s.clearWithdrawal(c.ID)
		}
	})
}

// withdrawn is how approval call rc ends once its gated call withdraws its
// approval (withdrawal): when the withdrawal is through and rc cancelled,
// cancelled whatever its request answered meanwhile — or parked, at
// shutdown.
func (s *Server) withdrawn(ctx context.Context, rc *running) ended {
	<-ctx.Done()
	if errors.Is(context.Cause(ctx), errShutdown) {
		return ended{park: true}
	}
	return ended{out: invoke.Cancelled(rc.t, true, context.Cause(ctx))}
}

// withdrawAttemptMin is the least time a withdrawal request is given when
// it is sent just before, or at, the approval's expiry (a gated call that
// expired withdraws an approval that expires with it): the approval tool
// counts the expiry from when it got the approval request, a little after
// brain's reckoning (approvalExpiry), so the withdrawal may still land.
const withdrawAttemptMin = time.Second

// withdraw sends cancel tool ct brain's withdrawal of the approval that
// approval call c asked for, {"call_id": c.ID}, in c's tenant and session:
// brain's own request, not a call of the session (it goes on after the
// session ended, which no call of it may). It is sent again, with the
// same request, after the pauses of sendApproval (resendPause.next: the
// tool's Retry-After, or a jittered doubling backoff) while it ends
// resendable (local down or restarting, a 5xx, a 429), until the approval
// expires at until (c's created_at plus its timeout_seconds: then the
// approval tool expires it itself, so nothing is sent after a pause that
// reached it, and no attempt, not even one the tool never answers, goes
// on past it or past withdrawAttemptMin after it began) or ctx ends. Any
// answer of the tool ends it: withdrawn, decided already, or no such
// approval. It reports whether the withdrawal is over (answered, or
// expired); false means ctx ended first, brain stops, and the withdrawal
// is left to the next brain.
func (s *Server) withdraw(ctx context.Context, ct *config.Tool, c *store.Call, until time.Time) bool {
	req := tool.Request{TenantID: c.TenantID, SessionID: c.SessionID, CallID: newID("call"),
		Arguments: mustJSON(map[string]string{"call_id": c.ID})}
	log := s.log.With("approval_call_id", c.ID, "parent_id", c.ParentID, "tool", ct.Name, "call_id", req.CallID)
	var pause resendPause
	for attempt := 1; ; attempt++ {
		deadline := until
		if least := time.Now().Add(withdrawAttemptMin); deadline.Before(least) {
			deadline = least
		}
		attemptCtx, cancel := context.WithDeadline(ctx, deadline)
		out := s.invokerFor(ct).Call(attemptCtx, ct, req, nil)
		cancel()
		switch {
		case out.Status == store.CallSucceeded:
			if d, ok := decidedBeforeWithdrawal(out.Result); ok {
				// First answer wins in brain too: the gated call went on
				// with another answer, so this decision was not used.
				log.Warn("approval already ended (decided or expired) when brain withdrew it; the gated call did not use it", "attempt", attempt,
					"gated_call_id", c.ParentID, "state", d.State, "decision", d.Result.StructuredContent.Decision, "operator", d.Result.StructuredContent.Operator)
				return true
			}
			log.Info("withdrew the approval of an approval call its gated call no longer waits for", "attempt", attempt)
			return true
		case !time.Now().Before(until):
			log.Warn("approval not withdrawn before it expired; the approval tool expires it", "attempt", attempt,
				"error_code", out.ErrorCode, "err", out.ErrorMessage)
			return true
		case ctx.Err() != nil:
			log.Warn("approval not withdrawn before brain stops; the next brain sends the withdrawal", "attempt", attempt)
			return false
		case !resendable(out):
			log.Warn("the cancel tool did not withdraw the approval; leaving it to the approval tool",
				"attempt", attempt, "error_code", out.ErrorCode, "err", out.ErrorMessage)
			return true
		}
		d := pause.next(out, time.Until(until))
		log.Warn("approval not withdrawn; sending the withdrawal again", "attempt", attempt+1, "in", d.String(),
			"error_code", out.ErrorCode, "err", out.ErrorMessage)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			log.Warn("approval not withdrawn before brain stops; the next brain sends the withdrawal", "attempt", attempt)
			return false
		}
		if !time.Now().Before(until) {
			log.Warn("approval not withdrawn before it expired; the approval tool expires it", "attempt", attempt,
				"error_code", out.ErrorCode, "err", out.ErrorMessage)
			return true
		}
	}
}

// cancelAnswer is what withdraw reads of the cancel tool's answer: the
// job pattern's status (local's approval_cancel: pkg/jobs StatusJSON),
// whose result carries the approval's decision.
type cancelAnswer struct {
	State  string `json:"state"`
	Result struct {
		StructuredContent struct {
			Decision string `json:"decision"`
			Operator string `json:"operator"`
		} `json:"structured_content"`
	} `json:"result"`
}

// decidedBeforeWithdrawal reports whether r, the cancel tool's answer to a
// withdrawal, says the approval had already ended another way (approved,
// denied or expired: a job state that is neither cancelled nor running)
// rather than been withdrawn, and what it says of it. An answer without
// that shape (another cancel tool) is taken as a withdrawal.
func decidedBeforeWithdrawal(r tool.Result) (cancelAnswer, bool) {
	var a cancelAnswer
	if !r.HasStructured() || json.Unmarshal(r.StructuredContent, &a) != nil {
		return cancelAnswer{}, false
	}
	switch a.State {
	case "succeeded", "failed":
		return a, true
	}
	return cancelAnswer{}, false
}

// approvalExpiry is when the approval that approval call c asked for
// expires: c's created_at plus the timeout_seconds it asked for (def when
// its arguments do not say).
func approvalExpiry(c *store.Call, def time.Duration) time.Time {
	var args struct {
		TimeoutSeconds int `json:"timeout_seconds"`
	}
	if json.Unmarshal(c.Arguments, &args) == nil && args.TimeoutSeconds > 0 {
		def = time.Duration(args.TimeoutSeconds) * time.Second
	}
	return c.CreatedAt.Add(def)
}

// resendProgress is the tool.progress of an approval call brain is about to
// send again (sendApproval).
type resendProgress struct {
	Status    string `json:"status"`  // "retrying"
	Attempt   int    `json:"attempt"` // the request about to be sent: 2 for the first resend
	ErrorCode string `json:"error_code"`
	RetryInMS int64  `json:"retry_in_ms"`
}

// resendable reports whether an approval call that ended with o may be
// sent again: it got no answer for a reason of the way there — the
// connection was refused, reset or dropped mid-stream, no response
// headers came, a 5xx or 429 — or the tool answered that it could not
// tell (is_error with unknown_outcome and no decision: local's "the
// approval service is restarting; the approval is still pending"). A
// decision, a refusal with a known outcome (other action or details, too
// many pending), a malformed answer and brain's own cancel are not.
func resendable(o invoke.Outcome) bool {
	if !o.Result.UnknownOutcome {
		return false // the tool answered, or brain refused the call
	}
	switch o.ErrorCode {
	case invoke.CodeConnectionFailed, invoke.CodeHeaderTimeout, invoke.CodeNoResultEvent:
		return true
	case invoke.CodeHTTPStatus:
		return o.HTTPStatus >= 500 || o.HTTPStatus == http.StatusTooManyRequests
	case invoke.CodeToolError:
		return !o.Result.HasStructured()
	}
	return false
}

// awaitFunction waits for the application's answer to a function tool's
// call, until its response_expires_at (timeout_seconds after it began to
// wait): then it ends timed_out. The call was handed to the application,
// so a call that times out or is cancelled has an unknown outcome.
func (s *Server) awaitFunction(ctx context.Context, rc *running) ended {
	a, _ := s.awaitAnswer(ctx, rc, rc.snapshot().ResponseExpiresAt, nil, nil)
	switch a.kind {
	case answerParked, answerTakenOver:
		return ended{park: true}
	case answerCancelled:
		return s.stopWaiting(ctx, rc, true)
	case answerExpired:
		o := invoke.Failed(invoke.CodeTimeout, true, fmt.Sprintf("tool %s: the application did not answer within timeout_seconds (%s)", rc.t.Name, rc.t.Timeout()))
		o.Status = invoke.StatusTimedOut
		return ended{out: o}
	}
	return ended{out: a.outcome, answer: a}
}

// respond answers POST /tool_calls/{id}/respond: the answer of a call in
// requires_input, as its response_schema says — for an approval gate
// {"approved": bool, "comment"?: string}, for a function tool the result
// object, checked as a tool's answer is (strict decoding, output_schema for
// a success, max_output_bytes). A body that does not fit is refused (400,
// or 413 past max_output_bytes) naming the field, and the call still
// waits. The first answer wins: a call that is not waiting (queued,
// running, already answered, expired, finished) is 409. The answer is
// recorded with who gave it (tool.responded); the response is the call
// after it: finished (200) or gone on (202).
func (s *Server) respond(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, key, err := s.caller(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	id := p.ByName("id")
	stored, err := s.unfinishedCall(r.Context(), tenant, id, "; it takes no answer")
	if err != nil {
		return err
	}
	rc, ok := s.lookupRunning(id)
	if !ok {
		if s.shared != nil {
			// Another replica runs the call, or none until its lease runs
			// out: the answer goes through the store.
			return s.respondRemote(w, r, tenant, key, stored)
		}
		return httpapi.Conflict("tool call %q is no longer waiting for input", id)
	}
	cur := rc.snapshot()
	if cur.Status != store.CallRequiresInput {
		return httpapi.Conflict("tool call %q is %s, not waiting for input (requires_input)", id, cur.Status)
	}
	if err := httpapi.CheckJSON(r); err != nil {
		return err
	}
	data, err := httpapi.ReadBody(r, s.maxBody)
	if err != nil {
		return err
	}
	a, err := parseAnswer(rc.t, cur.InputKind, key, data)
	if err != nil {
		return err
	}
	if won, standing := rc.offer(a); !won {
		return httpapi.Conflict("tool call %q %s", id, standing.why())
	}
	// The call took the answer; its record waits on the store, which may
	// not answer (the call's goroutine tries the write again until it
	// does). The client is not held for the outage: 503, and the call
	// tells how it went once the store is back.
	recorded := time.NewTimer(s.recordWait)
	defer recorded.Stop()
	select {
	case <-a.done:
	case <-recorded.C:
		return httpapi.Unavailable("tool call %q took the answer, but brain's database has not recorded it within %s; read the call (GET /tool_calls/%s) for its outcome once the database is back; an answer given again is refused", id, s.recordWait, id)
	case <-r.Context().Done():
		return r.Context().Err()
	}
	if a.err != nil {
		if errors.Is(a.err, store.ErrNotOwner) || errors.Is(a.err, invoke.ErrTakenOver) {
			// Nothing was recorded; the replica that took the call over
			// takes the answer given again (respondRemote).
			return httpapi.Unavailable("tool call %q was taken over by another brain replica before the answer was recorded; answer again", id)
		}
		return fmt.Errorf("record the answer of tool call %s: %w", id, a.err)
	}
	writeCall(w, a.call, s.queuePosition(a.call))
	return nil
}

// parseAnswer reads the answer data, given with API key key, to a call of
// binding t waiting for input of kind: a function tool's result or an
// approval gate's {approved, comment}. A body that does not fit is a 400
// (or 413) naming the field.
func parseAnswer(t *config.Tool, kind, key string, data []byte) (*answer, error) {
	a := newAnswer(answerGiven)
	a.by = responder{Type: "api", APIKey: key}
	var err error
	if kind == store.InputFunction {
		a.function = true
		if t == nil {
			return nil, httpapi.Conflict("the call's tool is no longer in brain's host config")
		}
		a.outcome, err = functionAnswer(t, data)
	} else {
		a.approved, a.comment, err = approvalAnswer(data)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// why says why a call no longer takes an answer, after "tool call X".
func (a *answer) why() string {
	switch a.kind {
	case answerExpired:
		return "is no longer waiting for input: its response expired"
	case answerCancelled:
		return "is no longer waiting for input: it was cancelled"
	case answerParked:
		return "is no longer waiting for input here: brain is shutting down; answer again once it is back"
	case answerTakenOver:
		return "is no longer waiting for input here: another brain replica took it over; answer again"
	}
	return "was already answered by " + a.by.String()
}

// approvalAnswer decodes an approval gate's answer strictly.
func approvalAnswer(data []byte) (approved bool, comment string, err error) {
	var body struct {
		Approved *bool   `json:"approved"`
		Comment  *string `json:"comment"`
	}
	if err := httpapi.DecodeObject(data, &body); err != nil {
		return false, "", err
	}
	if body.Approved == nil {
		return false, "", httpapi.BadRequest(`approved: required: true to send the call, false to refuse it`)
	}
	if body.Comment != nil {
		comment = *body.Comment
		if n := utf8.RuneCountInString(comment); n > MaxCommentChars {
			return false, "", httpapi.BadRequest("comment: longer than %d characters (got %d)", MaxCommentChars, n)
		}
	}
	return *body.Approved, comment, nil
}

// functionAnswer checks the application's result for function tool t as a
// tool's answer is checked, and returns the outcome it makes.
func functionAnswer(t *config.Tool, data []byte) (invoke.Outcome, error) {
	if n := int64(len(data)); n > t.MaxOutputBytes() {
		return invoke.Outcome{}, httpapi.Errorf(http.StatusRequestEntityTooLarge, httpapi.CodeTooLarge,
			"body: the result of %d bytes is larger than tool %s's max_output_bytes %d", n, t.Name, t.MaxOutputBytes())
	}
	if t := strings.TrimSpace(string(data)); t != "" && t[0] != '{' {
		return invoke.Outcome{}, httpapi.BadRequest("body: must be a result object, got %s", httpapi.JSONKind(t[0]))
	}
	r, err := tool.DecodeResult(data)
	if err != nil {
		var fe *strictjson.FieldError
		if errors.As(err, &fe) && fe.Field != "" {
			return invoke.Outcome{}, httpapi.BadRequest("%s: %s", fe.Field, fe.Problem)
		}
		return invoke.Outcome{}, httpapi.BadRequest("body: %s", strings.TrimPrefix(err.Error(), "result: "))
	}
	o, err := invoke.Accept(t, r)
	if err != nil {
		return invoke.Outcome{}, httpapi.BadRequest("structured_content: does not match tool %s's output_schema: %v", t.Name, err)
	}
	return o, nil
}
