package service

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/pkg/tracing"
	"github.com/brain-tools/suite/pkg/version"
)

// MCPPath is where a Server serves its tools over MCP.
const MCPPath = "/mcp"

// MCPMetaUnknownOutcome is the CallToolResult _meta key that carries the
// contract's unknown_outcome (true when the tool may have acted although
// its completion is unknown). brain's MCP client reads it back.
const MCPMetaUnknownOutcome = "com.github.brain-tools/unknown_outcome"

// The _meta keys of a tools/call request through which a host that holds
// the service's bearer token (brain) states the call's identity, as the
// tool contract's request body does over HTTP: tenant_id, session_id and
// call_id. Without them the tenant is MCPOptions.Tenant, the session the
// MCP session (or a fresh one per stateless request) and the call a random
// ID; with them, state a tool keeps per session (a sandbox workspace, a
// job) follows the host's session instead of the transport's.
const (
	MCPMetaTenantID  = "com.github.brain-tools/tenant_id"
	MCPMetaSessionID = "com.github.brain-tools/session_id"
	MCPMetaCallID    = "com.github.brain-tools/call_id"
)

// MCPMetaProgress is the _meta key of a progress notification that
// carries the tool's own progress value as JSON when it is not a Progress
// (whose fields map onto the notification's).
const MCPMetaProgress = "com.github.brain-tools/progress"

// MCPMaxMetaID caps an identity given in _meta, in bytes; a longer one is
// ignored.
const MCPMaxMetaID = 256

// DefaultSessionIdle is MCPOptions.SessionIdle when unset.
const DefaultSessionIdle = 30 * time.Minute

// statelessSince is the first MCP revision served statelessly.
const statelessSince = "2026-07-28"

var mcpNameRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// ValidMCPName reports whether name may be published as an MCP tool name:
// ^[a-z0-9_-]{1,64}$.
func ValidMCPName(name string) bool { return mcpNameRE.MatchString(name) }

// MCPOptions configure the MCP endpoint. A Server fills the unset ones
// from itself: Name from Server.Name, Logger from Server.Logger, Tenant
// from the first of Config.Tenants ("local" when none), MaxRequestBytes
// from Config.MaxRequestBytes.
type MCPOptions struct {
	// Name and Version identify the server to clients (serverInfo). Name
	// defaults to "brain-tools", Version to the binary's version
	// (pkg/version, the same -version prints and build_info reports).
	Name, Version string
	// Tenant is the tenant_id of every MCP call that does not state its
	// own in _meta. Required by NewMCPHandler.
	Tenant string
	// Logger receives one record per call; nil discards.
	Logger *slog.Logger
	// SessionIdle closes a 2025-11-25 session after this long without a
	// request. 0 means DefaultSessionIdle.
	SessionIdle time.Duration
	// MaxRequestBytes caps a request body; larger bodies get 413. 0 means
	// the go-sdk default of 4 MiB.
	MaxRequestBytes int64
	// Metrics records every call (tool_calls_total and the rest, transport
	// mcp) and counts the open sessions (mcp_sessions); nil records
	// nothing. A Server sets its own.
	Metrics *metrics.Set
	// AllowAnyHost turns off the DNS-rebinding guard, which refuses a
	// request that arrived on a loopback address with a Host header that is
	// not loopback. Set it only behind a reverse proxy on the same host.
	AllowAnyHost bool
	// Tools, when set, are what a Server serves over MCP instead of its
	// own Tools: a service whose MCP clients need more than its HTTP
	// callers (the sandbox's workspace handles for stateless clients).
	Tools []Tool
}

// MCPOrigin says where the session_id of an MCP call came from, for a
// tool that keeps state per session (MCPCallOrigin).
type MCPOrigin int

// The origins of an MCP call's session_id.
const (
	// MCPOriginHost: the MCPMetaSessionID of a host holding the token
	// (brain), a session of the host's.
	MCPOriginHost MCPOrigin = iota + 1
	// MCPOriginSession: the client's MCP session (2025-11-25), "mcp-" +
	// its ID, which lives until the session is closed or idle.
	MCPOriginSession
	// MCPOriginRequest: a stateless request (2026-07-28) with no session
	// of its own: "mcp-req-" + a random ID made up for this one request,
	// so nothing kept under it is ever asked for again.
	MCPOriginRequest
)

type mcpOriginKey struct{}

// MCPCallOrigin reports the MCPOrigin of the session_id of the call whose
// context ctx is; ok is false for a call that did not come over MCP.
func MCPCallOrigin(ctx context.Context) (o MCPOrigin, ok bool) {
	o, ok = ctx.Value(mcpOriginKey{}).(MCPOrigin)
	return o, ok
}

