// Package invoke calls a tool service over HTTP exactly as the tool contract
// says and classifies every outcome.
//
// Source: the "Distributed tools" contract (shared/seeds/000_*.txt),
// sections "Handle a tool call", "Return a JSON result", "Stream progress
// with SSE" and "Handle errors, timeouts, and long jobs". A Caller
//
//   - refuses before sending when the tenant isn't allowed, the arguments
//     fail input_schema, or the credential is missing (is_error, known
//     outcome);
//   - POSTs the call once (never retried, redirects never followed, proxy
//     from HTTPS_PROXY / HTTP_PROXY) with the contract's headers and body;
//   - enforces the 30 s response-header limit, the binding's whole-call
//     timeout_seconds, and max_output_bytes while reading;
//   - reads one JSON result or an SSE stream of progress events and one
//     result event, and classifies everything else as a failure with
//     unknown_outcome, per the contract's outcome table.
//
// The outcome helpers (Refused, RefusedRetryable, Failed, Cancelled, and
// Finish / Accept, which check a result) are the one place an Outcome is
// made: the MCP caller uses them, and the server for what happens to a call
// before it is sent (an approval denied or expired, a full queue) and for a
// function tool's result, which the application gives through the API and
// Accept checks as a tool's answer.
package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/brain-tools/suite/pkg/bufpool"
	"github.com/brain-tools/suite/pkg/netguard"
	"github.com/brain-tools/suite/pkg/sse"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/pkg/tracing"
	"github.com/brain-tools/suite/services/brain/internal/config"
)

// Status values of an Outcome; they match the ToolCall lifecycle's final
// states.
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusTimedOut  = "timed_out"
	StatusCancelled = "cancelled"
)

// Error codes of an Outcome. The comment after each says how the contract's
// outcome table classifies it (is_error / unknown_outcome).
const (
	CodeToolError            = "tool_error"             // tool said is_error; unknown_outcome as the tool said
	CodeTenantNotAllowed     = "tenant_not_allowed"     // refused before sending; known outcome
	CodeInvalidArguments     = "invalid_arguments"      // refused before sending; known outcome
	CodeMissingCredential    = "missing_credential"     // refused before sending; known outcome
	CodeMCPNotSupported      = "mcp_not_supported"      // binding has mcp_tool and the Invoker has no MCP caller (Route); known outcome
	CodeConnectionFailed     = "connection_failed"      // connect failed or the connection dropped; unknown outcome
	CodeHeaderTimeout        = "header_timeout"         // no response headers within 30 s; unknown outcome
	CodeTimeout              = "timeout"                // whole call exceeded timeout_seconds; unknown outcome
	CodeHTTPStatus           = "http_status"            // non-2xx status (a 3xx included); unknown outcome
	CodeBadContentType       = "bad_content_type"       // neither application/json nor text/event-stream; unknown outcome
	CodeInvalidResult        = "invalid_result"         // result not valid per the contract; unknown outcome
	CodeOutputTooLarge       = "output_too_large"       // response longer than max_output_bytes; unknown outcome
	CodeNoResultEvent        = "no_result_event"        // SSE stream ended without a result event; unknown outcome
	CodeBadEvent             = "bad_event"              // SSE event other than progress/result, or non-JSON progress; unknown outcome
	CodeOutputSchemaMismatch = "output_schema_mismatch" // structured_content fails output_schema; unknown outcome
	CodeCancelled            = "cancelled"              // ctx cancelled by the caller; unknown_outcome = Sent
	CodeBrainRestarted       = "brain_restarted"        // brain stopped while the request may have been out; unknown outcome
	CodeApprovalDenied       = "approval_denied"        // an approval gate's answer was no: not sent; known outcome
	CodeApprovalExpired      = "approval_expired"       // nobody answered an approval gate in time: not sent; known outcome
	CodeQueueFull            = "queue_full"             // the binding's queue of waiting calls is full: not sent; known outcome
	CodeNotInConfig          = "tool_not_in_config"     // the binding left the host config while the call waited: not sent; known outcome
	CodeDestinationRefused   = "destination_refused"    // the SSRF guard refused a tenant-given url's address before dialing: not sent; known outcome
)

