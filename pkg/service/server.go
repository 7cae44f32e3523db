// Package service is the runtime every tool service of the suite runs on:
// env config, logging, listening, graceful shutdown, health, metrics, the
// bearer check, strict request decoding, and answering each call with one
// JSON result or an SSE stream (progress events, comment heartbeats, then
// exactly one result), as the tool contract describes.
//
// A tool service is a list of Tools handed to a Server, each declared once
// with NewTool (its schemas inferred from its Go types):
//
//	wordCount := service.NewTool(tool.Binding{Name: "word_count", Description: "Count the words of a text."}, countWords)
//	service.Main(service.RunTools("customtool", wordCount))
//
// The same tools are served over POST /tools/<name> and over MCP at /mcp;
// one call core (core.go) runs every call, whichever transport carried it,
// so a tool checks its arguments and answers the same way over both.
package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brain-tools/suite/pkg/bearer"
	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/pkg/sse"
	"github.com/brain-tools/suite/pkg/tool"
)

// Server serves a service's tools over HTTP:
//
//	POST /tools/{name}  one tool call (bearer token unless Config.NoAuth)
//	GET  /tools         the service's bindings {"tools":[...]} (bearer)
//	GET  /healthz       {"status":"ok"} or 503 (no auth)
//	GET  /metrics       Prometheus metrics (no auth), build_info among them
//	GET, POST, DELETE /mcp  the tools over MCP (bearer), unless Config.DisableMCP
//
// plus whatever Routes adds. Every answer carries an X-Request-Id
// (httpapi.WithRequestID) and every refusal is the suite's JSON error body
// (httpapi.WriteError).
type Server struct {
	// Name names the service in logs and metrics.
	Name   string
	Config Config
	// Logger may be nil (discard).
	Logger *slog.Logger
	Tools  []Tool
	// Health reports readiness. nil means always ready. Detail fields are
	// merged into the /healthz body (a "status" detail replaces "ok"); an
	// error answers 503.
	Health func(ctx context.Context) (detail map[string]any, err error)
	// Routes adds the service's own routes (an operator page).
	Routes func(r *httprouter.Router)
	// MCP configures the /mcp endpoint; its zero value takes every option
	// from the Server (see MCPOptions).
	MCP MCPOptions

	once    sync.Once // builds handler
	regOnce sync.Once // builds metrics
	handler http.Handler
	metrics *metrics.Set
	// streams are the calls streaming on taken-over connections.
	streams streamSet
	// buildErr names the tools whose schemas do not compile.
	buildErr error
}

// Handler returns the service's HTTP handler. It is built once.
func (s *Server) Handler() http.Handler {
	s.once.Do(s.build)
	return s.handler
}

// Registry returns the Prometheus registry /metrics serves, so a service
// can register its own collectors. It does not build the handler: Routes and
// MCP may still be changed afterwards.
func (s *Server) Registry() *prometheus.Registry {
	return s.Metrics().Registry
}

// Metrics returns the service's metric Set (pkg/metrics), on which a
// service registers the metrics of its own that package metrics lists
// (sandbox_workspaces, approvals_pending, …). Like Registry it does not
// build the handler.
func (s *Server) Metrics() *metrics.Set {
	s.regOnce.Do(s.initMetrics)
	return s.metrics
}

func (s *Server) initMetrics() {
	s.metrics = metrics.New(s.Name)
}

