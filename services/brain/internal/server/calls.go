package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/julienschmidt/httprouter"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// createCallRequest is the body of POST /sessions/{id}/tool_calls.
// arguments defaults to {}; wait_seconds (0..60, default 0) is how long to
// wait for the call to finish before answering 202 with the pending call.
type createCallRequest struct {
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	WaitSeconds *int64          `json:"wait_seconds"`
}

func (s *Server) createCall(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, err := s.tenant(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	var req createCallRequest
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	if req.Tool == "" {
		return badRequest("tool: required")
	}
	args := bytes.TrimSpace(req.Arguments)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	if args[0] != '{' {
		return badRequest("arguments: must be a JSON object")
	}
	var wait int64
	if req.WaitSeconds != nil {
		wait = *req.WaitSeconds
		if wait < 0 || wait > MaxWaitSeconds {
			return badRequest("wait_seconds: must be 0..%d, got %d", MaxWaitSeconds, wait)
		}
	}
	sess, err := s.session(r.Context(), tenant, p.ByName("id"))
	if err != nil {
		return err
	}
	if sess.Status != store.SessionActive {
		return conflict("session %q is %s", sess.ID, sess.Status)
	}
	if !slices.Contains(sess.Tools, req.Tool) {
		return badRequest("tool: %q is not enabled in session %q (enabled: %s)", req.Tool, sess.ID, strings.Join(sess.Tools, ", "))
	}
	t, ok := s.cfg.Tool(req.Tool)
	if !ok || !t.Allowed(tenant) {
		// The session was created under a host config that had the tool.
		return badRequest("tool: %q is not in the catalog of tenant %q", req.Tool, tenant)
	}
	rc, err := s.start(r, sess, t, args)
	if err != nil {
		return err
	}
	c, err := s.wait(r.Context(), rc, time.Duration(wait)*time.Second)
	if err != nil {
		return err
	}
	writeCall(w, c)
	return nil
}

func writeCall(w http.ResponseWriter, c *store.Call) {
	status := http.StatusOK
	if !store.Terminal(c.Status) {
		status = http.StatusAccepted
	}
	writeJSON(w, status, callJSON(c))
}

// start records the call with its tool.call event and runs it. The call is
// registered as in flight before it is stored, under the lock endSession
// marks the session with: an interrupt or close that begins after the
// registration finds the call, cancels it and waits for its result; one that
// began before makes start refuse the call (409).
func (s *Server) start(r *http.Request, sess *store.Session, t *config.Tool, args json.RawMessage) (*running, error) {
	now := time.Now().UTC()
	c := store.Call{
		ID: newID("call"), SessionID: sess.ID, TenantID: sess.TenantID, Tool: t.Name, Status: store.CallRunning,
		Arguments: args, CreatedAt: now, StartedAt: now,
	}
	// The call outlives the request; it keeps the request's trace context so
	// invoke sends traceparent (W3C) with it.
	ctx := s.callsCtx
	traced := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if sc := trace.SpanContextFromContext(traced); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	rc := &running{call: c, cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		cancel(nil)
		return nil, errShuttingDown()
	}
	if cs, ok := s.sessions[sess.ID]; ok && cs.Status != store.SessionActive {
		st := cs.Status
		s.mu.Unlock()
		cancel(nil)
		return nil, conflict("session %q is %s", sess.ID, st)
	}
	if e, ok := s.ending[sess.ID]; ok {
		s.mu.Unlock()
		cancel(nil)
		return nil, conflict("session %q is being %s", sess.ID, e.to)
	}
	s.inflight[c.ID] = rc
	if s.bySession[c.SessionID] == nil {
		s.bySession[c.SessionID] = map[string]*running{}
	}
	s.bySession[c.SessionID][c.ID] = rc
	s.calls.Add(1)
	s.mu.Unlock()

	ev := &store.Event{Type: store.EventToolCall, SessionID: c.SessionID, CallID: c.ID, Time: now,
		Data: mustJSON(toolCallData{Tool: t.Name, Arguments: args})}
	if err := s.store.CreateCall(r.Context(), &c, ev); err != nil {
		s.forget(rc)
		cancel(nil)
		// An endSession that collected rc waits for done; the call never
		// existed, so there is no final state (final stays nil).
		close(rc.done)
		s.calls.Done()
		var se *store.StateError
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil, notFound("session %q not found", c.SessionID)
		case errors.As(err, &se):
			return nil, conflict("session %q is %s", c.SessionID, se.Status)
		}
		return nil, fmt.Errorf("create tool call: %w", err)
	}
	go s.execute(ctx, rc, t)
	return rc, nil
}

