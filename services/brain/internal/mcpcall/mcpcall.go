// Package mcpcall is brain's MCP client: a binding with mcp_tool is called
// as a tools/call on the MCP server at its url, over Streamable HTTP, and
// the answer is classified exactly like an HTTP tool's (see package invoke
// and the contract's outcome table).
//
// Source: the tool contract (shared/seeds/000_*.txt, "mcp_tool" and
// "Handle errors, timeouts, and long jobs"), the MCP Streamable HTTP
// transport of revisions 2025-11-25 and 2026-07-28, and the design notes'
// MCP section. A Caller
//
//   - keeps one MCP client session per server (url and token), shared by
//     every call to it; the session is opened on first use, newest revision
//     first (2026-07-28, stateless), falling back to 2025-11-25 (sessions);
//   - refuses before sending, like invoke: tenant not allowed, arguments
//     failing input_schema, credential missing;
//   - sends Authorization: Bearer <token_env's value> and traceparent on
//     every request, never follows redirects, takes its proxy from
//     HTTPS_PROXY / HTTP_PROXY, waits at most 30 s for the response headers
//     of the handshake, t.Timeout() for the whole call (MCP servers send a
//     call's headers with its first message, so the 30 s header limit of
//     HTTP tools would cut healthy long calls), and caps the call's
//     response at max_output_bytes (plus a little for JSON-RPC and SSE
//     framing);
//   - forwards MCP progress notifications of the call as tool.progress data
//     {"progress":N,"total":N?,"message":"..."?};
//   - cancels the MCP request when ctx ends (notifications/cancelled for a
//     2025-11-25 session, closing the request's stream for 2026-07-28);
//   - re-initializes a session the server has forgotten (HTTP 404 on a
//     2025-11-25 session) and resends the call once: a 404 means the server
//     did not run it;
//   - maps the CallToolResult to the contract's result: text and image
//     blocks (other MCP blocks become text describing them),
//     structuredContent, isError, and unknown_outcome from the _meta key
//     service.MCPMetaUnknownOutcome; output_schema is checked for results
//     that are not errors, and a structured-only result gets a text block;
//   - classifies a stream that drops before the result, a connection that
//     fails (before the call was sent too: the contract's outcome table
//     makes every failed connection unknown), a non-2xx status and an
//     invalid result as failed with unknown_outcome, and uses invoke's
//     outcome helpers for every outcome, so that both transports classify
//     and word them alike.
package mcpcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brain-tools/suite/pkg/netguard"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/pkg/version"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
)

// Error codes of an Outcome beyond invoke's.
const (
	// CodeMCPError: the server answered tools/call with a JSON-RPC error.
	// Unknown outcome, except for the codes that say the request was
	// refused before it ran (parse error, invalid request, method not
	// found, invalid params: an unknown tool or bad arguments).
	CodeMCPError = "mcp_error"
	// CodeSessionExpired: the server answered 404 for the session again
	// after brain re-initialized it. The server did not run the call, so
	// the outcome is known.
	CodeSessionExpired = "mcp_session_expired"
)

// FramingSlack is what a call's response may exceed max_output_bytes by on
// the wire: the JSON-RPC envelope and SSE framing around the result.
const FramingSlack = 16 << 10

// DefaultProbeTimeout bounds Probe's connection to each server.
const DefaultProbeTimeout = 10 * time.Second

// Options configure a Caller.
type Options struct {
	// Logger receives one record per call; nil discards.
	Logger *slog.Logger
	// Transport sends the HTTP requests; nil means an http.Transport that
	// takes its proxy from HTTPS_PROXY / HTTP_PROXY / NO_PROXY.
	Transport http.RoundTripper
	// ProtocolVersion is the MCP revision to ask for first; "" means the
	// newest the SDK speaks (2026-07-28), which falls back to 2025-11-25
	// when a server does not serve it.
	ProtocolVersion string
	// ProbeTimeout bounds Probe per server; 0 means DefaultProbeTimeout.
	ProbeTimeout time.Duration

	// headerTimeout is the response-header limit (tool.HeaderTimeout);
	// tests shorten it.
	headerTimeout time.Duration
}

