package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/mcpcall"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/cenkalti/backoff/v5"
	"github.com/julienschmidt/httprouter"
)

// Limits of a session's descriptive fields.
const (
	MaxHarnessBytes = 64
	MaxModelBytes   = 256
)

// createSessionRequest is the body of POST /sessions. harness and
// config.model are stored and returned; config.tools enables tools by name;
// config.require_approval gates tools of the session: {"name": "always"}
// (a session may tighten a binding's require_approval, never loosen it).
type createSessionRequest struct {
	Harness *string            `json:"harness"`
	Config  *sessionConfigBody `json:"config"`
}

// sessionConfigBody is config as sent: a tool name may be null there (a
// []string would read it as ""), to be refused as such.
type sessionConfigBody struct {
	Model           *string            `json:"model"`
	Tools           []*string          `json:"tools"`
	ToolsetID       *string            `json:"toolset_id"`
	RequireApproval map[string]*string `json:"require_approval"`
}

// sessionConfig is config as stored and returned; with toolset_id, tools
// are the toolset's as the session was created.
type sessionConfig struct {
	Model           *string           `json:"model,omitempty"`
	Tools           []string          `json:"tools"`
	ToolsetID       string            `json:"toolset_id,omitempty"`
	RequireApproval map[string]string `json:"require_approval,omitempty"`
}

// sessionGates reports whether session sess gates tool name (its
// config.require_approval says "always").
func sessionGates(sess *store.Session, name string) bool {
	if !bytes.Contains(sess.Config, []byte(`"require_approval"`)) {
		return false
	}
	var cfg sessionConfig
	return json.Unmarshal(sess.Config, &cfg) == nil && cfg.RequireApproval[name] == tool.ApprovalAlways
}

