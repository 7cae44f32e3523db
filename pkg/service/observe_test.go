package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"
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
		service.NewTool(tool.Binding{Name: "typed", Description: "Typed.", InputSchema: []byte(`{"type":"object"}`)},
			func(_ context.Context, _ *service.Call, in shoutIn) (*tool.Result, error) {
				return tool.TextResult("%s", in.Text), nil
			}),
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

// logLines parses the JSON log lines written so far.
func logLines(t *testing.T, logs *servicetest.LogBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, rec)
	}
	return out
}

// TestLogLinesCarryRequestID checks that every line logged while a request
// is served carries its request ID, over HTTP and MCP: the access-log line,
// the line a tool logs with call.Logger, the runtime's "tool call" line
// and its "tool panicked" line, and the access-log line of a 401. The ID
// is the caller's X-Request-Id when it sent one.
func TestLogLinesCarryRequestID(t *testing.T) {
	buf := &servicetest.LogBuffer{}
	tools := append(observedTools(), service.Tool{
		Binding: tool.Binding{Name: "chatty", Description: "Logs a line.", InputSchema: []byte(`{"type":"object"}`)},
		Handler: func(_ context.Context, call *service.Call) *tool.Result {
			call.Logger.Info("inside the tool")
			return tool.TextResult("said")
		}})
	s := servicetest.StartServer(t, &service.Server{Name: "observed", Tools: tools, Logger: service.NewLogger(buf, slog.LevelDebug)})

	post := func(name, requestID, token string) *http.Response {
		t.Helper()
		body, _ := json.Marshal(tool.Request{TenantID: "local", SessionID: "s1", CallID: "call-" + name, Arguments: json.RawMessage(`{}`)})
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/tools/"+name, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if requestID != "" {
			req.Header.Set("X-Request-Id", requestID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	post("chatty", "caller-chatty-1", s.Token)
	post("panics", "", s.Token)
	if resp := post("chatty", "caller-wrong-token", "wrong"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", resp.StatusCode)
	}
	s.CallMCP(t, "chatty", map[string]any{})

	// The MCP client has its result before the server's handler of the
	// POST returns and logs it: wait for the access-log line of the POST
	// that carried the call.
	var (
		lines       []map[string]any
		mcpRequests map[string]bool // the request IDs of the POSTs to /mcp
	)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		lines, mcpRequests = logLines(t, buf), map[string]bool{}
		callID := ""
		for _, l := range lines {
			if l["msg"] == "request" && l["route"] == service.MCPPath {
				mcpRequests[l["request_id"].(string)] = true
			}
			if l["transport"] == "mcp" && l["msg"] == "tool call" {
				callID, _ = l["request_id"].(string)
			}
		}
		if mcpRequests[callID] || time.Now().After(deadline) {
			break
		}
	}
	revisions := 0 // the /mcp lines after initialize name the revision
	for _, l := range lines {
		if l["msg"] == "request" && l["route"] == service.MCPPath && l["mcp_revision"] != nil {
			if rev, _ := l["mcp_revision"].(string); !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`).MatchString(rev) {
				t.Errorf("mcp_revision %q, want the revision the client spoke (YYYY-MM-DD)", rev)
			}
			revisions++
		}
	}
	if revisions == 0 {
		t.Errorf("no /mcp access-log line has mcp_revision")
	}
	seen := map[string]int{}
	for _, l := range lines {
		msg, _ := l["msg"].(string)
		if msg == "listening" || msg == "stopped" {
			continue // the server's own lines, of no request
		}
		id, _ := l["request_id"].(string)
		if id == "" {
			t.Errorf("a line of a request without request_id: %v", l)
			continue
		}
		key := msg
		switch {
		case l["call_id"] == "call-chatty" || l["path"] == "/tools/chatty" && l["status"] == float64(200):
			if id != "caller-chatty-1" {
				t.Errorf("%q of the chatty HTTP call: request_id %q, want the caller's caller-chatty-1", msg, id)
			}
			key = "http " + msg
		case l["status"] == float64(401):
			if id != "caller-wrong-token" {
				t.Errorf("the 401's line: request_id %q, want caller-wrong-token", id)
			}
			key = "401"
		case l["transport"] == "mcp":
			if !mcpRequests[id] {
				t.Errorf("%q of the MCP call: request_id %q is no POST /mcp's (%v)", msg, id, mcpRequests)
			}
			key = "mcp " + msg
		}
		seen[key]++
	}
	for _, want := range []string{"http inside the tool", "http tool call", "http request", "tool panicked", "401", "mcp inside the tool", "mcp tool call"} {
		if seen[want] == 0 {
			t.Errorf("no %q line (lines by kind: %v)", want, seen)
		}
	}
}

// TestRoutePanics: a service route that breaks its response off with
// http.ErrAbortHandler reaches its client as a cut connection, not as a
// 500 appended to what it sent, and is not logged as a panic; any other
// panic is a 500 with the JSON error body, logged.
func TestRoutePanics(t *testing.T) {
	cfg, err := service.ParseEnv[service.Config](map[string]string{"ADDR": "127.0.0.1:0", "BRAIN_TOOLS_KEY": "tok"})
	if err != nil {
		t.Fatal(err)
	}
	var logs servicetest.LogBuffer
	srv := &service.Server{Name: "test", Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Routes: func(r *httprouter.Router) {
			r.GET("/abort", func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
				_, _ = io.WriteString(w, "first row\n")
				_ = http.NewResponseController(w).Flush()
				panic(http.ErrAbortHandler)
			})
			r.GET("/boom", func(http.ResponseWriter, *http.Request, httprouter.Params) { panic("boom") })
		}}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)

	tests := []struct {
		path    string
		status  int
		body    string
		readErr bool
		logged  bool
	}{
		{path: "/abort", status: http.StatusOK, body: "first row\n", readErr: true},
		{path: "/boom", status: http.StatusInternalServerError, body: `"code":"internal_error"`, logged: true},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			before := len(logs.String())
			resp, err := http.Get(ts.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.body) {
				t.Errorf("got %d %q, want %d with %q", resp.StatusCode, body, tt.status, tt.body)
			}
			if (err != nil) != tt.readErr {
				t.Errorf("reading the body: %v, want an error: %v", err, tt.readErr)
			}
			if tt.readErr && strings.Contains(string(body), "internal_error") {
				t.Errorf("an aborted response got an error body appended: %q", body)
			}
			// The client may have its answer before the handler returns
			// and logs: wait for the request's access-log line.
			var log string
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log, "msg=request "); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no access-log line in ten seconds; log:\n%s", log)
				}
				log = logs.String()[before:]
			}
			if got := strings.Contains(log, "panic"); got != tt.logged {
				t.Errorf("logged as a panic: %v, want %v; log:\n%s", got, tt.logged, log)
			}
		})
	}
}