func (s *Server) build() {
	s.Logger = orDiscard(s.Logger)
	s.regOnce.Do(s.initMetrics)

	r := httprouter.New()
	r.HandleMethodNotAllowed = true
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, httpapi.NotFound("no route for %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, httpapi.Errorf(http.StatusMethodNotAllowed, httpapi.CodeMethodNotAllowed, "%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, w.Header().Get("Allow")))
	})
	r.PanicHandler = httpapi.PanicHandler(func(w http.ResponseWriter, r *http.Request, v any) {
		s.Logger.ErrorContext(r.Context(), "panic", "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
		httpapi.WriteError(w, httpapi.Internal(nil))
	})
	byName := make(map[string]*toolEntry, len(s.Tools))
	var faults []error
	for i := range s.Tools {
		t := &s.Tools[i]
		name := t.Binding.Name
		c, err := newCore(t, s.metrics, metrics.TransportHTTP)
		if err != nil {
			// Serve refuses to start; a handler built without it answers
			// the tool's calls with a 500 naming the fault.
			faults = append(faults, fmt.Errorf("tool %s: %w", name, err))
			s.Logger.Error("tool not served", "tool", name, "err", err)
			continue
		}
		byName[name] = &toolEntry{Tool: t, core: c}
		if t.Metrics != nil {
			t.Metrics(s.metrics)
		}
	}
	s.buildErr = errors.Join(faults...)
	r.POST("/tools/:name", httpapi.RouteHandle("/tools/:name", func(w http.ResponseWriter, req *http.Request, p httprouter.Params) {
		// The token is checked first, so tool names cannot be probed without it.
		s.authed(func(w http.ResponseWriter, req *http.Request) {
			t, ok := byName[p.ByName("name")]
			if !ok && s.buildErr != nil && s.declares(p.ByName("name")) {
				httpapi.WriteError(w, httpapi.Errorf(http.StatusInternalServerError, httpapi.CodeInternal, "tool %s cannot be served: its schemas do not compile", p.ByName("name")))
				return
			}
			if !ok {
				httpapi.WriteError(w, httpapi.NotFound("no tool named %q on this service", p.ByName("name")))
				return
			}
			s.serveCall(w, req, t)
		})(w, req)
	}))
	// The runtime's GET routes answer HEAD too (RFC 9110 section 9.3.2);
	// net/http sends the headers without the body. Routes a service adds
	// (Routes) register HEAD themselves where it makes sense.
	metricsPage := httpapi.Route("/metrics", promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{}))
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		r.Handle(method, "/tools", httpapi.RouteHandle("/tools", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) {
			s.authed(s.serveBindings)(w, req)
		}))
		r.Handle(method, "/healthz", httpapi.RouteHandle("/healthz", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) { s.serveHealth(w, req) }))
		r.Handler(method, "/metrics", metricsPage)
	}
	if s.Routes != nil {
		s.Routes(r)
	}
	if !s.Config.DisableMCP {
		s.mountMCP(r)
	}
	obs := &httpapi.Observer{Metrics: s.metrics, Logger: s.Logger}
	s.handler = obs.Observe(httpapi.WithRequestID(httpapi.LimitBodyTime(bodyTimeout, r)))
}

// declares reports whether s has a tool named name.
func (s *Server) declares(name string) bool {
	for i := range s.Tools {
		if s.Tools[i].Binding.Name == name {
			return true
		}
	}
	return false
}

// MaxDrainBytes is how much of an oversized body the runtime reads and
// discards before a tool's Tool.TooLarge answer: 64 MiB, the largest
// request body brain accepts (BRAIN_MAX_REQUEST_BYTES), so an answer to
// anything brain can send arrives whole.
const MaxDrainBytes = 64 << 20

// toolEntry is a tool with its call core.
type toolEntry struct {
	*Tool
	core *core
}

// Authed wraps h with the service's bearer check (none with NoAuth), for
// routes a service adds itself.
func (s *Server) Authed(h http.HandlerFunc) http.HandlerFunc { return s.authed(h) }

func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	if s.Config.NoAuth {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if !bearer.Check(r, s.Config.Token) {
			bearer.Unauthorized(w, r)
			return
		}
		h(w, r)
	}
}

