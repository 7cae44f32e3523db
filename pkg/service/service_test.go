package service

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/sse"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/pkg/version"
)

type echoArgs struct {
	Text string `json:"text"`
}

func (a *echoArgs) Validate() error {
	if a.Text == "" {
		return fmt.Errorf("text: required")
	}
	return nil
}

var echoBinding = tool.Binding{
	Name: "echo", Description: "Echo text.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":4096}},"required":["text"],"additionalProperties":false}`),
}

// testServer starts a Server with a few tools that exercise each path of
// the runtime, on a real listener on 127.0.0.1.
func testServer(t *testing.T, mutate func(*Config)) (*httptest.Server, chan context.Context) {
	t.Helper()
	return testServerWaits(t, mutate, false)
}

// testServerWaits is testServer with every tool's Waits set to waits, so
// that its streams are taken over from net/http (stream.go).
func testServerWaits(t *testing.T, mutate func(*Config), waits bool) (*httptest.Server, chan context.Context) {
	t.Helper()
	cfg, err := ParseEnv[Config](map[string]string{"ADDR": "127.0.0.1:0", "BRAIN_TOOLS_KEY": "tok"})
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(&cfg)
	}
	ctxs := make(chan context.Context, 1)
	srv := &Server{Name: "test", Config: cfg, Tools: []Tool{
		NewTool(echoBinding, func(ctx context.Context, c *Call, a echoArgs) (*tool.Result, error) {
			return &tool.Result{Content: []tool.Content{tool.Text(a.Text)}}, nil
		}),
		{Binding: tool.Binding{Name: "steps", Description: "progress then result"}, Handler: func(ctx context.Context, c *Call) *tool.Result {
			for i := range 3 {
				if err := c.Progress(map[string]int{"step": i}); err != nil {
					return tool.Errorf("progress: %v", err)
				}
			}
			return tool.TextResult("done after %s", c.CallID)
		}},
		{Binding: tool.Binding{Name: "slow", Description: "no progress, longer than StreamAfter"}, Handler: func(ctx context.Context, c *Call) *tool.Result {
			select {
			case <-time.After(600 * time.Millisecond):
				return tool.TextResult("slow done")
			case <-ctx.Done():
				return tool.Errorf("cancelled")
			}
		}},
		{Binding: tool.Binding{Name: "wait", Description: "blocks until cancelled"}, Handler: func(ctx context.Context, c *Call) *tool.Result {
			ctxs <- ctx
			<-ctx.Done()
			return tool.Errorf("cancelled")
		}},
		{Binding: tool.Binding{Name: "boom", Description: "panics"}, Handler: func(ctx context.Context, c *Call) *tool.Result { panic("boom") }},
		{Binding: tool.Binding{Name: "nothing", Description: "returns nil"}, Handler: func(ctx context.Context, c *Call) *tool.Result { return nil }},
		{Binding: tool.Binding{Name: "invalid", Description: "returns an empty result"}, Handler: func(ctx context.Context, c *Call) *tool.Result { return &tool.Result{} }},
		{Binding: tool.Binding{Name: "fails", Description: "handled failure"}, Handler: func(ctx context.Context, c *Call) *tool.Result { return tool.Errorf("denied") }},
	}}
	for i := range srv.Tools {
		srv.Tools[i].Waits = waits
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts, ctxs
}

const goodBody = `{"tenant_id":"local","session_id":"s1","call_id":"c1","arguments":{"text":"hello"}}`

func post(t *testing.T, url, body string, headers map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer tok")
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBadInput(t *testing.T) {
	ts, _ := testServer(t, func(c *Config) { c.MaxRequestBytes = 200 })
	tests := []struct {
		name    string
		path    string
		body    string
		headers map[string]string
		status  int
		want    string
	}{
		{"malformed JSON", "/tools/echo", `{"tenant_id":`, nil, 400, "malformed JSON"},
		{"unknown top-level field", "/tools/echo", `{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{},"extra":1}`, nil, 400, "extra: unknown field"},
		{"wrong type", "/tools/echo", `{"tenant_id":5,"session_id":"s","call_id":"c","arguments":{}}`, nil, 400, "tenant_id: wrong type: got number, want string"},
		{"missing call_id", "/tools/echo", `{"tenant_id":"t","session_id":"s","arguments":{}}`, nil, 400, "call_id: required"},
		{"arguments not object", "/tools/echo", `{"tenant_id":"t","session_id":"s","call_id":"c","arguments":"x"}`, nil, 400, "arguments: required: must be a JSON object"},
		{"trailing data", "/tools/echo", goodBody + `{}`, nil, 400, "unexpected data after"},
		{"oversized body", "/tools/echo", `{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"text":"` + strings.Repeat("x", 200) + `"}}`, nil, 413, "larger than the limit of 200 bytes"},
		{"no token", "/tools/echo", goodBody, map[string]string{"Authorization": ""}, 401, "missing bearer token"},
		{"wrong token", "/tools/echo", goodBody, map[string]string{"Authorization": "Bearer nope"}, 401, "invalid bearer token"},
		{"wrong content type", "/tools/echo", goodBody, map[string]string{"Content-Type": "text/plain"}, 415, "Content-Type must be application/json"},
		{"json in another charset", "/tools/echo", goodBody, map[string]string{"Content-Type": "application/json; charset=latin1"}, 415, "Content-Type must be application/json"},
		{"empty body", "/tools/echo", ``, nil, 400, "request body is empty: expected a JSON value"},
		{"unknown tool", "/tools/nope", goodBody, nil, 404, `no tool named \"nope\"`},
		{"unknown tool without token is 401, not a probe", "/tools/nope", goodBody, map[string]string{"Authorization": ""}, 401, "missing bearer token"},
		{"argument unknown field", "/tools/echo", `{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"text":"a","x":1}}`, nil, 200, `invalid arguments: at (root): additional properties 'x' not allowed`},
		{"argument wrong type", "/tools/echo", `{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"text":1}}`, nil, 200, `invalid arguments: at \"/text\": got number, want string`},
		{"argument fails the schema", "/tools/echo", `{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{}}`, nil, 200, `invalid arguments: at (root): missing property 'text'`},
		{"argument fails Validate", "/tools/echo", `{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"text":""}}`, nil, 200, `invalid arguments: text: required`},
		{"argument named twice", "/tools/echo", `{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"text":"a","text":"b"}}`, nil, 200, `invalid arguments: text: duplicate field`},
		{"argument not UTF-8", "/tools/echo", "{\"tenant_id\":\"t\",\"session_id\":\"s\",\"call_id\":\"c\",\"arguments\":{\"text\":\"a\xffb\"}}", nil, 200, `invalid arguments: text: string is not valid UTF-8`},
		{"argument with a lone surrogate", "/tools/echo", `{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"text":"\ud800"}}`, nil, 200, `invalid arguments: text: string has an unpaired UTF-16 surrogate`},
		{"argument name not UTF-8", "/tools/echo", "{\"tenant_id\":\"t\",\"session_id\":\"s\",\"call_id\":\"c\",\"arguments\":{\"te\xffxt\":\"a\"}}", nil, 200, `invalid arguments: string is not valid UTF-8`},
		{"arguments a string that is not UTF-8", "/tools/echo", "{\"tenant_id\":\"t\",\"session_id\":\"s\",\"call_id\":\"c\",\"arguments\":\"\xbd\"}", nil, 400, `arguments: string is not valid UTF-8`},
		{"envelope fault after a bad argument", "/tools/echo", `{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"text":"a","text":"b"},"tenant_id":"u"}`, nil, 400, `tenant_id: duplicate field`},
		{"envelope not UTF-8 after a bad argument", "/tools/echo", "{\"tenant_id\":\"t\",\"session_id\":\"s\",\"arguments\":{\"text\":\"a\",\"text\":\"b\"},\"call_id\":\"c\xff\"}", nil, 400, `call_id: string is not valid UTF-8`},
		{"envelope field named twice", "/tools/echo", `{"tenant_id":"t","tenant_id":"u","session_id":"s","call_id":"c","arguments":{"text":"a"}}`, nil, 400, `tenant_id: duplicate field`},
		{"arguments named twice", "/tools/echo", `{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"text":"a"},"arguments":{"text":"b"}}`, nil, 400, `arguments: duplicate field`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, ts.URL+tt.path, tt.body, tt.headers)
			body := readAll(t, resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if !strings.Contains(body, tt.want) {
				t.Fatalf("body %s, want it to contain %q", body, tt.want)
			}
			if resp.StatusCode != 200 {
				var eb struct {
					Error struct {
						Code      string `json:"code"`
						RequestID string `json:"request_id"`
					} `json:"error"`
				}
				if err := json.Unmarshal([]byte(body), &eb); err != nil {
					t.Fatalf("refusal body %s: %v", body, err)
				}
				if eb.Error.Code == "" || eb.Error.RequestID == "" || eb.Error.RequestID != resp.Header.Get("X-Request-Id") {
					t.Fatalf("refusal %s: want a code and request_id equal to X-Request-Id %q", body, resp.Header.Get("X-Request-Id"))
				}
			}
			if resp.StatusCode == 200 {
				r, err := tool.DecodeResult([]byte(body))
				if err != nil || !r.IsError || r.UnknownOutcome {
					t.Fatalf("want an is_error result without unknown_outcome, got %+v (%v)", r, err)
				}
			}
		})
	}
	t.Run("GET on a tool is 405", func(t *testing.T) {
		resp, err := http.Get(ts.URL + "/tools/echo")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}

func TestJSONResults(t *testing.T) {
	ts, _ := testServer(t, nil)
	tests := []struct {
		tool        string
		accept      string
		wantText    string
		wantError   bool
		wantUnknown bool
	}{
		{"echo", "application/json, text/event-stream", "hello", false, false},
		{"fails", "application/json, text/event-stream", "denied", true, false},
		{"boom", "application/json", "internal error in tool boom", true, true},
		{"nothing", "application/json", "returned no result", true, true},
		{"invalid", "application/json", "returned an invalid result", true, true},
		// Without text/event-stream in Accept, progress is dropped and the
		// answer stays JSON.
		{"steps", "application/json", "done after c1", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			resp := post(t, ts.URL+"/tools/"+tt.tool, goodBody, map[string]string{"Accept": tt.accept})
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			r, err := tool.DecodeResult([]byte(readAll(t, resp.Body)))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(r.Content[0].Text, tt.wantText) || r.IsError != tt.wantError || r.UnknownOutcome != tt.wantUnknown {
				t.Fatalf("result %+v", r)
			}
		})
	}
}

