package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/pkg/tracing"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
	"github.com/brain-tools/suite/services/brain/internal/store"
)

// A call's life, from start to its one tool.result:
//
//	refused before anything (Precheck, a full queue)  → failed at once
//	gated:    requires_input (approval) → answered yes → queued or running
//	                                    → no, expired, cancelled → failed / cancelled, never sent
//	capped:   queued → running (a slot of the binding's max_concurrency)
//	function: requires_input (function) → the application's result, or timed_out / cancelled
//	approval call of a gated call: running → sent, and sent again with its
//	          ID while no decision came and the gated call waits (sendApproval)
//	otherwise running → sent → the tool's outcome
//
// Each step is stored (store.UpdateCall) before the next begins, with its
// events: tool.requires_input when a call starts to wait, tool.responded
// with the answer. A call that waits (requires_input, queued) when brain
// shuts down, or dies, is left as stored and taken up again at the next
// start (recoverCalls), or by another replica once the dead one's lease ran
// out (takeUp): nothing it waits for was sent. So is the approval call of
// a gated call that waits: the next brain sends it again. The withdrawal
// of an approval nobody waits for any more (withdraw) is kept with its
// approval call: the call stays running until the withdrawal is over,
// or, when it ends first (its session ended, or a restart ended it
// brain_restarted), it is stored with the withdrawal pending
// (store.Call.WithdrawUntil); either way the next brain sends it again.

// running is a call in flight. final is set before done is closed; it stays
// nil when the call could not be stored (start failed), and is not terminal
// when the call was left waiting at shutdown.
type running struct {
	id, sessionID string
	t             *config.Tool
	cancel        context.CancelCauseFunc
	done          chan struct{}
	final         *store.Call

	// refusal is the outcome a call refused at start ends with at once.
	refusal *invoke.Outcome
	// q is the binding's queue for the tenant (nil without
	// max_concurrency); ord is the call's stored order in it, holding
	// (guarded by q.mu) whether it holds a slot, and admitted is closed
	// when the queue gives it one.
	q        slots
	ord      int64
	holding  bool
	admitted chan struct{}

	// span is the call's span, ended when the call has recorded how it
	// ended (execute); a no-op span while tracing is off.
	span oteltrace.Span

	// gate, set for the approval call of a gated call, is that gated call:
	// while it waits, the approval call is sent again when it ends without
	// a decision (sendApproval). approval is the approval call a gated call
	// taken up after a restart waits on: the one it had running, sent again
	// with its ID (takeUp).
	gate, approval *running
	// withdrawing is set on an approval call whose gated call withdraws
	// its approval (withdrawal): it ends cancelled once that is through.
	// withdrawUntil, set before it, is that approval's expiry; withdrawn
	// is set once the withdrawal is over (endApproval). An approval call
	// that ends withdrawing but not withdrawn (its session ended) is
	// stored with the withdrawal pending (store.Call.WithdrawUntil), so
	// that the next brain sends it should this one stop first.
	withdrawing, withdrawn atomic.Bool
	withdrawUntil          time.Time
	// decided, made for an approval call, is closed once its gated call
	// has decided whether it withdraws the approval (awaitApproval).
	decided chan struct{}
	// takenOver is set once another replica owns the call (takeOver): it
	// stops here and nothing more is recorded or sent for it. finishing
	// is set once its run is over and execute records how it ended.
	takenOver, finishing atomic.Bool

	mu       sync.Mutex
	call     store.Call // as last stored
	answer   *answer    // the first answer, or what ended the wait for one
	answered chan struct{}
}

func (rc *running) snapshot() store.Call {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.call
}

// status is the call's status as last stored: snapshot's, without the
// copy of the call.
func (rc *running) status() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.call.Status
}

// waitsUntil is the response_expires_at of a call that waits for input
// (requires_input); zero once it does not.
func (rc *running) waitsUntil() time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.call.Status != store.CallRequiresInput {
		return time.Time{}
	}
	return rc.call.ResponseExpiresAt
}

func (rc *running) set(c store.Call) {
	rc.mu.Lock()
	rc.call = c
	rc.mu.Unlock()
}

// offer makes a the call's answer unless it has one: the first answer wins
// (an application's, an operator's, the expiry's, the cancellation's). It
// returns the answer that stands.
func (rc *running) offer(a *answer) (won bool, standing *answer) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.answer != nil {
		return false, rc.answer
	}
	rc.answer = a
	close(rc.answered)
	return true, a
}

func (rc *running) standingAnswer() *answer {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.answer
}

func newRunning(c store.Call, t *config.Tool, cancel context.CancelCauseFunc) *running {
	return &running{id: c.ID, sessionID: c.SessionID, t: t, cancel: cancel, done: make(chan struct{}),
		admitted: make(chan struct{}), answered: make(chan struct{}), call: c}
}

// callSpec is a call to start: a tool of a session, made by an application
// (CallerAPI) or by brain for a gated call (CallerSystem, with parent).
type callSpec struct {
	tenant, sessionID string
	t                 *config.Tool
	args              json.RawMessage
	gated             bool   // wait for an approval before sending
	parent            string // the gated call an approval call is made for
	caller            string
	// gate is an approval call's running.gate.
	gate *running
	// refusal, when set, is how the call ends at once, not sent (a custom
	// tool whose secret is missing).
	refusal *invoke.Outcome
	// ctx carries what the call keeps of what made it: the trace context
	// of the request (or of the gated call) its span is a child of; nil
	// means none.
	ctx context.Context
}

