// Package mcpserver serves a tool service's tools over the Model Context
// Protocol (Streamable HTTP) at /mcp, from the same handlers that answer
// POST /tools/<name>, so that any MCP client (Claude Desktop, Cursor, the
// MCP Inspector, brain itself) can call them.
//
// Both current revisions of the MCP transport are served on one endpoint:
//
//   - 2025-11-25 and older: the initialize handshake and sessions
//     (Mcp-Session-Id). A session idle for Options.SessionIdle is closed;
//     its next request gets 404 and the client initializes again.
//   - 2026-07-28: stateless requests (server/discover, per-request _meta).
//     A request is routed here when it carries an Mcp-Protocol-Version
//     header of 2026-07-28 or later; closing its response stream cancels
//     the call.
//
// # Identity
//
// MCP requests carry no tenant, session or call ID, so the adapter makes
// them up, and a tool authorizes with them exactly as with the HTTP path:
//
//   - tenant_id is Options.Tenant, a value of the service's configuration
//     (Attach uses the first of TOOL_TENANTS, "local" by default). Every MCP
//     client holding the service's bearer token acts for that tenant.
//   - session_id is "mcp-" + the MCP session ID for a client with a session
//     (2025-11-25), so a client's calls share per-session state such as a
//     sandbox workspace; a stateless request (2026-07-28) gets a fresh
//     "mcp-req-" + random ID of its own.
//   - call_id is "mcp-call-" + 128 random bits, logged with every call.
//
// # Calls
//
// Arguments are checked against the binding's input_schema (draft 2020-12,
// format asserted, external $ref refused) before the handler runs; a
// failure is an isError result naming the value at fault. A tool's result
// maps to a CallToolResult: text and image blocks, structuredContent (a
// text block with its JSON is added when the tool sent none, as MCP asks),
// isError, and unknown_outcome as the _meta key MetaUnknownOutcome.
// Structured content that fails the binding's output_schema becomes an
// isError result with unknown outcome. A panic, a nil or an invalid result
// become an isError result with unknown outcome, as on the HTTP path.
//
// Progress a handler reports (service.Call.Progress) becomes an MCP
// notifications/progress message on the call's stream, only when the client
// sent a progress token (any token, 0 included), echoing that token; the
// progress value counts the reports (1, 2, ...) and message is the
// report's compact JSON. Without a token progress is dropped.
//
// # Names
//
// Tool names published over MCP must match ^[a-z0-9_-]{1,64}$; New and
// Attach refuse a tool whose name does not.
//
// # Auth
//
// The Handler checks no token itself: Attach mounts it behind the
// service's own bearer check (service.Server.Authed), so /mcp takes exactly
// the token POST /tools/<name> takes. Use bearer.Require when mounting it
// elsewhere.
package mcpserver

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
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/brain-tools/suite/pkg/schema"
	"github.com/julienschmidt/httprouter"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

// Path is where Attach mounts the MCP endpoint.
const Path = "/mcp"

// MetaUnknownOutcome is the CallToolResult _meta key that carries the
// contract's unknown_outcome (true when the tool may have acted although
// its completion is unknown). brain's MCP client reads it back.
const MetaUnknownOutcome = "com.github.brain-tools/unknown_outcome"

// The _meta keys of a tools/call request through which a host that holds
// the service's bearer token (brain) states the call's identity, as the
// tool contract's request body does over HTTP: tenant_id, session_id and
// call_id. Without them the tenant is Options.Tenant, the session the MCP
// session (or a fresh one per stateless request) and the call a random ID;
// with them, state a tool keeps per session (a sandbox workspace, a job)
// follows the host's session instead of the transport's.
const (
	MetaTenantID  = "com.github.brain-tools/tenant_id"
	MetaSessionID = "com.github.brain-tools/session_id"
	MetaCallID    = "com.github.brain-tools/call_id"
)

// maxMetaID caps an identity given in _meta, in bytes.
const maxMetaID = 256

// DefaultSessionIdle is Options.SessionIdle when unset.
const DefaultSessionIdle = 30 * time.Minute

// statelessSince is the first MCP revision served statelessly.
const statelessSince = "2026-07-28"

var nameRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// ValidName reports whether name may be published as an MCP tool name:
// ^[a-z0-9_-]{1,64}$.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Options configure a Handler.
type Options struct {
	// Name and Version identify the server to clients (serverInfo). Name
	// defaults to "brain-tools", Version to "1".
	Name, Version string
	// Tenant is the tenant_id of every MCP call. Required.
	Tenant string
	// Logger receives one record per call; nil discards.
	Logger *slog.Logger
	// SessionIdle closes a 2025-11-25 session after this long without a
	// request. 0 means DefaultSessionIdle.
	SessionIdle time.Duration
	// MaxRequestBytes caps a request body; larger bodies get 413. 0 means
	// the go-sdk default of 4 MiB.
	MaxRequestBytes int64
	// AllowAnyHost turns off the DNS-rebinding guard, which refuses a
	// request that arrived on a loopback address with a Host header that is
	// not loopback. Set it only behind a reverse proxy on the same host.
	AllowAnyHost bool
}

// Handler serves MCP at one endpoint (GET, POST and DELETE). It is safe
// for concurrent use.
type Handler struct {
	stateful     http.Handler
	stateless    http.Handler
	allowAnyHost bool
}

// New builds the MCP endpoint for tools. It fails, naming the tool, when a
// name does not match ^[a-z0-9_-]{1,64}$, two tools share a name, a schema
// does not compile or input_schema is not an object schema, or
// Options.Tenant is empty.
func New(tools []service.Tool, o Options) (*Handler, error) {
	if o.Tenant == "" {
		return nil, errors.New("mcpserver: Options.Tenant is required: MCP calls carry no tenant")
	}
	if o.Name == "" {
		o.Name = "brain-tools"
	}
	if o.Version == "" {
		o.Version = "1"
	}
	if o.SessionIdle <= 0 {
		o.SessionIdle = DefaultSessionIdle
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: o.Version}, &mcp.ServerOptions{
		// Tools only: no logging capability to advertise.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	seen := map[string]bool{}
	for i := range tools {
		t := &tools[i]
		name := t.Binding.Name
		if !ValidName(name) {
			return nil, fmt.Errorf("mcpserver: tool %q: name must match ^[a-z0-9_-]{1,64}$ to be published over MCP", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("mcpserver: tool %q: duplicate name", name)
		}
		seen[name] = true
		if t.Handler == nil {
			return nil, fmt.Errorf("mcpserver: tool %q: no handler", name)
		}
		a, err := newAdapter(t, o.Tenant, logger)
		if err != nil {
			return nil, fmt.Errorf("mcpserver: tool %q: %w", name, err)
		}
		mt := &mcp.Tool{Name: name, Description: t.Binding.Description, InputSchema: t.Binding.InputSchema}
		if len(bytes.TrimSpace(t.Binding.OutputSchema)) > 0 {
			mt.OutputSchema = t.Binding.OutputSchema
		}
		srv.AddTool(mt, a.handle)
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
	return &Handler{
		stateful:     mcp.NewStreamableHTTPHandler(get, &stateful),
		stateless:    mcp.NewStreamableHTTPHandler(get, &stateless),
		allowAnyHost: o.AllowAnyHost,
	}, nil
}

// ServeHTTP routes a request by its revision: an Mcp-Protocol-Version of
// 2026-07-28 or later goes to the stateless server, everything else (the
// initialize handshake, session requests) to the session-keeping one.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The Streamable HTTP transport asks servers to validate Origin against
	// DNS rebinding: a browser page from another origin gets 403. Clients
	// that are not browsers send no Origin.
	if o := r.Header.Get("Origin"); o != "" && !h.allowAnyHost && !sameOrigin(o, r) {
		service.WriteError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("Origin %q is not this server's origin", o))
		return
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v >= statelessSince {
		h.stateless.ServeHTTP(w, r)
		return
	}
	h.stateful.ServeHTTP(w, r)
}

// sameOrigin reports whether the Origin header names the host the request
// was sent to.
func sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// Attach builds the MCP endpoint from s.Tools and mounts it at /mcp (GET,
// POST, DELETE) behind s's bearer check, keeping the routes s.Routes
// already adds. Call it before s.Handler. Unset options come from s: Name
// from s.Name, Logger from s.Logger, Tenant from the first of
// s.Config.Tenants ("local" when none), MaxRequestBytes from
// s.Config.MaxRequestBytes.
func Attach(s *service.Server, o Options) error {
	if s.Built() {
		return errors.New("attach /mcp: the service's handler is already built, so /mcp would never be served: attach before Handler or Run")
	}
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
	h, err := New(s.Tools, o)
	if err != nil {
		return err
	}
	prev := s.Routes
	s.Routes = func(r *httprouter.Router) {
		if prev != nil {
			prev(r)
		}
		authed := s.Authed(jsonRefusals(h))
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			r.Handler(m, Path, authed)
		}
	}
	return nil
}

// jsonRefusals serves h, rewriting the refusals the go-sdk writes with
// http.Error (a 4xx or 5xx status with a text/plain body) into the suite's
// {"error":{"code","message","request_id"}} body, so that a client reads a
// refusal of /mcp as it reads one of any other route. Answers in JSON-RPC,
// SSE streams and other statuses pass through untouched.
func jsonRefusals(h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		jw := &refusalWriter{ResponseWriter: w}
		h.ServeHTTP(jw, r)
		jw.finish()
	}
}

