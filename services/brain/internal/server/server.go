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
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brain-tools/suite/pkg/bounded"
	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/netguard"
	"github.com/brain-tools/suite/pkg/pgbound"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/hub"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
	"github.com/brain-tools/suite/services/brain/internal/mcpcall"
	"github.com/brain-tools/suite/services/brain/internal/seal"
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
	// StatementTimeout bounds each PostgreSQL statement: a database that
	// stops answering fails the requests that need it with 503 after it.
	// 0 means pgbound.Default.
	StatementTimeout time.Duration
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
	Invoker invoke.Invoker
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
	// Guard is the SSRF guard every url a tenant gives (custom tools, a
	// session's MCP servers) is checked and dialed through; nil means
	// netguard.New with AnyPort and no allow-list: only public addresses.
	// The host config's own bindings are the operator's and not guarded.
	Guard *netguard.Guard
	// SecretsKey is the key material tenant secrets are sealed with (at
	// least seal.MinKeyBytes bytes; BRAIN_SECRETS_KEY); nil means the key
	// file in DataDir, created on first start.
	SecretsKey []byte
	// Limits cap what each tenant keeps; a zero field means its default.
	Limits Limits

	// takeUpHook, when set (tests only), is called with the calls the lease
	// loop claimed from stopped replicas before it takes them up: a test
	// makes a take-up as slow as it likes with it.
	takeUpHook func(ctx context.Context, calls []*store.Call)
	// leaseHook, when set (tests only), is called before each renewal of
	// this replica's leases (renewal true) and each pass that takes up
	// other replicas' calls (false): a test holds them back in it, as a
	// paused process would, or only the renewals, as a renewal stuck on
	// the database would.
	leaseHook func(ctx context.Context, renewal bool)
	// wrapStore, when set (tests only), wraps the store brain opened: a
	// test makes one of its writes fail after it committed, as a
	// connection lost with its commit would.
	wrapStore func(store.Store) store.Store
}

// Limits are the most custom tools, secrets and toolsets one tenant
// keeps, and the most revisions one custom tool keeps.
type Limits struct {
	CustomTools int // default DefaultMaxCustomTools
	Secrets     int // default DefaultMaxSecrets
	Toolsets    int // default DefaultMaxToolsets
	Revisions   int // default DefaultMaxRevisions
}

// Defaults of Limits.
const (
	DefaultMaxCustomTools = 1000
	DefaultMaxSecrets     = 1000
	DefaultMaxToolsets    = 1000
	// DefaultMaxRevisions is the most revisions of one custom tool, its
	// first one counted. Revisions are kept for the calls that name them
	// (also after the tool is deleted), so they are not pruned; past the
	// limit an update is refused and the tenant replaces the tool.
	DefaultMaxRevisions = 100
)

// MaxRequestBytesLimit is the largest Options.MaxRequestBytes: 64 MiB.
const MaxRequestBytesLimit = 64 << 20

// DefaultLease is Options.Lease when unset.
const DefaultLease = 15 * time.Second