func readEvents(t *testing.T, r io.Reader) (events []sse.Event, comments int) {
	t.Helper()
	data := readAll(t, r)
	comments = strings.Count(data, "\n: ") + boolInt(strings.HasPrefix(data, ": "))
	for e, err := range sse.Read(strings.NewReader(data), 0) {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	return events, comments
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestSSEProgress(t *testing.T) {
	for _, waits := range []bool{false, true} {
		t.Run(fmt.Sprintf("waits=%v", waits), func(t *testing.T) { testSSEProgress(t, waits) })
	}
}

func testSSEProgress(t *testing.T, waits bool) {
	ts, _ := testServerWaits(t, nil, waits)
	resp := post(t, ts.URL+"/tools/steps", goodBody, map[string]string{"Accept": "application/json, text/event-stream"})
	if got, want := resp.Close, waits; got != want {
		t.Errorf("Connection: close is %v; a stream of a tool that waits is closed after (taken over), another's is not", got)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events, _ := readEvents(t, resp.Body)
	var names []string
	for _, e := range events {
		names = append(names, e.Name+" "+e.Data)
	}
	want := []string{`progress {"step":0}`, `progress {"step":1}`, `progress {"step":2}`, `result {"content":[{"type":"text","text":"done after c1"}]}`}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
}

func TestStreamsOnItsOwnBeforeHeaderLimit(t *testing.T) {
	for _, waits := range []bool{false, true} {
		t.Run(fmt.Sprintf("waits=%v", waits), func(t *testing.T) { testStreamsOnItsOwn(t, waits) })
	}
}

func testStreamsOnItsOwn(t *testing.T, waits bool) {
	ts, _ := testServerWaits(t, func(c *Config) { c.StreamAfter = 50 * time.Millisecond; c.Heartbeat = 40 * time.Millisecond }, waits)
	start := time.Now()
	resp := post(t, ts.URL+"/tools/slow", goodBody, map[string]string{"Accept": "application/json, text/event-stream"})
	headers := time.Since(start)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	if headers >= 300*time.Millisecond {
		t.Fatalf("headers after %s: not sent before the result", headers)
	}
	events, comments := readEvents(t, resp.Body)
	if len(events) != 1 || events[0].Name != "result" || !strings.Contains(events[0].Data, "slow done") {
		t.Fatalf("events %+v", events)
	}
	// 550 ms of stream at a 40 ms interval is about 13 heartbeats; two
	// show they repeat even on a machine busy enough to skip most ticks.
	if comments < 2 {
		t.Fatalf("%d heartbeats in 550 ms at a 40 ms interval", comments)
	}
}

func TestCancelledWhenHostDrops(t *testing.T) {
	ts, ctxs := testServer(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/tools/wait", strings.NewReader(goodBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer tok")
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
	}()
	var handlerCtx context.Context
	select {
	case handlerCtx = <-ctxs:
	case <-time.After(5 * time.Second):
		t.Fatal("handler never ran")
	}
	cancel()
	select {
	case <-handlerCtx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("handler context not cancelled after the host dropped the request")
	}
}

func TestHealthToolsMetrics(t *testing.T) {
	ts, _ := testServer(t, func(c *Config) { c.PublicURL = "https://tools.example" })
	resp, err := http.Get(ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp.Body); resp.StatusCode != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("healthz %d %s", resp.StatusCode, body)
	}
	resp.Body.Close()

	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/tools", nil)
	if resp, _ := http.DefaultClient.Do(req); resp.StatusCode != 401 {
		t.Fatalf("GET /tools without token: %d", resp.StatusCode)
	}
	req.Header.Set("Authorization", "Bearer tok")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Tools []tool.Binding }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	b := got.Tools[0]
	if b.Name != "echo" || b.URL != "https://tools.example/tools/echo" || b.TokenEnv != "BRAIN_TOOLS_KEY" || len(b.Tenants) != 1 || b.Tenants[0] != "local" {
		t.Fatalf("binding %+v", b)
	}
	if err := b.Validate(); err != nil {
		t.Fatalf("published binding invalid: %v", err)
	}

	post(t, ts.URL+"/tools/echo", goodBody, nil)
	resp, err = http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp.Body)
	resp.Body.Close()
	if !strings.Contains(body, `tool_calls_total{error_code="",service="test",status="succeeded",tool="echo",transport="http"} 1`) {
		t.Fatalf("metrics missing the call:\n%s", body)
	}
	v := version.Get()
	if want := fmt.Sprintf(`build_info{goversion=%q,revision=%q,service="test",version=%q} 1`, v.GoVersion, v.Revision, v.Version); !strings.Contains(body, want) {
		t.Fatalf("metrics missing %s:\n%s", want, body)
	}
}

