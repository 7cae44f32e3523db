package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/servicetest"
	"github.com/brain-tools/suite/pkg/tool"
)

type repeatIn struct {
	Text  string `json:"text" jsonschema:"What to repeat." schema:"minLength=1,maxLength=16"`
	Times int    `json:"times,omitempty" schema:"minimum=1,maximum=3"`
}

// Validate says what the schema cannot: no text with a comma.
func (in *repeatIn) Validate() error {
	if strings.Contains(in.Text, ",") {
		return errors.New("text: must not contain a comma")
	}
	return nil
}

type repeatOut struct {
	Text string `json:"text"`
}

func (o repeatOut) String() string { return o.Text }

func repeatTool() service.Tool {
	return service.NewTool(tool.Binding{Name: "repeat", Description: "Repeat a text.", Annotations: tool.ReadOnly()},
		func(_ context.Context, _ *service.Call, in repeatIn) (repeatOut, error) {
			return repeatOut{strings.Repeat(in.Text, max(in.Times, 1))}, nil
		})
}

// TestSameRefusalOverHTTPAndMCP calls a declared tool with the same
// arguments over both transports: every bad argument is refused with the
// same is_error result, and a good call answers the same result.
func TestSameRefusalOverHTTPAndMCP(t *testing.T) {
	srv := servicetest.Start(t, repeatTool())
	tests := []struct {
		name string
		args any
		want string // the refusal's text; "" for a good call
	}{
		{"too long", map[string]any{"text": strings.Repeat("x", 17)}, `invalid arguments: at "/text": maxLength: got 17, want 16`},
		{"missing", map[string]any{}, `invalid arguments: at (root): missing property 'text'`},
		{"wrong type", map[string]any{"text": 5}, `invalid arguments: at "/text": got number, want string`},
		{"unknown field", map[string]any{"text": "a", "colour": "red"}, `colour`},
		{"under minimum", map[string]any{"text": "a", "times": 0}, `invalid arguments: at "/times": minimum: got 0, want 1`},
		{"not an integer", map[string]any{"text": "a", "times": 1.5}, `invalid arguments: at "/times": got number, want integer`},
		{"Validate", map[string]any{"text": "a,b"}, `invalid arguments: text: must not contain a comma`},
		{"good", map[string]any{"text": "ab", "times": 2}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			overHTTP := srv.Call(t, "repeat", tt.args)
			overMCP := srv.CallMCP(t, "repeat", tt.args)
			if overHTTP.Result == nil {
				t.Fatalf("HTTP: refused with %d %s", overHTTP.Status, overHTTP.Error)
			}
			if diff := cmp.Diff(overHTTP.Result, overMCP.Result); diff != "" {
				t.Errorf("HTTP and MCP answers differ (-http +mcp):\n%s", diff)
			}
			if tt.want == "" {
				if overHTTP.Result.IsError || overHTTP.Text() != "abab" || string(overHTTP.Result.StructuredContent) != `{"text":"abab"}` {
					t.Errorf("good call: %+v", overHTTP.Result)
				}
				return
			}
			if !overHTTP.Result.IsError || overHTTP.Result.UnknownOutcome || !strings.Contains(overHTTP.Text(), tt.want) {
				t.Errorf("got %+v (%q), want an is_error refusal containing %q", overHTTP.Result, overHTTP.Text(), tt.want)
			}
		})
	}
}

// TestDeclaredOutputChecked: a declared tool whose output breaks its
// inferred output schema answers an is_error result with unknown_outcome
// on both transports, never the bad structured content.
func TestDeclaredOutputChecked(t *testing.T) {
	type out struct {
		N int `json:"n" schema:"maximum=10"`
	}
	bad := service.NewTool(tool.Binding{Name: "bad", Description: "Answer more than its schema allows."},
		func(context.Context, *service.Call, struct{}) (out, error) { return out{N: 11}, nil })
	srv := servicetest.Start(t, bad)
	for name, r := range map[string]*servicetest.Reply{"HTTP": srv.Call(t, "bad", map[string]any{}), "MCP": srv.CallMCP(t, "bad", map[string]any{})} {
		if r.Result == nil || !r.Result.IsError || !r.Result.UnknownOutcome || r.Result.HasStructured() || !strings.Contains(r.Text(), "output_schema") {
			t.Errorf("%s: %+v, want is_error with unknown_outcome naming output_schema", name, r.Result)
		}
	}
}

// TestNewToolErrors: a handler's error is an is_error result with its
// text; UnknownOutcome adds unknown_outcome.
func TestNewToolErrors(t *testing.T) {
	fail := service.NewTool(tool.Binding{Name: "fail", Description: "Fail."},
		func(_ context.Context, _ *service.Call, in struct {
			Lost bool `json:"lost"`
		}) (*tool.Result, error) {
			err := errors.New("the printer is on fire")
			if in.Lost {
				return nil, service.UnknownOutcome(err)
			}
			return nil, err
		})
	srv := servicetest.Start(t, fail)
	for _, lost := range []bool{false, true} {
		r := srv.Call(t, "fail", map[string]any{"lost": lost})
		if !r.Result.IsError || r.Result.UnknownOutcome != lost || r.Text() != "the printer is on fire" {
			t.Errorf("lost=%v: %+v", lost, r.Result)
		}
	}
}