// start records the call with its tool.call event (and tool.requires_input
// when it starts out waiting) and runs it. The call is registered as in
// flight before it is stored, under the lock endSession marks the session
// with: an interrupt or close that begins after the registration finds the
// call, cancels it and waits for its result; one that began before makes
// start refuse the call (409). reqCtx bounds only the write.
func (s *Server) start(reqCtx context.Context, sp callSpec) (*running, error) {
	now := time.Now().UTC()
	t := sp.t
	c := store.Call{
		ID: newID("call"), SessionID: sp.sessionID, TenantID: sp.tenant, Tool: t.Name, Status: store.CallRunning,
		Arguments: sp.args, CreatedAt: now, StartedAt: now, ParentID: sp.parent, CallerType: sp.caller,
		RevisionID: t.RevisionID,
	}
	// The call outlives the request: its span, a child of the request's,
	// goes on the calls' context, so the request to the tool is its child
	// and carries traceparent (W3C) on.
	parent := sp.ctx
	if parent == nil {
		parent = context.Background()
	}
	span := oteltrace.SpanFromContext(parent)
	if tracing.Enabled() { // the attributes are not built for nothing
		var spanCtx context.Context
		spanCtx, span = tracing.Start(parent, "tool_call "+t.Name, oteltrace.WithAttributes(
			attribute.String("tool.name", t.Name), attribute.String("tool.transport", transportOf(t)),
			attribute.String("brain.tenant_id", sp.tenant), attribute.String("brain.session_id", sp.sessionID),
			attribute.String("brain.call_id", c.ID), attribute.String("brain.caller_type", sp.caller)))
		c.SpanID = tracing.SpanID(spanCtx)
	}
	ctx, cancel := context.WithCancelCause(oteltrace.ContextWithSpan(s.callsCtx, span))
	rc := newRunning(c, t, cancel)
	rc.span, rc.gate = span, sp.gate
	if sp.gate != nil {
		rc.decided = make(chan struct{})
	}
	if err := s.register(rc); err != nil {
		cancel(nil)
		span.End()
		return nil, err
	}
	// A call that could never be sent is refused here, before anybody is
	// asked to approve it, before it queues, and before its creator is
	// answered: the answer is then its final state, not "running".
	var (
		queued, taken bool
		settled       <-chan struct{}
	)
	rc.refusal = sp.refusal
	if rc.refusal == nil {
		if o, ok := invoke.Precheck(t, sp.tenant, sp.args); !ok {
			refusal := o // only a refused call's outcome goes to the heap
			rc.refusal = &refusal
		} else {
			// The arguments are the call's for good: the invoker need not
			// validate them against the same binding again.
			ctx = invoke.WithPrechecked(ctx, t, sp.tenant, sp.args)
		}
	}
	if t.MaxConcurrency > 0 && rc.refusal == nil && !sp.gated {
		rc.q = s.queueFor(sp.tenant, t)
		var sl slot
		switch sl, settled = rc.q.take(rc, s.maxQueued); sl {
		case slotTaken:
			taken = true
		case slotQueued:
			queued = true
		case slotFull:
			o := invoke.RefusedRetryable(invoke.CodeQueueFull, fmt.Sprintf(
				"tool %s: %d calls of tenant %q already wait for one of its %d slots (max_concurrency); the call was not sent",
				t.Name, s.maxQueued, sp.tenant, t.MaxConcurrency))
			rc.refusal, rc.q = &o, nil
		}
	} else if t.MaxConcurrency > 0 && sp.gated {
		rc.q = s.queueFor(sp.tenant, t) // joined once approved
	}
	evs := []*store.Event{{Type: store.EventToolCall, SessionID: c.SessionID, CallID: c.ID, Time: now,
		Data: (&toolCallData{Tool: t.Name, Arguments: sp.args, CallerType: sp.caller, ParentID: optString(sp.parent),
			RevisionID: optString(t.RevisionID)}).appendJSON(make([]byte, 0, 64+len(t.Name)+len(sp.args)))}}
	switch {
	case rc.refusal != nil:
	case sp.gated:
		c.StartedAt = time.Time{}
		evs = append(evs, s.waitForInput(&c, t, store.InputApproval, now.Add(s.config().Approvals.Timeout)))
	case queued:
		c.Status, c.StartedAt = store.CallQueued, time.Time{}
	case t.Function():
		evs = append(evs, s.waitForInput(&c, t, store.InputFunction, now.Add(t.Timeout())))
	}
	rc.set(c)
	err := s.storeCall(reqCtx, &c, evs, settled)
	if taken {
		rc.q.stored()
	}
	if err != nil {
		if queued {
			rc.q.unpend()
		} else if rc.q != nil {
			rc.q.leave(rc)
		}
		s.unregister(rc)
		span.End()
		var se *store.StateError
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, httpapi.NotFound("session %q not found", c.SessionID)
		case errors.As(err, &se):
			return nil, httpapi.Conflict("session %q is %s", c.SessionID, se.Status)
		}
		s.settleUncertainCreate(c, t, err)
		return nil, fmt.Errorf("%w; the call was not sent, and should the store hold it after all, brain ends it as not sent", err)
	}
	rc.ord = c.Ord
	rc.set(c)
	if queued {
		rc.q.join(rc, true)
		if s.shared != nil && rc.q.holds(rc) {
			// A shared queue stores every capped call queued first; one
			// that found a slot free goes on before it is answered, as
			// on a single brain. Should the write fail, run tries again
			// and ends the call.
			s.begin(ctx, rc)
		}
	}
	s.spawn(func() { s.execute(ctx, rc) })
	return rc, nil
}

// settleUncertainCreate has call c, a call of t whose write failed with
// err for a reason of the store's, ended as not sent (storeRefusal) should
// the store hold it after all: a write whose connection was lost with its
// commit (a database crash, a failover) may have committed. Nobody runs
// such a call, and on a shared store this replica, its owner, would renew
// its lease for as long as it lives: the call would stay running, its
// session could not be closed and its slot (max_concurrency) would stay
// taken. One goroutine (settleLoop) reads such calls back, however many
// writes an outage fails.
func (s *Server) settleUncertainCreate(c store.Call, t *config.Tool, err error) {
	if s.callsCtx.Err() != nil {
		return // stopping: the lease's, as for any call brain leaves
	}
	s.settleMu.Lock()
	defer s.settleMu.Unlock()
	if len(s.unsettled) >= maxUnsettled {
		s.log.Warn("too many tool calls whose write failed to read back; this one is left to its lease", "call_id", c.ID, "tool", c.Tool)
		return
	}
	s.unsettled = append(s.unsettled, unsettled{id: c.ID, tenant: c.TenantID, t: t, err: err, at: time.Now()})
	if len(s.unsettled) == 1 {
		s.settleOnce.Do(func() { go s.settleLoop() })
		select {
		case s.settleKick <- struct{}{}:
		default:
		}
	}
}

// unsettled is a call settleLoop is to read back.
type unsettled struct {
	id, tenant string
	t          *config.Tool
	err        error
	at         time.Time
}

// maxUnsettled bounds the calls settleLoop holds: past it, a call whose
// write failed is left to its lease, which runs out when brain stops.
const maxUnsettled = 10000