func TestHealthHEAD(t *testing.T) {
	ts, _ := testServer(t, nil)
	resp, err := http.Head(ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("HEAD /healthz: %d", resp.StatusCode)
	}
}

func TestHealthUnavailable(t *testing.T) {
	srv := &Server{Name: "x", Config: Config{NoAuth: true}, Health: func(context.Context) (map[string]any, error) {
		return map[string]any{"provider": "none"}, fmt.Errorf("no key")
	}}
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if w.Code != 503 || !strings.Contains(w.Body.String(), `"error":"no key"`) || !strings.Contains(w.Body.String(), `"provider":"none"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"ADDR": ":1"}, "BRAIN_TOOLS_KEY is not set"},
		{map[string]string{"ADDR": ":1", "INSECURE_NO_AUTH": "true"}, ""},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SSE_STREAM_AFTER": "31s"}, "SSE_STREAM_AFTER"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SSE_STREAM_AFTER": "0s"}, "SSE_STREAM_AFTER must be more than 0 and less than 30s (the host's header limit), got 0s"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SSE_STREAM_AFTER": "30s"}, "SSE_STREAM_AFTER must be more than 0 and less than 30s"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SSE_STREAM_AFTER": "29.999s"}, ""},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SSE_STREAM_AFTER": "1ns"}, ""},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "PUBLIC_URL": "ftp://x"}, "PUBLIC_URL"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "PUBLIC_URL": "notaurl"}, `PUBLIC_URL "notaurl": must be an absolute http:// or https:// URL`},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "PUBLIC_URL": "http://"}, `PUBLIC_URL "http://": has no host`},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "PUBLIC_URL": "http:local"}, "PUBLIC_URL"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "PUBLIC_URL": "http://local:99999"}, `PUBLIC_URL "http://local:99999": port "99999"`},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "PUBLIC_URL": "http://local:"}, "has an empty port"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "PUBLIC_URL": "http://u:p@local"}, "must not contain credentials"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "PUBLIC_URL": "http://local/?a=1"}, "must not contain a query"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "PUBLIC_URL": "http://local/?"}, "must not contain a query"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "PUBLIC_URL": "http://local/#x"}, "must not contain a fragment"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "PUBLIC_URL": "http://local/#"}, "must not contain a fragment"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "PUBLIC_URL": "https://tools.example.com:8443/local/"}, ""},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "PUBLIC_URL": "http://[::1]:8081"}, ""},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "TOOL_TENANTS": "a,,b"}, `TOOL_TENANTS "a,,b": entry 2 is empty`},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "TOOL_TENANTS": ","}, `TOOL_TENANTS ",": entry 1 is empty`},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "TOOL_TENANTS": "a,"}, `TOOL_TENANTS "a,": entry 2 is empty`},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "TOOL_TENANTS": "a, b"}, `TOOL_TENANTS "a, b": entry 2 " b" has surrounding spaces`},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "TOOL_TENANTS": "a,b,a"}, `TOOL_TENANTS "a,b,a": "a" is listed twice`},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "TOOL_TENANTS": "a,b"}, ""},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "TOOL_TENANTS": ""}, ""},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "MAX_REQUEST_BYTES": "0"}, "MAX_REQUEST_BYTES"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "MAX_REQUEST_BYTES": "-1"}, "MAX_REQUEST_BYTES must be positive, got -1"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "MAX_REQUEST_BYTES": "1"}, ""},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SHUTDOWN_TIMEOUT": "-1s"}, "SHUTDOWN_TIMEOUT must be positive, got -1s"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SHUTDOWN_TIMEOUT": "0s"}, "SHUTDOWN_TIMEOUT must be positive, got 0s"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SHUTDOWN_TIMEOUT": "0"}, "SHUTDOWN_TIMEOUT must be positive, got 0s"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SHUTDOWN_TIMEOUT": "1ns"}, ""},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SHUTDOWN_TIMEOUT": "soon"}, "SHUTDOWN_TIMEOUT: cannot parse"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SSE_HEARTBEAT": "-1s"}, "SSE_HEARTBEAT must be positive, got -1s"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SSE_HEARTBEAT": "0s"}, "SSE_HEARTBEAT must be positive, got 0s"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SSE_HEARTBEAT": "1ns"}, ""},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SSE_STREAM_AFTER": "-1s"}, "SSE_STREAM_AFTER must be more than 0 and less than 30s (the host's header limit), got -1s"},
		{map[string]string{"ADDR": "", "BRAIN_TOOLS_KEY": "k"}, `ADDR "": is empty`},
		{map[string]string{"ADDR": "nonsense", "BRAIN_TOOLS_KEY": "k"}, `ADDR "nonsense": want host:port`},
		{map[string]string{"ADDR": "127.0.0.1:65536", "BRAIN_TOOLS_KEY": "k"}, `ADDR "127.0.0.1:65536": port "65536" is not a number from 0 to 65535`},
		{map[string]string{"ADDR": "127.0.0.1:8081x", "BRAIN_TOOLS_KEY": "k"}, `port "8081x"`},
		{map[string]string{"ADDR": "127.0.0.1:", "BRAIN_TOOLS_KEY": "k"}, `port ""`},
		{map[string]string{"ADDR": "127.0.0.1:080", "BRAIN_TOOLS_KEY": "k"}, `port "080"`},
		{map[string]string{"ADDR": "127.0.0.1:65535", "BRAIN_TOOLS_KEY": "k"}, ""},
		{map[string]string{"ADDR": "127.0.0.1:0", "BRAIN_TOOLS_KEY": "k"}, ""},
		{map[string]string{"ADDR": "[::1]:8081", "BRAIN_TOOLS_KEY": "k"}, ""},
		{map[string]string{"ADDR": ":8081", "BRAIN_TOOLS_KEY": "k"}, ""},
		{map[string]string{"ADDR": " 127.0.0.1:8081", "BRAIN_TOOLS_KEY": "k"}, `ADDR " 127.0.0.1:8081": host " 127.0.0.1" contains a space`},
		{map[string]string{"ADDR": "127.0.0.1 :8081", "BRAIN_TOOLS_KEY": "k"}, `host "127.0.0.1 " contains a space`},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": " k"}, "BRAIN_TOOLS_KEY has surrounding whitespace"},
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k\x01k"}, "BRAIN_TOOLS_KEY contains a control character"},
		// Every problem is named at once.
		{map[string]string{"ADDR": ":1", "BRAIN_TOOLS_KEY": "k", "SHUTDOWN_TIMEOUT": "-1s", "SSE_HEARTBEAT": "-2s"}, "SHUTDOWN_TIMEOUT must be positive, got -1s\nSSE_HEARTBEAT must be positive, got -2s"},
	}
	for _, tt := range tests {
		cfg, err := ParseEnv[Config](tt.env)
		if err == nil {
			err = cfg.Validate()
		}
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%v: err %v, want %q", tt.env, err, tt.want)
		}
	}
	if _, err := ParseEnv[Config](map[string]string{"MAX_REQUEST_BYTES": "lots"}); err == nil || !strings.Contains(err.Error(), "MAX_REQUEST_BYTES") {
		t.Errorf("bad number: %v", err)
	}
}

