package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/servicetest"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/pkg/tracing"
)

type shoutIn struct {
	Text string `json:"text" schema:"maxLength=8"`
}

type shoutOut struct {
	Text string `json:"text"`
}

// observedTools are one tool per way a call can end.
func observedTools() []service.Tool {
	return []service.Tool{
		service.NewTool(tool.Binding{Name: "shout", Description: "Shout."}, func(_ context.Context, _ *service.Call, in shoutIn) (shoutOut, error) {
			if in.Text == "fail" {
				return shoutOut{}, errors.New("cannot shout that")
			}
			return shoutOut{in.Text + "!"}, nil
		}),
		{Binding: tool.Binding{Name: "panics", Description: "Panics.", InputSchema: []byte(`{"type":"object"}`)},
			Handler: func(context.Context, *service.Call) *tool.Result { panic("boom") }},
		{Binding: tool.Binding{Name: "typed", Description: "Typed.", InputSchema: []byte(`{"type":"object"}`)},
			Handler: service.Typed(func(_ context.Context, _ *service.Call, in shoutIn) *tool.Result {
				return tool.TextResult("%s", in.Text)
			})},
	}
}

// TestCallsCountedOnBothTransports makes the same calls over HTTP and over
// MCP and checks that each is counted with its transport, status and
// error code, the same way on both.
func TestCallsCountedOnBothTransports(t *testing.T) {
	s := servicetest.StartServer(t, &service.Server{Name: "observed", Tools: observedTools()})
	calls := []struct {
		tool string
		args any
		code string
	}{
		{"shout", map[string]any{"text": "hi"}, ""},
		{"shout", map[string]any{"text": "far too long"}, metrics.CodeInvalidArguments},
		{"shout", map[string]any{"text": "fail"}, metrics.CodeToolError},
		{"panics", map[string]any{}, metrics.CodePanic},
		{"typed", map[string]any{"text": 7}, metrics.CodeInvalidArguments},
	}
	for _, c := range calls {
		s.Call(t, c.tool, c.args)
		s.CallMCP(t, c.tool, c.args)
	}
	// A body the runtime refuses, and a wrong token.
	if r := s.CallRequest(t, "shout", tool.Request{TenantID: "local", SessionID: "s", Arguments: json.RawMessage(`{}`)}); r.Status != http.StatusBadRequest {
		t.Fatalf("a request without call_id: %d", r.Status)
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/tools", nil)
	req.Header.Set("Authorization", "Bearer wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	m := s.Server.Metrics()
	for _, c := range calls {
		status := metrics.StatusSucceeded
		if c.code != "" {
			status = metrics.StatusFailed
		}
		for _, transport := range []string{metrics.TransportHTTP, metrics.TransportMCP} {
			if got := testutil.ToFloat64(m.ToolCalls.WithLabelValues(c.tool, transport, status, c.code)); got < 1 {
				t.Errorf("tool_calls_total{tool=%q,transport=%q,status=%q,error_code=%q} = %v", c.tool, transport, status, c.code, got)
			}
			if got := testutil.ToFloat64(m.ToolInFlight.WithLabelValues(c.tool, transport)); got != 0 {
				t.Errorf("tool_calls_in_flight{tool=%q,transport=%q} = %v after every call ended", c.tool, transport, got)
			}
		}
	}
	for _, tc := range []struct {
		m    float64
		name string
	}{
		{testutil.ToFloat64(m.ToolCalls.WithLabelValues("shout", metrics.TransportHTTP, metrics.StatusFailed, metrics.CodeInvalidRequest)), "the refused body"},
		{testutil.ToFloat64(m.HTTPRequests.WithLabelValues("/tools/:name", http.MethodPost, "200")), "POST /tools/:name"},
		{testutil.ToFloat64(m.HTTPRequests.WithLabelValues(service.MCPPath, http.MethodPost, "200")), "POST /mcp"},
		{testutil.ToFloat64(m.AuthFailures.WithLabelValues("/tools")), "the wrong token"},
	} {
		if tc.m < 1 {
			t.Errorf("%s: not counted", tc.name)
		}
	}
}

// TestCallSpans checks the spans of one call on each transport: the
// request's server span, and the tool's span under it.
func TestCallSpans(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	t.Cleanup(tracing.Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))))
	s := servicetest.StartServer(t, &service.Server{Name: "observed", Tools: observedTools()})
	s.Call(t, "shout", map[string]any{"text": "hi"})
	s.CallMCP(t, "shout", map[string]any{"text": "fail"})
	// The MCP client has its result before the server's handler of the
	// POST returns and ends its span: wait until each tool span's parent
	// has ended too.
	byID := map[string]sdktrace.ReadOnlySpan{}
	var tools []sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		clear(byID)
		tools = tools[:0]
		for _, sp := range sr.Ended() {
			byID[sp.SpanContext().SpanID().String()] = sp
			if sp.Name() == "tool shout" {
				tools = append(tools, sp)
			}
		}
		parents := 0
		for _, sp := range tools {
			if _, ok := byID[sp.Parent().SpanID().String()]; ok {
				parents++
			}
		}
		if len(tools) >= 2 && parents == len(tools) || time.Now().After(deadline) {
			break
		}
	}
	if len(tools) != 2 {
		t.Fatalf("%d tool spans, want 2", len(tools))
	}
	for _, sp := range tools {
		parent, ok := byID[sp.Parent().SpanID().String()]
		transport := ""
		for _, a := range sp.Attributes() {
			if a.Key == "tool.transport" {
				transport = a.Value.AsString()
			}
		}
		want := map[string]string{metrics.TransportHTTP: "POST /tools/:name", metrics.TransportMCP: "POST /mcp"}[transport]
		if !ok || parent.Name() != want {
			t.Errorf("the %s tool span's parent is %v, want the server span %q", transport, parent, want)
		}
		if transport == metrics.TransportMCP && sp.Status().Code.String() != "Error" {
			t.Errorf("the failed MCP call's span has status %v", sp.Status())
		}
	}
}