func (s *Server) forget(rc *running) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, rc.call.ID)
	if m := s.bySession[rc.call.SessionID]; m != nil {
		delete(m, rc.call.ID)
		if len(m) == 0 {
			delete(s.bySession, rc.call.SessionID)
		}
	}
}

// execute sends the call and records its outcome.
func (s *Server) execute(ctx context.Context, rc *running, t *config.Tool) {
	defer s.calls.Done()
	c := &rc.call
	req := tool.Request{TenantID: c.TenantID, SessionID: c.SessionID, CallID: c.ID, Arguments: c.Arguments}
	var (
		tok string
		g   *grant
	)
	if t.InspectSession {
		tok, g = s.tokens.issue(c.TenantID, c.SessionID, c.ID)
		req.InspectionToken, req.BrainURL = tok, s.brainURL()
	}
	out := s.invoker.Call(ctx, t, req, func(data json.RawMessage) {
		s.hub.Publish(store.Event{Type: store.EventToolProgress, SessionID: c.SessionID, CallID: c.ID,
			Time: time.Now().UTC(), Data: data})
	})
	if g != nil {
		// "An inspection_token can read the session's events until the call
		// returns."
		s.tokens.revoke(tok, g)
	}
	final, err := s.finish(context.WithoutCancel(ctx), c, out)
	if err != nil {
		// The store refused the result; the call stays unfinished on disk and
		// a restart ends it as brain_restarted. Waiters still get the outcome.
		s.log.Error("record tool result", "call_id", c.ID, "tool", c.Tool, "err", err)
	}
	rc.final = final
	s.forget(rc)
	close(rc.done)
	rc.cancel(nil)
}

// finish stores the outcome of call c with its tool.result event and counts
// it in the metrics. It returns the finished call even when storing failed.
func (s *Server) finish(ctx context.Context, c *store.Call, out invoke.Outcome) (*store.Call, error) {
	now := time.Now().UTC()
	status := out.Status
	if !store.Terminal(status) {
		status = store.CallFailed
	}
	res := out.Result
	result := mustJSON(&res)
	f := *c
	f.Status, f.FinishedAt, f.ErrorCode, f.ErrorMessage = status, now, out.ErrorCode, out.ErrorMessage
	f.UnknownOutcome, f.Result = res.UnknownOutcome, result
	start := c.StartedAt
	if start.IsZero() {
		start = c.CreatedAt
	}
	dur := now.Sub(start)
	ev := &store.Event{Type: store.EventToolResult, SessionID: c.SessionID, CallID: c.ID, Time: now,
		Data: mustJSON(toolResultData{Tool: c.Tool, Status: status, ErrorCode: optString(out.ErrorCode),
			Result: result, DurationMS: dur.Milliseconds()})}
	if err := s.store.FinishCall(ctx, &f, ev); err != nil {
		return &f, err
	}
	s.metrics.calls.WithLabelValues(c.Tool, status).Inc()
	s.metrics.duration.WithLabelValues(c.Tool, status).Observe(dur.Seconds())
	return &f, nil
}

// errShuttingDown is the refusal of a request brain cannot answer because
// it is shutting down.
func errShuttingDown() *apiError {
	return unavailable("brain is shutting down; retry once it is back")
}

// wait waits up to d for rc to finish (or ctx to end) and returns the call as
// it is then. At shutdown the calls in flight record their final state
// before request contexts end (see Serve), so a waiter gets that state; only
// when brain goes away before the record (a call outlasting the shutdown
// grace) does the wait end with 503 instead of a call that only looks
// still running.
func (s *Server) wait(ctx context.Context, rc *running, d time.Duration) (*store.Call, error) {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-rc.done:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	select {
	case <-rc.done:
		return rc.final, nil
	default:
		if ctx.Err() != nil && s.isDraining() {
			return nil, unavailable("brain is shutting down before call %q recorded its final state; read it again once brain is back", rc.call.ID)
		}
		c := rc.call
		return &c, nil
	}
}

func (s *Server) lookupRunning(id string) (*running, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rc, ok := s.inflight[id]
	return rc, ok
}

// call returns the tenant's call id, or 404.
func (s *Server) call(ctx context.Context, tenant, id string) (*store.Call, error) {
	c, err := s.store.Call(ctx, tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("tool call %q not found", id)
	}
	return c, err
}