// MCPHandler serves MCP (Streamable HTTP) at one endpoint (GET, POST and
// DELETE), running each call through the same core as POST /tools/<name>.
// It checks no token itself; a Server mounts it behind its bearer check.
// It is safe for concurrent use.
//
// Both current revisions of the MCP transport are served:
//
//   - 2025-11-25 and older: the initialize handshake and sessions
//     (Mcp-Session-Id). A session idle for MCPOptions.SessionIdle is
//     closed; its next request gets 404 and the client initializes again.
//   - 2026-07-28: stateless requests (server/discover, per-request _meta).
//     A request is routed here when it carries an Mcp-Protocol-Version
//     header of 2026-07-28 or later; closing its response stream cancels
//     the call.
//
// Identity: tenant_id is MCPOptions.Tenant; session_id is "mcp-" + the MCP
// session ID (2025-11-25), or a fresh "mcp-req-" + random ID per stateless
// request; call_id is "mcp-call-" + 128 random bits; a host may state all
// three in _meta (MCPMetaTenantID and the rest). A handler learns which of
// these its session_id is from MCPCallOrigin.
//
// Results: text and image blocks, structuredContent (with a text block of
// its JSON when the tool sent no content, as MCP asks), isError, and
// unknown_outcome as the _meta key MCPMetaUnknownOutcome. Progress
// (Call.Progress) becomes notifications/progress when the client sent a
// progress token: a Progress value gives its progress, total and message;
// any other value counts the reports (1, 2, ...) with its compact JSON as
// the message and under MCPMetaProgress.
type MCPHandler struct {
	server       *mcp.Server
	stateful     http.Handler
	stateless    http.Handler
	allowAnyHost bool
}

// NewMCPHandler builds the MCP endpoint for the tools that OverMCP
// admits. It fails, naming the tool, when a name does not match
// ^[a-z0-9_-]{1,64}$, two tools share a name, a tool has no handler, a
// schema does not compile or input_schema is not an object schema, or
// o.Tenant is empty.
func NewMCPHandler(tools []Tool, o MCPOptions) (*MCPHandler, error) {
	return newMCPHandler(tools, o, false)
}

// newMCPHandler is NewMCPHandler; lenient leaves a tool that cannot be
// published over MCP out (logged as a warning) instead of failing.
func newMCPHandler(tools []Tool, o MCPOptions, lenient bool) (*MCPHandler, error) {
	if o.Tenant == "" {
		return nil, errors.New("mcp: MCPOptions.Tenant is required: MCP calls carry no tenant")
	}
	if o.Name == "" {
		o.Name = "brain-tools"
	}
	if o.Version == "" {
		o.Version = version.Get().Version
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = DefaultSessionIdle
	}
	logger := orDiscard(o.Logger)
	srv := mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: o.Version}, &mcp.ServerOptions{
		// Tools only: no logging capability to advertise.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	seen := map[string]bool{}
	for i := range tools {
		t := &tools[i]
		if !t.OverMCP() {
			continue
		}
		a, err := checkMCPTool(t, seen, o.Tenant, logger, o.Metrics)
		if err != nil {
			if lenient {
				logger.Warn("tool not served over MCP", "tool", t.Binding.Name, "err", err)
				continue
			}
			return nil, fmt.Errorf("mcp: tool %q: %w", t.Binding.Name, err)
		}
		srv.AddTool(mcpTool(&t.Binding), a.handle)
	}
	common := mcp.StreamableHTTPOptions{
		Logger:                     logger,
		MaxRequestBodyBytes:        o.MaxRequestBytes,
		DisableLocalhostProtection: o.AllowAnyHost,
	}
	stateful, stateless := common, common
	stateful.SessionTimeout = o.SessionIdle
	stateless.Stateless = true
	stateless.PropagateRequestCancellation = true
	get := func(*http.Request) *mcp.Server { return srv }
	return &MCPHandler{
		server:       srv,
		stateful:     mcp.NewStreamableHTTPHandler(get, &stateful),
		stateless:    mcp.NewStreamableHTTPHandler(get, &stateless),
		allowAnyHost: o.AllowAnyHost,
	}, nil
}