// Server is brain's HTTP API and call engine. Create it with New, serve it
// with Serve (or mount Handler), and Close it.
type Server struct {
	cfg       atomic.Pointer[config.Config] // the host config; Reload swaps it
	store     store.Store
	hub       *hub.Hub
	invoker   invoke.Invoker  // the host config's bindings
	guarded   invoke.Invoker  // tools of a tenant's making, through guard
	mcp       *mcpcall.Caller // nil when Options.Invoker is set
	tenantMCP *mcpcall.Caller // a session's MCP servers, through guard
	guard     *netguard.Guard
	sealer    *seal.Sealer
	limits    Limits
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
	// recordWait bounds how long an answer's request waits for the
	// store to record it: Options.StatementTimeout or pgbound.Default.
	recordWait time.Duration
	// takeUpHook and leaseHook are Options'.
	takeUpHook func(ctx context.Context, calls []*store.Call)
	leaseHook  func(ctx context.Context, renewal bool)
	// renewNow asks the renewal loop to renew at once: a write was refused
	// because another replica owns its call, and the others that replica
	// took with it are to be stopped here too.
	renewNow chan struct{}
	// retentionEvery is Options.RetentionInterval.
	retentionEvery time.Duration
	// background is the lease and retention loops; Close stops them.
	stopBackground context.CancelFunc
	background     sync.WaitGroup

	// callsCtx parents every call; Close cancels it.
	callsCtx    context.Context
	cancelCalls context.CancelCauseFunc
	// reqCtx parents every request; it ends only when requests outlast
	// the shutdown grace (Serve) or at Close, so a request in progress at
	// shutdown (a read, an answer being recorded) gets its answer.
	reqCtx     context.Context
	cancelReqs context.CancelCauseFunc
	// waitsEnd is closed (by endWaits) when brain stops: event streams
	// and waits for a call's end (wait_seconds, a cancel or an answer
	// relayed to another replica) return then instead of holding the
	// shutdown for their full length.
	waitsEnd <-chan struct{}
	endWaits context.CancelFunc

	mu         sync.Mutex
	drainBegan time.Time                      // when drain began (zero before): new calls get 503 from then
	sessions   map[string]*store.Session      // cache by session ID, see session()
	inflight   map[string]*running            // by call ID
	bySession  map[string]map[string]*running // session ID → call ID →
	ending     map[string]*ending             // sessions endSession is interrupting or closing
	queues     map[string]slots               // by tenant and binding, for max_concurrency
	toolSets   map[string]*toolSet            // by session ID, see toolSetOf
	toolSetMu  sync.Mutex                     // serializes storing a tool set with caching it
	// toolSetEpoch counts the drops of cached tool sets (dropToolSets): a
	// tool set read from the store is cached only if none came meanwhile.
	toolSetEpoch uint64
	bindings     map[string]*config.Tool // custom tools by revision ID, see revisionTool
	// remoteEnding are sessions another replica is ending (SignalEndSession),
	// with when this replica stops refusing their new calls on that account.
	remoteEnding map[string]time.Time
	// settled are this replica's answers stored for another replica's
	// call, by answer ID, closed when the store says they were settled.
	settled map[string]chan struct{}
	calls   sync.WaitGroup
	// unsettled are the calls whose write failed that settleLoop is to
	// read back (settleUncertainCreate), under settleMu; settleKick wakes
	// the loop, which settleOnce starts.
	settleMu   sync.Mutex
	unsettled  []unsettled
	settleKick chan struct{}
	settleOnce sync.Once
	// healthySince is when this replica's renewals began to succeed again
	// (UnixNano), 0 while the last one failed: it claims no other
	// replica's calls before a lease has passed since (takeUpExpired).
	healthySince atomic.Int64
	// unrecorded are the IDs of the calls whose result the store did not
	// take before brain stopped (execute), under s.mu: Close names them.
	unrecorded []string
	work       chan func() // calls for idle call goroutines (spawn)
	closeOnce  sync.Once
	closeErr   error
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
		toolSets:  map[string]*toolSet{},
		bindings:  map[string]*config.Tool{},
		maxQueued: o.MaxQueued,
		lease:     o.Lease,
		retention: o.Retention,
		guard:     o.Guard,
		limits:    o.Limits,

		retentionEvery: o.RetentionInterval,
		takeUpHook:     o.takeUpHook,
		leaseHook:      o.leaseHook,
		renewNow:       make(chan struct{}, 1),

		remoteEnding: map[string]time.Time{},
		settled:      map[string]chan struct{}{},
		work:         make(chan func()),
		settleKick:   make(chan struct{}, 1),
	}
	if s.lease == 0 {
		s.lease = DefaultLease
	}
	if s.recordWait = o.StatementTimeout; s.recordWait <= 0 {
		s.recordWait = pgbound.Default
	}
	if s.retentionEvery <= 0 {
		s.retentionEvery = DefaultRetentionInterval
	}
	s.cfg.Store(o.Config)
	if s.guard == nil {
		s.guard = netguard.New(netguard.Options{AnyPort: true})
	}
	s.limits.defaults()
	if s.maxQueued <= 0 {
		s.maxQueued = DefaultMaxQueued
	}
	if s.invoker == nil {
		// Bindings with mcp_tool go to their MCP server, the rest over HTTP.
		s.mcp = mcpcall.New(mcpcall.Options{Logger: log})
		s.invoker = invoke.Route(invoke.New(invoke.Options{Logger: log}), s.mcp)
	}
	// A tenant's urls are dialed only through the guard (proxies off: a
	// proxy would dial past it), and redirects are never followed anyway.
	s.tenantMCP = mcpcall.New(mcpcall.Options{Logger: log, Transport: s.guard.Transport()})
	s.guarded = invoke.Route(invoke.New(invoke.Options{Logger: log, Transport: s.guard.Transport()}), s.tenantMCP)
	if o.Invoker != nil {
		s.guarded = o.Invoker
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
	if err := s.openSealer(o); err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	s.callsCtx, s.cancelCalls = context.WithCancelCause(context.Background())
	s.reqCtx, s.cancelReqs = context.WithCancelCause(context.Background())
	waits, endWaits := context.WithCancel(context.Background())
	s.waitsEnd, s.endWaits = waits.Done(), endWaits
	if err := s.openStore(ctx, o); err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	if o.wrapStore != nil {
		s.store = o.wrapStore(s.store)
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

// openSealer makes the sealer of tenant secrets: from o.SecretsKey, or,
// on SQLite, the key file in o.DataDir (made on first start). Replicas on
// PostgreSQL share their secrets, so they must share the key: there it is
// required.
func (s *Server) openSealer(o Options) error {
	var err error
	switch {
	case o.SecretsKey != nil:
		s.sealer, err = seal.New(o.SecretsKey)
	case o.DatabaseURL != "":
		return errors.New("secrets key: required with a shared database (BRAIN_SECRETS_KEY, the same on every replica), so that each opens what another sealed")
	default:
		if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
		s.sealer, err = seal.FromDir(o.DataDir)
	}
	return err
}

// openStore opens the store o names: PostgreSQL when o.DatabaseURL is set,
// else SQLite in o.DataDir under the directory's lock.
func (s *Server) openStore(ctx context.Context, o Options) error {
	if o.DatabaseURL != "" {
		db, err := postgres.Open(ctx, postgres.Options{
			URL: o.DatabaseURL, Replica: newID("replica"), Lease: s.lease, StatementTimeout: o.StatementTimeout,
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
		s.writeError(w, req, httpapi.NotFound("no endpoint %s %s", req.Method, req.URL.Path))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.writeError(w, req, httpapi.Errorf(http.StatusMethodNotAllowed, httpapi.CodeMethodNotAllowed,
			"method %s not allowed on %s (allowed: %s)", req.Method, req.URL.Path, w.Header().Get("Allow")))
	})
	r.PanicHandler = httpapi.PanicHandler(func(w http.ResponseWriter, req *http.Request, v any) {
		s.writeError(w, req, fmt.Errorf("panic: %v", v))
	})
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
		handle(method, "/sessions/:id/tools", s.handle(s.getSessionTools))
		handle(method, "/custom_tools", s.handle(s.listCustomTools))
		handle(method, "/custom_tools/:id", s.handle(s.getCustomTool))
		handle(method, "/tool_revisions/:id", s.handle(s.getRevision))
		handle(method, "/secrets", s.handle(s.listSecrets))
		handle(method, "/secrets/:name", s.handle(s.getSecret))
		handle(method, "/toolsets", s.handle(s.listToolsets))
		handle(method, "/toolsets/:id", s.handle(s.getToolset))
	}
	handle(http.MethodPut, "/sessions/:id/tools", s.handle(s.putSessionTools))
	handle(http.MethodPost, "/sessions/:id/tools", s.handle(s.postSessionTools))
	handle(http.MethodPost, "/custom_tools", s.handle(s.createCustomTool))
	handle(http.MethodPut, "/custom_tools/:id", s.handle(s.updateCustomTool))
	handle(http.MethodDelete, "/custom_tools/:id", s.handle(s.deleteCustomTool))
	handle(http.MethodPut, "/secrets/:name", s.handle(s.putSecret))
	handle(http.MethodDelete, "/secrets/:name", s.handle(s.deleteSecret))
	handle(http.MethodPost, "/toolsets", s.handle(s.createToolset))
	handle(http.MethodPut, "/toolsets/:id", s.handle(s.updateToolset))
	handle(http.MethodDelete, "/toolsets/:id", s.handle(s.deleteToolset))
	handle(http.MethodPost, "/sessions", s.handle(s.createSession))
	handle(http.MethodDelete, "/sessions/:id", s.handle(s.closeSession))
	handle(http.MethodPost, "/sessions/:id/interrupt", s.handle(s.interruptSession))
	handle(http.MethodPost, "/sessions/:id/close", s.handle(s.closeSession))
	handle(http.MethodGet, "/sessions/:id/events", s.handle(s.events))
	handle(http.MethodPost, "/sessions/:id/tool_calls", s.handle(s.createCall))
	handle(http.MethodPost, "/tool_calls/:id/cancel", s.handle(s.cancelCall))
	handle(http.MethodPost, "/tool_calls/:id/respond", s.handle(s.respond))
	obs := &httpapi.Observer{Metrics: s.metrics.Set, Logger: s.log}
	return obs.Observe(httpapi.WithRequestID(noStore(httpapi.LimitBodyTime(httpapi.BodyTimeout, r))))
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if _, err := query(r); err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// shutdownGrace bounds each step of the shutdown: the calls in flight
// recording their final state, then the requests in progress.
const shutdownGrace = 10 * time.Second

// Serve serves the API on ln until ctx is cancelled, then shuts down in this
// order: new calls are refused (503), the calls in flight are cancelled and
// each records its final state (cancelled) and tool.result (up to 10 s;
// calls that wait, and the approval calls of gated calls, are left as
// stored for the next brain) —
// so a client waiting on a call with wait_seconds gets that final state and
// an open event stream delivers the results — then open event streams and
// waits end, and the other requests in progress get up to 10 s to finish
// before they are ended too. It does not Close the
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
	began := s.drain(s.grace)
	s.endWaits()
	sctx, cancel := context.WithTimeout(context.Background(), s.grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		// Requests still in progress a grace period on (a read held up by
		// the database, say) are ended now: each is answered 503 saying
		// brain is shutting down, if it can be within a second.
		s.cancelReqs(errShuttingDown())
		ended, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if hs.Shutdown(ended) != nil {
			_ = hs.Close()
		}
		return fmt.Errorf("shutdown: requests still in progress %s after the listener closed (%s after the shutdown began) were ended: %w",
			s.grace, time.Since(began).Round(100*time.Millisecond), err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// drain refuses new calls from now on (503), cancels the calls in flight
// (each ends cancelled, with an unknown outcome when its request was sent,
// and records its tool.result) and waits for them to finish until d after
// the first drain began (Serve's, then Close's: a later one does not
// start the grace again). It returns when the first began.
// Setting drainBegan under s.mu, where start registers calls, means no call
// is added to s.calls once this waits on it.
func (s *Server) drain(d time.Duration) (began time.Time) {
	s.mu.Lock()
	if s.drainBegan.IsZero() {
		s.drainBegan = time.Now()
	}
	began = s.drainBegan
	s.mu.Unlock()
	s.cancelCalls(errShutdown)
	if wait := time.Until(began.Add(d)); wait > 0 && !bounded.Wait(wait, s.calls.Wait) {
		s.log.Warn("calls still in flight after the shutdown grace period", "grace", d.String())
	}
	return began
}

// stuckCalls names the calls still in flight, for the error of a Close
// that could not wait for them.
func (s *Server) stuckCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.inflight))
	for id := range s.inflight {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// waitsEnded reports whether brain has stopped waits (see waitsEnd).
func (s *Server) waitsEnded() bool {
	select {
	case <-s.waitsEnd:
		return true
	default:
		return false
	}
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.drainBegan.IsZero()
}

// Close refuses new calls, cancels the calls still in flight (each ends
// cancelled, with an unknown outcome when its request was sent, and its
// tool.result event) and waits for them, then ends open requests and closes
// the store. The wait is bounded: a call that has not returned two grace
// periods after it was cancelled, by Serve's shutdown or by Close (its final write hanging on an
// unreachable database, say) is left as last stored, for the lease
// (PostgreSQL) or the next start (SQLite) to end brain_restarted, and
// Close's error names it; the process can then exit instead of hanging
// until it is killed. The store is then not closed (closing a pool waits
// for the connections the stuck calls hold), nor is it when the
// background work (the lease loop) does not end within a grace period.
// Calls whose result the store did not take are named in the error too.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var stuckErr error
		began := s.drain(s.grace)
		stuck := !bounded.Wait(max(time.Until(began.Add(2*s.grace)), 0), s.calls.Wait)
		if stuck {
			switch ids := s.stuckCalls(); {
			case len(ids) > 0:
				stuckErr = fmt.Errorf("close: %d call(s) still in flight %s after they were cancelled, left as stored for recovery: %s",
					len(ids), 2*s.grace, strings.Join(ids, ", "))
			case bounded.Wait(time.Second, s.calls.Wait):
				// Ended as the grace ran out (a result's write given up
				// on at the same moment): the last steps take no time.
				stuck = false
			default:
				stuckErr = fmt.Errorf("close: calls still ending %s after they were cancelled", 2*s.grace)
			}
		}
		s.endWaits()
		s.cancelReqs(errShuttingDown())
		s.stopBackground()
		if !bounded.Wait(s.grace, s.background.Wait) {
			stuck = true
			stuckErr = errors.Join(stuckErr, fmt.Errorf("close: background work (the lease loop, withdrawals) still running %s after it was stopped", s.grace))
		}
		s.mu.Lock()
		unrecorded := slices.Sorted(slices.Values(s.unrecorded))
		s.mu.Unlock()
		if len(unrecorded) > 0 {
			stuckErr = errors.Join(stuckErr, fmt.Errorf("close: the store did not take the result of %d call(s), left as stored for recovery: %s",
				len(unrecorded), strings.Join(unrecorded, ", ")))
		}
		// Tenants' servers come and go on their own: a session that cannot
		// be ended politely is the server's affair, not a failure to close.
		if err := s.tenantMCP.Close(); err != nil {
			s.log.Info("tenant MCP sessions not all ended at close", "err", err)
		}
		var mcpErr, lockErr error
		if s.mcp != nil {
			mcpErr = s.mcp.Close()
		}
		if s.lock != nil {
			lockErr = s.lock.Close()
		}
		var storeErr error
		if !stuck {
			storeErr = s.store.Close()
		}
		s.closeErr = errors.Join(stuckErr, storeErr, lockErr, mcpErr)
	})
	return s.closeErr
}

func (l *Limits) defaults() {
	if l.CustomTools <= 0 {
		l.CustomTools = DefaultMaxCustomTools
	}
	if l.Secrets <= 0 {
		l.Secrets = DefaultMaxSecrets
	}
	if l.Toolsets <= 0 {
		l.Toolsets = DefaultMaxToolsets
	}
	if l.Revisions <= 0 {
		l.Revisions = DefaultMaxRevisions
	}
}

// logStoreFailure logs work of brain's own (a lease renewal, a retention
// sweep) that its store failed: a warning when the database did not answer
// (httpapi.Unreachable: an outage, which the requests it fails report as
// 503 warnings too, every few seconds until it is over), an error
// otherwise.
func (s *Server) logStoreFailure(msg string, err error, attrs ...any) {
	s.log.Log(context.Background(), httpapi.FailureLevel(err), msg, append(attrs, "err", err)...)
}

// config is the host config in force: the one brain started with, or the
// last that Reload took. A call keeps the binding it started with.
func (s *Server) config() *config.Config { return s.cfg.Load() }

// Reload makes cfg, already checked (config.Parse), the host config in
// force: the catalog, new sessions and new calls see it at once; calls in
// flight keep the binding they started with, and a binding's queue takes
// its new max_concurrency at once (more slots are handed out now; fewer
// are taken back as calls leave).
func (s *Server) Reload(cfg *config.Config) {
	s.cfg.Store(cfg)
	s.mu.Lock()
	queues := maps.Clone(s.queues)
	s.mu.Unlock()
	for key, q := range queues {
		_, name, _ := strings.Cut(key, "\x00")
		if t, ok := cfg.Tool(name); ok {
			q.resize(t.MaxConcurrency)
		}
	}
	s.metrics.reloads.WithLabelValues("applied").Inc()
}

// ReloadRefused counts a host config that failed its checks and was not
// taken (the running one stays).
func (s *Server) ReloadRefused() { s.metrics.reloads.WithLabelValues("refused").Inc() }

// invokerFor is the invoker of binding t: tools of a tenant's making are
// dialed through the SSRF guard, the host config's are the operator's.
func (s *Server) invokerFor(t *config.Tool) invoke.Invoker {
	if t.Trusted() {
		return s.invoker
	}
	return s.guarded
}

func (s *Server) brainURL() string {
	if p := s.publicURL.Load(); p != nil {
		return *p
	}
	return ""
}
