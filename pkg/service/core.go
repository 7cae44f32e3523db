package service

import (
	"bytes"
	"context"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/pkg/schema"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/pkg/tracing"
)

// core runs the calls of one tool, the same way for every transport: the
// HTTP one (POST /tools/<name>) and MCP (/mcp) only decode the call and
// write its result. Its steps:
//
//  1. the arguments checked against input (an is_error result naming the
//     value at fault: "invalid arguments: at \"/text\": maxLength: got
//     5000, want 4096");
//  2. the handler, a panic, a nil or an invalid result becoming an
//     is_error result with unknown_outcome, since the work may have
//     happened;
//  3. a successful result's structured_content checked against output
//     (an is_error result with unknown_outcome when it fails).
//
// input and output are the tool's schemas, the same on every transport:
// those NewTool compiled when the tool was declared, or for a Tool written
// as a literal the ones compiled from its binding when the server is built.
//
// Every call is observed the same way on both transports (call): a span
// "tool NAME" (pkg/tracing, when tracing is on) that the call's logger
// marks its lines with, tool_calls_in_flight while it runs, and
// tool_calls_total and tool_call_duration_seconds when it ends, with its
// transport, status and error code (pkg/metrics).
type core struct {
	t             *Tool
	input, output *schema.Schema
	// transport is the one transport whose calls the core runs
	// (metrics.TransportHTTP or TransportMCP), and meters its tool's
	// series over it; nil records none (an MCPHandler built without a
	// Server).
	transport string
	meters    *metrics.ToolMeters
}

