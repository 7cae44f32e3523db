// Package server is brain's public HTTP API: catalog, sessions, ToolCall
// resources and session events, per notes/BRAIN_IFACE.md "Public HTTP API".
//
// It owns the lifecycle of every tool call: a call is stored with its
// tool.call event before the request leaves brain (the tool contract's
// "records a tool.call event ... and sends"), may wait for an answer
// (requires_input: a function tool's result from the application, or the
// answer to an approval gate) or for a slot of its binding's
// max_concurrency (queued), runs through the invoke Caller, and ends with
// exactly one tool.result event (lifecycle.go). State lives in a
// store.Store (SQLite, or PostgreSQL shared by several replicas: see
// shared.go); live events fan out through a hub.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/hub"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
	"github.com/brain-tools/suite/services/brain/internal/mcpcall"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/brain-tools/suite/services/brain/internal/store/postgres"
	"github.com/brain-tools/suite/services/brain/internal/store/sqlite"
	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultHeartbeat is how often an idle SSE event stream gets a comment line,
// so proxies and clients see the connection is alive.
const DefaultHeartbeat = 15 * time.Second

// MaxWaitSeconds is the largest wait_seconds a request may ask for.
const MaxWaitSeconds = 60

// Invoker calls one tool; *invoke.Caller is the implementation.
type Invoker interface {
	Call(ctx context.Context, t *config.Tool, req tool.Request, onProgress func(data json.RawMessage)) invoke.Outcome
}

var _ Invoker = (*invoke.Caller)(nil)

// Options configures New.
type Options struct {
	// Config is the checked host config: bindings and API keys. Required.
	Config *config.Config
	// DataDir is the directory of the SQLite database (brain.db); created
	// when missing. Required.
	DataDir string
	// Synchronous is the SQLite synchronous mode, NORMAL (default) or FULL;
	// see package store/sqlite for what each keeps.
	Synchronous string
	// DatabaseURL, a postgres:// URL, keeps state in PostgreSQL instead of
	// SQLite (DataDir is then unused): any number of brain replicas share
	// the database, and any of them serves any request.
	DatabaseURL string
	// Lease is how long a replica's claim on the calls it runs holds
	// without renewal (PostgreSQL only): a replica that dies has its calls
	// taken over by another within about Lease. 0 means DefaultLease.
	Lease time.Duration
	// Retention, when positive, removes sessions that ended (interrupted or
	// closed) longer ago than that, with their calls and events, in small
	// batches in the background; 0 keeps everything.
	Retention time.Duration
	// RetentionInterval is how often retention sweeps; 0 means
	// DefaultRetentionInterval (a minute).
	RetentionInterval time.Duration
	// PublicURL is the brain_url sent to tools with inspect_session. Empty:
	// "http://" + the listener's address, set by Serve.
	PublicURL string
	// Invoker calls tools; nil means invoke.New with Logger.
	Invoker Invoker
	// Logger receives server logs; nil discards them.
	Logger *slog.Logger
	// Heartbeat is the SSE heartbeat interval; 0 means DefaultHeartbeat.
	Heartbeat time.Duration
	// MaxRequestBytes caps every request body brain reads, in bytes
	// (1..MaxRequestBytesLimit); 0 means MaxBodyBytes (1 MiB). A tool
	// call's arguments travel in this body, so it bounds them too.
	MaxRequestBytes int64
	// MaxQueued caps the calls of one binding and tenant that wait queued
	// under its max_concurrency; 0 means DefaultMaxQueued.
	MaxQueued int
}

// MaxRequestBytesLimit is the largest Options.MaxRequestBytes: 64 MiB.
const MaxRequestBytesLimit = 64 << 20

// DefaultLease is Options.Lease when unset.
const DefaultLease = 15 * time.Second