// settleAfter is how long after a failed write settleLoop first reads the
// call back (a commit a lost connection left under way has ended by then).
const settleAfter = time.Second

// settleLoop reads back the calls settleUncertainCreate names, each at
// least settleAfter after its failure, until brain stops: a call the store
// does not hold, or holds ended, is done with; one it holds unfinished
// ends as not sent. While the store fails, it tries again every two
// settleAfter (one read a try: a call ends within about two seconds of
// the store answering again); calls left when brain stops are their
// lease's (taken over, brain_restarted, once it runs out).
func (s *Server) settleLoop() {
	pause := settleAfter
	for {
		select {
		case <-s.callsCtx.Done():
			return
		case <-s.settleKick:
		}
		for {
			select {
			case <-s.callsCtx.Done():
				return
			case <-time.After(pause):
			}
			s.settleMu.Lock()
			due := slices.Clone(s.unsettled)
			s.settleMu.Unlock()
			done, failed := 0, false
			for _, u := range due {
				if time.Since(u.at) < settleAfter {
					break
				}
				if err := s.settle(u); err != nil {
					failed = true
					break
				}
				done++
			}
			s.settleMu.Lock()
			s.unsettled = s.unsettled[done:]
			left := len(s.unsettled)
			s.settleMu.Unlock()
			pause = settleAfter
			if failed {
				pause *= 2
			}
			if left == 0 {
				break
			}
		}
	}
}

// settle reads call u back and ends it as not sent when the store holds
// it unfinished; it fails only when the store does.
func (s *Server) settle(u unsettled) error {
	ctx, cancel := context.WithTimeout(s.callsCtx, storeWait)
	defer cancel()
	got, err := s.store.Call(ctx, u.tenant, u.id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	case store.Terminal(got.Status):
		return nil
	}
	s.log.Warn("tool call stored though its write failed; ending it as not sent", "call_id", u.id, "tool", got.Tool, "write_err", u.err)
	if _, err := s.finishWith(s.callsCtx, u.t, got, storeRefusal(u.t, u.err), true); err != nil {
		// Another replica's by now (it took the call over), or brain is
		// stopping: either way no longer this one's.
		s.log.Warn("end a tool call stored though its write failed", "call_id", u.id, "tool", got.Tool, "err", err)
	}
	if u.t.MaxConcurrency > 0 {
		s.queueFor(u.tenant, u.t).done(nil) // a slot it held is free
	}
	return nil
}

// storeCall stores c with evs once settled is closed (nil: at once): a
// queued call waits for the calls that took a slot before it to be
// stored, so that it comes after them in the stored order.
func (s *Server) storeCall(ctx context.Context, c *store.Call, evs []*store.Event, settled <-chan struct{}) error {
	if settled != nil {
		select {
		case <-settled:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return s.store.CreateCall(ctx, c, evs...)
}

// register adds rc to the calls in flight, unless brain is draining or its
// session is ending.
func (s *Server) register(rc *running) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.drainBegan.IsZero() {
		return errShuttingDown()
	}
	if cs, ok := s.sessions[rc.sessionID]; ok && cs.Status != store.SessionActive {
		return httpapi.Conflict("session %q is %s", rc.sessionID, cs.Status)
	}
	if e, ok := s.ending[rc.sessionID]; ok {
		return httpapi.Conflict("session %q is being %s", rc.sessionID, e.to)
	}
	if s.remotelyEnding(rc.sessionID) {
		return httpapi.Conflict("session %q is being ended", rc.sessionID)
	}
	s.inflight[rc.id] = rc
	if s.bySession[rc.sessionID] == nil {
		s.bySession[rc.sessionID] = map[string]*running{}
	}
	s.bySession[rc.sessionID][rc.id] = rc
	s.calls.Add(1)
	return nil
}

// unregister undoes register for a call that was never stored. An
// endSession that collected rc waits for done; the call never existed, so
// there is no final state (final stays nil).
func (s *Server) unregister(rc *running) {
	s.forget(rc)
	rc.cancel(nil)
	close(rc.done)
	s.calls.Done()
}

func (s *Server) forget(rc *running) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, rc.id)
	if m := s.bySession[rc.sessionID]; m != nil {
		delete(m, rc.id)
		if len(m) == 0 {
			delete(s.bySession, rc.sessionID)
		}
	}
}

// waitForInput makes c, a call of t, wait in requires_input for an answer
// of kind until expires, and returns its tool.requires_input event.
func (s *Server) waitForInput(c *store.Call, t *config.Tool, kind string, expires time.Time) *store.Event {
	c.Status, c.InputKind, c.ResponseExpiresAt = store.CallRequiresInput, kind, expires.UTC()
	if kind == store.InputApproval {
		c.Prompt, c.ResponseSchema = approvalPrompt(c), approvalResponseSchema
	} else {
		c.Prompt, c.ResponseSchema = functionPrompt(c), functionResponseSchema(t)
	}
	return &store.Event{Type: store.EventToolRequiresInput, SessionID: c.SessionID, CallID: c.ID, Time: time.Now().UTC(),
		Data: mustJSON(requiresInputData{Tool: c.Tool, Kind: kind, Prompt: c.Prompt, ResponseSchema: c.ResponseSchema,
			ResponseExpiresAt: timeString(c.ResponseExpiresAt)})}
}

// ended is how run ended a call: its outcome, the answer that decided it
// (recorded with it, tool.responded before tool.result), or park: the call
// was left waiting as stored, for the next brain to take up.
type ended struct {
	out    invoke.Outcome
	answer *answer
	park   bool
}

