package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/julienschmidt/httprouter"
)

// createCallRequest is the body of POST /sessions/{id}/tool_calls.
// arguments defaults to {}; wait_seconds (0..60, default 0) is how long to
// wait for the call to finish before answering 202 with the pending call.
type createCallRequest struct {
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	WaitSeconds *int64          `json:"wait_seconds"`
}

// decodeCallRequest is httpapi.DecodeJSON of a createCallRequest. The
// usual body (string tool, any arguments, a plain integer wait_seconds,
// each at most once, nothing else) is read in one pass of a reused
// tokenizer, its arguments left where they are in the body; anything else
// goes to the strict decoder, which refuses it in its own words.
func decodeCallRequest(r *http.Request, limit int64) (createCallRequest, error) {
	var req createCallRequest
	if e := httpapi.CheckJSON(r); e != nil {
		return req, e
	}
	data, err := httpapi.ReadBody(r, limit)
	if err != nil {
		return req, err
	}
	if req, ok := decodeCallFast(data); ok {
		return req, nil
	}
	req = createCallRequest{}
	return req, httpapi.DecodeObject(data, &req)
}

// decodeCallFast reads the usual create-call body in one pass
// (strictjson.ReadObject); ok is false for anything else.
func decodeCallFast(data []byte) (req createCallRequest, ok bool) {
	ok = strictjson.ReadObject(data, func(dec *jsontext.Decoder, name string) bool {
		switch name {
		case "tool":
			v, err := dec.ReadToken()
			if err != nil || v.Kind() != '"' {
				return false
			}
			req.Tool = v.String()
			return true
		case "arguments":
			start := dec.InputOffset()
			if err := dec.SkipValue(); err != nil {
				return false
			}
			// The value starts after the name's ':' and any space.
			req.Arguments = bytes.TrimLeft(data[start:dec.InputOffset()], ": \t\r\n")
			return true
		case "wait_seconds":
			v, err := dec.ReadValue()
			if err != nil || v.Kind() != '0' {
				return false
			}
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return false // 1e1, 2.0, out of range: the strict decoder says
			}
			req.WaitSeconds = &n
			return true
		}
		return false
	})
	if !ok {
		return createCallRequest{}, false
	}
	return req, true
}

func (s *Server) createCall(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, err := s.tenant(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	req, err := decodeCallRequest(r, s.maxBody)
	if err != nil {
		return err
	}
	if req.Tool == "" {
		return httpapi.BadRequest("tool: required")
	}
	args := bytes.TrimSpace(req.Arguments)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	if args[0] != '{' {
		return httpapi.BadRequest("arguments: must be a JSON object")
	}
	var wait int64
	if req.WaitSeconds != nil {
		wait = *req.WaitSeconds
		if wait < 0 || wait > MaxWaitSeconds {
			return httpapi.BadRequest("wait_seconds: must be 0..%d, got %d", MaxWaitSeconds, wait)
		}
	}
	sess, err := s.knownSession(r.Context(), tenant, p.ByName("id"))
	if err != nil {
		return err
	}
	if sess.Status != store.SessionActive {
		return httpapi.Conflict("session %q is %s", sess.ID, sess.Status)
	}
	// The binding as it is now: a call keeps it (and, for a custom tool,
	// its revision) however the tool changes while the call is in flight.
	t, refusal, err := s.sessionTool(r.Context(), sess, req.Tool)
	if err != nil {
		return err
	}
	gated := t.Gated() || sessionGates(sess, t.Name)
	if gated && t.Function() {
		// A tool set stored before PUT refused this (refuseGatedFunction),
		// or a host config that made a gated tool a function tool since.
		return httpapi.Conflict(`tool: session %q gates %q (config.require_approval "always"), which is now a function tool, answered by the application itself: it cannot be gated; replace the session's tool set`, sess.ID, t.Name)
	}
	rc, err := s.start(r.Context(), callSpec{
		tenant: sess.TenantID, sessionID: sess.ID, t: t, args: args, caller: store.CallerAPI, refusal: refusal,
		gated: gated,
		ctx:   r.Context(),
	})
	if err != nil {
		return err
	}
	if rc.refusal != nil {
		// Refused before sending: it ends at once, without the tool, and
		// the caller learns so from this answer whatever wait_seconds.
		wait = MaxWaitSeconds
	}
	c, err := s.wait(r.Context(), rc, time.Duration(wait)*time.Second)
	if err != nil {
		return err
	}
	writeCall(w, c, s.queuePosition(c))
	return nil
}

// writeCall answers with call c: 200 when it has finished, 202 while it is
// pending. pos is its queue position when queued.
func writeCall(w http.ResponseWriter, c *store.Call, pos *int) {
	status := http.StatusOK
	if !store.Terminal(c.Status) {
		status = http.StatusAccepted
	}
	httpapi.WriteJSON(w, status, callAnswer{c, pos})
}

// call returns the tenant's call id, or 404.
func (s *Server) call(ctx context.Context, tenant, id string) (*store.Call, error) {
	c, err := s.store.Call(ctx, tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, httpapi.NotFound("tool call %q not found", id)
	}
	return c, err
}

// unfinishedCall returns the tenant's call id: 404 when there is none, 409
// (naming its status, then why) when it has finished.
func (s *Server) unfinishedCall(ctx context.Context, tenant, id, why string) (*store.Call, error) {
	c, err := s.call(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if store.Terminal(c.Status) {
		return nil, httpapi.Conflict("tool call %q is already %s%s", id, c.Status, why)
	}
	return c, nil
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
		} else if c, err = s.waitStored(r.Context(), tenant, id, time.Duration(wait)*time.Second); err != nil {
			// Finished between the read and the lookup, or running on
			// another replica (or on none: a dead one's lease runs out).
			return err
		}
	}
	writeCall(w, c, s.queuePosition(c))
	return nil
}