// newCore is the core of t's calls over transport: its declared schemas,
// or its binding's compiled (an error names the schema that does not
// compile). A literal with no input_schema has no argument check; no host
// config takes its binding, and /mcp does not list it.
func newCore(t *Tool, m *metrics.Set, transport string) (*core, error) {
	c := &core{t: t, transport: transport}
	if m != nil {
		c.meters = m.Tool(t.Binding.Name, transport)
	}
	if t.decl != nil {
		c.input, c.output = t.decl.input, t.decl.output
		return c, nil
	}
	var err error
	if in := bytes.TrimSpace(t.Binding.InputSchema); len(in) > 0 {
		if c.input, err = schema.Compile("input_schema", in); err != nil {
			return nil, err
		}
	}
	if out := bytes.TrimSpace(t.Binding.OutputSchema); len(out) > 0 {
		if c.output, err = schema.Compile("output_schema", out); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// call runs one call and observes it; argErr, when set, is the arguments'
// decoding failure, answered without running the tool. start is when the
// request arrived. A call that waits (request_approval, for an operator)
// keeps call, run and handle on its stack all that time, so the work
// before and after the handler is in functions of their own (begin, end,
// checkInput, checkResult): their frames are not held while it waits.
func (c *core) call(ctx context.Context, call *Call, argErr error, start time.Time) *tool.Result {
	ctx, span := c.begin(ctx, call)
	var (
		result *tool.Result
		code   string
	)
	if argErr != nil {
		result, code = badArguments(argErr)
	} else {
		result, code = c.run(ctx, call)
	}
	c.end(ctx, span, result, code, start)
	return result
}

// begin starts a call's observation: its span, its logger marked with
// it, tool_calls_in_flight.
//
//go:noinline
func (c *core) begin(ctx context.Context, call *Call) (context.Context, trace.Span) {
	name, transport := c.t.Binding.Name, c.transport
	span := trace.SpanFromContext(ctx)
	if tracing.Enabled() { // the attributes are not built for nothing
		ctx, span = tracing.Start(ctx, "tool "+name, trace.WithAttributes(
			attribute.String("tool.name", name), attribute.String("tool.transport", transport),
			attribute.String("brain.tenant_id", call.TenantID), attribute.String("brain.session_id", call.SessionID),
			attribute.String("brain.call_id", call.CallID)))
	}
	// The call's logger marks its lines with the span, or with the
	// caller's trace passed through.
	call.Logger = tracing.WithIDs(call.Logger, ctx)
	if c.meters != nil {
		c.meters.InFlight.Inc()
	}
	return ctx, span
}

// end ends a call's observation: its span (begin's, ended only when
// tracing started one), status and metrics.
//
//go:noinline
func (c *core) end(ctx context.Context, span trace.Span, result *tool.Result, code string, start time.Time) {
	if tracing.Enabled() {
		defer span.End()
	}
	status := metrics.StatusSucceeded
	switch {
	case ctx.Err() != nil:
		// The host went away (it cancelled the call, or its session
		// ended): whatever the handler answered, nobody reads it.
		status, code = metrics.StatusCancelled, metrics.CodeCancelled
	case result.IsError:
		status = metrics.StatusFailed
	}
	if status != metrics.StatusSucceeded {
		span.SetStatus(codes.Error, code)
		span.SetAttributes(attribute.String("tool.error_code", code), attribute.Bool("tool.unknown_outcome", result.UnknownOutcome))
	}
	if m := c.meters; m != nil {
		m.InFlight.Dec()
		m.Done(status, code, time.Since(start))
	}
}

//go:noinline
func badArguments(err error) (*tool.Result, string) {
	return tool.Errorf("invalid arguments: %v", err), metrics.CodeInvalidArguments
}

// run runs one call and returns its result and its error code ("" on
// success, see package metrics). call.Arguments must be the arguments'
// JSON.
func (c *core) run(ctx context.Context, call *Call) (*tool.Result, string) {
	if result, code := c.checkInput(call); result != nil {
		return result, code
	}
	result, panicked := c.invoke(ctx, call)
	return c.checkResult(call, result, panicked)
}

// checkInput checks the arguments against the input schema: an is_error
// result when they do not match.
//
//go:noinline
func (c *core) checkInput(call *Call) (*tool.Result, string) {
	if c.input != nil {
		if err := c.input.ValidateObject("arguments", call.Arguments); err != nil {
			return tool.Errorf("invalid %v", err), metrics.CodeInvalidArguments
		}
	}
	return nil, ""
}

// invoke calls the handler; a panic is recovered and reported.
func (c *core) invoke(ctx context.Context, call *Call) (result *tool.Result, panicked *any) {
	defer func() {
		if v := recover(); v != nil {
			panicked = &v
			call.Logger.Error("tool panicked", "panic", v, "stack", string(debug.Stack()))
		}
	}()
	return c.t.Handler(ctx, call), nil
}

// checkResult turns a panic, a nil or an invalid result into an is_error
// result with unknown_outcome, checks a successful result's
// structured_content against the output schema, and names the error code.
//
//go:noinline
func (c *core) checkResult(call *Call, result *tool.Result, panicked *any) (*tool.Result, string) {
	name := c.t.Binding.Name
	switch {
	case panicked != nil:
		return &tool.Result{Content: []tool.Content{tool.Text("internal error in tool " + name)}, IsError: true, UnknownOutcome: true}, metrics.CodePanic
	case result == nil:
		call.Logger.Error("tool returned no result")
		return internalError("tool " + name + " returned no result"), metrics.CodeInvalidResult
	}
	if err := result.Validate(); err != nil {
		call.Logger.Error("tool returned an invalid result", "err", err)
		return internalError("tool " + name + " returned an invalid result: " + err.Error()), metrics.CodeInvalidResult
	}
	switch {
	case result.IsError && call.badArgs:
		return result, metrics.CodeInvalidArguments
	case result.IsError:
		return result, metrics.CodeToolError
	}
	if c.output != nil && result.HasStructured() {
		if err := c.output.Validate("structured_content", result.StructuredContent); err != nil {
			call.Logger.Error("tool result does not match its output_schema", "err", err)
			return internalError("tool " + c.t.Binding.Name + " returned a result that does not match its output_schema: " + err.Error()), metrics.CodeOutputSchemaMismatch
		}
	}
	return result, ""
}

func internalError(what string) *tool.Result {
	return &tool.Result{Content: []tool.Content{tool.Text("internal error: " + what)}, IsError: true, UnknownOutcome: true}
}