// Caller calls MCP tools. It is safe for concurrent use; Close it to end
// its sessions.
type Caller struct {
	logger *slog.Logger
	opts   Options
	client *mcp.Client
	pool   pool

	tokens atomic.Uint64
	mu     sync.Mutex
	sinks  map[string]*sink // progress token → the call's progress sink
}

// New returns a Caller.
func New(o Options) *Caller {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = http.ProxyFromEnvironment
		t.MaxIdleConnsPerHost = 64
		o.Transport = t
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.headerTimeout <= 0 {
		o.headerTimeout = tool.HeaderTimeout
	}
	c := &Caller{logger: o.Logger, opts: o, sinks: map[string]*sink{}}
	c.client = mcp.NewClient(&mcp.Implementation{Name: "brain", Version: version.Get().Version}, &mcp.ClientOptions{
		// brain offers the server nothing: no roots, sampling or elicitation.
		Capabilities:                &mcp.ClientCapabilities{},
		ProgressNotificationHandler: c.onProgress,
	})
	c.pool.caller = c
	c.pool.ctx, c.pool.cancel = context.WithCancel(context.Background())
	return c
}

// Close ends every pooled session (a DELETE for 2025-11-25 sessions, at
// most a few seconds each).
func (c *Caller) Close() error { return c.pool.closeAll() }

// Call calls t.MCPTool on the MCP server at t.URL with req's arguments and
// classifies the outcome with invoke's statuses and codes (plus
// CodeMCPError and CodeSessionExpired). It never returns before the call
// has ended. onProgress, when not nil, receives each progress notification
// of the call as JSON {"progress":N,"total":N?,"message":"..."?}, in
// order, never after Call returns.
//
// req's tenant, session and call go in the request's _meta
// (service.MCPMetaTenantID and the rest), which our own services use and
// other servers may ignore. inspect_session is not sent over MCP.
func (c *Caller) Call(ctx context.Context, t *config.Tool, req tool.Request, onProgress func(data json.RawMessage)) invoke.Outcome {
	start := time.Now()
	o := c.call(ctx, t, req, onProgress)
	invoke.LogOutcome(ctx, c.logger, "mcp tool call", t, req, o, start,
		slog.String("mcp_tool", t.MCPTool), slog.String("server", t.URL))
	return o
}

func (c *Caller) call(ctx context.Context, t *config.Tool, req tool.Request, onProgress func(json.RawMessage)) invoke.Outcome {
	if t.MCPTool == "" {
		return invoke.Refused(invoke.CodeInvalidArguments, fmt.Sprintf("tool %s has no mcp_tool", t.Name))
	}
	if o, ok := invoke.PrecheckOnce(ctx, t, req.TenantID, req.Arguments); !ok {
		return o
	}
	if t.TokenEnv != "" && t.Token == "" {
		return invoke.Refused(invoke.CodeMissingCredential, fmt.Sprintf("tool %s: token_env %s is not set", t.Name, t.TokenEnv))
	}
	if err := ctx.Err(); err != nil {
		return invoke.Cancelled(t, false, context.Cause(ctx))
	}

	callCtx, cancelCall := context.WithTimeoutCause(ctx, t.Timeout(), invoke.ErrCallTimeout)
	defer cancelCall()

	s := &sink{fn: onProgress}
	token := "brain-" + strconv.FormatUint(c.tokens.Add(1), 10)
	c.mu.Lock()
	c.sinks[token] = s
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.sinks, token)
		c.mu.Unlock()
		s.close()
	}()

	for attempt := 1; ; attempt++ {
		conn, err := c.pool.get(callCtx, endpointOf(t))
		if err != nil {
			return c.connectFailure(ctx, callCtx, t, err)
		}
		tr := &trace{limit: t.MaxOutputBytes() + FramingSlack}
		params := &mcp.CallToolParams{Name: t.MCPTool, Arguments: json.RawMessage(req.Arguments),
			// The call's identity, as the HTTP body carries it: a tool that
			// keeps state per session (a sandbox workspace) follows brain's
			// session, not the pooled MCP session shared by all of them.
			Meta: mcp.Meta{
				service.MCPMetaTenantID:  req.TenantID,
				service.MCPMetaSessionID: req.SessionID,
				service.MCPMetaCallID:    req.CallID,
			}}
		params.SetProgressToken(token)
		res, err := conn.session.CallTool(withTrace(callCtx, tr), params)
		if err == nil {
			return finish(t, res, tr)
		}
		if errors.Is(err, mcp.ErrSessionMissing) {
			c.pool.drop(conn)
			if attempt == 1 && ctx.Err() == nil && callCtx.Err() == nil {
				c.logger.Info("mcp session expired; initializing a new one", "server", t.URL, "tool", t.Name)
				continue
			}
			msg := fmt.Sprintf("tool %s: MCP server %s forgot the session again after brain re-initialized it (HTTP 404); the call was not run", t.Name, t.URL)
			// The server ran nothing: the same call may be made again.
			o := invoke.RefusedRetryable(CodeSessionExpired, msg)
			o.Sent = true
			return o
		}
		if !tr.attempted.Load() && ctx.Err() == nil && callCtx.Err() == nil {
			// The call never reached the HTTP transport: the pooled session
			// had died (a stream of another call failed it). Nothing was
			// sent, so a fresh session may carry the call, once.
			c.pool.drop(conn)
			if attempt == 1 {
				c.logger.Info("mcp session closed before the call was sent; opening a new one", "server", t.URL, "tool", t.Name, "err", err)
				continue
			}
		}
		if conn.broken() {
			c.pool.drop(conn)
		}
		o := c.callFailure(ctx, callCtx, t, tr, err)
		if o.ErrorCode == invoke.CodeConnectionFailed {
			// The server dropped a connection. Kept-alive ones to it are
			// likely closed too, and a POST written on one of those fails
			// the next call although the server never read it (a POST is
			// never resent). Start the next call on a new connection.
			c.closeIdleConnections()
		}
		return o
	}
}

