package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/brain-tools/suite/pkg/schema"
	"github.com/brain-tools/suite/pkg/tool"
)

// TypedHandler is the handler of a tool declared with NewTool: it gets
// the call's arguments decoded into In and returns its output, or an
// error.
//
// A nil error with an output: the output's JSON is the result's
// structured_content, and the text of its String method (when Out has
// one, fmt.Stringer) the result's text block. Without a String method the
// structured content is the whole answer and each transport renders it as
// text where it needs to (brain as the contract's "structured-only
// result", MCP as a text block of its JSON). Out = *tool.Result returns the
// result itself, for a tool that answers images or hand-made content.
//
// An error: an is_error result whose text is the error's message (status
// 200, as the contract's callout says); wrap it with UnknownOutcome when the
// work may have happened anyway.
type TypedHandler[In, Out any] func(ctx context.Context, call *Call, in In) (Out, error)

// NewTool declares a tool once: its binding b, whose input_schema, when b
// leaves it empty, is inferred from In and whose output_schema, when b
// leaves it empty and Out is not *tool.Result, from Out (schema.For:
// json tags name the properties, jsonschema tags describe them, schema
// tags set their limits); and its typed handler fn.
//
// On every transport (POST /tools/<name> and /mcp) the runtime then checks
// the arguments against the input schema before fn runs, and a successful
// result's structured_content against the output schema after; a call
// that fails the input schema is refused with the same is_error result on
// both ("invalid arguments: at \"/text\": maxLength: got 5000, want
// 4096"). In may implement Validate() error for the rules a schema cannot
// say; its error is answered the same way.
//
// NewTool panics when a schema cannot be inferred or does not compile, or
// an inferred schema is not an object: a programming error, found when the
// service starts.
func NewTool[In, Out any](b tool.Binding, fn TypedHandler[In, Out]) Tool {
	if len(bytes.TrimSpace(b.InputSchema)) == 0 {
		b.InputSchema = mustInfer[In](b.Name, "input_schema")
	}
	if len(bytes.TrimSpace(b.OutputSchema)) == 0 && reflect.TypeFor[Out]() != reflect.TypeFor[*tool.Result]() {
		b.OutputSchema = mustInfer[Out](b.Name, "output_schema")
	}
	d := &declared{}
	var err error
	if d.input, err = compileObject("input_schema", b.InputSchema); err != nil {
		panic(fmt.Sprintf("service.NewTool %s: %v", b.Name, err))
	}
	if len(bytes.TrimSpace(b.OutputSchema)) > 0 {
		if d.output, err = schema.Compile("output_schema", b.OutputSchema); err != nil {
			panic(fmt.Sprintf("service.NewTool %s: %v", b.Name, err))
		}
	}
	handler := typed(func(ctx context.Context, call *Call, in In) *tool.Result {
		out, err := fn(ctx, call, in)
		return Answer(out, err)
	})
	return Tool{Binding: b, Handler: handler, decl: d, decodeArgs: decoderOf[In]()}
}

// declared holds what NewTool compiled once: the schemas every transport
// checks a call against.
type declared struct {
	input, output *schema.Schema
}

func mustInfer[T any](name, field string) json.RawMessage {
	doc, err := schema.For[T]()
	if err != nil {
		panic(fmt.Sprintf("service.NewTool %s: %s: %v", name, field, err))
	}
	var head struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(doc, &head); err != nil || head.Type != "object" {
		panic(fmt.Sprintf("service.NewTool %s: %s: %s is not a JSON object type (a struct or a map); MCP needs one", name, field, reflect.TypeFor[T]()))
	}
	return doc
}

// compileObject compiles an input_schema, which MCP requires to be an
// object schema.
func compileObject(field string, doc json.RawMessage) (*schema.Schema, error) {
	in := bytes.TrimSpace(doc)
	if len(in) == 0 || in[0] != '{' {
		return nil, fmt.Errorf("%s: must be a JSON Schema object", field)
	}
	var head struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(in, &head); err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if head.Type != "object" {
		return nil, fmt.Errorf(`%s: type must be "object", got %v`, field, head.Type)
	}
	return schema.Compile(field, in)
}

// Answer is the result of a TypedHandler's return values: Output(out)
// when err is nil, otherwise an is_error result whose text is err's
// message (with unknown_outcome when err is marked by UnknownOutcome).
func Answer(out any, err error) *tool.Result {
	if err != nil {
		return failure(err)
	}
	return Output(out)
}

// Output turns a typed handler's output into its result: a *tool.Result
// as it is; anything else as structured_content (its JSON), with a text
// block of its String method when it has one. An output that does not
// encode becomes an is_error result with unknown_outcome (the work was
// done; its answer is lost).
func Output(out any) *tool.Result {
	switch v := out.(type) {
	case *tool.Result:
		return v
	case nil:
		return nil
	}
	data, err := json.Marshal(out)
	if err != nil {
		return &tool.Result{Content: []tool.Content{tool.Text("internal error: encode the tool's output: " + err.Error())}, IsError: true, UnknownOutcome: true}
	}
	r := &tool.Result{StructuredContent: data}
	if s, ok := out.(fmt.Stringer); ok {
		r.Content = []tool.Content{tool.Text(s.String())}
	}
	return r
}

// UnknownOutcome marks err, returned by a TypedHandler, as a failure after
// which the work may still have happened: the is_error result then also
// says unknown_outcome.
func UnknownOutcome(err error) error {
	if err == nil {
		return nil
	}
	return &unknownOutcome{err}
}

type unknownOutcome struct{ error }

func (e *unknownOutcome) Unwrap() error { return e.error }

// failure is the is_error result of a TypedHandler's error.
func failure(err error) *tool.Result {
	var u *unknownOutcome
	return &tool.Result{Content: []tool.Content{tool.Text(err.Error())}, IsError: true, UnknownOutcome: errors.As(err, &u)}
}