// Outcome is the classified end of one tool call.
type Outcome struct {
	// Result is what the model sees. It is always valid per pkg/tool: a
	// failure carries one text block describing it, with IsError and
	// UnknownOutcome set as the contract's outcome table says.
	Result tool.Result
	// Status is StatusSucceeded, StatusFailed, StatusTimedOut or
	// StatusCancelled.
	Status string
	// ErrorCode is one of the Code* constants; "" on success.
	ErrorCode string
	// ErrorMessage describes the failure for people; "" on success. It never
	// contains the tool's url or token.
	ErrorMessage string
	// Sent reports whether the request (may have) left brain: false only
	// when brain refused the call or knows nothing was written.
	Sent bool
	// HTTPStatus is the status of a non-2xx answer (CodeHTTPStatus); 0
	// otherwise.
	HTTPStatus int
	// Retryable reports whether the same call may be made again safely
	// (the ToolCall's retryable, meaningful for a failure): false when the
	// outcome is unknown or the tool (or brain, for the arguments) refused
	// the call; true for a transient refusal before sending (a call
	// cancelled while queued, an approval that expired) and for a 429 or
	// 503 whose Retry-After says to come back.
	Retryable bool
	// RetryAfter is how long that 429 or 503 asked to wait before the
	// same call is made again: its Retry-After in seconds, or the time
	// from now until its HTTP date. 0 without one (or a date already
	// past); a caller that resends uses it instead of its own pause.
	RetryAfter time.Duration
}

// Options configure a Caller.
type Options struct {
	// Logger receives one record per call; nil discards.
	Logger *slog.Logger
	// Transport sends the requests; nil means an http.Transport that takes
	// its proxy from HTTPS_PROXY / HTTP_PROXY / NO_PROXY
	// (http.ProxyFromEnvironment).
	Transport http.RoundTripper
}

// Caller sends tool calls. It is safe for concurrent use.
type Caller struct {
	client *http.Client
	logger *slog.Logger
	// headerTimeout is the contract's response-header limit
	// (tool.HeaderTimeout); tests shorten it.
	headerTimeout time.Duration
	// resultGrace is ResultGrace; tests shorten it.
	resultGrace time.Duration
}

// New returns a Caller.
func New(o Options) *Caller {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	rt := o.Transport
	if rt == nil {
		rt = newTransport(http.ProxyFromEnvironment)
	}
	return &Caller{
		client: &http.Client{
			// A client span per request ("tool POST"), and traceparent on
			// it whether brain traces or only passes a trace on.
			Transport: tracing.Transport(rt, "tool"),
			// The contract: brain doesn't follow redirects from tools. The
			// 3xx comes back as the response and counts as non-2xx.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		logger:        logger,
		headerTimeout: tool.HeaderTimeout,
		resultGrace:   ResultGrace,
	}
}

// newTransport is the default transport with the given proxy function.
// Header and call limits are enforced by Call itself, so they hold for any
// RoundTripper.
func newTransport(proxy func(*http.Request) (*url.URL, error)) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = proxy
	t.MaxIdleConnsPerHost = 64
	return t
}

// The causes a call's context is cancelled with, and the read error past
// the output cap, for both callers (HTTP here, MCP in mcpcall), which
// classify them the same way.
var (
	// ErrCallTimeout ends a call that ran past its binding's
	// timeout_seconds.
	ErrCallTimeout = errors.New("tool call exceeded timeout_seconds")
	// ErrHeaderTimeout ends a request whose response headers did not come
	// within the header limit (tool.HeaderTimeout by default).
	ErrHeaderTimeout = errors.New("no response headers within the header limit")
	// ErrOutputTooLarge is a CapReader's read past max_output_bytes.
	ErrOutputTooLarge = errors.New("response larger than max_output_bytes")
	errAfterResult    = errors.New("the event stream stayed open after its result")
	// ErrTakenOver ends a call another brain replica took over once this
	// replica's lease on it ran out: the call is that replica's to record,
	// so its request here ends without a warning of its own (the server
	// warns once, for the call).
	ErrTakenOver = errors.New("another brain replica took the call over: this replica's lease on it ran out")
)