// checkMCPTool builds t's adapter, or says why t cannot be published
// over MCP; seen holds the names published so far.
func checkMCPTool(t *Tool, seen map[string]bool, tenant string, logger *slog.Logger, m *metrics.Set) (*mcpAdapter, error) {
	name := t.Binding.Name
	switch {
	case !ValidMCPName(name):
		return nil, errors.New("name must match ^[a-z0-9_-]{1,64}$ to be published over MCP")
	case seen[name]:
		return nil, errors.New("duplicate name")
	case t.Handler == nil:
		return nil, errors.New("no handler")
	}
	a, err := newMCPAdapter(t, tenant, logger, m)
	if err != nil {
		return nil, err
	}
	seen[name] = true
	return a, nil
}

// mcpTool is the MCP listing of a binding: name, title, description,
// schemas and annotations.
func mcpTool(b *tool.Binding) *mcp.Tool {
	mt := &mcp.Tool{Name: b.Name, Title: b.Title, Description: b.Description, InputSchema: b.InputSchema}
	if len(bytes.TrimSpace(b.OutputSchema)) > 0 {
		mt.OutputSchema = b.OutputSchema
	}
	if a := b.Annotations; a != nil {
		mt.Annotations = &mcp.ToolAnnotations{
			Title:           b.Title,
			ReadOnlyHint:    a.ReadOnlyHint,
			DestructiveHint: a.DestructiveHint,
			IdempotentHint:  a.IdempotentHint,
			OpenWorldHint:   a.OpenWorldHint,
		}
	}
	return mt
}

// ServeHTTP routes a request by its revision: an Mcp-Protocol-Version of
// 2026-07-28 or later goes to the stateless server, everything else (the
// initialize handshake, session requests) to the session-keeping one.
func (h *MCPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The Streamable HTTP transport asks servers to validate Origin against
	// DNS rebinding: a browser page from another origin gets 403. Clients
	// that are not browsers send no Origin.
	if o := r.Header.Get("Origin"); o != "" && !h.allowAnyHost && !sameOrigin(o, r) {
		httpapi.WriteError(w, httpapi.Errorf(http.StatusForbidden, httpapi.CodeForbidden, "Origin %q is not this server's origin", o))
		return
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v >= statelessSince {
		h.stateless.ServeHTTP(w, r)
		return
	}
	h.stateful.ServeHTTP(w, r)
}

// Sessions returns how many MCP sessions (revision 2025-11-25) are open.
func (h *MCPHandler) Sessions() int {
	n := 0
	for range h.server.Sessions() {
		n++
	}
	return n
}

// sameOrigin reports whether the Origin header names the host the request
// was sent to.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// mcpOptions is s.MCP with its unset fields filled from s.
func (s *Server) mcpOptions() MCPOptions {
	o := s.MCP
	if o.Name == "" {
		o.Name = s.Name
	}
	if o.Logger == nil {
		o.Logger = s.Logger
	}
	if o.Tenant == "" {
		o.Tenant = "local"
		if len(s.Config.Tenants) > 0 && s.Config.Tenants[0] != "" {
			o.Tenant = s.Config.Tenants[0]
		}
	}
	if o.MaxRequestBytes == 0 {
		o.MaxRequestBytes = s.Config.MaxRequestBytes
	}
	if o.Metrics == nil {
		o.Metrics = s.Metrics()
	}
	return o
}

// CheckMCP reports why s's tools cannot all be served over MCP (see
// NewMCPHandler). The endpoint a Server mounts leaves such a tool out,
// with a warning in the log; a service that wants the start to fail
// instead calls this first.
func (s *Server) CheckMCP() error {
	if s.Config.DisableMCP {
		return nil
	}
	_, err := NewMCPHandler(s.mcpTools(), s.mcpOptions())
	return err
}

// mcpTools are the tools s serves over MCP: MCPOptions.Tools, or s.Tools.
func (s *Server) mcpTools() []Tool {
	if s.MCP.Tools != nil {
		return s.MCP.Tools
	}
	return s.Tools
}

// mountMCP mounts /mcp behind the bearer check, so it takes exactly the
// token POST /tools/<name> takes. A tool that cannot be published over
// MCP is left out (see CheckMCP).
func (s *Server) mountMCP(r *httprouter.Router) {
	var h http.Handler
	o := s.mcpOptions()
	mh, err := newMCPHandler(s.mcpTools(), o, true)
	if err != nil {
		s.Logger.Error("mcp endpoint not served", "err", err)
		h = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			httpapi.WriteError(w, httpapi.Errorf(http.StatusInternalServerError, httpapi.CodeInternal, "mcp endpoint not available: %v", err))
		})
	} else {
		h = jsonRefusals(mh)
		s.metrics.GaugeFunc(metrics.MCPSessions, func() float64 { return float64(mh.Sessions()) })
	}
	authed := s.authed(h.ServeHTTP)
	observed := httpapi.Route(MCPPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.SetTenant(r.Context(), o.Tenant)
		if v := r.Header.Get("Mcp-Protocol-Version"); v != "" {
			httpapi.Annotate(r.Context(), slog.String("mcp_revision", strictjson.Clip(v, 32)))
		}
		if trace.SpanContextFromContext(r.Context()).IsValid() {
			// The SDK hands a tool handler the request's headers, not
			// its context: this request's span goes there, so the
			// call's span is its child (mcpAdapter.handle).
			tracing.Inject(r.Context(), r.Header)
		}
		authed(w, r)
	}))
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		r.Handler(m, MCPPath, observed)
	}
}