// TestPublishedBinding: GET /tools publishes the inferred schemas, the
// title and the annotations; the MCP listing carries the same, and leaves
// out the tools that cannot work over MCP.
func TestPublishedBinding(t *testing.T) {
	inspect := service.NewTool(tool.Binding{Name: "look", Description: "Read the session.", InspectSession: true},
		func(context.Context, *service.Call, struct{}) (*tool.Result, error) { return tool.TextResult("x"), nil })
	httpOnly := repeatTool()
	httpOnly.Binding.Name, httpOnly.HTTPOnly = "repeat_http", true
	srv := servicetest.Start(t, repeatTool(), inspect, httpOnly)
	b := srv.Server.Bindings(srv.URL)
	if len(b) != 3 || b[0].Annotations == nil || !b[0].Annotations.ReadOnlyHint {
		t.Fatalf("bindings: %+v", b)
	}
	var in map[string]any
	if err := json.Unmarshal(b[0].InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type": "object", "additionalProperties": false, "required": []any{"text"},
		"properties": map[string]any{
			"text":  map[string]any{"type": "string", "description": "What to repeat.", "minLength": 1.0, "maxLength": 16.0},
			"times": map[string]any{"type": "integer", "minimum": 1.0, "maximum": 3.0},
		},
	}
	if diff := cmp.Diff(want, in); diff != "" {
		t.Errorf("input_schema (-want +got):\n%s", diff)
	}
	listed := servicetest.ListMCP(t, srv)
	if len(listed) != 1 || listed[0].Name != "repeat" {
		t.Fatalf("tools over MCP: %+v, want repeat alone (look inspects a session, repeat_http is HTTP-only)", listed)
	}
	if a := listed[0].Annotations; a == nil || !a.ReadOnlyHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("MCP annotations: %+v, want read-only and not open-world", a)
	}
}

// TestHandWrittenSchema: a binding that writes its own input_schema keeps
// it, and the runtime checks calls against it on both transports.
func TestHandWrittenSchema(t *testing.T) {
	b := tool.Binding{Name: "at_least", Description: "Take a number of at least 5.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":5}},"required":["n"],"additionalProperties":false}`)}
	atLeast := service.NewTool(b, func(_ context.Context, _ *service.Call, in struct {
		N int `json:"n"`
	}) (*tool.Result, error) {
		return tool.TextResult("%d", in.N), nil
	})
	if string(atLeast.Binding.InputSchema) != string(b.InputSchema) || len(atLeast.Binding.OutputSchema) != 0 {
		t.Fatalf("binding changed: %s / %s", atLeast.Binding.InputSchema, atLeast.Binding.OutputSchema)
	}
	srv := servicetest.Start(t, atLeast)
	for name, r := range map[string]*servicetest.Reply{"HTTP": srv.Call(t, "at_least", map[string]any{"n": 3}), "MCP": srv.CallMCP(t, "at_least", map[string]any{"n": 3})} {
		if !r.Result.IsError || !strings.Contains(r.Text(), `at "/n": minimum: got 3, want 5`) {
			t.Errorf("%s: %+v", name, r.Result)
		}
	}
	if r := srv.Call(t, "at_least", map[string]any{"n": 7}); r.Result.IsError || r.Text() != "7" {
		t.Errorf("n=7: %+v", r.Result)
	}
}

// TestLiteralToolSchemaChecked: a Tool written as a literal has its
// binding's input_schema checked on both transports, as a declared one;
// one whose schema does not compile fails the start, naming the tool.
func TestLiteralToolSchemaChecked(t *testing.T) {
	literal := service.Tool{
		Binding: tool.Binding{Name: "count", Description: "Count.", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","maximum":3}},"additionalProperties":false}`)},
		Handler: func(context.Context, *service.Call) *tool.Result { return tool.TextResult("ran") },
	}
	srv := servicetest.Start(t, literal)
	for _, reply := range []*servicetest.Reply{srv.Call(t, "count", map[string]any{"n": 4}), srv.CallMCP(t, "count", map[string]any{"n": 4})} {
		if reply.Result == nil || !reply.Result.IsError || reply.Text() != `invalid arguments: at "/n": maximum: got 4, want 3` {
			t.Errorf("n over the maximum: %+v", reply)
		}
	}
	if got := srv.Call(t, "count", map[string]any{"n": 3}); got.Result == nil || got.Text() != "ran" {
		t.Errorf("n at the maximum: %+v", got)
	}

	bad := literal
	bad.Binding.InputSchema = json.RawMessage(`{"type":"strong"}`)
	cfg, err := service.ParseEnv[service.Config](map[string]string{"ADDR": "127.0.0.1:0", "BRAIN_TOOLS_KEY": servicetest.Token})
	if err != nil {
		t.Fatal(err)
	}
	err = service.Run(context.Background(), &service.Server{Name: "bad", Config: cfg, Tools: []service.Tool{bad}})
	if err == nil || !strings.Contains(err.Error(), "tool count: input_schema") {
		t.Fatalf("Run with a schema that does not compile: %v", err)
	}
}