// ResultGrace is how long brain reads an SSE stream on after its result
// event, waiting for the stream to end: anything but comments in that time
// fails the call (the contract's "exactly one result event"); a stream
// still open after it is closed by brain and the result stands.
const ResultGrace = time.Second

// Call sends req to t's url and classifies the outcome. It never returns
// before the call has ended: succeeded, failed, timed out (t.Timeout() for
// the whole call, tool.HeaderTimeout for the response headers) or cancelled
// (ctx done: status cancelled, unknown_outcome = Sent).
//
// req.TenantID, SessionID and CallID are sent as given; Arguments is
// validated against input_schema first. InspectionToken and BrainURL are
// sent only when the binding sets inspect_session, and are then required.
//
// onProgress, when not nil, receives each SSE progress payload (valid
// JSON, a fresh copy) on the calling goroutine, in order; a slow callback
// slows the read of the stream but not the time limits.
func (c *Caller) Call(ctx context.Context, t *config.Tool, req tool.Request, onProgress func(data json.RawMessage)) Outcome {
	start := time.Now()
	o := c.call(ctx, t, req, onProgress)
	LogOutcome(ctx, c.logger, "tool call", t, req, o, start)
	return o
}

// LogOutcome writes the one log record of a finished call: its identity
// (never the arguments or an inspection token), status, error and
// duration; at warn level when the outcome is unknown. extra adds fields
// (the MCP caller adds the server and remote tool).
func LogOutcome(ctx context.Context, logger *slog.Logger, msg string, t *config.Tool, req tool.Request, o Outcome, start time.Time, extra ...slog.Attr) {
	level := slog.LevelInfo
	if o.Result.UnknownOutcome && !errors.Is(context.Cause(ctx), ErrTakenOver) {
		level = slog.LevelWarn
	}
	if !logger.Enabled(ctx, level) {
		return // the record's attributes are not built for nothing
	}
	attrs := append([]slog.Attr{
		slog.String("tool", t.Name),
		slog.String("tenant_id", req.TenantID),
		slog.String("session_id", req.SessionID),
		slog.String("call_id", req.CallID),
		slog.String("status", o.Status),
		slog.String("error_code", o.ErrorCode),
		slog.String("error", o.ErrorMessage),
		slog.Bool("sent", o.Sent),
		slog.Bool("unknown_outcome", o.Result.UnknownOutcome),
		slog.Int64("duration_ms", time.Since(start).Milliseconds()),
	}, extra...)
	logger.LogAttrs(ctx, level, msg, attrs...)
}

// Precheck is the refusal of a call before anything else happens to it —
// the tenant is not allowed, or the arguments fail input_schema (the
// contract's "refused before sending") — and ok false; ok is true when the
// call may go on. Call runs it first; the server runs it before a call
// waits for an answer or a slot, so that nobody is asked to approve, and
// nothing queues, a call that could never be sent.
func Precheck(t *config.Tool, tenantID string, args json.RawMessage) (refusal Outcome, ok bool) {
	if !t.Allowed(tenantID) {
		return Refused(CodeTenantNotAllowed, fmt.Sprintf("tool %s is not allowed for tenant %q", t.Name, tenantID)), false
	}
	if err := t.ValidateArguments(args); err != nil {
		return Refused(CodeInvalidArguments, fmt.Sprintf("tool %s: %v", t.Name, err)), false
	}
	return Outcome{}, true
}

// prechecked is the call a context says passed Precheck (WithPrechecked).
type prechecked struct {
	t      *config.Tool
	tenant string
	args   json.RawMessage
}

type precheckedKey struct{}

// WithPrechecked returns ctx saying that the call of binding t for tenantID
// with args passed Precheck, so that Call does not validate the same
// arguments against the same binding's schema a second time. Call checks
// again whatever differs: another binding (a config reload), tenant, or
// arguments.
func WithPrechecked(ctx context.Context, t *config.Tool, tenantID string, args json.RawMessage) context.Context {
	return context.WithValue(ctx, precheckedKey{}, &prechecked{t: t, tenant: tenantID, args: args})
}