// Server is brain's HTTP API and call engine. Create it with New, serve it
// with Serve (or mount Handler), and Close it.
type Server struct {
	cfg       *config.Config
	store     store.Store
	hub       *hub.Hub
	invoker   Invoker
	mcp       *mcpcall.Caller // nil when Options.Invoker is set
	log       *slog.Logger
	heartbeat time.Duration
	grace     time.Duration // shutdownGrace; tests shorten it
	maxBody   int64         // Options.MaxRequestBytes
	maxQueued int           // Options.MaxQueued
	publicURL atomic.Pointer[string]
	metrics   *brainMetrics
	tokens    inspections
	handler   http.Handler
	lock      *os.File     // flock on the data dir; nil on PostgreSQL
	shared    store.Shared // the store, when replicas share it; nil on SQLite
	lease     time.Duration
	retention time.Duration
	// retentionEvery is Options.RetentionInterval.
	retentionEvery time.Duration
	// background is the lease and retention loops; Close stops them.
	stopBackground context.CancelFunc
	background     sync.WaitGroup

	// callsCtx parents every call; Close cancels it.
	callsCtx    context.Context
	cancelCalls context.CancelCauseFunc
	// reqCtx parents every request; Serve cancels it on shutdown so SSE
	// streams and long waits end.
	reqCtx     context.Context
	cancelReqs context.CancelFunc

	mu        sync.Mutex
	draining  bool                           // set by drain: new calls get 503
	sessions  map[string]*store.Session      // cache by session ID, see session()
	inflight  map[string]*running            // by call ID
	bySession map[string]map[string]*running // session ID → call ID →
	ending    map[string]*ending             // sessions endSession is interrupting or closing
	queues    map[string]slots               // by tenant and binding, for max_concurrency
	// remoteEnding are sessions another replica is ending (SignalEndSession),
	// with when this replica stops refusing their new calls on that account.
	remoteEnding map[string]time.Time
	// settled are this replica's answers stored for another replica's
	// call, by answer ID, closed when the store says they were settled.
	settled   map[string]chan struct{}
	calls     sync.WaitGroup
	work      chan func() // calls for idle call goroutines (spawn)
	closeOnce sync.Once
	closeErr  error
}

// errShutdown is the cancel cause of calls still in flight at Close.
var errShutdown = errors.New("brain is shutting down")