// execute runs the call and records how it ended.
func (s *Server) execute(ctx context.Context, rc *running) {
	defer s.calls.Done()
	e := s.run(ctx, rc)
	rc.finishing.Store(true)
	c := rc.snapshot()
	var final *store.Call
	if e.park || rc.takenOver.Load() {
		// Only a parked call's answer is this copy; finishWith returns
		// its own, so c stays off the heap. A call another replica took
		// over is that replica's to record: it ends here as last stored.
		final = new(store.Call)
		*final = c
		if e.answer != nil {
			e.answer.recorded(final, invoke.ErrTakenOver)
		}
	} else {
		var evs []*store.Event
		if e.answer != nil && e.answer.given() {
			evs = append(evs, e.answer.event(&c))
		}
		if rc.gate != nil {
			pendingWithdrawal(ctx, rc, &c)
		}
		var err error
		final, err = s.finishWith(context.WithoutCancel(ctx), rc.t, &c, e.out, true, evs...)
		switch {
		case err == nil:
		case s.takenOver(rc, err):
			// Not this replica's result to record: the call ends as its
			// new owner records it.
			final = new(store.Call)
			*final = rc.snapshot()
		default:
			// The store did not take the result (brain is stopping with the
			// store failing): the call stays unfinished on disk and the next
			// brain, or replica, ends it brain_restarted. Waiters get it as
			// stored, not an end the store has not got.
			s.logStoreFailure("record tool result: left as stored for the next brain", err, "call_id", c.ID, "tool", c.Tool)
			s.mu.Lock()
			s.unrecorded = append(s.unrecorded, c.ID)
			s.mu.Unlock()
			final = new(store.Call)
			*final = rc.snapshot()
		}
		if e.answer != nil {
			e.answer.recorded(final, err)
		}
	}
	if rc.q != nil {
		rc.q.done(rc)
	}
	rc.final = final
	endSpan(rc.span, final)
	s.forget(rc)
	close(rc.done)
	rc.cancel(nil)
}

// pendingWithdrawal sets on c, approval call rc as it ends, the
// withdrawal of its approval that is not over yet (Call.WithdrawUntil),
// stored with the end so that it outlives this brain. When rc ends
// because its session did, its gated call, cancelled with it, is about to
// decide whether it withdraws the approval: rc waits for that first, or
// the withdrawal would start after rc was stored without it.
func pendingWithdrawal(ctx context.Context, rc *running, c *store.Call) {
	if errors.Is(context.Cause(ctx), errSessionEnded) && rc.decided != nil {
		select {
		case <-rc.decided:
		case <-rc.gate.done:
		}
	}
	if rc.withdrawing.Load() && !rc.withdrawn.Load() {
		c.WithdrawUntil = rc.withdrawUntil
	}
}

// endSpan ends a call's span with how the call ended: its status, error
// code and unknown_outcome, and an error status unless it succeeded.
func endSpan(span oteltrace.Span, c *store.Call) {
	if span == nil {
		return
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("tool.status", c.Status))
		if store.Terminal(c.Status) && c.Status != store.CallSucceeded {
			span.SetAttributes(attribute.String("tool.error_code", c.ErrorCode), attribute.Bool("tool.unknown_outcome", c.UnknownOutcome))
			span.SetStatus(codes.Error, c.ErrorCode)
		}
	}
	span.End()
}

// run takes the call through its steps (see the top of this file) and
// returns how it ended.
func (s *Server) run(ctx context.Context, rc *running) ended {
	if rc.refusal != nil {
		return ended{out: *rc.refusal}
	}
	c := rc.snapshot()
	if c.Status == store.CallRequiresInput && c.InputKind == store.InputApproval {
		if e, approved := s.awaitApproval(ctx, rc); !approved {
			return e
		}
	}
	if e, ok := s.admit(ctx, rc); !ok {
		return e
	}
	if rc.q != nil {
		defer rc.q.leave(rc)
	}
	if rc.t.Function() {
		return s.awaitFunction(ctx, rc)
	}
	if rc.gate != nil {
		return s.sendApproval(ctx, rc)
	}
	return ended{out: s.send(ctx, rc)}
}

// admit waits, when the call is capped and does not hold a slot of its
// queue yet, until it gets one (queued, first come first served), then
// stores the call running, or, for a function tool, requires_input. A call
// cancelled while queued was never sent. An uncapped call goes on at once
// (stored running first when it was left queued: by a process whose binding
// had max_concurrency).
func (s *Server) admit(ctx context.Context, rc *running) (ended, bool) {
	status := rc.status()
	if rc.q == nil {
		if status != store.CallQueued {
			return ended{}, true
		}
		return s.begin(ctx, rc)
	}
	if rc.q.holds(rc) {
		if status == store.CallQueued {
			if s.isDraining() {
				// Given a slot a shutdown freed before this call was
				// told of the shutdown: it stays queued for the next
				// brain.
				rc.q.leave(rc)
				return ended{park: true}, false
			}
			// Stored queued and given a slot at once (a shared queue
			// hands slots out only to stored calls).
			e, ok := s.begin(ctx, rc)
			if !ok {
				rc.q.leave(rc)
			}
			return e, ok
		}
		return ended{}, true
	}
	// Stored queued and among its queue's waiting calls: by start, by a
	// take-up, or, approved, by awaitApproval.
	select {
	case <-rc.admitted:
	case <-ctx.Done():
	}
	if ctx.Err() != nil {
		rc.q.leave(rc)
		return s.stopWaiting(ctx, rc, false), false
	}
	if s.isDraining() {
		// A slot freed by a call that shutdown cancelled, before this
		// call's own cancel came: it stays queued for the next brain.
		rc.q.leave(rc)
		return ended{park: true}, false
	}
	e, ok := s.begin(ctx, rc)
	if !ok {
		rc.q.leave(rc)
	}
	return e, ok
}

// begin stores a queued call that may go on: running, or, for a function
// tool, requires_input until its answer is due.
func (s *Server) begin(ctx context.Context, rc *running) (ended, bool) {
	c := rc.snapshot()
	now := time.Now().UTC()
	c.StartedAt = now
	var evs []*store.Event
	if rc.t.Function() {
		evs = append(evs, s.waitForInput(&c, rc.t, store.InputFunction, now.Add(rc.t.Timeout())))
	} else {
		c.Status = store.CallRunning
	}
	if err := s.store.UpdateCall(context.WithoutCancel(ctx), &c, []string{store.CallQueued}, evs...); err != nil {
		s.takenOver(rc, err)
		return ended{out: storeRefusal(rc.t, err)}, false
	}
	rc.set(c)
	return ended{}, true
}

// stopWaiting is how a call that waits for an answer or a slot ends when
// ctx is done: at shutdown it is parked (left waiting as stored, for the
// next brain); otherwise it is cancelled, sent (to the application, for a
// function tool in requires_input) or not.
func (s *Server) stopWaiting(ctx context.Context, rc *running, sent bool) ended {
	cause := context.Cause(ctx)
	if errors.Is(cause, errShutdown) || errors.Is(cause, invoke.ErrTakenOver) {
		return ended{park: true}
	}
	return ended{out: invoke.Cancelled(rc.t, sent, cause)}
}

