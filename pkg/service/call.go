package service

import (
	"context"
	"log/slog"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
)

// Handler runs one tool call and returns its result. A failure the tool
// handles is a result with IsError (the transport answers 200, as the
// contract's callout says); a nil or invalid result and a panic become an
// is_error result with unknown_outcome, since the work may have happened.
// ctx is cancelled when the host drops the request.
type Handler func(ctx context.Context, call *Call) *tool.Result

// Tool is one tool a service serves at POST /tools/<Binding.Name> and,
// unless it is HTTPOnly, over MCP at /mcp. Binding's URL, TokenEnv and
// Tenants may be left empty: GET /tools fills them from the service's
// Config. Declare a tool with NewTool; a Tool written as a literal (a
// Handler that reads call.Arguments itself) has its binding's schemas
// compiled when the server is built and checked on both transports just
// the same.
type Tool struct {
	Binding tool.Binding
	Handler Handler
	// HTTPOnly says the tool cannot work over MCP, so /mcp does not list
	// it: an MCP call has no brain session to inspect, for one. A binding
	// with inspect_session is HTTP-only whatever this says.
	HTTPOnly bool
	// TooLarge, when set, answers a request body over MAX_REQUEST_BYTES
	// with its result (status 200) instead of a 413, which the host would
	// record as an unknown outcome although the tool did nothing. head is
	// the start of the body (limit+1 bytes), enough to see which argument
	// made it large; limit is MAX_REQUEST_BYTES. The runtime reads and
	// discards the rest of the body first (up to MaxDrainBytes), so the
	// host, still sending, gets the answer rather than a reset.
	TooLarge func(head []byte, limit int64) *tool.Result
	// Waits says the tool's calls may wait long (minutes or hours, for a
	// person: request_approval). Over HTTP, to a host that accepts SSE,
	// such a call runs on a goroutine of its own, and once its stream
	// starts the connection is taken over from net/http (stream.go), so
	// a waiting stream keeps no handler, buffers or background reader.
	// Other tools' calls run on the handler's goroutine, which costs less
	// for a call answered in milliseconds.
	Waits bool
	// Metrics, when set, is called once with the server's metric Set
	// (pkg/metrics) as the server builds its handler, to register gauges
	// of the tool's own: pkg/jobs counts the jobs of its Manager there.
	Metrics func(*metrics.Set)

	// decodeArgs, set by NewTool, decodes the arguments in
	// the same pass as the request body.
	decodeArgs argsDecoder
	// decl, set by NewTool, holds the compiled schemas every transport
	// checks the call against.
	decl *declared
}

// OverMCP reports whether /mcp lists the tool: not HTTPOnly and no
// inspect_session (an MCP call carries no inspection token).
func (t *Tool) OverMCP() bool { return !t.HTTPOnly && !t.Binding.InspectSession }

// decoderOf decodes a tool's arguments into a new A in the same pass as
// the request body.
func decoderOf[A any]() argsDecoder {
	return func(dec *jsontext.Decoder) (any, error) {
		args := new(A)
		if err := strictjson.DecodeValue(dec, args); err != nil {
			return nil, err
		}
		return args, nil
	}
}

// Call is one tool call as a handler sees it: the request body (identity
// and arguments) and a way to report progress.
type Call struct {
	tool.Request
	// Logger carries the call's tool, tenant, session and call IDs.
	Logger   *slog.Logger
	progress func(any) error
	stream   func()   // starts the stream (the HTTP transport), or nil
	args     any      // the arguments already decoded (NewTool), or nil
	written  []func() // OnWritten's functions
	// badArgs says the handler refused the arguments (Typed's decoding
	// or Validate), so the call counts as invalid_arguments, as a
	// schema refusal does.
	badArgs bool
}

// NewCall builds a Call for a transport other than the built-in HTTP one
// (an MCP adapter, a test). progress may be nil, which drops progress.
func NewCall(req tool.Request, logger *slog.Logger, progress func(any) error) *Call {
	return &Call{Request: req, Logger: orDiscard(logger), progress: progress}
}

// Progress reports progress: v is marshalled to JSON and sent as an SSE
// "progress" event, switching the response to SSE on the first call; over
// MCP it is a notifications/progress message, and in a job (pkg/jobs) it
// is the progress the status tool shows. A Progress value is structured
// progress: MCP gets its progress, total and message as they are. When the
// host did not ask for progress (no text/event-stream, no MCP progress
// token) it is dropped.
func (c *Call) Progress(v any) error {
	if c.progress == nil {
		return nil
	}
	return c.progress(v)
}

// Stream starts the call's SSE stream now, when the host accepts one,
// instead of at the first progress or after SSE_STREAM_AFTER: a tool that
// is about to wait long (request_approval, for an operator) calls it
// first, so that the built-in HTTP transport hands its connection over
// at once and a thousand such calls arriving together do not each hold
// net/http's per-connection buffers and handler while they start. The
// answer is then an SSE stream even if the result comes at once. Other
// transports ignore it.
func (c *Call) Stream() {
	if c.stream != nil {
		c.stream()
	}
}

// OnWritten registers f to run once the built-in HTTP transport has
// written the call's result to the host, or failed to: a handler uses it to
// recycle a large buffer that its result's strings share (storage_get's
// base64). Other transports (NewCall) never run f, so f may only return
// memory to a pool, never do work the call needs.
func (c *Call) OnWritten(f func()) {
	c.written = append(c.written, f)
}

// typed adapts a handler that takes its arguments as a struct, as
// NewTool's handlers do: the call's arguments are decoded strictly into A
// (unknown fields and wrong types refused; the HTTP transport has decoded
// them already, in the same pass as the request body), and a decoding
// failure, or an error of A's Validate() error, answers an is_error result
// naming the field before fn runs.
func typed[A any](fn func(ctx context.Context, call *Call, args A) *tool.Result) Handler {
	return func(ctx context.Context, call *Call) *tool.Result {
		args, refused := typedArgs[A](call)
		if refused != nil {
			return refused
		}
		return fn(ctx, call, *args)
	}
}

// typedArgs is typed's decoding and Validate, in a frame of its own so that
// a handler that waits does not keep it on its stack.
//
//go:noinline
func typedArgs[A any](call *Call) (*A, *tool.Result) {
	if p, ok := call.args.(*A); ok {
		return validated(call, p)
	}
	args := new(A)
	if err := strictjson.Unmarshal(call.Arguments, args); err != nil {
		call.badArgs = true
		return nil, tool.Errorf("invalid arguments: %v", err)
	}
	return validated(call, args)
}

func validated[A any](call *Call, args *A) (*A, *tool.Result) {
	if v, ok := any(args).(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			call.badArgs = true
			return nil, tool.Errorf("invalid arguments: %v", err)
		}
	}
	return args, nil
}

// Progress is structured progress, for Call.Progress: Progress is how far
// the work is and Total how far it goes (0: unknown), in the same unit
// (seconds, bytes, items); Message says it in words. Over HTTP it is the
// SSE progress event {"progress":3,"total":10,"message":"7 s left"}; over
// MCP the notification's progress, total and message. MCP asks Progress to
// grow with every report.
type Progress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}