// errCallCancelled is the cancel cause of POST /tool_calls/{id}/cancel.
var errCallCancelled = errors.New("tool call cancelled by the client")

// cancelCall answers POST /tool_calls/{id}/cancel: an in-flight call is
// cancelled and the finished call returned (status cancelled, is_error, and
// unknown_outcome when the request had been sent — or the status it reached
// first); a finished call is 409 naming its status. A queued call, or one
// waiting for an approval, was never sent: it ends cancelled, retryable.
func (s *Server) cancelCall(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, err := s.tenant(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	var empty struct{}
	if err := httpapi.DecodeOptionalJSON(r, s.maxBody, &empty); err != nil {
		return err
	}
	id := p.ByName("id")
	// The stored call only has to be unfinished; the answer is its state
	// after the cancel.
	stored, err := s.unfinishedCall(r.Context(), tenant, id, "")
	if err != nil {
		return err
	}
	var c *store.Call
	if rc, ok := s.lookupRunning(id); ok {
		rc.cancel(errCallCancelled)
		select {
		case <-rc.done:
			c = rc.final
		case <-r.Context().Done():
			if s.isDraining() {
				return httpapi.Unavailable("brain is shutting down before call %q recorded its final state; read it again once brain is back", id)
			}
			return r.Context().Err()
		}
		if !store.Terminal(c.Status) {
			// Left waiting by a shutdown that began first.
			return httpapi.Unavailable("brain is shutting down; call %q waits as it was: cancel it again once brain is back", id)
		}
	} else if s.shared != nil {
		// Another replica runs it (or ran it and died): tell it, and wait
		// for the final state it records (or the lease loop does).
		s.notify(r.Context(), store.Signal{Kind: store.SignalCancel, SessionID: stored.SessionID, CallID: id})
		if c, err = s.waitStored(r.Context(), tenant, id, s.endWait()); err != nil {
			return err
		}
		if !store.Terminal(c.Status) {
			return httpapi.Unavailable("tool call %q runs on a brain replica that did not record its end in %s; read it again", id, s.endWait())
		}
	} else if c, err = s.call(r.Context(), tenant, id); err != nil {
		return err
	}
	writeCall(w, c, nil)
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
			return httpapi.BadRequest("%s: must not be empty (omit it to list calls of every %s)", name, strings.TrimSuffix(name, "_id"))
		}
	}
	f := store.CallFilter{TenantID: tenant, SessionID: q.Get("session_id"), Tool: q.Get("tool"), Status: q.Get("status")}
	if f.Status != "" && !slices.Contains(store.CallStatuses, f.Status) {
		return httpapi.BadRequest("status: unknown status %q (want one of %s)", f.Status, strings.Join(store.CallStatuses, ", "))
	}
	if q.Has("session_id") {
		if _, err := s.knownSession(r.Context(), tenant, f.SessionID); err != nil {
			return err
		}
	}
	limit, err := intParam(q, "limit", 1, store.MaxListLimit, 100)
	if err != nil {
		return err
	}
	if after := q.Get("after"); after != "" {
		if _, err := s.store.Call(r.Context(), tenant, after); errors.Is(err, store.ErrNotFound) {
			return httpapi.BadRequest("after: no tool call %q (pass the next_after of the previous page)", after)
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
		out = append(out, callJSON(c, s.queuePosition(c)))
	}
	body := map[string]any{"tool_calls": out, "has_more": more}
	if more {
		body["next_after"] = out[len(out)-1].ID
	}
	httpapi.WriteJSON(w, http.StatusOK, body)
	return nil
}