// storeRefusal is the outcome of a call brain could not move on because the
// store refused the step: it is not sent, since a call sent without its
// step recorded could be sent again after a restart.
func storeRefusal(t *config.Tool, err error) invoke.Outcome {
	return invoke.Refused(invoke.CodeCancelled, fmt.Sprintf("tool %s: the call was not sent: brain could not record it: %v", t.Name, err))
}

// send sends the call to its tool and returns the outcome.
func (s *Server) send(ctx context.Context, rc *running) invoke.Outcome {
	c := rc.snapshot()
	req := tool.Request{TenantID: c.TenantID, SessionID: c.SessionID, CallID: c.ID, Arguments: c.Arguments}
	var (
		tok string
		g   *grant
	)
	if rc.t.InspectSession {
		tok, g = s.issueToken(ctx, &c)
		req.InspectionToken, req.BrainURL = tok, s.brainURL()
	}
	inFlight := s.metrics.Tool(metricToolOf(&c, rc.t, s.config()), transportOf(rc.t)).InFlight
	inFlight.Inc()
	defer inFlight.Dec()
	// The callback keeps the call's ids, not a copy of the call.
	sessionID, callID := c.SessionID, c.ID
	out := s.invokerFor(rc.t).Call(ctx, rc.t, req, func(data json.RawMessage) {
		s.publishProgress(ctx, sessionID, callID, data)
	})
	if g != nil {
		// "An inspection_token can read the session's events until the call
		// returns."
		s.revokeToken(ctx, tok, g)
	}
	return out
}

// finish stores the outcome of call c with evs and its tool.result event,
// and counts it in the metrics. It returns the finished call even when
// storing failed, and does not try again: it ends the calls a stopped
// brain left (takeUp), which are left for the next round when the store
// fails.
func (s *Server) finish(ctx context.Context, c *store.Call, out invoke.Outcome, evs ...*store.Event) (*store.Call, error) {
	return s.finishWith(ctx, s.callTool(c), c, out, false, evs...)
}

// escapeNUL writes each NUL (U+0000) of msg as the four characters \x00. An
// error message may quote a tool's text (its is_error content, a function
// tool's answer), which may hold a NUL: the message is kept in a text
// column, where PostgreSQL holds no NUL (SQLite does), and the call would
// not finish there. The result keeps the text as the tool gave it, in
// JSON, escaped.
func escapeNUL(msg string) string {
	return strings.ReplaceAll(msg, "\x00", `\x00`)
}

// finishWith is finish of c, a call of binding t (nil when none has it);
// with retry, the call's own goroutine ending it, a write the store fails
// is tried again (retryFinish).
func (s *Server) finishWith(ctx context.Context, t *config.Tool, c *store.Call, out invoke.Outcome, retry bool, evs ...*store.Event) (*store.Call, error) {
	now := time.Now().UTC()
	status := out.Status
	if !store.Terminal(status) {
		status = store.CallFailed
	}
	res := out.Result
	result := encodeResult(&res)
	f := *c
	f.Status, f.FinishedAt, f.ErrorCode, f.ErrorMessage = status, now, out.ErrorCode, escapeNUL(out.ErrorMessage)
	f.UnknownOutcome, f.Result = res.UnknownOutcome, result
	f.Prompt, f.ResponseSchema, f.ResponseExpiresAt = "", nil, time.Time{}
	f.Retryable = nil
	if status != store.CallSucceeded {
		r := out.Retryable
		f.Retryable = &r
	}
	start := c.StartedAt
	if start.IsZero() {
		start = c.CreatedAt
	}
	dur := now.Sub(start)
	evs = append(evs, &store.Event{Type: store.EventToolResult, SessionID: c.SessionID, CallID: c.ID, Time: now,
		Data: (&toolResultData{Tool: c.Tool, Status: status, ErrorCode: optString(out.ErrorCode),
			Retryable: f.Retryable, Result: result, DurationMS: dur.Milliseconds()}).appendJSON(make([]byte, 0, 128+len(c.Tool)+len(result)))})
	wctx := ctx
	if retry {
		// A store that hangs (a database paused, a network cut) is a store
		// that failed: the write is tried again.
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, storeWait)
		defer cancel()
	}
	if err := s.store.FinishCall(wctx, &f, evs...); err != nil {
		if !retry {
			return &f, err
		}
		if err := s.retryFinish(ctx, &f, evs, err); err != nil {
			return &f, err
		}
	}
	s.metrics.Tool(metricToolOf(c, t, s.config()), transportOf(t)).Done(status, out.ErrorCode, dur)
	return &f, nil
}

// retryFinish writes final state f of a call and its events again, the
// first write having failed with err for a reason of the store's (the
// database unreachable, a failover, a full disk), with a jittered
// exponential backoff (cenkalti/backoff, every 10 s at most) until the
// store takes it or brain shuts down: meanwhile the call is running, in
// memory as in the store, so that no replica and no waiter is told an end
// the store has not got; left unrecorded it would stay running in the
// store, renewed by its replica on PostgreSQL as long as that lives. A
// refusal that another try would not change (store.StateError: the call
// ended already, or another replica owns it: its lease ran out in the
// outage) ends the tries; when the call ended as f says, an earlier try
// that reported a failure did commit (a connection lost with its commit),
// and the write is done. At shutdown one more try is made, then the call
// is left as stored for the next brain (brain_restarted).
func (s *Server) retryFinish(ctx context.Context, f *store.Call, evs []*store.Event, err error) error {
	var se *store.StateError
	if errors.As(err, &se) {
		return err
	}
	s.log.Warn("record tool result: the store failed; trying again until it takes it", "call_id", f.ID, "tool", f.Tool, "err", err)
	tries := 1
	try := func() error {
		tries++
		tctx, cancel := context.WithTimeout(ctx, storeWait)
		defer cancel()
		err := s.store.FinishCall(tctx, f, evs...)
		if errors.As(err, &se) {
			// An earlier try may have committed and lost its answer: the
			// call then reads as ended as f says, at f's time.
			if got, rerr := s.store.Call(tctx, f.TenantID, f.ID); rerr == nil && got.Status == f.Status &&
				got.FinishedAt.Sub(f.FinishedAt).Abs() < time.Millisecond && got.ErrorCode == f.ErrorCode {
				return nil
			}
			return backoff.Permanent(err)
		}
		return err
	}
	_, err = backoff.Retry(s.callsCtx, func() (struct{}, error) { return struct{}{}, try() },
		backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: 200 * time.Millisecond, RandomizationFactor: 0.5,
			Multiplier: 1.5, MaxInterval: 10 * time.Second}), backoff.WithMaxElapsedTime(0))
	if err != nil && s.callsCtx.Err() != nil && errors.Is(err, context.Cause(s.callsCtx)) {
		err = try() // brain is stopping: one more try, bounded by storeWait
	}
	if err == nil {
		s.log.Info("record tool result: recorded after the store failed", "call_id", f.ID, "tool", f.Tool, "tries", tries)
	}
	return err
}