func TestServeShutsDownGracefully(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	srv := &Server{Name: "x", Config: Config{NoAuth: true, MaxRequestBytes: 1 << 20, Heartbeat: time.Second, StreamAfter: time.Second, ShutdownTimeout: 2 * time.Second},
		Tools: []Tool{{Binding: tool.Binding{Name: "t"}, Handler: func(ctx context.Context, c *Call) *tool.Result {
			close(started)
			time.Sleep(200 * time.Millisecond)
			return tool.TextResult("finished")
		}}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, srv) }()
	respc := make(chan string, 1)
	go func() {
		resp, err := http.Post("http://"+ln.Addr().String()+"/tools/t", "application/json", strings.NewReader(goodBody))
		if err != nil {
			respc <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(bufio.NewReader(resp.Body))
		respc <- string(b)
	}()
	<-started
	cancel()
	if got := <-respc; !strings.Contains(got, "finished") {
		t.Fatalf("in-flight call cut off by shutdown: %s", got)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestAcceptsSSE(t *testing.T) {
	tests := []struct {
		accept string
		want   bool
	}{
		{"application/json, text/event-stream", true},
		{"text/event-stream", true},
		{"TEXT/Event-Stream", true},
		{"application/json", false},
		{"", false},
		{"*/*", true},
		{"text/*;q=0.5", true},
		{"text/event-stream;q=0", false},
		{"text/event-stream; q=0.000", false},
		{"text/event-stream;q=0.001", true},
		{"text/event-stream;charset=utf-8;q=1", true},
		{"application/json;q=0.9, text/event-stream;q=0", false},
		{"text/event-streamx", false},
		{" , ,text/event-stream", true},
	}
	for _, tt := range tests {
		if got := acceptsSSE(tt.accept); got != tt.want {
			t.Errorf("acceptsSSE(%q) = %v, want %v", tt.accept, got, tt.want)
		}
	}
}

// TestRequestLimitEdge: MAX_REQUEST_BYTES holds at its edge whether the
// body declares its length (refused before it is read) or comes chunked
// (refused while it is read).
func TestRequestLimitEdge(t *testing.T) {
	const limit = 200
	ts, _ := testServer(t, func(c *Config) { c.MaxRequestBytes = limit })
	body := func(n int) string {
		head, tail := `{"tenant_id":"local","session_id":"s1","call_id":"c1","arguments":{"text":"`, `"}}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	for _, tc := range []struct {
		name    string
		size    int
		chunked bool
		status  int
	}{
		{"at the limit, with length", limit, false, 200},
		{"one over, with length", limit + 1, false, 413},
		{"at the limit, chunked", limit, true, 200},
		{"one over, chunked", limit + 1, true, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := body(tc.size)
			var r io.Reader = strings.NewReader(b)
			if tc.chunked {
				r = io.MultiReader(r) // no length known: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, ts.URL+"/tools/echo", r)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer tok")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got := len(b); got != tc.size {
				t.Fatalf("built a %d-byte body, want %d", got, tc.size)
			}
			if (req.ContentLength == -1) != tc.chunked && !(tc.chunked && req.ContentLength == 0) {
				t.Fatalf("ContentLength %d, chunked %v", req.ContentLength, tc.chunked)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, readAll(t, resp.Body))
			}
		})
	}
}

func TestRequestIDFromCaller(t *testing.T) {
	ts, _ := testServer(t, nil)
	for _, tc := range []struct{ sent, want string }{
		{"brain-req_abc:1", "brain-req_abc:1"},
		{"", ""},
		{"bad id with spaces", ""},
		{strings.Repeat("a", 129), ""},
	} {
		resp := post(t, ts.URL+"/tools/nope", goodBody, map[string]string{"X-Request-Id": tc.sent})
		got := resp.Header.Get("X-Request-Id")
		body := readAll(t, resp.Body)
		switch {
		case tc.want != "" && got != tc.want:
			t.Errorf("sent %q: X-Request-Id %q, want it kept", tc.sent, got)
		case tc.want == "" && (got == tc.sent || !strings.HasPrefix(got, "req_")):
			t.Errorf("sent %q: X-Request-Id %q, want a new req_ ID", tc.sent, got)
		case !strings.Contains(body, `"request_id":"`+got+`"`):
			t.Errorf("sent %q: body %s does not repeat %q", tc.sent, body, got)
		}
	}
}

// TestTooLargeAnsweredByTool: a tool with Tool.TooLarge answers a body
// over MAX_REQUEST_BYTES with its own 200 result, whether the body
// declares its length or comes chunked and however far over the limit it
// is (the rest is read, so the answer is not lost to a reset); the head it
// gets is the start of the body. A tool without it still gets the 413.
func TestTooLargeAnsweredByTool(t *testing.T) {
	const limit = 1 << 10
	var heads []string
	srv := &Server{Name: "t", Config: Config{Token: "tok", MaxRequestBytes: limit, Heartbeat: time.Second, StreamAfter: time.Second},
		Tools: []Tool{
			{Binding: tool.Binding{Name: "big"}, Handler: func(context.Context, *Call) *tool.Result { return tool.TextResult("ran") },
				TooLarge: func(head []byte, l int64) *tool.Result {
					heads = append(heads, string(head[:20]))
					return tool.Errorf("text: more than %d bytes", l)
				}},
			NewTool(echoBinding, func(ctx context.Context, c *Call, a echoArgs) (*tool.Result, error) {
				return tool.TextResult("%s", a.Text), nil
			}),
		}}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	head := `{"tenant_id":"local","session_id":"s1","call_id":"c1","arguments":{"text":"`
	for _, tc := range []struct {
		name    string
		tool    string
		size    int
		chunked bool
		status  int
	}{
		{"at the limit", "big", limit, false, 200},
		{"one over, with length", "big", limit + 1, false, 200},
		{"8 MiB over, with length", "big", 8 << 20, false, 200},
		{"8 MiB over, chunked", "big", 8 << 20, true, 200},
		{"a tool without TooLarge", "echo", limit + 1, false, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := head + strings.Repeat("x", tc.size-len(head)-3) + `"}}`
			var r io.Reader = strings.NewReader(b)
			if tc.chunked {
				r = io.MultiReader(r)
			}
			req, _ := http.NewRequest(http.MethodPost, ts.URL+"/tools/"+tc.tool, r)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer tok")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			switch {
			case tc.status == 413:
			case tc.size <= limit && !strings.Contains(body, `"ran"`):
				t.Fatalf("a body within the limit did not run the tool: %s", body)
			case tc.size > limit && !strings.Contains(body, `"is_error":true`) || tc.size > limit && !strings.Contains(body, "more than 1024 bytes"):
				t.Fatalf("body %s", body)
			}
		})
	}
	if len(heads) != 3 || heads[0] != head[:20] {
		t.Fatalf("TooLarge saw heads %q", heads)
	}
}
