package service

import (
	"context"
	"runtime/debug"

	"github.com/brain-tools/suite/pkg/schema"
	"github.com/brain-tools/suite/pkg/tool"
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
// input and output are the declared schemas of a NewTool tool on every
// transport. A tool written as a literal has none over HTTP (it checks
// its own arguments, as before NewTool), and over MCP the ones compiled
// from its binding.
type core struct {
	t             *Tool
	input, output *schema.Schema
}

// newCore is the core of t over HTTP: the declared schemas, if any.
func newCore(t *Tool) *core {
	c := &core{t: t}
	if t.decl != nil {
		c.input, c.output = t.decl.input, t.decl.output
	}
	return c
}

// run runs one call. call.Arguments must be the arguments' JSON.
func (c *core) run(ctx context.Context, call *Call) *tool.Result {
	if c.input != nil {
		if err := c.input.ValidateObject("arguments", call.Arguments); err != nil {
			return tool.Errorf("invalid %v", err)
		}
	}
	result := c.handle(ctx, call)
	if c.output != nil && !result.IsError && result.HasStructured() {
		if err := c.output.Validate("structured_content", result.StructuredContent); err != nil {
			call.Logger.Error("tool result does not match its output_schema", "err", err)
			return internalError("tool " + c.t.Binding.Name + " returned a result that does not match its output_schema: " + err.Error())
		}
	}
	return result
}

// handle calls the handler, turning a panic, a nil or an invalid result
// into an is_error result with unknown_outcome.
func (c *core) handle(ctx context.Context, call *Call) (result *tool.Result) {
	name := c.t.Binding.Name
	defer func() {
		if v := recover(); v != nil {
			call.Logger.Error("tool panicked", "panic", v, "stack", string(debug.Stack()))
			result = &tool.Result{Content: []tool.Content{tool.Text("internal error in tool " + name)}, IsError: true, UnknownOutcome: true}
		}
	}()
	result = c.t.Handler(ctx, call)
	if result == nil {
		call.Logger.Error("tool returned no result")
		return internalError("tool " + name + " returned no result")
	}
	if err := result.Validate(); err != nil {
		call.Logger.Error("tool returned an invalid result", "err", err)
		return internalError("tool " + name + " returned an invalid result: " + err.Error())
	}
	return result
}

func internalError(what string) *tool.Result {
	return &tool.Result{Content: []tool.Content{tool.Text("internal error: " + what)}, IsError: true, UnknownOutcome: true}
}