// isPrechecked reports whether ctx says that the call of t for tenantID
// with args passed Precheck: the same binding, tenant, and the very bytes.
func isPrechecked(ctx context.Context, t *config.Tool, tenantID string, args json.RawMessage) bool {
	p, ok := ctx.Value(precheckedKey{}).(*prechecked)
	return ok && p.t == t && p.tenant == tenantID && len(p.args) == len(args) &&
		(len(args) == 0 || &p.args[0] == &args[0])
}

// PrecheckOnce is Precheck, unless ctx says (WithPrechecked) that this
// very call passed it already.
func PrecheckOnce(ctx context.Context, t *config.Tool, tenantID string, args json.RawMessage) (refusal Outcome, ok bool) {
	if isPrechecked(ctx, t, tenantID, args) {
		return Outcome{}, true
	}
	return Precheck(t, tenantID, args)
}

func (c *Caller) call(ctx context.Context, t *config.Tool, req tool.Request, onProgress func(json.RawMessage)) Outcome {
	if o, ok := PrecheckOnce(ctx, t, req.TenantID, req.Arguments); !ok {
		return o
	}
	if t.TokenEnv != "" && t.Token == "" {
		return Refused(CodeMissingCredential, fmt.Sprintf("tool %s: token_env %s is not set", t.Name, t.TokenEnv))
	}
	if !t.InspectSession {
		// Never hand a session token to a tool that did not ask for one.
		req.InspectionToken, req.BrainURL = "", ""
	} else if req.InspectionToken == "" || req.BrainURL == "" {
		return Refused(CodeMissingCredential, fmt.Sprintf("tool %s: inspect_session needs an inspection_token and a brain_url", t.Name))
	}
	if t.MCPTool != "" {
		return mcpNotSupported(t)
	}
	if err := ctx.Err(); err != nil {
		return Cancelled(t, false, err)
	}
	// The body streams the arguments from the call; they are not copied.
	body, bodyLen, err := req.Body()
	if err != nil {
		return Refused(CodeInvalidArguments, fmt.Sprintf("tool %s: encode request: %v", t.Name, err))
	}

	// One context ends the request, with the cause of whichever limit
	// (or cancel) came first: the whole-call timeout, the header limit,
	// the grace after an SSE result. One timer keeps both limits: it
	// fires at the first; when that is the header limit and the headers
	// came in time, it is set again for the rest of the timeout.
	reqCtx, cancelReq := context.WithCancelCause(ctx)
	defer cancelReq(nil)
	timeout := t.Timeout()
	deadline := time.Now().Add(timeout)
	headerFirst := c.headerTimeout < timeout
	var headersIn atomic.Bool
	limit := time.AfterFunc(min(c.headerTimeout, timeout), func() {
		switch {
		case headerFirst && !headersIn.Load():
			cancelReq(ErrHeaderTimeout)
		case !headerFirst || !time.Now().Before(deadline):
			cancelReq(ErrCallTimeout)
		}
		// Else the headers came just as the header limit ran out: call
		// sets the timer again for the rest of the timeout.
	})
	defer limit.Stop()

	// The request has left brain once its headers are written. A transport
	// that reports no connection at all (not an http.Transport) is assumed
	// to have sent it.
	var wrote, gotConn atomic.Bool
	reqCtx = httptrace.WithClientTrace(reqCtx, &httptrace.ClientTrace{
		GetConn:      func(string) { gotConn.Store(true) },
		WroteHeaders: func() { wrote.Store(true) },
	})
	sent := func() bool { return wrote.Load() || !gotConn.Load() }

	hreq, err := http.NewRequestWithContext(reqCtx, http.MethodPost, t.URL, body)
	if err != nil {
		return Refused(CodeConnectionFailed, fmt.Sprintf("tool %s: build request: %v", t.Name, Describe(err)))
	}
	hreq.ContentLength = bodyLen
	// A request the tool never received (a dead keep-alive connection, an
	// HTTP/2 stream refused or cut by GOAWAY unprocessed) is sent again by
	// the transport only when it can rewind the body.
	hreq.GetBody = func() (io.ReadCloser, error) {
		b, _, err := req.Body()
		return io.NopCloser(b), err
	}
	// The value slices are shared by every request: nothing appends to a
	// request's header values, and a transport that changes a header
	// (the tracing one) changes its own clone.
	hreq.Header = http.Header{"Content-Type": headerJSON, "Accept": headerAccept}
	if t.Token != "" {
		hreq.Header["Authorization"] = []string{"Bearer " + t.Token}
	}

	resp, err := c.client.Do(hreq)
	headersIn.Store(true)
	if headerFirst && (limit.Stop() || reqCtx.Err() == nil) {
		// Stopped before the header limit, or it ran out as the headers
		// came and left the request alone: the timeout goes on.
		limit.Reset(time.Until(deadline))
	}
	if err != nil {
		return c.readFailure(ctx, reqCtx, t, sent(), err)
	}
	defer resp.Body.Close()
	return c.readResponse(ctx, reqCtx, cancelReq, t, resp, onProgress)
}