// callTool is the binding call c runs with: its own while in flight, else
// the host config's; nil when neither has it.
func (s *Server) callTool(c *store.Call) *config.Tool {
	if rc, ok := s.lookupRunning(c.ID); ok {
		return rc.t
	}
	t, _ := s.config().Tool(c.Tool)
	return t
}

// metricToolOf is the tool label in the metrics of call c, made with
// binding t (its own while in flight, else the host config's; nil when
// neither has it) under host config cfg: the binding's name for the host
// config's tools; for tools of a tenant's making, whose names are the
// tenant's data (and as many as tenants make), "(custom)" or
// "(session)".
func metricToolOf(c *store.Call, t *config.Tool, cfg *config.Config) string {
	if c.RevisionID != "" {
		return "(custom)"
	}
	if t != nil && !t.Trusted() {
		return "(" + t.Origin + ")"
	}
	if _, ok := cfg.Tool(c.Tool); ok {
		return c.Tool
	}
	return "(session)"
}

// errShuttingDown is the refusal of a request brain cannot answer because
// it is shutting down.
func errShuttingDown() *httpapi.Error {
	return httpapi.Unavailable("brain is shutting down; retry once it is back")
}

// wait waits up to d for rc to finish (or ctx to end) and returns the call as
// it is then. At shutdown the calls in flight record their final state (or
// are left waiting, as stored) before request contexts end (see Serve), so
// a waiter gets that state; only when brain goes away before the record (a
// call outlasting the shutdown grace) does the wait end with 503 instead of
// a call that only looks still running.
func (s *Server) wait(ctx context.Context, rc *running, d time.Duration) (*store.Call, error) {
	start := time.Now()
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-rc.done:
		case <-t.C:
		case <-ctx.Done():
		case <-s.waitsEnd:
		}
	}
	select {
	case <-rc.done:
		if rc.takenOver.Load() {
			// Another replica owns the call: it is as that one records it.
			c := rc.snapshot()
			return s.waitStored(ctx, c.TenantID, c.ID, max(d-time.Since(start), 0))
		}
		return rc.final, nil
	default:
		if s.waitsEnded() {
			return nil, httpapi.Unavailable("brain is shutting down before call %q recorded its final state; read it again once brain is back", rc.id)
		}
		if err := ctx.Err(); err != nil {
			return nil, err // the client left: 499, not an answer nobody reads
		}
		c := rc.snapshot()
		return &c, nil
	}
}

func (s *Server) lookupRunning(id string) (*running, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rc, ok := s.inflight[id]
	return rc, ok
}

// queuePosition is the place of queued call c in its binding's queue, 1
// for the next to go; nil when c is not queued here.
func (s *Server) queuePosition(c *store.Call) *int {
	if c.Status != store.CallQueued {
		return nil
	}
	if s.shared != nil {
		// The queue is the store's, whichever replica runs the call.
		t, ok := s.config().Tool(c.Tool)
		if !ok || t.MaxConcurrency == 0 {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeWait)
		defer cancel()
		n, err := s.shared.QueuePosition(ctx, store.Queue{TenantID: c.TenantID, Tool: c.Tool, Max: t.MaxConcurrency}, c.ID)
		if err != nil || n == 0 {
			if err != nil {
				s.log.Warn("queue position", "call_id", c.ID, "err", err)
			}
			return nil
		}
		return &n
	}
	rc, ok := s.lookupRunning(c.ID)
	if !ok || rc.q == nil {
		return nil
	}
	if n := rc.q.position(rc); n > 0 {
		return &n
	}
	return nil
}