// maxRefusalBytes bounds the text of a refusal kept for the JSON body.
const maxRefusalBytes = 1024

type refusalWriter struct {
	http.ResponseWriter
	status int          // a plain-text refusal being captured; 0 otherwise
	text   bytes.Buffer // its text, at most maxRefusalBytes
}

func (w *refusalWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *refusalWriter) Write(p []byte) (int, error) {
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
func (w *refusalWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && w.status == 0 {
		f.Flush()
	}
}

func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// refusalCodes are the error codes of the statuses the go-sdk refuses with;
// any other 4xx is invalid_request, a 5xx internal_error.
var refusalCodes = map[int]string{
	http.StatusForbidden:             "forbidden",
	http.StatusNotFound:              "not_found",
	http.StatusMethodNotAllowed:      "method_not_allowed",
	http.StatusConflict:              "conflict",
	http.StatusRequestEntityTooLarge: "request_too_large",
	http.StatusUnsupportedMediaType:  "unsupported_media_type",
}

func (w *refusalWriter) finish() {
	if w.status == 0 {
		return
	}
	code, ok := refusalCodes[w.status]
	switch {
	case ok:
	case w.status >= 500:
		code = "internal_error"
	default:
		code = "invalid_request"
	}
	service.WriteError(w.ResponseWriter, w.status, code, "mcp: "+strings.TrimSpace(w.text.String()))
}

// adapter runs one service.Tool for MCP calls.
type adapter struct {
	t      *service.Tool
	tenant string
	logger *slog.Logger
	input  *schema.Schema
	output *schema.Schema // nil without output_schema
}

func newAdapter(t *service.Tool, tenant string, logger *slog.Logger) (*adapter, error) {
	a := &adapter{t: t, tenant: tenant, logger: logger}
	in := bytes.TrimSpace(t.Binding.InputSchema)
	if len(in) == 0 || in[0] != '{' {
		return nil, errors.New("input_schema: must be a JSON Schema object")
	}
	var head struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(in, &head); err != nil {
		return nil, fmt.Errorf("input_schema: %w", err)
	}
	if head.Type != "object" {
		return nil, fmt.Errorf(`input_schema: type must be "object" for MCP, got %v`, head.Type)
	}
	var err error
	if a.input, err = schema.Compile("input_schema", in); err != nil {
		return nil, err
	}
	if out := bytes.TrimSpace(t.Binding.OutputSchema); len(out) > 0 {
		if a.output, err = schema.Compile("output_schema", out); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (a *adapter) handle(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	start := time.Now()
	r := tool.Request{TenantID: a.tenant, CallID: "mcp-call-" + rand.Text(), Arguments: req.Params.Arguments}
	if sid := req.Session.ID(); sid != "" {
		r.SessionID = "mcp-" + sid
	} else {
		r.SessionID = "mcp-req-" + rand.Text()
	}
	for key, dst := range map[string]*string{MetaTenantID: &r.TenantID, MetaSessionID: &r.SessionID, MetaCallID: &r.CallID} {
		if v, ok := req.Params.Meta[key].(string); ok && v != "" && len(v) <= maxMetaID && utf8.ValidString(v) {
			*dst = v
		}
	}
	if len(bytes.TrimSpace(r.Arguments)) == 0 || bytes.Equal(bytes.TrimSpace(r.Arguments), []byte("null")) {
		r.Arguments = json.RawMessage(`{}`)
	}
	logger := a.logger.With("tool", a.t.Binding.Name, "tenant_id", r.TenantID, "session_id", r.SessionID, "call_id", r.CallID, "transport", "mcp")

	var result *tool.Result
	if err := a.input.Validate("arguments", r.Arguments); err != nil {
		result = tool.Errorf("invalid arguments: %v", err)
	} else {
		p := &progress{session: req.Session, ctx: ctx, token: req.Params.GetProgressToken()}
		result = a.run(ctx, service.NewCall(r, logger, p.send), logger)
		p.close()
		if !result.IsError && result.HasStructured() && a.output != nil {
			if err := a.output.Validate("structured_content", result.StructuredContent); err != nil {
				logger.Error("tool result does not match its output_schema", "err", err)
				result = &tool.Result{Content: []tool.Content{tool.Text("internal error: tool " + a.t.Binding.Name + " returned a result that does not match its output_schema: " + err.Error())}, IsError: true, UnknownOutcome: true}
			}
		}
	}
	res, err := toMCP(result)
	if err != nil {
		logger.Error("convert tool result", "err", err)
		res = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "internal error: " + err.Error()}}, IsError: true, Meta: mcp.Meta{MetaUnknownOutcome: true}}
	}
	logger.Info("tool call", "is_error", result.IsError, "duration_ms", time.Since(start).Milliseconds())
	return res, nil
}