// checkRequireApproval checks config.require_approval against the session's
// tools (by name, with their bindings): each name is a tool of
// config.tools, each value "always" or "never", and none loosens its
// binding ("never" for a binding that says "always") or gates a function
// tool.
func (s *Server) checkRequireApproval(ra map[string]*string, tools []string, bindings map[string]*config.Tool) (map[string]string, error) {
	if len(ra) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(ra)) {
		field := fmt.Sprintf("config.require_approval.%s", strictjson.Clip(name, 64))
		v := ra[name]
		switch {
		case !slices.Contains(tools, name):
			return nil, httpapi.BadRequest("%s: %q is not one of config.tools", field, name)
		case v == nil:
			return nil, httpapi.BadRequest(`%s: must be "always" or "never", got null`, field)
		case *v != tool.ApprovalAlways && *v != tool.ApprovalNever:
			return nil, httpapi.BadRequest(`%s: must be "always" or "never", got %q`, field, *v)
		}
		t := bindings[name]
		switch {
		case *v == tool.ApprovalNever && t.Gated():
			return nil, httpapi.BadRequest(`%s: "never" would loosen the binding's require_approval "always"; a session may only tighten it`, field)
		case *v == tool.ApprovalAlways && t.Function():
			return nil, httpapi.BadRequest("%s: %q is a function tool, answered by the application itself; it cannot be gated", field, name)
		}
		out[name] = *v
	}
	return out, nil
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	tenant, err := s.tenant(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	var req createSessionRequest
	if err := httpapi.DecodeJSON(r, s.maxBody, &req); err != nil {
		return err
	}
	cfg := &sessionConfig{Tools: []string{}}
	if req.Config != nil {
		cfg.Model = req.Config.Model
		for i, name := range req.Config.Tools {
			if name == nil {
				return httpapi.BadRequest("config.tools[%d]: must be a tool name, got null", i)
			}
			cfg.Tools = append(cfg.Tools, *name)
		}
	}
	var harness string
	if req.Harness != nil {
		harness = *req.Harness
		if len(harness) > MaxHarnessBytes {
			return httpapi.BadRequest("harness: longer than %d bytes (got %d)", MaxHarnessBytes, len(harness))
		}
		if err := noNUL("harness", harness); err != nil {
			return err
		}
	}
	if cfg.Model != nil && len(*cfg.Model) > MaxModelBytes {
		return httpapi.BadRequest("config.model: longer than %d bytes (got %d)", MaxModelBytes, len(*cfg.Model))
	}
	toolsField := "config.tools"
	if req.Config != nil && req.Config.ToolsetID != nil {
		if req.Config.Tools != nil {
			return httpapi.BadRequest("config.toolset_id: give config.tools or config.toolset_id, not both")
		}
		id := *req.Config.ToolsetID
		if err := noNUL("config.toolset_id", id); err != nil {
			return err
		}
		ts, err := s.store.Toolset(r.Context(), tenant, id)
		if errors.Is(err, store.ErrNotFound) {
			return httpapi.BadRequest("config.toolset_id: no toolset %q", id)
		}
		if err != nil {
			return fmt.Errorf("read toolset: %w", err)
		}
		cfg.ToolsetID, cfg.Tools, toolsField = id, append([]string{}, ts.Tools...), "config.toolset_id"
	}
	if len(cfg.Tools) > MaxSessionTools {
		return httpapi.BadRequest("%s: %d tools, more than the ceiling of %d tools per session", toolsField, len(cfg.Tools), MaxSessionTools)
	}
	seen := map[string]int{}
	bindings := map[string]*config.Tool{}
	for i, name := range cfg.Tools {
		field := fmt.Sprintf("config.tools[%d]", i)
		if toolsField != "config.tools" {
			field = fmt.Sprintf("config.toolset_id: toolset %q: tools[%d]", cfg.ToolsetID, i)
		}
		if name == "" {
			return httpapi.BadRequest("%s: must be a tool name, got an empty string", field)
		}
		if j, dup := seen[name]; dup {
			return httpapi.BadRequest("%s: tool %q is listed twice (also config.tools[%d])", field, name, j)
		}
		seen[name] = i
		// Unknown and not-allowed read the same, so a tenant learns nothing
		// about other tenants' tools.
		t, ok, err := s.catalogTool(r.Context(), tenant, name)
		if err != nil {
			return err
		}
		if !ok {
			return httpapi.BadRequest("%s: unknown tool %q (not in the catalog of tenant %q)", field, name, tenant)
		}
		bindings[name] = t
	}
	// MCP servers the session's tools use are reached now: a required one
	// that cannot be refuses the session; any other is recorded as an
	// mcp.unavailable event and the session goes on with fewer tools.
	if req.Config != nil {
		if cfg.RequireApproval, err = s.checkRequireApproval(req.Config.RequireApproval, cfg.Tools, bindings); err != nil {
			return err
		}
	}
	var unavailable []mcpcall.Unavailable
	if s.mcp != nil {
		tools := make([]*config.Tool, 0, len(cfg.Tools))
		for _, name := range cfg.Tools {
			tools = append(tools, bindings[name])
		}
		unavailable = s.mcp.Probe(r.Context(), tools, func(t *config.Tool) bool { return t.Required })
		if err := mcpcall.RequiredError(unavailable); err != nil {
			return httpapi.BadRequest("%s: %v", toolsField, err)
		}
	}
	now := time.Now().UTC()
	sess := &store.Session{
		ID: newID("ses"), TenantID: tenant, Status: store.SessionActive, Harness: harness,
		Tools: cfg.Tools, Config: mustJSON(cfg), CreatedAt: now, UpdatedAt: now,
	}
	ev := &store.Event{Type: store.EventSessionCreated, SessionID: sess.ID, Time: now,
		Data: mustJSON(sessionEventData{Status: store.SessionActive, Tools: cfg.Tools})}
	evs := []*store.Event{ev}
	for _, u := range unavailable {
		s.log.Warn("mcp server unavailable", "session_id", sess.ID, "server", u.Server, "reason", u.Reason)
		evs = append(evs, &store.Event{Type: store.EventMCPUnavailable, SessionID: sess.ID, Time: now, Data: u.EventData()})
	}
	if err := s.store.CreateSession(r.Context(), sess, evs...); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	cp := *sess
	s.cacheSession(&cp)
	httpapi.WriteJSON(w, http.StatusCreated, sessionJSON(sess))
	return nil
}

// maxCachedSessions bounds the session cache; past it, sessions without
// calls in flight and not being ended are evicted (they are re-read from the store on use).
const maxCachedSessions = 10000