// toolForCall is the binding a call left waiting by a previous process
// goes on with: the custom-tool revision it recorded, the tool of its
// session's tool set, or the host config's binding; nil when none has it
// any more. The refusal is a custom tool's missing secret.
func (s *Server) toolForCall(ctx context.Context, c *store.Call) (*config.Tool, *invoke.Outcome, error) {
	if c.RevisionID != "" {
		rev, err := s.store.ToolRevision(ctx, c.TenantID, c.RevisionID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		t, err := s.revisionTool(rev)
		if errors.Is(err, errRevisionDoesNotCompile) {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, err
		}
		return s.withSecret(ctx, c.TenantID, t)
	}
	sess, err := s.store.Session(ctx, c.TenantID, c.SessionID)
	if err != nil {
		return nil, nil, err
	}
	ts, err := s.toolSetOf(ctx, sess)
	if err != nil {
		return nil, nil, err
	}
	ts.mu.Lock()
	t, ok := ts.tools[c.Tool]
	ts.mu.Unlock()
	if ok {
		return t, nil, nil
	}
	if h, ok := s.config().Tool(c.Tool); ok {
		return h, nil, nil
	}
	return nil, nil, nil
}

// recoverCalls takes up the calls a previous process left unfinished, in
// their stored order. A running call may or may not have reached its tool:
// it ends failed, brain_restarted, with an unknown outcome — except the
// approval call of a gated call that waits again, which is sent again with
// its call ID (brain's own request, which the approval tool attaches to the
// approval it recorded: the operator answers the approval already on the
// page, not a second one). A call that was waiting — for an answer
// (requires_input) or a slot (queued) — was not sent: it waits again,
// answerable as before (an approval call is made anew when it had none
// running), or queued in its place; one whose wait has expired ends as it
// would have. A call whose binding left the host config, or whose session
// has ended, ends without being sent. A withdrawal left pending on an
// approval call that had ended is sent again (resumeWithdrawal).
func (s *Server) recoverCalls(ctx context.Context) error {
	calls, err := s.store.UnfinishedCalls(ctx)
	if err != nil {
		return fmt.Errorf("recover calls: %w", err)
	}
	left, err := s.store.PendingWithdrawals(ctx)
	if err != nil {
		return fmt.Errorf("recover calls: %w", err)
	}
	_, err = s.takeUp(ctx, append(calls, left...))
	return err
}

// takeUp takes up calls whose brain process is gone, as recoverCalls says:
// those a previous process left (SQLite, at start), or those of a replica
// whose lease ran out (PostgreSQL, the lease loop), which this replica now
// owns. A finished call among them has a withdrawal pending. A call it
// cannot take up (the store failing) is skipped and the others are taken
// up all the same; it returns the IDs of those skipped, and their errors
// joined.
func (s *Server) takeUp(ctx context.Context, calls []*store.Call) (skipped []string, _ error) {
	var errs []error
	skip := func(c *store.Call, err error) {
		skipped = append(skipped, c.ID)
		errs = append(errs, fmt.Errorf("recover call %s: %w", c.ID, err))
	}
	type takenUp struct {
		rc  *running
		ctx context.Context
	}
	var waiting []takenUp
	// The approval calls to send again, by gated call; each is taken up with
	// its gated call (resent), or ends brain_restarted after the loop when
	// that call does not wait again.
	resend := approvalsToResend(calls, time.Now())
	resent := map[string]bool{}
	for i, c := range calls {
		if err := ctx.Err(); err != nil {
			// brain is stopping (a signal during start-up, or shutdown):
			// the rest stay as stored, for the next start or replica.
			errs = append(errs, fmt.Errorf("%d of %d calls not taken up: %w", len(calls)-i, len(calls), err))
			break
		}
		if store.Terminal(c.Status) {
			s.resumeWithdrawal(c)
			continue
		}
		if c.Status == store.CallRunning {
			if c.ParentID != "" && resend[c.ParentID] == c {
				continue
			}
			if err := s.endRestarted(ctx, c); err != nil {
				skip(c, err)
				continue
			}
			s.resumeWithdrawal(c)
			continue
		}
		t, out, err := s.toolForCall(ctx, c)
		if err != nil {
			skip(c, err)
			continue
		}
		sess, err := s.store.Session(ctx, c.TenantID, c.SessionID)
		if err != nil {
			skip(c, err)
			continue
		}
		switch {
		case out != nil:
		case t == nil:
			o := invoke.Refused(invoke.CodeNotInConfig, fmt.Sprintf("tool %s is no longer in brain's host config or the session's tool set; the call was not sent", c.Tool))
			out = &o
		case (c.InputKind == store.InputFunction) != t.Function() && c.Status == store.CallRequiresInput:
			// A call that waited for the application's answer is never sent
			// to a url, nor one that waited for its approval answered as a
			// function tool's.
			o := invoke.Refused(invoke.CodeNotInConfig, fmt.Sprintf("tool %s changed kind in brain's host config while the call waited; the call was not sent", c.Tool))
			out = &o
		case sess.Status != store.SessionActive || s.sessionEnding(c.SessionID):
			// A session being interrupted or closed, here or on another
			// replica, waits for this call to end: it ends as the session
			// would have ended it (register would refuse it).
			o := invoke.Cancelled(t, false, errSessionEnded)
			out = &o
		}
		if out != nil {
			if _, err := s.finish(ctx, c, *out); err != nil {
				skip(c, err)
			}
			continue
		}
		callCtx, cancel := context.WithCancelCause(s.callsCtx)
		rc := newRunning(*c, t, cancel)
		rc.ord = c.Ord
		if err := s.register(rc); err != nil {
			cancel(nil)
			skip(c, err)
			continue
		}
		if t.MaxConcurrency > 0 {
			rc.q = s.queueFor(c.TenantID, t)
			// A function call waiting for its answer holds its slot again.
			if c.Status == store.CallRequiresInput && c.InputKind == store.InputFunction {
				rc.q.hold(rc)
			}
		}
		waiting = append(waiting, takenUp{rc, callCtx})
		s.log.Info("took up a call left waiting by a previous process", "call_id", c.ID, "tool", c.Tool, "status", c.Status)
		if ac := resend[c.ID]; ac != nil {
			if child, childCtx := s.resumeApproval(rc, ac); child != nil {
				resent[c.ID] = true
				rc.approval = child
				waiting = append(waiting, takenUp{child, childCtx})
			}
		}
	}
	for gate, c := range resend {
		if resent[gate] || ctx.Err() != nil {
			continue
		}
		if err := s.endRestarted(ctx, c); err != nil {
			skip(c, err)
			continue
		}
		s.resumeWithdrawal(c)
	}
	// The queued calls join once every held slot is counted, in their
	// stored order.
	for _, w := range waiting {
		if w.rc.q != nil && w.rc.call.Status == store.CallQueued {
			w.rc.q.join(w.rc, false)
		}
	}
	for _, w := range waiting {
		go s.execute(w.ctx, w.rc)
		if s.shared != nil && w.rc.call.Status == store.CallRequiresInput {
			// Answers given through other replicas while nobody ran it.
			go s.takeAnswers(w.rc.id)
		}
	}
	return skipped, errors.Join(errs...)
}

// endRestarted ends call c, left running by a brain process that is gone:
// it may or may not have reached its tool, so it fails, brain_restarted,
// with an unknown outcome, and is never sent again. When c is the approval
// call of a gated call that does not wait for it again (answered, ended,
// expired, or its approval call not taken up) and the host config names a
// cancel tool for its tenant, its approval is to be withdrawn while it has
// not expired: nobody is left to act on its answer. That withdrawal is
// stored pending with c's end (c.WithdrawUntil), for resumeWithdrawal to
// send, so that a brain stopping before it is through leaves it to the
// next one.
func (s *Server) endRestarted(ctx context.Context, c *store.Call) error {
	if isApprovalCall(c) {
		if until := approvalExpiry(c, s.config().Approvals.Timeout); time.Now().Before(until) {
			if s.cancelTool(c.TenantID) != nil {
				c.WithdrawUntil = until
			} else {
				s.log.Warn("an approval call ended by a restart leaves its approval pending on the approval tool until it expires: the host config names no cancel tool for its tenant to withdraw it",
					"approval_call_id", c.ID, "parent_id", c.ParentID, "tenant_id", c.TenantID, "until", until.Format(time.RFC3339))
			}
		}
	}
	res := tool.Result{
		Content:        []tool.Content{tool.Text("brain restarted while this call was in flight; the tool may or may not have done the work")},
		IsError:        true,
		UnknownOutcome: true,
	}
	out := invoke.Outcome{Result: res, Status: store.CallFailed, ErrorCode: invoke.CodeBrainRestarted,
		ErrorMessage: "brain restarted before the call finished", Sent: true}
	if _, err := s.finish(ctx, c, out); err != nil {
		return fmt.Errorf("recover call %s: %w", c.ID, err)
	}
	s.log.Warn("ended call left in flight by a brain process that stopped", "call_id", c.ID, "tool", c.Tool, "session_id", c.SessionID)
	if t, ok := s.config().Tool(c.Tool); ok && t.MaxConcurrency > 0 {
		// Its slot is free: the next call of its queue goes on.
		s.queueFor(c.TenantID, t).done(nil)
	}
	return nil
}

// resumeWithdrawal sends, on a goroutine, the withdrawal pending on c, a
// finished approval call (c.WithdrawUntil; none: nothing to do), whose
// sender is gone, and clears it once it is over. One whose approval has
// expired, or that the host config names no cancel tool for any more, is
// cleared at once: the approval tool expires the approval itself.
func (s *Server) resumeWithdrawal(c *store.Call) {
	if c.WithdrawUntil.IsZero() {
		return
	}
	ct := s.cancelTool(c.TenantID)
	if ct == nil || !time.Now().Before(c.WithdrawUntil) {
		if ct == nil {
			// Its approval stays answerable on the approval tool's page
			// until it expires: the operator is to know why.
			s.log.Warn("dropped the withdrawal of an approval left pending by a brain process that stopped: the host config names no cancel tool for its tenant any more; it stays pending on the approval tool until it expires",
				"approval_call_id", c.ID, "parent_id", c.ParentID, "tenant_id", c.TenantID, "until", c.WithdrawUntil.Format(time.RFC3339))
		}
		s.clearWithdrawal(c.ID)
		return
	}
	s.log.Info("sending the withdrawal of an approval left pending by a brain process that stopped",
		"approval_call_id", c.ID, "parent_id", c.ParentID, "until", c.WithdrawUntil.Format(time.RFC3339))
	s.background.Go(func() {
		if s.withdraw(s.callsCtx, ct, c, c.WithdrawUntil) {
			s.clearWithdrawal(c.ID)
		}
	})
}

// clearWithdrawal clears the pending withdrawal of approval call id once
// it is over. Should the store refuse, the next brain sends it again, and
// the approval tool answers that there is nothing left to withdraw.
func (s *Server) clearWithdrawal(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), storeWait)
	defer cancel()
	if err := s.store.ClearWithdrawal(ctx, id); errors.Is(err, store.ErrNotOwner) {
		s.log.Info("a pending withdrawal not cleared: another brain replica took it over and sends it", "approval_call_id", id)
	} else if err != nil {
		s.log.Warn("clear a pending withdrawal; it is sent again after a restart", "approval_call_id", id, "err", err)
	}
}