// run calls the handler, turning a panic, a nil or an invalid result into
// an is_error result with unknown_outcome (the work may have happened).
func (a *adapter) run(ctx context.Context, call *service.Call, logger *slog.Logger) (result *tool.Result) {
	name := a.t.Binding.Name
	defer func() {
		if v := recover(); v != nil {
			logger.Error("tool panicked", "panic", v, "stack", string(debug.Stack()))
			result = &tool.Result{Content: []tool.Content{tool.Text("internal error in tool " + name)}, IsError: true, UnknownOutcome: true}
		}
	}()
	result = a.t.Handler(ctx, call)
	if result == nil {
		logger.Error("tool returned no result")
		return &tool.Result{Content: []tool.Content{tool.Text("internal error: tool " + name + " returned no result")}, IsError: true, UnknownOutcome: true}
	}
	if err := result.Validate(); err != nil {
		logger.Error("tool returned an invalid result", "err", err)
		return &tool.Result{Content: []tool.Content{tool.Text("internal error: tool " + name + " returned an invalid result: " + err.Error())}, IsError: true, UnknownOutcome: true}
	}
	return result
}

// progress turns a handler's progress reports into MCP progress
// notifications on the call's stream.
type progress struct {
	session *mcp.ServerSession
	ctx     context.Context
	token   any // nil: the client asked for no progress

	mu   sync.Mutex
	n    int
	done bool
}

func (p *progress) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("progress: %w", err)
	}
	if !json.Valid(data) {
		return errors.New("progress: not valid JSON")
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
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return fmt.Errorf("progress: %w", err)
	}
	if err := p.session.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{
		ProgressToken: p.token,
		Progress:      float64(p.n),
		Message:       buf.String(),
	}); err != nil {
		return fmt.Errorf("progress: %w", err)
	}
	return nil
}

func (p *progress) close() {
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
			data, err := decodeBase64(c.Data)
			if err != nil {
				return nil, fmt.Errorf("content[%d].data: %w", i, err)
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
		res.Meta = mcp.Meta{MetaUnknownOutcome: true}
	}
	return res, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func decodeBase64(s string) ([]byte, error) {
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not valid base64: %w", err)
	}
	return data, nil
}