// Bindings returns the service's bindings as a host config would list them,
// with url under base ("http://127.0.0.1:8081"), token_env and tenants
// filled in where the tool left them empty.
func (s *Server) Bindings(base string) []tool.Binding {
	base = strings.TrimRight(base, "/")
	out := make([]tool.Binding, 0, len(s.Tools))
	for _, t := range s.Tools {
		b := t.Binding
		if b.URL == "" {
			b.URL = base + "/tools/" + b.Name
		}
		if b.TokenEnv == "" && !s.Config.NoAuth {
			b.TokenEnv = "BRAIN_TOOLS_KEY"
		}
		if len(b.Tenants) == 0 {
			b.Tenants = append([]string(nil), s.Config.Tenants...)
		}
		out = append(out, b)
	}
	return out
}

func (s *Server) serveBindings(w http.ResponseWriter, r *http.Request) {
	base := s.Config.PublicURL
	if base == "" {
		base = "http://" + r.Host
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"tools": s.Bindings(base)})
}

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{"status": "ok", "service": s.Name}
	if s.Health != nil {
		detail, err := s.Health(r.Context())
		for k, v := range detail {
			body[k] = v
		}
		if err != nil {
			body["status"] = "unavailable"
			body["error"] = err.Error()
			httpapi.WriteJSON(w, http.StatusServiceUnavailable, body)
			return
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, body)
}

// serveCall answers one tool call. The response starts as JSON; the first
// progress, or StreamAfter without a result, switches it to SSE when the
// host accepts text/event-stream.
func (s *Server) serveCall(w http.ResponseWriter, r *http.Request, t *toolEntry) {
	start := time.Now()
	name := t.Binding.Name
	if e := httpapi.CheckJSON(r); e != nil {
		s.metrics.Tool(name, metrics.TransportHTTP).Done(metrics.StatusFailed, metrics.CodeInvalidRequest, time.Since(start))
		httpapi.WriteError(w, e)
		return
	}
	data, err := httpapi.ReadBody(r, s.Config.MaxRequestBytes)
	var req tool.Request
	var args any
	var argErr error
	if err == nil {
		req, args, argErr, err = decodeRequest(data, t.decodeArgs)
		err = httpapi.BodyError(err)
	}
	if err == nil {
		err = httpapi.BodyError(req.Validate())
	}
	var he *httpapi.Error
	if err != nil && t.TooLarge != nil && len(data) > 0 && errors.As(err, &he) && he.Code == httpapi.CodeTooLarge {
		// The tool answers an oversized body itself: read the rest of it
		// so the answer reaches a host that is still sending.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, MaxDrainBytes))
		result := t.TooLarge(data, s.Config.MaxRequestBytes)
		httpapi.WriteJSON(w, http.StatusOK, result)
		s.metrics.Tool(name, metrics.TransportHTTP).Done(metrics.StatusFailed, metrics.CodeRequestTooLarge, time.Since(start))
		s.Logger.InfoContext(r.Context(), "tool call", "tool", name, "is_error", result.IsError, "request_too_large", true, "duration_ms", time.Since(start).Milliseconds())
		return
	}
	if err != nil {
		e := httpapi.Classify(r, err)
		code := metrics.CodeInvalidRequest
		if e.Code == httpapi.CodeTooLarge {
			code = metrics.CodeRequestTooLarge
		}
		s.metrics.Tool(name, metrics.TransportHTTP).Done(metrics.StatusFailed, code, time.Since(start))
		httpapi.WriteError(w, e)
		return
	}
	httpapi.SetTenant(r.Context(), req.TenantID)

	logger := s.Logger.With("tool", name, "tenant_id", req.TenantID, "session_id", req.SessionID, "call_id", req.CallID)
	resp := &response{w: w, canStream: acceptsSSE(r.Header.Get("Accept")), heartbeat: s.Config.Heartbeat, logger: logger}
	call := NewCall(req, logger, resp.progress)
	call.args = args
	call.stream = resp.startStream
	if !resp.canStream || !t.Waits {
		var auto *time.Timer
		if resp.canStream {
			// Start streaming on our own before the host's 30 s header
			// limit (a timer, not a goroutine per waiting call).
			auto = time.AfterFunc(s.Config.StreamAfter, resp.startStream)
		}
		result := t.core.call(r.Context(), call, argErr, start)
		if auto != nil {
			auto.Stop()
		}
		s.answer(resp, call, result, start)
		return
	}
	s.serveStreamable(w, r, t, resp, call, argErr, start)
}