// session returns the tenant's session id, or 404. Sessions are cached: on
// SQLite brain is the only process writing its data dir (see lockDataDir),
// and every status change goes through endSession, so the cache is
// authoritative and the tool-call path reads nothing from the store. On a
// shared store other replicas change sessions too, so the status is read
// from the store each time (the cache keeps the entry endSession works on).
func (s *Server) session(ctx context.Context, tenant, id string) (*store.Session, error) {
	return s.lookupSession(ctx, tenant, id, true)
}

// knownSession is session without the shared store's status read: for a
// caller that needs only what never changes (tenant, tools) or whose write
// the store refuses itself when the status moved on (CreateCall).
func (s *Server) knownSession(ctx context.Context, tenant, id string) (*store.Session, error) {
	return s.lookupSession(ctx, tenant, id, false)
}

func (s *Server) lookupSession(ctx context.Context, tenant, id string, fresh bool) (*store.Session, error) {
	s.mu.Lock()
	c, ok := s.sessions[id]
	s.mu.Unlock()
	if ok && fresh && s.shared != nil {
		// Other replicas end sessions too: the store has the status.
		fresh, err := s.store.Session(ctx, tenant, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, httpapi.NotFound("session %q not found", id)
		}
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		*c = *fresh
		s.mu.Unlock()
	}
	if !ok {
		sess, err := s.store.Session(ctx, tenant, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, httpapi.NotFound("session %q not found", id)
		}
		if err != nil {
			return nil, err
		}
		c = s.cacheSession(sess)
	}
	if c.TenantID != tenant {
		return nil, httpapi.NotFound("session %q not found", id)
	}
	s.mu.Lock()
	cp := *c
	s.mu.Unlock()
	return &cp, nil
}

// cacheSession adds sess unless the cache has it already, and returns the
// cached entry.
func (s *Server) cacheSession(sess *store.Session) *store.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.sessions[sess.ID]; ok {
		return c
	}
	if len(s.sessions) >= maxCachedSessions {
		for id := range s.sessions {
			if _, busy := s.ending[id]; !busy && len(s.bySession[id]) == 0 {
				delete(s.sessions, id)
				break
			}
		}
	}
	s.sessions[sess.ID] = sess
	return sess
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, err := s.tenant(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	sess, err := s.session(r.Context(), tenant, p.ByName("id"))
	if err != nil {
		return err
	}
	// The tools the session has now (its tool set against the catalog).
	ts, err := s.toolSetOf(r.Context(), sess)
	if err != nil {
		return err
	}
	if sess.Tools, err = s.toolNames(r.Context(), tenant, ts); err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, sessionJSON(sess))
	return nil
}

func (s *Server) interruptSession(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	return s.endSession(w, r, p.ByName("id"), store.SessionInterrupted)
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	return s.endSession(w, r, p.ByName("id"), store.SessionClosed)
}

// errSessionEnded is the cancel cause of calls whose session was interrupted
// or closed (the contract: "Interrupting or closing a session cancels its
// in-flight tool requests").
var errSessionEnded = errors.New("session ended")

// ending is a session that endSession is interrupting or closing: while it
// cancels the session's calls, waits for their results and records the
// session's event, start refuses new calls of the session and the cache keeps
// its entry. done is closed when endSession is through.
type ending struct {
	to   string
	done chan struct{}
}

