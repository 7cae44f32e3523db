package mcpcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
)

const secret = "mcp-secret"

var testEnv = map[string]string{"MCP_KEY": secret, "WRONG_KEY": "nope"}

// mcpServer is a real go-sdk MCP server over Streamable HTTP, stateful
// (2025-11-25 sessions) or stateless (2026-07-28), behind a bearer check,
// with tools for every outcome brain classifies.
type mcpServer struct {
	srv *mcp.Server
	ts  *httptest.Server

	inits      atomic.Int32 // initialize and server/discover requests
	ran        atomic.Int32 // tool handler runs
	lost404    atomic.Bool  // answer 404 to every tools/call on a session
	started    chan string  // a blocking tool began
	cancelled  chan string  // a blocking tool saw its context end
	release    chan struct{}
	stop       chan struct{} // closed at cleanup: blocked tools return
	traceparms chan string   // traceparent of each tools/call
}

type serverOpts struct {
	stateless bool
	pageSize  int
	tools     []string // extra no-op tools
	mw        mcp.Middleware
}

func newMCPServer(t *testing.T, o serverOpts) *mcpServer {
	t.Helper()
	s := &mcpServer{
		started:    make(chan string, 8),
		cancelled:  make(chan string, 8),
		release:    make(chan struct{}),
		stop:       make(chan struct{}),
		traceparms: make(chan string, 64),
	}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "test-server", Version: "1"}, &mcp.ServerOptions{PageSize: o.pageSize})
	obj := json.RawMessage(`{"type":"object"}`)
	add := func(name string, h func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error)) {
		s.srv.AddTool(&mcp.Tool{Name: name, Description: "tool " + name, InputSchema: obj}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.ran.Add(1)
			return h(ctx, req)
		})
	}
	text := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	add("echo", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ Text string }
		if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: text(a.Text)}, nil
	})
	add("weather", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{StructuredContent: map[string]any{"temp": 21.5}}, nil
	})
	add("bad_struct", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text("warm"), StructuredContent: map[string]any{"temp": "warm"}}, nil
	})
	add("fail", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text("city not found"), IsError: true, StructuredContent: map[string]any{"code": 404}}, nil
	})
	add("unknown", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: text("upstream dropped"), IsError: true, Meta: mcp.Meta{service.MCPMetaUnknownOutcome: true}}, nil
	})
	add("mixed", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.ImageContent{Data: []byte("\x89PNG"), MIMEType: "image/png"},
			&mcp.AudioContent{Data: []byte("RIFF"), MIMEType: "audio/wav"},
			&mcp.ResourceLink{URI: "file:///r.txt", Name: "r.txt"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///e.txt", Text: "embedded"}},
		}}, nil
	})
	add("internal", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("database down")
	})
	add("big", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a struct{ N int }
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return &mcp.CallToolResult{Content: text(strings.Repeat("x", a.N))}, nil
	})
	add("progress", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tok := req.Params.GetProgressToken()
		if tok == nil {
			return &mcp.CallToolResult{Content: text("no token"), IsError: true}, nil
		}
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "half"})
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 2})
		select {
		case <-s.release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: text("done")}, nil
	})
	add("block", func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.started <- "block"
		select {
		case <-ctx.Done():
			s.cancelled <- "block"
			return nil, ctx.Err()
		case <-s.stop:
			return nil, errors.New("test over")
		}
	})
	add("drop", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// Start the call's event stream, then cut every connection.
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1})
		time.Sleep(50 * time.Millisecond)
		s.ts.CloseClientConnections()
		// The result has nowhere to go: its stream is gone.
		return &mcp.CallToolResult{Content: text("too late")}, nil
	})
	for _, name := range o.tools {
		add(name, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text(name)}, nil
		})
	}
	if o.mw != nil {
		s.srv.AddReceivingMiddleware(o.mw)
	}
	// A 2026-07-28 server cancels a call when its stream closes, as the
	// revision says; the go-sdk does so with PropagateRequestCancellation.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv }, &mcp.StreamableHTTPOptions{
		Stateless: o.stateless, PropagateRequestCancellation: o.stateless,
	})
	s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"method":"initialize"`)) || bytes.Contains(body, []byte(`"method":"server/discover"`)) {
			s.inits.Add(1)
		}
		if bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			select {
			case s.traceparms <- r.Header.Get("traceparent"):
			default:
			}
			if bytes.Contains(body, []byte(`"name":"hangup"`)) {
				// The server read the call and hangs up without a word.
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			for _, b := range busyAnswers {
				if bytes.Contains(body, []byte(`"name":"`+b.tool+`"`)) {
					if b.retryAfter != "" {
						w.Header().Set("Retry-After", b.retryAfter)
					}
					http.Error(w, "busy", b.status)
					return
				}
			}
			if s.lost404.Load() && r.Header.Get("Mcp-Session-Id") != "" {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.ts.Close)
	t.Cleanup(func() { close(s.stop) }) // runs before ts.Close
	return s
}

// kinds are the two server flavours and the revision brain must agree on
// with each.
var kinds = []struct {
	name      string
	stateless bool
	revision  string
}{
	{"stateful", false, "2025-11-25"},
	{"stateless", true, "2026-07-28"},
}

var weatherSchema = map[string]any{
	"type":       "object",
	"properties": map[string]any{"temp": map[string]any{"type": "number"}},
	"required":   []string{"temp"},
}

// bind builds a checked binding of mcpTool on url, with token_env MCP_KEY;
// edit changes the binding's JSON first.
func bind(t testing.TB, name, url, mcpTool string, edit func(map[string]any)) *config.Tool {
	t.Helper()
	b := map[string]any{
		"name":         name,
		"description":  "MCP tool " + mcpTool,
		"input_schema": map[string]any{"type": "object"},
		"url":          url,
		"mcp_tool":     mcpTool,
		"token_env":    "MCP_KEY",
		"tenants":      []string{"local"},
	}
	if edit != nil {
		edit(b)
	}
	doc, _ := json.Marshal(map[string]any{"tools": []any{b}, "api_keys": apiKeysFor(b["tenants"])})
	cfg, err := config.Parse(doc, func(k string) string {
		if v, ok := strings.CutPrefix(k, "TEST_API_KEY_"); ok {
			return "api-key-" + v
		}
		return testEnv[k]
	})
	if err != nil {
		t.Fatalf("binding: %v", err)
	}
	return cfg.Tools[0]
}

func request(args string) tool.Request {
	return tool.Request{TenantID: "local", SessionID: "ses_1", CallID: "call_1", Arguments: json.RawMessage(args)}
}

func newCaller(t *testing.T) *Caller {
	t.Helper()
	c := New(Options{})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// agreed returns the revision the pooled session with url settled on.
func agreed(t *testing.T, c *Caller, url string) string {
	t.Helper()
	conn, err := c.pool.get(context.Background(), Endpoint{URL: url, Token: secret})
	if err != nil {
		t.Fatal(err)
	}
	return conn.session.InitializeResult().ProtocolVersion
}

func TestCall(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			s := newMCPServer(t, serverOpts{stateless: k.stateless})
			c := newCaller(t)
			withSchema := func(b map[string]any) { b["output_schema"] = weatherSchema }

			tests := []struct {
				name     string
				tool     *config.Tool
				args     string
				status   string
				code     string
				unknown  bool
				sent     bool
				ran      bool
				content  []tool.Content
				structed string
			}{
				{name: "text", tool: bind(t, "echo", s.ts.URL, "echo", nil), args: `{"text":"hi"}`,
					status: invoke.StatusSucceeded, sent: true, ran: true, content: []tool.Content{tool.Text("hi")}},
				{name: "structured only gets a text block", tool: bind(t, "weather", s.ts.URL, "weather", withSchema), args: `{}`,
					status: invoke.StatusSucceeded, sent: true, ran: true, content: []tool.Content{tool.Text(`{"temp":21.5}`)}, structed: `{"temp":21.5}`},
				{name: "output schema mismatch", tool: bind(t, "bad", s.ts.URL, "bad_struct", withSchema), args: `{}`,
					status: invoke.StatusFailed, code: invoke.CodeOutputSchemaMismatch, unknown: true, sent: true, ran: true},
				{name: "error result skips output schema", tool: bind(t, "fail", s.ts.URL, "fail", withSchema), args: `{}`,
					status: invoke.StatusFailed, code: invoke.CodeToolError, sent: true, ran: true, content: []tool.Content{tool.Text("city not found")}, structed: `{"code":404}`},
				{name: "error with unknown outcome", tool: bind(t, "unknown", s.ts.URL, "unknown", nil), args: `{}`,
					status: invoke.StatusFailed, code: invoke.CodeToolError, unknown: true, sent: true, ran: true, content: []tool.Content{tool.Text("upstream dropped")}},
				{name: "other content types", tool: bind(t, "mixed", s.ts.URL, "mixed", nil), args: `{}`,
					status: invoke.StatusSucceeded, sent: true, ran: true, content: []tool.Content{
						tool.Image([]byte("\x89PNG"), "image/png"),
						tool.Text("[audio content of type audio/wav, 4 bytes, not shown]"),
						tool.Text("[resource link: file:///r.txt (r.txt)]"),
						tool.Text("embedded"),
					}},
				{name: "unknown MCP tool", tool: bind(t, "nope", s.ts.URL, "nope", nil), args: `{}`,
					status: invoke.StatusFailed, code: CodeMCPError, sent: true},
				{name: "protocol error from the tool", tool: bind(t, "internal", s.ts.URL, "internal", nil), args: `{}`,
					status: invoke.StatusFailed, code: CodeMCPError, unknown: true, sent: true, ran: true},
				{name: "tenant not allowed", tool: bind(t, "echo2", s.ts.URL, "echo", func(b map[string]any) { b["tenants"] = []string{"other"} }), args: `{"text":"hi"}`,
					status: invoke.StatusFailed, code: invoke.CodeTenantNotAllowed},
				{name: "arguments fail input_schema", tool: bind(t, "echo3", s.ts.URL, "echo", func(b map[string]any) {
					b["input_schema"] = map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string", "format": "email"}}}
				}), args: `{"text":"not-an-email"}`, status: invoke.StatusFailed, code: invoke.CodeInvalidArguments},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					before := s.ran.Load()
					o := c.Call(context.Background(), tc.tool, request(tc.args), nil)
					if o.Status != tc.status || o.ErrorCode != tc.code || o.Result.UnknownOutcome != tc.unknown || o.Sent != tc.sent {
						t.Errorf("outcome = %s/%s unknown=%v sent=%v (%s), want %s/%s unknown=%v sent=%v",
							o.Status, o.ErrorCode, o.Result.UnknownOutcome, o.Sent, o.ErrorMessage, tc.status, tc.code, tc.unknown, tc.sent)
					}
					if err := o.Result.Validate(); err != nil {
						t.Errorf("result is not valid per pkg/tool: %v", err)
					}
					if o.Result.IsError != (tc.status != invoke.StatusSucceeded) {
						t.Errorf("is_error = %v for status %s", o.Result.IsError, o.Status)
					}
					if ran := s.ran.Load() > before; ran != tc.ran {
						t.Errorf("tool ran = %v, want %v", ran, tc.ran)
					}
					if tc.content != nil {
						if diff := cmp.Diff(tc.content, o.Result.Content); diff != "" {
							t.Errorf("content (-want +got):\n%s", diff)
						}
					}
					if got := string(o.Result.StructuredContent); got != tc.structed {
						t.Errorf("structured_content = %s, want %s", got, tc.structed)
					}
				})
			}
			if got := agreed(t, c, s.ts.URL); got != k.revision {
				t.Errorf("agreed revision %s, want %s", got, k.revision)
			}
			if n := s.inits.Load(); n < 1 || n > 2 {
				// One session for every call (a stateful server sees
				// server/discover then initialize).
				t.Errorf("%d handshake requests for %d calls, want one session", n, len(tests))
			}
		})
	}
}

func TestOutputLimit(t *testing.T) {
	s := newMCPServer(t, serverOpts{stateless: true})
	c := newCaller(t)
	// The result {"content":[{"type":"text","text":"xxx…"}]} is 38 bytes
	// plus the text.
	const n = 1000
	limit := int64(len(`{"content":[{"type":"text","text":""}]}`) + n)
	tl := bind(t, "big", s.ts.URL, "big", func(b map[string]any) { b["max_output_bytes"] = limit })
	if o := c.Call(context.Background(), tl, request(fmt.Sprintf(`{"n":%d}`, n)), nil); o.Status != invoke.StatusSucceeded {
		t.Errorf("result of exactly max_output_bytes: %s %s", o.Status, o.ErrorMessage)
	}
	o := c.Call(context.Background(), tl, request(fmt.Sprintf(`{"n":%d}`, n+1)), nil)
	if o.ErrorCode != invoke.CodeOutputTooLarge || !o.Result.UnknownOutcome {
		t.Errorf("result one byte over: %s %s unknown=%v", o.Status, o.ErrorCode, o.Result.UnknownOutcome)
	}
	// Far over: the response body itself is cut off while reading.
	o = c.Call(context.Background(), tl, request(`{"n":100000}`), nil)
	if o.ErrorCode != invoke.CodeOutputTooLarge || !o.Result.UnknownOutcome {
		t.Errorf("body far over the cap: %s %s unknown=%v (%s)", o.Status, o.ErrorCode, o.Result.UnknownOutcome, o.ErrorMessage)
	}
	// The session survives for the next call.
	if o := c.Call(context.Background(), tl, request(`{"n":1}`), nil); o.Status != invoke.StatusSucceeded {
		t.Errorf("call after an oversized one: %s %s", o.Status, o.ErrorMessage)
	}
}

func TestProgress(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			s := newMCPServer(t, serverOpts{stateless: k.stateless})
			c := newCaller(t)
			var (
				mu  sync.Mutex
				got []string
			)
			onProgress := func(data json.RawMessage) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, string(data))
				if len(got) == 2 {
					close(s.release)
				}
			}
			o := c.Call(context.Background(), bind(t, "progress", s.ts.URL, "progress", nil), request(`{}`), onProgress)
			if o.Status != invoke.StatusSucceeded {
				t.Fatalf("outcome %s %s", o.Status, o.ErrorMessage)
			}
			mu.Lock()
			defer mu.Unlock()
			want := []string{`{"progress":1,"total":2,"message":"half"}`, `{"progress":2}`}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("progress payloads (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			s := newMCPServer(t, serverOpts{stateless: k.stateless})
			c := newCaller(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan invoke.Outcome, 1)
			go func() { done <- c.Call(ctx, bind(t, "block", s.ts.URL, "block", nil), request(`{}`), nil) }()
			select {
			case <-s.started:
			case <-time.After(10 * time.Second):
				t.Fatal("the tool did not start")
			}
			cancel() // the session was interrupted
			o := <-done
			if o.Status != invoke.StatusCancelled || o.ErrorCode != invoke.CodeCancelled || !o.Result.UnknownOutcome || !o.Sent {
				t.Errorf("outcome = %s/%s unknown=%v sent=%v, want cancelled with unknown outcome", o.Status, o.ErrorCode, o.Result.UnknownOutcome, o.Sent)
			}
			select {
			case <-s.cancelled:
			case <-time.After(10 * time.Second):
				t.Fatal("the MCP request was not cancelled on the server")
			}
			// The pooled session still works.
			if o := c.Call(context.Background(), bind(t, "echo", s.ts.URL, "echo", nil), request(`{"text":"after"}`), nil); o.Status != invoke.StatusSucceeded {
				t.Errorf("call after a cancel: %s %s", o.Status, o.ErrorMessage)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	s := newMCPServer(t, serverOpts{stateless: true})
	c := newCaller(t)
	start := time.Now()
	o := c.Call(context.Background(), bind(t, "block", s.ts.URL, "block", func(b map[string]any) { b["timeout_seconds"] = 1 }), request(`{}`), nil)
	if o.Status != invoke.StatusTimedOut || o.ErrorCode != invoke.CodeTimeout || !o.Result.UnknownOutcome {
		t.Errorf("outcome = %s/%s unknown=%v, want timed_out with unknown outcome", o.Status, o.ErrorCode, o.Result.UnknownOutcome)
	}
	if d := time.Since(start); d < time.Second || d > 10*time.Second {
		t.Errorf("timed out after %s, want about timeout_seconds (1 s)", d)
	}
	select {
	case <-s.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the MCP request was not cancelled on the server")
	}
}

func TestSessionExpiry(t *testing.T) {
	s := newMCPServer(t, serverOpts{})
	c := newCaller(t)
	echo := bind(t, "echo", s.ts.URL, "echo", nil)
	if o := c.Call(context.Background(), echo, request(`{"text":"one"}`), nil); o.Status != invoke.StatusSucceeded {
		t.Fatalf("first call: %s %s", o.Status, o.ErrorMessage)
	}
	inits := s.inits.Load()
	// The server forgets the session: its next request gets 404.
	for ss := range s.srv.Sessions() {
		_ = ss.Close()
	}
	ran := s.ran.Load()
	o := c.Call(context.Background(), echo, request(`{"text":"two"}`), nil)
	if o.Status != invoke.StatusSucceeded || o.Result.Content[0].Text != "two" {
		t.Fatalf("call on an expired session: %s %s", o.Status, o.ErrorMessage)
	}
	if n := s.ran.Load() - ran; n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	if n := s.inits.Load() - inits; n < 1 || n > 2 {
		t.Errorf("%d new handshake requests, want one new session", n)
	}

	// A server that answers 404 again after the new handshake: brain
	// re-initializes once, then gives up; the tool never ran.
	s.lost404.Store(true)
	inits, ran = s.inits.Load(), s.ran.Load()
	o = c.Call(context.Background(), echo, request(`{"text":"three"}`), nil)
	if o.Status != invoke.StatusFailed || o.ErrorCode != CodeSessionExpired || o.Result.UnknownOutcome {
		t.Errorf("outcome = %s/%s unknown=%v (%s), want %s with a known outcome", o.Status, o.ErrorCode, o.Result.UnknownOutcome, o.ErrorMessage, CodeSessionExpired)
	}
	if n := s.inits.Load() - inits; n < 1 || n > 2 {
		t.Errorf("%d handshake requests after the 404s, want exactly one re-initialization", n)
	}
	if s.ran.Load() != ran {
		t.Error("the tool ran although every call got 404")
	}
}

func TestDroppedStream(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			s := newMCPServer(t, serverOpts{stateless: k.stateless})
			c := newCaller(t)
			var progress atomic.Int32
			o := c.Call(context.Background(), bind(t, "drop", s.ts.URL, "drop", nil), request(`{}`), func(json.RawMessage) { progress.Add(1) })
			if o.Status != invoke.StatusFailed || o.ErrorCode != invoke.CodeConnectionFailed || !o.Result.UnknownOutcome || !o.Sent {
				t.Errorf("outcome = %s/%s unknown=%v sent=%v (%s), want failed with unknown outcome", o.Status, o.ErrorCode, o.Result.UnknownOutcome, o.Sent, o.ErrorMessage)
			}
			t.Logf("dropped stream: %s", o.ErrorMessage)
			// The server got the call before the stream dropped.
			if s.ran.Load() != 1 {
				t.Errorf("tool ran %d times", s.ran.Load())
			}
			if o := c.Call(context.Background(), bind(t, "echo", s.ts.URL, "echo", nil), request(`{"text":"again"}`), nil); o.Status != invoke.StatusSucceeded {
				t.Errorf("call after a dropped stream: %s %s", o.Status, o.ErrorMessage)
			}
		})
	}
}

// TestHangUp: a server that reads a call and closes the connection gave
// no answer. The go-sdk wraps that net/http failure in a JSON-RPC error
// ("rejected by transport"); brain must not report it as the server's.
func TestHangUp(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			s := newMCPServer(t, serverOpts{stateless: k.stateless})
			c := newCaller(t)
			o := c.Call(context.Background(), bind(t, "hangup", s.ts.URL, "hangup", nil), request(`{}`), nil)
			if o.Status != invoke.StatusFailed || o.ErrorCode != invoke.CodeConnectionFailed || !o.Result.UnknownOutcome || !o.Sent {
				t.Errorf("outcome = %s/%s unknown=%v sent=%v (%s), want failed/%s with unknown outcome", o.Status, o.ErrorCode, o.Result.UnknownOutcome, o.Sent, o.ErrorMessage, invoke.CodeConnectionFailed)
			}
			if strings.Contains(o.ErrorMessage, "answered") {
				t.Errorf("message %q says the server answered", o.ErrorMessage)
			}
			if o := c.Call(context.Background(), bind(t, "echo", s.ts.URL, "echo", nil), request(`{"text":"again"}`), nil); o.Status != invoke.StatusSucceeded {
				t.Errorf("call after a hang-up: %s %s", o.Status, o.ErrorMessage)
			}
		})
	}
}

func TestConnectFailures(t *testing.T) {
	s := newMCPServer(t, serverOpts{stateless: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	c := newCaller(t)
	for _, tc := range []struct {
		name string
		tool *config.Tool
		want string
	}{
		{"nothing listening", bind(t, "x", closed, "echo", nil), "connection refused"},
		{"wrong token", bind(t, "x", s.ts.URL, "echo", func(b map[string]any) { b["token_env"] = "WRONG_KEY" }), "HTTP 401 Unauthorized"},
		{"no token", bind(t, "x", s.ts.URL, "echo", func(b map[string]any) { delete(b, "token_env") }), "HTTP 401 Unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := c.Call(context.Background(), tc.tool, request(`{"text":"x"}`), nil)
			// The contract's outcome table: a failed connection is an
			// unknown outcome, whatever brain knows of what it wrote.
			if o.Status != invoke.StatusFailed || o.ErrorCode != invoke.CodeConnectionFailed || !o.Result.UnknownOutcome || !o.Result.IsError || o.Sent {
				t.Errorf("outcome = %s/%s unknown=%v sent=%v, want a connection failure with an unknown outcome, not sent", o.Status, o.ErrorCode, o.Result.UnknownOutcome, o.Sent)
			}
			if !strings.Contains(o.ErrorMessage, tc.want) || !strings.Contains(o.ErrorMessage, "connect to MCP server") {
				t.Errorf("message %q, want it to name the server and %q", o.ErrorMessage, tc.want)
			}
		})
	}
	if s.ran.Load() != 0 {
		t.Error("a tool ran")
	}
}

// busyAnswers are the test server's non-2xx answers to a tools/call of
// these tools.
var busyAnswers = []struct {
	tool, retryAfter string
	status           int
}{
	{"busy503", "7", http.StatusServiceUnavailable},
	{"busy429date", "Sun, 06 Nov 2094 08:49:37 GMT", http.StatusTooManyRequests},
	{"busy429bare", "", http.StatusTooManyRequests},
	{"fail500", "7", http.StatusInternalServerError},
	{"busy503junk", "soon", http.StatusServiceUnavailable},
}

// A 429 or 503 with a Retry-After is a retryable outcome that says how
// long to wait, as for an HTTP tool; any other status, or one without a
// valid Retry-After, is not.
func TestRetryAfter(t *testing.T) {
	s := newMCPServer(t, serverOpts{stateless: true})
	c := newCaller(t)
	for _, tc := range []struct {
		tool      string
		status    int
		retryable bool
		wait      time.Duration // at least
		said      string        // in the message
	}{
		{"busy503", 503, true, 7 * time.Second, "with Retry-After 7s"},
		{"busy429date", 429, true, 24 * time.Hour, "with Retry-After Sun, 06 Nov 2094 08:49:37 GMT"},
		{"busy429bare", 429, false, 0, "answered HTTP 429 Too Many Requests"},
		{"fail500", 500, false, 0, "answered HTTP 500 Internal Server Error"},
		{"busy503junk", 503, false, 0, "answered HTTP 503 Service Unavailable"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			o := c.Call(context.Background(), bind(t, "x", s.ts.URL, tc.tool, nil), request(`{}`), nil)
			if o.ErrorCode != invoke.CodeHTTPStatus || o.HTTPStatus != tc.status || !o.Result.UnknownOutcome {
				t.Fatalf("outcome %s %d unknown=%v: %s", o.ErrorCode, o.HTTPStatus, o.Result.UnknownOutcome, o.ErrorMessage)
			}
			if o.Retryable != tc.retryable || o.RetryAfter < tc.wait || (tc.wait == 0) != (o.RetryAfter == 0) {
				t.Errorf("retryable %v after %s, want %v after at least %s", o.Retryable, o.RetryAfter, tc.retryable, tc.wait)
			}
			if !strings.Contains(o.ErrorMessage, tc.said) || (!tc.retryable && strings.Contains(o.ErrorMessage, "Retry-After")) {
				t.Errorf("message %q, want it to say %q", o.ErrorMessage, tc.said)
			}
		})
	}
}

func TestNoRedirects(t *testing.T) {
	s := newMCPServer(t, serverOpts{stateless: true})
	redirect := httptest.NewServer(http.RedirectHandler(s.ts.URL, http.StatusTemporaryRedirect))
	defer redirect.Close()
	o := newCaller(t).Call(context.Background(), bind(t, "x", redirect.URL, "echo", nil), request(`{"text":"x"}`), nil)
	if o.ErrorCode != invoke.CodeConnectionFailed || s.inits.Load() != 0 {
		t.Errorf("outcome %s %s, server handshakes %d: the redirect was followed", o.ErrorCode, o.ErrorMessage, s.inits.Load())
	}
}

func TestTraceparent(t *testing.T) {
	s := newMCPServer(t, serverOpts{stateless: true})
	c := newCaller(t)
	sc := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID: oteltrace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, SpanID: oteltrace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: oteltrace.FlagsSampled,
	})
	ctx := oteltrace.ContextWithSpanContext(context.Background(), sc)
	if o := c.Call(ctx, bind(t, "echo", s.ts.URL, "echo", nil), request(`{"text":"x"}`), nil); o.Status != invoke.StatusSucceeded {
		t.Fatal(o.ErrorMessage)
	}
	if got, want := <-s.traceparms, "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01"; got != want {
		t.Errorf("traceparent = %q, want %q", got, want)
	}
}

func TestPoolPerCredential(t *testing.T) {
	s := newMCPServer(t, serverOpts{stateless: true})
	c := newCaller(t)
	a := bind(t, "a", s.ts.URL, "echo", nil)
	for range 3 {
		if o := c.Call(context.Background(), a, request(`{"text":"x"}`), nil); o.Status != invoke.StatusSucceeded {
			t.Fatal(o.ErrorMessage)
		}
	}
	if n := s.inits.Load(); n != 1 {
		t.Errorf("%d handshakes for three calls on one server, want 1", n)
	}
	// Concurrent first calls share one handshake too.
	s2 := newMCPServer(t, serverOpts{stateless: true})
	b := bind(t, "b", s2.ts.URL, "echo", nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if o := c.Call(context.Background(), b, request(`{"text":"x"}`), nil); o.Status != invoke.StatusSucceeded {
				t.Error(o.ErrorMessage)
			}
		})
	}
	wg.Wait()
	if n := s2.inits.Load(); n != 1 {
		t.Errorf("%d handshakes for eight concurrent calls, want 1", n)
	}
}

type fakeInvoker struct{ calls atomic.Int32 }

func (f *fakeInvoker) Call(context.Context, *config.Tool, tool.Request, func(json.RawMessage)) invoke.Outcome {
	f.calls.Add(1)
	return invoke.Outcome{Result: *tool.TextResult("http"), Status: invoke.StatusSucceeded, Sent: true}
}

func TestRoute(t *testing.T) {
	s := newMCPServer(t, serverOpts{stateless: true})
	httpInv := &fakeInvoker{}
	r := invoke.Route(httpInv, newCaller(t))
	if o := r.Call(context.Background(), bind(t, "m", s.ts.URL, "echo", nil), request(`{"text":"mcp"}`), nil); o.Result.Content[0].Text != "mcp" {
		t.Errorf("MCP binding: %+v", o)
	}
	h := bind(t, "h", "http://127.0.0.1:1/tools/h", "x", func(b map[string]any) { delete(b, "mcp_tool") })
	if o := r.Call(context.Background(), h, request(`{}`), nil); o.Result.Content[0].Text != "http" || httpInv.calls.Load() != 1 {
		t.Errorf("HTTP binding: %+v", o)
	}
}

// TestDeadPooledSession: a pooled session that died before a call reached
// the transport (its death not yet noticed by the pool) is replaced, and
// the call goes out once on the new session.
func TestDeadPooledSession(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			s := newMCPServer(t, serverOpts{stateless: k.stateless})
			c := newCaller(t)
			echo := bind(t, "echo", s.ts.URL, "echo", nil)
			live, err := c.pool.get(context.Background(), Endpoint{URL: s.ts.URL, Token: secret})
			if err != nil {
				t.Fatal(err)
			}
			_ = live.session.Close()
			<-live.closed
			ready := make(chan struct{})
			close(ready)
			dead := &conn{key: live.key, url: live.url, ready: ready, session: live.session, closed: make(chan struct{})}
			c.pool.mu.Lock()
			c.pool.conns[live.key] = dead
			c.pool.mu.Unlock()

			inits, ran := s.inits.Load(), s.ran.Load()
			o := c.Call(context.Background(), echo, request(`{"text":"fresh"}`), nil)
			if o.Status != invoke.StatusSucceeded || o.Result.Content[0].Text != "fresh" {
				t.Fatalf("call on a dead pooled session: %s %s", o.Status, o.ErrorMessage)
			}
			if s.ran.Load()-ran != 1 || s.inits.Load() == inits {
				t.Errorf("tool ran %d times, %d new handshakes; want once on a new session", s.ran.Load()-ran, s.inits.Load()-inits)
			}
		})
	}
}

// apiKeysFor returns an api_keys entry (env TEST_API_KEY_<i>) for each of a
// binding's tenants, so the host config check passes.
func apiKeysFor(tenants any) []map[string]string {
	names, _ := tenants.([]string)
	var keys []map[string]string
	for i, tenant := range names {
		keys = append(keys, map[string]string{"env": fmt.Sprintf("TEST_API_KEY_%d", i), "tenant": tenant})
	}
	return keys
}