// serveStreamable runs a call of a tool that Waits, whose host accepts
// SSE, on a goroutine of its own (runCall) and waits for it here: for its result, answered as JSON or
// on the stream through w, or for its stream to start, when it takes the
// connection over and returns (see stream.go).
func (s *Server) serveStreamable(w http.ResponseWriter, r *http.Request, t *toolEntry, resp *response, call *Call, argErr error, start time.Time) {
	// The call outlives this handler once its stream is taken over, so its
	// context is the request's values with a cancellation of its own:
	// the request's until then (the host hung up, the shutdown cancels),
	// the stream's watch after.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	stopFollowing := context.AfterFunc(r.Context(), cancel)
	takeover, left := make(chan chan takeoverReply), make(chan struct{})
	resp.takeover, resp.left = takeover, left
	resp.set = &s.streams
	resp.cancel = cancel
	done := make(chan *tool.Result, 1)
	// Start streaming on our own before the host's 30 s header limit
	// (a timer, not a goroutine per waiting call).
	auto := time.AfterFunc(s.Config.StreamAfter, resp.startStream)
	go s.runCall(ctx, t, resp, call, argErr, start, auto, done)
	for {
		select {
		case result := <-done:
			close(left)
			stopFollowing()
			cancel()
			s.answer(resp, call, result, start)
			return
		case reply := <-takeover:
			// Counted before the connection leaves net/http's sight, so
			// that a shutdown cannot miss it; settled by the call's
			// goroutine, or here when the takeover fails.
			s.streams.reserve()
			conn, chunked, err := takeOver(w, r)
			if err != nil {
				s.streams.settle(nil)
			}
			reply <- takeoverReply{conn: conn, chunked: chunked, err: err}
			if err == nil {
				stopFollowing()
				if r.Context().Err() != nil {
					cancel() // the host hung up before the hand-over
				}
				return
			}
		}
	}
}

// runCall runs a call that may stream. A call whose stream was taken over
// answers on it here; any other hands its result to its handler.
func (s *Server) runCall(ctx context.Context, t *toolEntry, resp *response, call *Call, argErr error, start time.Time, auto *time.Timer, done chan<- *tool.Result) {
	result := t.core.call(ctx, call, argErr, start)
	auto.Stop()
	resp.mu.Lock()
	detached := resp.stream != nil
	if !detached {
		resp.done = true // no stream starts any more: the handler answers
	}
	resp.mu.Unlock()
	if !detached {
		done <- result
		return
	}
	s.answer(resp, call, result, start)
	resp.cancel()
}

// answer writes the call's result, runs its OnWritten functions and logs
// it.
func (s *Server) answer(resp *response, call *Call, result *tool.Result, start time.Time) {
	resp.finish(result)
	for _, f := range call.written {
		f()
	}
	call.Logger.Info("tool call", "is_error", result.IsError, "streamed", resp.streamed(), "duration_ms", time.Since(start).Milliseconds())
}

// takeoverReply is a handler's answer to a call asking to stream: the
// connection taken over, or why not.
type takeoverReply struct {
	conn    net.Conn
	chunked bool
	err     error
}