// getCall answers GET /tool_calls/{id}[?wait_seconds=N]: 200 with a finished
// call, 202 with one still pending after the wait.
func (s *Server) getCall(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, err := s.tenant(r)
	if err != nil {
		return err
	}
	q, err := query(r, "wait_seconds")
	if err != nil {
		return err
	}
	wait, err := intParam(q, "wait_seconds", 0, MaxWaitSeconds, 0)
	if err != nil {
		return err
	}
	id := p.ByName("id")
	c, err := s.call(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	if !store.Terminal(c.Status) {
		if rc, ok := s.lookupRunning(id); ok {
			if c, err = s.wait(r.Context(), rc, time.Duration(wait)*time.Second); err != nil {
				return err
			}
		} else if c, err = s.call(r.Context(), tenant, id); err != nil {
			// It finished between the read and the lookup.
			return err
		}
	}
	writeCall(w, c)
	return nil
}

// errCallCancelled is the cancel cause of POST /tool_calls/{id}/cancel.
var errCallCancelled = errors.New("tool call cancelled by the client")

// cancelCall answers POST /tool_calls/{id}/cancel: an in-flight call is
// cancelled and the finished call returned (status cancelled, is_error, and
// unknown_outcome when the request had been sent — or the status it reached
// first); a finished call is 409 naming its status.
func (s *Server) cancelCall(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, err := s.tenant(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	var empty struct{}
	if err := s.decodeOptionalBody(r, &empty); err != nil {
		return err
	}
	id := p.ByName("id")
	c, err := s.call(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	if store.Terminal(c.Status) {
		return conflict("tool call %q is already %s", id, c.Status)
	}
	if rc, ok := s.lookupRunning(id); ok {
		rc.cancel(errCallCancelled)
		select {
		case <-rc.done:
			c = rc.final
		case <-r.Context().Done():
			if s.isDraining() {
				return unavailable("brain is shutting down before call %q recorded its final state; read it again once brain is back", id)
			}
			return r.Context().Err()
		}
	} else if c, err = s.call(r.Context(), tenant, id); err != nil {
		return err
	}
	writeCall(w, c)
	return nil
}

// listCalls answers GET /tool_calls?session_id=&tool=&status=&limit=.
func (s *Server) listCalls(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	tenant, err := s.tenant(r)
	if err != nil {
		return err
	}
	q, err := query(r, "session_id", "tool", "status", "limit", "after")
	if err != nil {
		return err
	}
	// An empty filter value would read as "no filter" and list everything
	// (or, for session_id, look up a session named ""): refuse it.
	for _, name := range []string{"session_id", "tool", "status", "after"} {
		if q.Has(name) && q.Get(name) == "" {
			return badRequest("%s: must not be empty (omit it to list calls of every %s)", name, strings.TrimSuffix(name, "_id"))
		}
	}
	f := store.CallFilter{TenantID: tenant, SessionID: q.Get("session_id"), Tool: q.Get("tool"), Status: q.Get("status")}
	if f.Status != "" && !slices.Contains(store.CallStatuses, f.Status) {
		return badRequest("status: unknown status %q (want one of %s)", f.Status, strings.Join(store.CallStatuses, ", "))
	}
	if q.Has("session_id") {
		if _, err := s.session(r.Context(), tenant, f.SessionID); err != nil {
			return err
		}
	}
	limit, err := intParam(q, "limit", 1, store.MaxListLimit, 100)
	if err != nil {
		return err
	}
	if after := q.Get("after"); after != "" {
		if _, err := s.store.Call(r.Context(), tenant, after); errors.Is(err, store.ErrNotFound) {
			return badRequest("after: no tool call %q (pass the next_after of the previous page)", after)
		} else if err != nil {
			return fmt.Errorf("list tool calls: %w", err)
		}
		f.After = after
	}
	// One more than asked tells whether another page follows.
	f.Limit = int(limit) + 1
	calls, err := s.store.Calls(r.Context(), f)
	if err != nil {
		return fmt.Errorf("list tool calls: %w", err)
	}
	more := len(calls) > int(limit)
	if more {
		calls = calls[:limit]
	}
	out := make([]CallJSON, 0, len(calls))
	for _, c := range calls {
		out = append(out, callJSON(c))
	}
	body := map[string]any{"tool_calls": out, "has_more": more}
	if more {
		body["next_after"] = out[len(out)-1].ID
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}