// The Content-Type and Accept of every request (see call).
var (
	headerJSON   = []string{"application/json"}
	headerAccept = []string{"application/json, text/event-stream"}
)

// readResponse classifies a response whose headers arrived: status,
// Content-Type, then the JSON result or the SSE stream, read under the
// max_output_bytes cap. The caller closes the body.
func (c *Caller) readResponse(ctx, reqCtx context.Context, cancelReq context.CancelCauseFunc, t *config.Tool, resp *http.Response, onProgress func(json.RawMessage)) Outcome {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The contract: brain ignores the body of a non-2xx response. Read a
		// little so the connection can be reused, never more.
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		msg := fmt.Sprintf("tool %s answered HTTP %s", t.Name, resp.Status)
		if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
			msg += " (redirects are not followed)"
		}
		after, wait, retry := RetryAfter(resp, time.Now())
		if retry {
			msg += fmt.Sprintf(" with Retry-After %s", after)
		}
		o := Failed(CodeHTTPStatus, true, msg)
		o.Retryable, o.HTTPStatus, o.RetryAfter = retry, resp.StatusCode, wait
		return o
	}

	limit := t.MaxOutputBytes()
	if resp.ContentLength > limit {
		return Failed(CodeOutputTooLarge, true, fmt.Sprintf("tool %s: response of %d bytes is larger than max_output_bytes %d", t.Name, resp.ContentLength, limit))
	}
	capped := NewCapReader(resp.Body, limit)
	ct := resp.Header.Get("Content-Type")
	mediaType, err := mediaTypeOf(ct)
	switch {
	case err == nil && mediaType == "application/json":
		data, err := readAll(capped, resp.ContentLength)
		if err != nil {
			return c.readFailure(ctx, reqCtx, t, true, err)
		}
		r, err := tool.DecodeResult(data)
		// The result and any error message are copies: the buffer can
		// serve the next response.
		recycle(data)
		if err != nil {
			return Failed(CodeInvalidResult, true, fmt.Sprintf("tool %s: invalid %v", t.Name, err))
		}
		return Finish(t, r)
	case err == nil && mediaType == "text/event-stream":
		return c.readStream(ctx, reqCtx, cancelReq, t, capped, limit, onProgress)
	default:
		return Failed(CodeBadContentType, true, fmt.Sprintf("tool %s: response Content-Type %q is neither application/json nor text/event-stream", t.Name, strictjson.Clip(ct, 100)))
	}
}

// mediaTypeOf is mime.ParseMediaType's media type, without parsing the
// usual "application/json" (pkg/service's) into a parameter map.
func mediaTypeOf(ct string) (string, error) {
	if ct == "application/json" {
		return ct, nil
	}
	mediaType, _, err := mime.ParseMediaType(ct)
	return mediaType, err
}