// response is the state of one call's HTTP answer: JSON until the first
// progress or StreamAfter, SSE after.
type response struct {
	mu        sync.Mutex
	w         http.ResponseWriter
	canStream bool
	heartbeat time.Duration
	logger    *slog.Logger
	sse       *sse.Writer
	// beatTimer sends the next heartbeat. A timer rather than a goroutine
	// per stream: a service holding a thousand streams open (approvals
	// waiting for an operator) would spend 8 KiB of stack on each.
	beatTimer *time.Timer
	done      bool

	// For a call on a goroutine of its own (serveStreamable): takeover
	// asks its handler to take the connection over, left is closed when
	// the handler no longer listens, set is where a taken-over stream is
	// counted, cancel cancels the call, and stream is the taken-over
	// connection.
	takeover chan chan takeoverReply
	left     chan struct{}
	set      *streamSet
	cancel   context.CancelFunc
	stream   *connStream
}

func (r *response) streamed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sse != nil
}

// startStream sends the SSE headers and starts heartbeats; it is a no-op
// when streaming is impossible, already on, or the call is done.
func (r *response) startStream() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.startLocked()
}

func (r *response) startLocked() bool {
	if r.sse != nil {
		return true
	}
	if !r.canStream || r.done {
		return false
	}
	if r.takeover != nil {
		switch started, ok := r.takeOverLocked(); {
		case !ok:
			return false
		case started:
			r.beatTimer = time.AfterFunc(r.heartbeat, r.beat)
			return true
		}
	}
	r.sse = sse.NewWriter(r.w)
	if err := startOffStack(r.sse); err != nil {
		r.logger.Debug("sse start", "err", err)
	}
	r.beatTimer = time.AfterFunc(r.heartbeat, r.beat)
	return true
}

// takeOverLocked asks the handler to take the connection over: started
// when the stream now runs on it, !ok when the handler already answered;
// neither when the connection cannot be taken over and the stream goes
// through the ResponseWriter.
func (r *response) takeOverLocked() (started, ok bool) {
	reply := make(chan takeoverReply, 1)
	select {
	case r.takeover <- reply:
	case <-r.left:
		return false, false
	}
	got := <-reply
	r.takeover = nil
	if got.err != nil {
		r.logger.Debug("sse stream through the handler", "err", got.err)
		return false, true
	}
	r.w = nil // the handler has returned: its writer is net/http's again
	r.stream = &connStream{conn: got.conn, chunked: got.chunked, hangup: r.cancel, set: r.set}
	r.set.settle(r.stream)
	go r.stream.watch()
	r.sse = sse.NewStreamWriter(r.stream)
	return true, true
}

// startOffStack sends w's headers from a goroutine of its own and waits
// for it. Writing the headers takes net/http's chunkWriter.writeHeader, a
// 2.8 KiB frame; at the depth where a tool reports its first progress it
// grows the call's goroutine past 8 KiB to 16 KiB, and Go does not shrink
// a stack whose goroutine still uses a quarter of it: a stream that then
// waits (request_approval, for an operator) would keep 16 KiB for its
// whole life instead of 8. The short-lived goroutine's stack is reused.
func startOffStack(w *sse.Writer) error {
	done := make(chan error, 1)
	go func() { done <- w.Start() }()
	return <-done
}

// beat sends one heartbeat comment and arms the next, under r.mu: once
// finish has marked the call done, no heartbeat is written any more.
func (r *response) beat() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	if err := r.sse.Comment("heartbeat"); err != nil {
		return
	}
	r.beatTimer.Reset(r.heartbeat)
}

func (r *response) progress(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("progress: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return errors.New("progress: the call already answered")
	}
	if !r.startLocked() {
		return nil // the host did not accept SSE: progress is dropped
	}
	return r.sse.Event(sse.EventProgress, json.RawMessage(data))
}

// finish writes the one result: as an SSE result event when streaming, or
// as a JSON body (encoded before the status line is written). A stream on
// a taken-over connection then ends.
func (r *response) finish(result *tool.Result) {
	r.mu.Lock()
	r.done = true
	w := r.sse
	stream := r.stream
	if r.beatTimer != nil {
		// A heartbeat already firing waits for r.mu and then sees done.
		r.beatTimer.Stop()
	}
	r.mu.Unlock()
	if w == nil {
		httpapi.WriteJSON(r.w, http.StatusOK, result)
		return
	}
	if err := w.Event(sse.EventResult, result); err != nil {
		r.logger.Warn("write result event", "err", err)
	}
	if stream != nil {
		stream.end()
	}
}