// beginEnd makes endSession the only one ending session id, waiting for
// another interrupt or close of the same session to finish first. The
// returned release must be called once.
func (s *Server) beginEnd(ctx context.Context, id, to string) (release func(), err error) {
	for {
		s.mu.Lock()
		e, busy := s.ending[id]
		if !busy {
			e = &ending{to: to, done: make(chan struct{})}
			s.ending[id] = e
			s.mu.Unlock()
			return func() {
				s.mu.Lock()
				delete(s.ending, id)
				s.mu.Unlock()
				close(e.done)
			}, nil
		}
		s.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// endSession moves a session to interrupted or closed. It cancels the
// session's in-flight calls, waits until each has recorded its final state
// and tool.result event, and only then records session.interrupted or
// session.closed — so every call's result comes before the session's event
// on the stream, and a client that stops reading at session.closed has seen
// them all. New calls are refused (409) from the start. Once begun, the end
// is carried through even if the client goes away. An interrupted session
// can still be closed; any other move from a non-active session is 409
// naming its state.
func (s *Server) endSession(w http.ResponseWriter, r *http.Request, id, to string) error {
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
	from, evType := []string{store.SessionActive}, store.EventSessionInterrupted
	if to == store.SessionClosed {
		from, evType = []string{store.SessionActive, store.SessionInterrupted}, store.EventSessionClosed
	}
	if _, err := s.session(r.Context(), tenant, id); err != nil {
		return err
	}
	release, err := s.beginEnd(r.Context(), id, to)
	if err != nil {
		return err
	}
	defer release()
	// Reload: the session may have been evicted before beginEnd; from now on
	// the cache keeps it (see cacheSession).
	if _, err := s.session(r.Context(), tenant, id); err != nil {
		return err
	}
	s.mu.Lock()
	c := s.sessions[id]
	if !slices.Contains(from, c.Status) {
		st := c.Status
		s.mu.Unlock()
		return httpapi.Conflict("session %q is %s", id, st)
	}
	var calls []*running
	for _, rc := range s.bySession[id] {
		calls = append(calls, rc)
	}
	s.mu.Unlock()
	// Every call start registered before beginEnd is in calls; every later
	// one was refused. A cancelled call ends promptly (invoke and mcpcall
	// stop on their context), so this wait is short.
	ctx := context.WithoutCancel(r.Context())
	endSig := store.Signal{Kind: store.SignalEndSession, SessionID: id}
	s.notify(ctx, endSig)
	for _, rc := range calls {
		rc.cancel(errSessionEnded)
	}
	for _, rc := range calls {
		<-rc.done
	}
	var now time.Time
	err = store.ErrCallsInFlight
	for deadline, pause := time.Now().Add(s.endWait()), 10*time.Millisecond; errors.Is(err, store.ErrCallsInFlight); pause = min(2*pause, time.Second) {
		now = time.Now().UTC()
		ev := &store.Event{Type: evType, SessionID: id, Time: now, Data: mustJSON(sessionEventData{Status: to})}
		if err = s.store.SetSessionStatus(ctx, tenant, id, from, to, now, ev); !errors.Is(err, store.ErrCallsInFlight) {
			break
		}
		// A call of another replica is still unfinished, or was created
		// there before the signal arrived: tell them again and wait for it
		// (a dead replica's calls are ended when its lease runs out).
		if time.Now().After(deadline) {
			verb := "close"
			if to == store.SessionInterrupted {
				verb = "interrupt"
			}
			return httpapi.Unavailable("session %q still has calls in flight on other brain replicas after %s; send the %s again", id, s.endWait(), verb)
		}
		time.Sleep(pause)
		s.notify(ctx, endSig)
	}
	if err != nil && httpapi.Unreachable(err) && s.endCommitted(ctx, tenant, id, to, now) {
		// The store committed the end and lost its answer (its connection
		// cut with the commit): the end is done, as the caller asked.
		err = nil
	}
	if err != nil {
		// Let the next read take the store's word.
		s.mu.Lock()
		delete(s.sessions, id)
		s.mu.Unlock()
		var se *store.StateError
		if errors.As(err, &se) {
			return httpapi.Conflict("session %q is %s", id, se.Status)
		}
		return fmt.Errorf("end session: %w", err)
	}
	s.mu.Lock()
	c.Status, c.UpdatedAt = to, now
	cp := *c
	s.mu.Unlock()
	httpapi.WriteJSON(w, http.StatusOK, sessionJSON(&cp))
	return nil
}

// endCommitted reports whether the store holds session id ended as to at
// at: the write of that end failed for the store's want of an answer, and
// may have committed all the same. It reads the session until the store
// answers, for as long as a store step may take (storeWait).
func (s *Server) endCommitted(ctx context.Context, tenant, id, to string, at time.Time) bool {
	ctx, cancel := context.WithTimeout(ctx, storeWait)
	defer cancel()
	got, err := backoff.Retry(ctx, func() (*store.Session, error) { return s.store.Session(ctx, tenant, id) },
		backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, RandomizationFactor: 0.5,
			Multiplier: 2, MaxInterval: time.Second}), backoff.WithMaxElapsedTime(0))
	return err == nil && got.Status == to && got.UpdatedAt.Equal(at)
}