// New opens the store — SQLite under o.DataDir, or PostgreSQL at
// o.DatabaseURL — and returns a Server ready to serve. On SQLite it first
// takes up the calls a previous process left unfinished (see takeUp:
// running ones end failed, brain_restarted, unknown outcome, each with its
// tool.result event; those waiting for an answer or a slot wait again); on
// PostgreSQL a background loop renews this replica's leases and takes up so
// the calls of replicas whose lease ran out (see shared.go).
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Config == nil {
		return nil, errors.New("new server: config is required")
	}
	if o.DataDir == "" && o.DatabaseURL == "" {
		return nil, errors.New("new server: data dir or database URL is required")
	}
	if o.Lease < 0 || o.Retention < 0 {
		return nil, errors.New("new server: lease and retention must not be negative")
	}
	if o.MaxRequestBytes < 0 || o.MaxRequestBytes > MaxRequestBytesLimit {
		return nil, fmt.Errorf("new server: max request bytes: want 1..%d, got %d", MaxRequestBytesLimit, o.MaxRequestBytes)
	}
	log := discardLogger(o.Logger)
	s := &Server{
		cfg:       o.Config,
		hub:       &hub.Hub{},
		invoker:   o.Invoker,
		log:       log,
		heartbeat: o.Heartbeat,
		maxBody:   o.MaxRequestBytes,
		grace:     shutdownGrace,
		metrics:   newMetrics(),
		sessions:  map[string]*store.Session{},
		inflight:  map[string]*running{},
		bySession: map[string]map[string]*running{},
		ending:    map[string]*ending{},
		queues:    map[string]slots{},
		maxQueued: o.MaxQueued,
		lease:     o.Lease,
		retention: o.Retention,

		retentionEvery: o.RetentionInterval,

		remoteEnding: map[string]time.Time{},
		settled:      map[string]chan struct{}{},
		work:         make(chan func()),
	}
	if s.lease == 0 {
		s.lease = DefaultLease
	}
	if s.retentionEvery <= 0 {
		s.retentionEvery = DefaultRetentionInterval
	}
	if s.maxQueued <= 0 {
		s.maxQueued = DefaultMaxQueued
	}
	if s.invoker == nil {
		// Bindings with mcp_tool go to their MCP server, the rest over HTTP.
		s.mcp = mcpcall.New(mcpcall.Options{Logger: log})
		s.invoker = mcpcall.Route(invoke.New(invoke.Options{Logger: log}), s.mcp)
	}
	if s.heartbeat <= 0 {
		s.heartbeat = DefaultHeartbeat
	}
	if s.maxBody == 0 {
		s.maxBody = MaxBodyBytes
	}
	if o.PublicURL != "" {
		s.publicURL.Store(&o.PublicURL)
	}
	s.callsCtx, s.cancelCalls = context.WithCancelCause(context.Background())
	s.reqCtx, s.cancelReqs = context.WithCancel(context.Background())
	if err := s.openStore(ctx, o); err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	s.registerGauges()
	s.handler = s.routes()
	if s.shared == nil {
		if err := s.recoverCalls(ctx); err != nil {
			s.drain(s.grace)
			s.store.Close()
			s.lock.Close()
			return nil, fmt.Errorf("new server: %w", err)
		}
	}
	bg, stop := context.WithCancel(context.Background())
	s.stopBackground = stop
	if s.shared != nil {
		s.background.Go(func() { s.leaseLoop(bg) })
	}
	if s.retention > 0 {
		s.background.Go(func() { s.retentionLoop(bg) })
	}
	return s, nil
}

// openStore opens the store o names: PostgreSQL when o.DatabaseURL is set,
// else SQLite in o.DataDir under the directory's lock.
func (s *Server) openStore(ctx context.Context, o Options) error {
	if o.DatabaseURL != "" {
		db, err := postgres.Open(ctx, postgres.Options{
			URL: o.DatabaseURL, Replica: newID("replica"), Lease: s.lease,
			OnCommit: s.hub.Publish, OnSignal: s.onSignal, Logger: s.log,
		})
		if err != nil {
			return err
		}
		s.store, s.shared = db, db
		return nil
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	lock, err := lockDataDir(o.DataDir)
	if err != nil {
		return err
	}
	db, err := sqlite.Open(filepath.Join(o.DataDir, "brain.db"), sqlite.Options{
		Synchronous: o.Synchronous,
		OnCommit:    s.hub.Publish,
	})
	if err != nil {
		lock.Close()
		return err
	}
	s.store, s.lock = db, lock
	return nil
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler { return s.handler }

// Registry returns the Prometheus registry served at GET /metrics.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.Registry }

func (s *Server) routes() http.Handler {
	r := httprouter.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.writeError(w, req, notFound("no endpoint %s %s", req.Method, req.URL.Path))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.writeError(w, req, errorf(http.StatusMethodNotAllowed, codeMethodNotAllowed,
			"method %s not allowed on %s (allowed: %s)", req.Method, req.URL.Path, w.Header().Get("Allow")))
	})
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		s.writeError(w, req, fmt.Errorf("panic: %v", v))
	}
	// Every route is registered under its pattern, which names it in the
	// metrics, the access log and its span (httpapi.Observe).
	handle := func(method, path string, h httprouter.Handle) {
		r.Handle(method, path, httpapi.RouteHandle(path, h))
	}
	// Each GET route but the event stream answers HEAD as GET with no body
	// (net/http drops it; RFC 9110 section 9.3.2), for load balancers,
	// probes and clients that check with HEAD.
	metricsPage := httpapi.Route("/metrics", promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{}))
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		handle(method, "/healthz", s.handle(s.healthz))
		r.Handler(method, "/metrics", metricsPage)
		handle(method, "/catalog", s.handle(s.catalog))
		handle(method, "/sessions/:id", s.handle(s.getSession))
		handle(method, "/tool_calls", s.handle(s.listCalls))
		handle(method, "/tool_calls/:id", s.handle(s.getCall))
	}
	handle(http.MethodPost, "/sessions", s.handle(s.createSession))
	handle(http.MethodDelete, "/sessions/:id", s.handle(s.closeSession))
	handle(http.MethodPost, "/sessions/:id/interrupt", s.handle(s.interruptSession))
	handle(http.MethodPost, "/sessions/:id/close", s.handle(s.closeSession))
	handle(http.MethodGet, "/sessions/:id/events", s.handle(s.events))
	handle(http.MethodPost, "/sessions/:id/tool_calls", s.handle(s.createCall))
	handle(http.MethodPost, "/tool_calls/:id/cancel", s.handle(s.cancelCall))
	handle(http.MethodPost, "/tool_calls/:id/respond", s.handle(s.respond))
	obs := &httpapi.Observer{Metrics: s.metrics.Set, Logger: s.log}
	return obs.Observe(httpapi.WithRequestID(service.LimitBodyTime(service.BodyTimeout, r)))
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if _, err := query(r); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// shutdownGrace bounds each step of the shutdown: the calls in flight
// recording their final state, then the requests in progress.
const shutdownGrace = 10 * time.Second