// acceptsSSE reports whether an Accept header lists text/event-stream (or
// text/* or */*) with a non-zero quality (RFC 9110 section 12.5.1). It runs
// on every call, so it scans the header without allocating.
func acceptsSSE(accept string) bool {
	for accept != "" {
		var part string
		part, accept, _ = strings.Cut(accept, ",")
		mt, params, _ := strings.Cut(part, ";")
		mt = strings.TrimSpace(mt)
		if !strings.EqualFold(mt, "text/event-stream") && !strings.EqualFold(mt, "text/*") && mt != "*/*" {
			continue
		}
		if zeroQuality(params) {
			continue
		}
		return true
	}
	return false
}

// zeroQuality reports whether media-type parameters hold q=0 (0, 0.0,
// 0.000).
func zeroQuality(params string) bool {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
			return strings.Trim(strings.TrimSpace(v), "0.") == "" && strings.HasPrefix(strings.TrimSpace(v), "0")
		}
	}
	return false
}

// Serve serves s on ln until ctx is cancelled, then shuts down: in-flight
// calls get Config.ShutdownTimeout to finish, after which their contexts are
// cancelled and connections closed. A clean shutdown returns nil. A tool
// whose schemas do not compile fails the start, naming the tool, and ln is
// closed.
func Serve(ctx context.Context, ln net.Listener, s *Server) error {
	logger := orDiscard(s.Logger)
	if s.Handler(); s.buildErr != nil {
		return errors.Join(fmt.Errorf("serve %s: %w", s.Name, s.buildErr), ln.Close())
	}
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("listening", "service", s.Name, "addr", ln.Addr().String(), "tools", len(s.Tools), "auth", !s.Config.NoAuth)
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", s.Name, err)
	case <-ctx.Done():
	}
	timeout := s.Config.ShutdownTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err == nil {
		// Streams on taken-over connections are not net/http's any more.
		err = s.streams.wait(sctx)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		logger.Warn("shutdown: cancelling calls still running", "after", timeout)
		cancelBase()
		// Taken-over streams are cancelled too, and given a moment to
		// write the results their calls end with, before every
		// connection still open is closed.
		s.streams.cancelAll()
		grace, cancelGrace := context.WithTimeout(context.Background(), lingerAfterEnd)
		_ = s.streams.wait(grace)
		cancelGrace()
		err = srv.Close()
		s.streams.closeAll()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", s.Name, err)
	}
	if err != nil {
		return fmt.Errorf("shutdown %s: %w", s.Name, err)
	}
	logger.Info("stopped", "service", s.Name)
	return nil
}

// MinTokenBytes is the token length below which Run warns
// (bearer.MinTokenBytes).
const MinTokenBytes = bearer.MinTokenBytes

// Listen validates c and listens on c.Addr, warning through logger (nil:
// none) of a BRAIN_TOOLS_KEY under MinTokenBytes. A service that creates
// files or opens a store calls it before them, then Serve: an address it
// cannot take (busy, not this host's) then fails the start naming ADDR and
// leaves nothing behind.
func Listen(c Config, logger *slog.Logger) (net.Listener, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.NoAuth && len(c.Token) < MinTokenBytes {
		orDiscard(logger).Warn("BRAIN_TOOLS_KEY is short: use a random token of at least 16 bytes", "bytes", len(c.Token))
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on ADDR %q: %w", c.Addr, err)
	}
	return ln, nil
}

// Run is Listen with s.Config, then Serve.
func Run(ctx context.Context, s *Server) error {
	ln, err := Listen(s.Config, s.Logger)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, s)
}