// readAll reads r to its end into a buffer sized from the response's
// Content-Length (already checked against max_output_bytes), so a large
// result is read in one allocation; -1 (unknown) starts small. The buffer
// keeps bytes.MinRead spare: bytes.Buffer.ReadFrom wants that much room
// before each read, the one that meets the end too, and would otherwise
// copy a full buffer into one twice its size just to read EOF.
func readAll(r io.Reader, contentLength int64) ([]byte, error) {
	if contentLength <= 0 {
		return io.ReadAll(r)
	}
	buf := bytes.NewBuffer(slices.Grow(*readBuffers.Get(), int(contentLength)+bytes.MinRead))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// readBuffers recycle result buffers (readAll, recycle); a result larger
// than 4 MiB, twice the largest max_output_bytes, is not kept.
var readBuffers = bufpool.New(4 << 20)

// recycle hands data, read by readAll and no longer used, to the next
// readAll.
func recycle(data []byte) { readBuffers.Put(nil, data) }

// readStream reads an SSE response: zero or more progress events (JSON
// payloads, forwarded), then exactly one result event, then the end of the
// stream. Comments are skipped by the reader; any other event fails the
// call, and so does anything but comments after the result (a second result
// included): the contract allows exactly one. The stream is read on for
// c.resultGrace after the result; if it has not ended by then, brain closes
// it and the result stands, as it does when the stream breaks after it
// (but for output past max_output_bytes, which fails the call).
func (c *Caller) readStream(ctx, reqCtx context.Context, cancelReq context.CancelCauseFunc, t *config.Tool, body io.Reader, limit int64, onProgress func(json.RawMessage)) Outcome {
	var result *tool.Result
	// The body cap bounds every event already; the reader's own per-event
	// limit sits just above it so the cap is what a tool runs into.
	for ev, err := range sse.Read(body, int(limit)+1024) {
		if err != nil {
			if errors.Is(err, sse.ErrEventTooLarge) {
				err = ErrOutputTooLarge
			}
			if result != nil && !errors.Is(err, ErrOutputTooLarge) {
				break
			}
			return c.readFailure(ctx, reqCtx, t, true, err)
		}
		if result != nil {
			if ev.Name == sse.EventResult {
				return Failed(CodeBadEvent, true, fmt.Sprintf("tool %s: a second result event after the first (an event stream carries exactly one)", t.Name))
			}
			return Failed(CodeBadEvent, true, fmt.Sprintf("tool %s: SSE event %q after the result (nothing may follow the result event)", t.Name, strictjson.Clip(ev.Name, 64)))
		}
		switch ev.Name {
		case sse.EventProgress:
			if !json.Valid([]byte(ev.Data)) {
				return Failed(CodeBadEvent, true, fmt.Sprintf("tool %s: progress event data is not JSON", t.Name))
			}
			if onProgress != nil {
				onProgress(json.RawMessage(ev.Data))
			}
		case sse.EventResult:
			r, err := tool.DecodeResult([]byte(ev.Data))
			if err != nil {
				return Failed(CodeInvalidResult, true, fmt.Sprintf("tool %s: invalid %v", t.Name, err))
			}
			result = r
			grace := time.AfterFunc(c.resultGrace, func() { cancelReq(errAfterResult) })
			defer grace.Stop()
		default:
			return Failed(CodeBadEvent, true, fmt.Sprintf("tool %s: unexpected SSE event %q (want progress or result)", t.Name, strictjson.Clip(ev.Name, 64)))
		}
	}
	if result != nil {
		return Finish(t, result)
	}
	return Failed(CodeNoResultEvent, true, fmt.Sprintf("tool %s: event stream ended without a result event", t.Name))
}

// Finish is the outcome of a result a tool answered (over HTTP, SSE or
// MCP): Accept's checks, with a result that fails output_schema classified
// as the contract's "invalid result" row (failed, unknown outcome).
func Finish(t *config.Tool, r *tool.Result) Outcome {
	o, err := Accept(t, r)
	if err != nil {
		return Failed(CodeOutputSchemaMismatch, true, fmt.Sprintf("tool %s: result does not match output_schema: %v", t.Name, err))
	}
	return o
}

// Accept applies the host's checks to a decoded result, a tool's answer and
// a function tool's answer given through the API alike: a successful
// result's structured_content must match output_schema (the error names
// its JSON pointer; error results bypass the schema, as the contract says),
// and a result with structured_content only gets a text block of it
// (compact JSON) for the harness, error results too. An error result is
// StatusFailed with CodeToolError and keeps its unknown_outcome.
func Accept(t *config.Tool, r *tool.Result) (Outcome, error) {
	if !r.IsError && r.HasStructured() {
		if err := t.ValidateOutput(r.StructuredContent); err != nil {
			return Outcome{}, err
		}
	}
	if len(r.Content) == 0 && r.HasStructured() {
		var buf bytes.Buffer
		if err := json.Compact(&buf, r.StructuredContent); err != nil {
			return Outcome{}, &strictjson.FieldError{Field: "structured_content", Problem: "not valid JSON"}
		}
		r.Content = []tool.Content{tool.Text(buf.String())}
	}
	if r.IsError {
		return Outcome{Result: *r, Status: StatusFailed, ErrorCode: CodeToolError, ErrorMessage: errorText(t, r), Sent: true}, nil
	}
	return Outcome{Result: *r, Status: StatusSucceeded, Sent: true}, nil
}

// readFailure classifies an error of sending the request or reading the
// response. ctx is the caller's context, reqCtx the request's: the caller's
// cancellation wins, then the whole-call timeout, then the header limit.
func (c *Caller) readFailure(ctx, reqCtx context.Context, t *config.Tool, sent bool, err error) Outcome {
	if ctx.Err() != nil {
		return Cancelled(t, sent, context.Cause(ctx))
	}
	cause := context.Cause(reqCtx)
	switch {
	case errors.Is(cause, ErrCallTimeout):
		o := Failed(CodeTimeout, true, fmt.Sprintf("tool %s: call exceeded timeout_seconds (%s)", t.Name, t.Timeout()))
		o.Status, o.Sent = StatusTimedOut, sent
		return o
	case errors.Is(cause, ErrHeaderTimeout):
		o := Failed(CodeHeaderTimeout, true, fmt.Sprintf("tool %s: no response headers within %s", t.Name, c.headerTimeout))
		o.Status, o.Sent = StatusTimedOut, sent
		return o
	case errors.Is(err, ErrOutputTooLarge):
		return Failed(CodeOutputTooLarge, true, fmt.Sprintf("tool %s: response is larger than max_output_bytes %d", t.Name, t.MaxOutputBytes()))
	case errors.Is(err, netguard.ErrRefused):
		return GuardRefused(t, err)
	}
	o := Failed(CodeConnectionFailed, true, fmt.Sprintf("tool %s: connection failed: %s", t.Name, Describe(err)))
	o.Sent = sent
	return o
}

// RetryAfter reports whether resp is a 429 or 503 that says when to come
// back (Retry-After, RFC 9110 section 10.2.3: seconds or an HTTP date), the
// value as said, and the wait it asks for as of now (0 for a date already
// past). Such a tool said it is busy: the outcome stays unknown, as the
// contract says of every non-2xx status, but the call is retryable.
func RetryAfter(resp *http.Response, now time.Time) (string, time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return "", 0, false
	}
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if v == "" {
		return "", 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return fmt.Sprintf("%ds", n), time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return strictjson.Clip(v, 64), max(t.Sub(now), 0), true
	}
	return "", 0, false
}