// closeIdleConnections closes the kept-alive connections of the caller's
// HTTP transport, when it has any.
func (c *Caller) closeIdleConnections() {
	if t, ok := c.opts.Transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// connectFailure classifies a failure to open the server's session. The
// call was not sent (Sent false), but the contract's outcome table makes a
// connection that failed or timed out an unknown outcome, as invoke does
// for an HTTP tool it could not reach.
func (c *Caller) connectFailure(ctx, callCtx context.Context, t *config.Tool, err error) invoke.Outcome {
	if ctx.Err() != nil {
		return invoke.Cancelled(t, false, context.Cause(ctx))
	}
	var o invoke.Outcome
	if errors.Is(err, netguard.ErrRefused) {
		return invoke.GuardRefused(t, err)
	}
	if errors.Is(context.Cause(callCtx), invoke.ErrCallTimeout) {
		o = invoke.Failed(invoke.CodeTimeout, true, fmt.Sprintf("tool %s: call exceeded timeout_seconds (%s) while connecting to MCP server %s", t.Name, t.Timeout(), t.URL))
		o.Status = invoke.StatusTimedOut
	} else {
		o = invoke.Failed(invoke.CodeConnectionFailed, true, fmt.Sprintf("tool %s: connect to MCP server %s: %s", t.Name, t.URL, mcpReason(err)))
	}
	o.Sent = false
	return o
}

// callFailure classifies an error of a tools/call that may have reached
// the server. The caller's cancellation wins, then the whole-call timeout,
// then what the transport saw.
func (c *Caller) callFailure(ctx, callCtx context.Context, t *config.Tool, tr *trace, err error) invoke.Outcome {
	sent := tr.sent()
	if ctx.Err() != nil {
		return invoke.Cancelled(t, sent, context.Cause(ctx))
	}
	if errors.Is(context.Cause(callCtx), invoke.ErrCallTimeout) {
		o := invoke.Failed(invoke.CodeTimeout, sent, fmt.Sprintf("tool %s: call exceeded timeout_seconds (%s)", t.Name, t.Timeout()))
		o.Status, o.Sent = invoke.StatusTimedOut, sent
		return o
	}
	if tr.tripped.Load() {
		return invoke.Failed(invoke.CodeOutputTooLarge, true, fmt.Sprintf("tool %s: response is larger than max_output_bytes %d", t.Name, t.MaxOutputBytes()))
	}
	// A JSON-RPC error is the most precise answer, also when it came with
	// a non-2xx status (2026-07-28 maps errors to HTTP statuses). The SDK
	// also wraps its own HTTP failures in a JSON-RPC error ("rejected by
	// transport", -32005): those carry the *url.Error of net/http and are
	// no answer from the server.
	// A 429 or 5xx the SDK counts transient it reports as that same
	// error, with the status text alone: the status says more.
	var werr *jsonrpc.Error
	st := int(tr.status.Load())
	if errors.As(err, &werr) && !errors.As(err, new(*url.Error)) && !(st != 0 && rejectedByTransport(werr)) {
		msg := fmt.Sprintf("tool %s: MCP server %s answered error %d: %s", t.Name, t.URL, werr.Code, strictjson.Clip(werr.Message, 512))
		switch werr.Code {
		case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
			// The server refused the request before running the tool.
			o := invoke.Refused(CodeMCPError, msg)
			o.Sent = true
			return o
		}
		return invoke.Failed(CodeMCPError, true, msg)
	}
	if st != 0 {
		msg := fmt.Sprintf("tool %s: MCP server %s answered HTTP %d %s", t.Name, t.URL, st, http.StatusText(st))
		if st >= 300 && st <= 399 {
			msg += " (redirects are not followed)"
		}
		ra := tr.retry.Load()
		if ra != nil {
			msg += " with Retry-After " + ra.said
		}
		o := invoke.Failed(invoke.CodeHTTPStatus, true, msg)
		o.HTTPStatus = st
		if ra != nil {
			o.Retryable, o.RetryAfter = true, ra.wait
		}
		return o
	}
	if !sent {
		// Not sent, yet a failed connection: an unknown outcome, as above.
		o := invoke.Failed(invoke.CodeConnectionFailed, true, fmt.Sprintf("tool %s: MCP server %s: %s", t.Name, t.URL, mcpReason(err)))
		o.Sent = false
		return o
	}
	return invoke.Failed(invoke.CodeConnectionFailed, true, fmt.Sprintf("tool %s: MCP server %s: the connection dropped before the result: %s", t.Name, t.URL, mcpReason(err)))
}

// rejectedByTransport reports whether e is the MCP SDK's own "rejected by
// transport" (-32005), not an error the server sent.
func rejectedByTransport(e *jsonrpc.Error) bool {
	return e.Code == -32005 && e.Message == "rejected by transport"
}

// sink delivers one call's progress; close stops delivery for good.
type sink struct {
	mu   sync.Mutex
	fn   func(json.RawMessage)
	done bool
}

func (s *sink) deliver(data json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done && s.fn != nil {
		s.fn(data)
	}
}

func (s *sink) close() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
}