// cancelTool is the host config's cancel tool (approvals.cancel_tool)
// when tenant may use it; nil otherwise.
func (s *Server) cancelTool(tenant string) *config.Tool {
	ct := s.config().Approvals.CancelTool
	if ct == nil || !ct.Allowed(tenant) {
		return nil
	}
	return ct
}

// isApprovalCall tells whether c is an approval call: one brain made
// itself (CallerSystem) for its parent, a gated call.
func isApprovalCall(c *store.Call) bool {
	return c.CallerType == store.CallerSystem && c.ParentID != ""
}

// approvalsToResend pairs each gated call among calls that still waits for
// its approval (requires_input, not expired at now) with the approval call
// it had running, by the gated call's ID: takeUp sends that call again,
// with its ID, instead of ending it and making another.
func approvalsToResend(calls []*store.Call, now time.Time) map[string]*store.Call {
	gates := map[string]bool{}
	for _, c := range calls {
		if c.Status == store.CallRequiresInput && c.InputKind == store.InputApproval && now.Before(c.ResponseExpiresAt) {
			gates[c.ID] = true
		}
	}
	out := map[string]*store.Call{}
	for _, c := range calls {
		if c.Status == store.CallRunning && isApprovalCall(c) && gates[c.ParentID] {
			out[c.ParentID] = c
		}
	}
	return out
}

// resumeApproval takes up approval call c, left running for gated call
// gate, which waits again: registered as in flight (holding its slot again
// under max_concurrency), to be sent again with its ID while the gate
// waits. It returns nil when c cannot go on: its binding left the host
// config, or its session is ending.
func (s *Server) resumeApproval(gate *running, c *store.Call) (*running, context.Context) {
	t, ok := s.config().Tool(c.Tool)
	if !ok || t.Function() {
		return nil, nil
	}
	ctx, cancel := context.WithCancelCause(s.callsCtx)
	rc := newRunning(*c, t, cancel)
	rc.ord, rc.gate, rc.decided = c.Ord, gate, make(chan struct{})
	if err := s.register(rc); err != nil {
		cancel(nil)
		return nil, nil
	}
	if t.MaxConcurrency > 0 {
		rc.q = s.queueFor(c.TenantID, t)
		rc.q.hold(rc)
	}
	s.log.Info("took up the approval call of a gated call left waiting; sending it again with its call ID",
		"call_id", c.ID, "parent_id", gate.id, "tool", c.Tool)
	return rc, ctx
}

// workerIdle is how long a call's goroutine waits for the next call
// before it exits.
const workerIdle = 10 * time.Second

// spawn runs f on an idle call goroutine, or a new one when none is idle.
// A call's goroutine needs a stack of tens of KB (schema validation, the
// HTTP client, the result's decoding); one that outlives its call keeps
// it, so that the next call does not pay for growing a new one, which
// cost a call about as much CPU as its schema validation.
func (s *Server) spawn(f func()) {
	select {
	case s.work <- f:
	default:
		go s.worker(f)
	}
}

func (s *Server) worker(f func()) {
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		f()
		t.Reset(workerIdle)
		select {
		case f = <-s.work:
		case <-t.C:
			return
		}
	}
}