// Refused is the outcome of a call brain did not send: an error with a
// known outcome (the contract's "refused the call before sending it" row),
// its one text block msg, not retryable (the same call would be refused
// again).
func Refused(code, msg string) Outcome {
	return Outcome{
		Result:       tool.Result{Content: []tool.Content{tool.Text(msg)}, IsError: true},
		Status:       StatusFailed,
		ErrorCode:    code,
		ErrorMessage: msg,
	}
}

// RefusedRetryable is Refused for a transient reason (a queue that was
// full, an approval nobody answered in time): the call was not sent, and
// may be made again.
func RefusedRetryable(code, msg string) Outcome {
	o := Refused(code, msg)
	o.Retryable = true
	return o
}

// GuardRefused is the outcome of a call whose tenant-given url the SSRF
// guard (pkg/netguard) refused to dial: nothing was sent, so the outcome
// is known, and the same call would be refused again.
func GuardRefused(t *config.Tool, err error) Outcome {
	var re *netguard.RefusedError
	reason := err.Error()
	if errors.As(err, &re) {
		reason = re.Reason
	}
	return Refused(CodeDestinationRefused, fmt.Sprintf("tool %s: brain refused to connect to its url: %s; the call was not sent "+
		"(a tenant's tool reaches only public addresses unless the operator allows a range in BRAIN_TENANT_URL_ALLOW)", t.Name, reason))
}