// progressData is the tool.progress payload of an MCP progress
// notification.
type progressData struct {
	Progress float64  `json:"progress"`
	Total    *float64 `json:"total,omitempty"`
	Message  string   `json:"message,omitempty"`
}

func (c *Caller) onProgress(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	p := r.Params
	if p == nil {
		return
	}
	token, ok := p.ProgressToken.(string)
	if !ok {
		return // not one of ours: brain's tokens are strings
	}
	c.mu.Lock()
	s := c.sinks[token]
	c.mu.Unlock()
	if s == nil {
		return // the call already returned
	}
	d := progressData{Progress: p.Progress, Message: p.Message}
	if p.Total != 0 {
		total := p.Total
		d.Total = &total
	}
	data, err := json.Marshal(d)
	if err != nil {
		return
	}
	s.deliver(data)
}

// mcpReason is invoke.Describe of an error from the MCP SDK, whose own
// messages repeat the method before the cause ("calling \"tools/call\":
// …"): of those, the last, most specific part is kept. A handshake
// refused with a non-2xx status is said as "HTTP 401 Unauthorized".
func mcpReason(err error) string {
	if se, ok := errors.AsType[*statusError](err); ok {
		return se.Error()
	}
	s := invoke.Describe(err)
	if errors.As(err, new(*net.OpError)) {
		return s
	}
	if i := strings.LastIndex(s, ": "); i > 0 && len(s)-i < 200 {
		s = s[i+2:]
	}
	return s
}