// Serve serves the API on ln until ctx is cancelled, then shuts down in this
// order: new calls are refused (503), the calls in flight are cancelled and
// each records its final state (cancelled) and tool.result (up to 10 s) —
// so a client waiting on a call with wait_seconds gets that final state and
// an open event stream delivers the results — then open event streams and
// waits end and requests in progress get up to 10 s. It does not Close the
// server, but the server takes no new calls afterwards. When no PublicURL
// was configured it becomes "http://" + ln's address.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.publicURL.Load() == nil {
		u := "http://" + ln.Addr().String()
		s.publicURL.Store(&u)
	}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return s.reqCtx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.mu.Lock()
	inflight := len(s.inflight)
	s.mu.Unlock()
	s.log.Info("brain shutting down: new calls are refused, calls in flight are cancelled",
		"calls_in_flight", inflight, "grace", s.grace.String())
	s.drain(s.grace)
	s.cancelReqs()
	sctx, cancel := context.WithTimeout(context.Background(), s.grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// drain refuses new calls from now on (503), cancels the calls in flight
// (each ends cancelled, with an unknown outcome when its request was sent,
// and records its tool.result) and waits up to d for them to finish.
// Setting draining under s.mu, where start registers calls, means no call
// is added to s.calls once this waits on it.
func (s *Server) drain(d time.Duration) {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.cancelCalls(errShutdown)
	done := make(chan struct{})
	go func() {
		s.calls.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.log.Warn("calls still in flight after the shutdown grace period", "grace", d.String())
	}
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// Close refuses new calls, cancels the calls still in flight (each ends
// cancelled, with an unknown outcome when its request was sent, and its
// tool.result event) and waits for them, then ends open requests and closes
// the store.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.drain(s.grace)
		s.calls.Wait()
		s.cancelReqs()
		s.stopBackground()
		s.background.Wait()
		var mcpErr, lockErr error
		if s.mcp != nil {
			mcpErr = s.mcp.Close()
		}
		if s.lock != nil {
			lockErr = s.lock.Close()
		}
		s.closeErr = errors.Join(s.store.Close(), lockErr, mcpErr)
	})
	return s.closeErr
}

func (s *Server) brainURL() string {
	if p := s.publicURL.Load(); p != nil {
		return *p
	}
	return ""
}