// jsonRefusals serves h, rewriting the refusals the go-sdk writes with
// http.Error (a 4xx or 5xx status with a text/plain body) into the suite's
// JSON error body, so that a client reads a refusal of /mcp as it reads
// one of any other route. Answers in JSON-RPC, SSE streams and other
// statuses pass through untouched.
func jsonRefusals(h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		jw := &textRefusal{ResponseWriter: w}
		h.ServeHTTP(jw, r)
		jw.finish()
	}
}

// maxRefusalBytes bounds the text of a refusal kept for the JSON body.
const maxRefusalBytes = 1024

type textRefusal struct {
	http.ResponseWriter
	status int          // a plain-text refusal being captured; 0 otherwise
	text   bytes.Buffer // its text, at most maxRefusalBytes
}

func (w *textRefusal) WriteHeader(code int) {
	if w.status == 0 && code >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *textRefusal) Write(p []byte) (int, error) {
	if w.status == 0 {
		return w.ResponseWriter.Write(p)
	}
	if room := maxRefusalBytes - w.text.Len(); room > 0 {
		w.text.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Flush passes through, for the SSE streams; a refusal is written whole by
// finish.
func (w *textRefusal) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && w.status == 0 {
		f.Flush()
	}
}

func (w *textRefusal) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// refusalCodes are the error codes of the statuses the go-sdk refuses with;
// any other 4xx is invalid_request, a 5xx internal_error.
var refusalCodes = map[int]string{
	http.StatusForbidden:             httpapi.CodeForbidden,
	http.StatusNotFound:              httpapi.CodeNotFound,
	http.StatusMethodNotAllowed:      httpapi.CodeMethodNotAllowed,
	http.StatusConflict:              httpapi.CodeConflict,
	http.StatusRequestEntityTooLarge: httpapi.CodeTooLarge,
	http.StatusUnsupportedMediaType:  httpapi.CodeUnsupportedMedia,
}

func (w *textRefusal) finish() {
	if w.status == 0 {
		return
	}
	code, ok := refusalCodes[w.status]
	switch {
	case ok:
	case w.status >= 500:
		code = httpapi.CodeInternal
	default:
		code = httpapi.CodeInvalidRequest
	}
	// The go-sdk set text/plain and may have set a length for its text.
	w.Header().Del("Content-Length")
	httpapi.Refuse(w.ResponseWriter, w.status, code, "mcp: "+strings.TrimSpace(w.text.String()))
}

// mcpAdapter runs one Tool for MCP calls through its core.
type mcpAdapter struct {
	core   *core
	tenant string
	logger *slog.Logger
}

// newMCPAdapter builds t's core for MCP, which also asks for an input
// schema of type object.
func newMCPAdapter(t *Tool, tenant string, logger *slog.Logger, m *metrics.Set) (*mcpAdapter, error) {
	if t.decl == nil {
		if _, err := compileObject("input_schema", t.Binding.InputSchema); err != nil {
			return nil, err
		}
	}
	c, err := newCore(t, m, metrics.TransportMCP)
	if err != nil {
		return nil, err
	}
	return &mcpAdapter{core: c, tenant: tenant, logger: logger}, nil
}

func (a *mcpAdapter) handle(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	start := time.Now()
	r := tool.Request{TenantID: a.tenant, CallID: "mcp-call-" + rand.Text(), Arguments: req.Params.Arguments}
	origin := MCPOriginRequest
	if sid := req.Session.ID(); sid != "" {
		r.SessionID, origin = "mcp-"+sid, MCPOriginSession
	} else {
		r.SessionID = "mcp-req-" + rand.Text()
	}
	for key, dst := range map[string]*string{MCPMetaTenantID: &r.TenantID, MCPMetaSessionID: &r.SessionID, MCPMetaCallID: &r.CallID} {
		if v, ok := req.Params.Meta[key].(string); ok && v != "" && len(v) <= MCPMaxMetaID && utf8.ValidString(v) {
			*dst = v
			if key == MCPMetaSessionID {
				origin = MCPOriginHost
			}
		}
	}
	ctx = context.WithValue(ctx, mcpOriginKey{}, origin)
	if len(bytes.TrimSpace(r.Arguments)) == 0 || bytes.Equal(bytes.TrimSpace(r.Arguments), []byte("null")) {
		r.Arguments = json.RawMessage(`{}`)
	}
	logger := a.logger.With("tool", a.core.t.Binding.Name, "tenant_id", r.TenantID, "session_id", r.SessionID, "call_id", r.CallID, "transport", "mcp")
	if req.Extra != nil {
		// The MCP SDK runs the handler on a context of its own, not the
		// HTTP request's: the trace comes in the request's headers, where
		// the /mcp route put its server span (mountMCP), and the request
		// ID in X-Request-Id (httpapi.WithRequestID).
		ctx = tracing.ContextWithRequestID(tracing.Extract(ctx, req.Extra.Header), req.Extra.Header.Get(httpapi.HeaderRequestID))
	}

	p := &mcpProgress{session: req.Session, ctx: ctx, token: req.Params.GetProgressToken()}
	call := NewCall(r, logger, p.send)
	result := a.core.call(ctx, call, nil, start)
	logger = call.Logger
	p.close()
	res, err := toMCP(result)
	if err != nil {
		logger.Error("convert tool result", "err", err)
		res = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "internal error: " + err.Error()}}, IsError: true, Meta: mcp.Meta{MCPMetaUnknownOutcome: true}}
	}
	logger.Info("tool call", "is_error", result.IsError, "duration_ms", time.Since(start).Milliseconds())
	return res, nil
}