// Failed is the outcome of a call that was sent and failed; with unknown
// set the tool may have done the work, and the text block says to check
// before retrying.
func Failed(code string, unknown bool, msg string) Outcome {
	text := msg
	if unknown {
		text += " (the outcome is unknown: the tool may have acted; check before retrying)"
	}
	return Outcome{
		Result:       tool.Result{Content: []tool.Content{tool.Text(text)}, IsError: true, UnknownOutcome: unknown},
		Status:       StatusFailed,
		ErrorCode:    code,
		ErrorMessage: msg,
		Sent:         true,
	}
}

// Cancelled is the outcome of a call its caller cancelled (status
// cancelled); the outcome is unknown when the request had been sent, and
// only a call that was not sent is retryable. cause, unless it is
// context.Canceled, is named in the message.
func Cancelled(t *config.Tool, sent bool, cause error) Outcome {
	msg := fmt.Sprintf("tool %s: call cancelled", t.Name)
	if cause != nil && !errors.Is(cause, context.Canceled) {
		msg += ": " + cause.Error()
	}
	o := Failed(CodeCancelled, sent, msg)
	o.Status, o.Sent, o.Retryable = StatusCancelled, sent, !sent
	return o
}

// errorText is the ErrorMessage of a tool's own error result: its first
// text block, clipped.
func errorText(t *config.Tool, r *tool.Result) string {
	for _, c := range r.Content {
		if c.Type == tool.TypeText && strings.TrimSpace(c.Text) != "" {
			return fmt.Sprintf("tool %s: %s", t.Name, strictjson.Clip(c.Text, 1024))
		}
	}
	return fmt.Sprintf("tool %s reported an error", t.Name)
}

// Describe renders a transport error for a client: without the request
// URL (a binding's url is never shown to clients) and without addresses,
// naming the operation once ("dial: connection refused", "read:
// connection reset by peer"), at most 300 bytes.
func Describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		// An *os.SyscallError repeats the operation ("read: read: …",
		// "dial: connect: …"): its errno says the rest.
		var se *os.SyscallError
		switch {
		case errors.As(oe.Err, &se):
			return oe.Op + ": " + se.Err.Error()
		case oe.Err != nil:
			return oe.Op + ": " + Describe(oe.Err)
		}
		return oe.Op
	}
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed before the response was complete"
	}
	return strictjson.Clip(err.Error(), 300)
}

// CapReader reads a response body and fails with ErrOutputTooLarge when
// it goes past its limit. It reads at most one byte beyond the limit, and
// only to tell a body of exactly the limit from a longer one.
type CapReader struct {
	r    io.Reader
	left int64
}

// NewCapReader caps r at limit bytes.
func NewCapReader(r io.Reader, limit int64) *CapReader {
	return &CapReader{r: r, left: limit}
}

// Read reads from the body, or fails with ErrOutputTooLarge past the
// limit.
func (c *CapReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.left <= 0 {
		var one [1]byte
		for {
			n, err := c.r.Read(one[:])
			if n > 0 {
				return 0, ErrOutputTooLarge
			}
			if err != nil {
				return 0, err
			}
		}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