// mcpProgress turns a handler's progress reports into MCP progress
// notifications on the call's stream.
type mcpProgress struct {
	session *mcp.ServerSession
	ctx     context.Context
	token   any // nil: the client asked for no progress

	mu   sync.Mutex
	n    int
	done bool
}

func (p *mcpProgress) send(v any) error {
	params := &mcp.ProgressNotificationParams{ProgressToken: p.token}
	switch pv := v.(type) {
	case Progress:
		params.Progress, params.Total, params.Message = pv.Progress, pv.Total, pv.Message
	case *Progress:
		params.Progress, params.Total, params.Message = pv.Progress, pv.Total, pv.Message
	default:
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("progress: %w", err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, data); err != nil {
			return fmt.Errorf("progress: %w", err)
		}
		params.Message = buf.String()
		params.Meta = mcp.Meta{MCPMetaProgress: json.RawMessage(buf.Bytes())}
	}
	if p.token == nil {
		return nil // the client sent no progress token: progress is dropped
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return errors.New("progress: the call already answered")
	}
	p.n++
	if _, ok := params.Meta[MCPMetaProgress]; ok {
		params.Progress = float64(p.n)
	}
	if err := p.session.NotifyProgress(p.ctx, params); err != nil {
		return fmt.Errorf("progress: %w", err)
	}
	return nil
}

func (p *mcpProgress) close() {
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
}

// toMCP maps a valid contract result to a CallToolResult.
func toMCP(r *tool.Result) (*mcp.CallToolResult, error) {
	res := &mcp.CallToolResult{Content: []mcp.Content{}, IsError: r.IsError}
	for i, c := range r.Content {
		switch c.Type {
		case tool.TypeText:
			res.Content = append(res.Content, &mcp.TextContent{Text: c.Text})
		case tool.TypeImage:
			data, err := base64.StdEncoding.DecodeString(c.Data)
			if err != nil {
				return nil, fmt.Errorf("content[%d].data: not valid base64: %w", i, err)
			}
			res.Content = append(res.Content, &mcp.ImageContent{Data: data, MIMEType: c.MIMEType})
		default:
			return nil, fmt.Errorf("content[%d].type: unknown content type %q", i, c.Type)
		}
	}
	if r.HasStructured() {
		var buf bytes.Buffer
		if err := json.Compact(&buf, r.StructuredContent); err != nil {
			return nil, fmt.Errorf("structured_content: %w", err)
		}
		res.StructuredContent = json.RawMessage(buf.Bytes())
		if len(res.Content) == 0 {
			// MCP: a tool returning structured content should also return
			// it serialized in a text block, for clients that read only text.
			res.Content = append(res.Content, &mcp.TextContent{Text: buf.String()})
		}
	}
	if r.UnknownOutcome {
		res.Meta = mcp.Meta{MCPMetaUnknownOutcome: true}
	}
	return res, nil
}
