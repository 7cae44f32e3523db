package service_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/julienschmidt/httprouter"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/pkg/version"
)

const testToken = "test-token"

var (
	objSchema  = json.RawMessage(`{"type":"object"}`)
	textSchema = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":8}},"required":["text"],"additionalProperties":false}`)
	countSchma = json.RawMessage(`{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"]}`)
)

// fixture is a set of tools exercising every path of the adapter, and what
// they saw.
type fixture struct {
	mu        sync.Mutex
	requests  []tool.Request
	cancelled chan struct{} // closed when "slow" sees its context end
	release   chan struct{} // "slow" returns when this is closed
}

func newFixture() *fixture {
	return &fixture{cancelled: make(chan struct{}), release: make(chan struct{})}
}

func (f *fixture) record(c *service.Call) {
	f.mu.Lock()
	f.requests = append(f.requests, c.Request)
	f.mu.Unlock()
}

func (f *fixture) last() tool.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}

type textArgs struct {
	Text string `json:"text"`
}

func (f *fixture) tools() []service.Tool {
	b := func(name string, in, out json.RawMessage) tool.Binding {
		return tool.Binding{Name: name, Description: "test tool " + name, InputSchema: in, OutputSchema: out}
	}
	return []service.Tool{
		service.NewTool(b("echo", textSchema, nil), func(_ context.Context, c *service.Call, a textArgs) (*tool.Result, error) {
			f.record(c)
			return tool.TextResult("%s", a.Text), nil
		}),
		{Binding: b("structured", objSchema, countSchma), Handler: func(_ context.Context, c *service.Call) *tool.Result {
			f.record(c)
			r, _ := tool.StructuredResult(map[string]int{"count": 3}, "")
			return r
		}},
		{Binding: b("bad_output", objSchema, countSchma), Handler: func(context.Context, *service.Call) *tool.Result {
			r, _ := tool.StructuredResult(map[string]string{"count": "three"}, "three")
			return r
		}},
		{Binding: b("fail", objSchema, countSchma), Handler: func(context.Context, *service.Call) *tool.Result {
			// An error result skips output_schema.
			return &tool.Result{Content: []tool.Content{tool.Text("no such file")}, IsError: true, StructuredContent: json.RawMessage(`{"reason":"x"}`)}
		}},
		{Binding: b("unknown", objSchema, nil), Handler: func(context.Context, *service.Call) *tool.Result {
			return &tool.Result{Content: []tool.Content{tool.Text("upstream dropped")}, IsError: true, UnknownOutcome: true}
		}},
		{Binding: b("panic", objSchema, nil), Handler: func(context.Context, *service.Call) *tool.Result { panic("boom") }},
		{Binding: b("nil-result", objSchema, nil), Handler: func(context.Context, *service.Call) *tool.Result { return nil }},
		{Binding: b("image", objSchema, nil), Handler: func(context.Context, *service.Call) *tool.Result {
			return &tool.Result{Content: []tool.Content{tool.Image([]byte("\x89PNG"), "image/png")}}
		}},
		{Binding: b("progress", objSchema, nil), Handler: func(_ context.Context, c *service.Call) *tool.Result {
			if err := c.Progress(map[string]string{"status": "one"}); err != nil {
				return tool.Errorf("progress: %v", err)
			}
			if err := c.Progress(map[string]int{"done": 2}); err != nil {
				return tool.Errorf("progress: %v", err)
			}
			return tool.TextResult("done")
		}},
		{Binding: b("slow", objSchema, nil), Handler: func(ctx context.Context, c *service.Call) *tool.Result {
			f.record(c)
			_ = c.Progress(map[string]string{"status": "started"})
			select {
			case <-ctx.Done():
				close(f.cancelled)
				return tool.Errorf("cancelled")
			case <-f.release:
				return tool.TextResult("released")
			}
		}},
	}
}

// authTransport adds the bearer token to every request.
type authTransport struct{ token string }

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if a.token != "" {
		r.Header.Set("Authorization", "Bearer "+a.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// startService runs a service with the fixture's tools and /mcp attached.
func startService(t *testing.T, f *fixture, o service.MCPOptions) (*httptest.Server, *service.Server) {
	t.Helper()
	cfg, err := service.ParseEnv[service.Config](map[string]string{"ADDR": "127.0.0.1:0", "BRAIN_TOOLS_KEY": testToken, "TOOL_TENANTS": "acme,other"})
	if err != nil {
		t.Fatal(err)
	}
	srv := &service.Server{Name: "test", Config: cfg, Tools: f.tools(),
		Routes: func(r *httprouter.Router) {
			r.GET("/own", func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
				_, _ = io.WriteString(w, "own route")
			})
		}}
	srv.MCP = o
	if err := srv.CheckMCP(); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts, srv
}

type progressLog struct {
	mu    sync.Mutex
	items []*mcp.ProgressNotificationParams
}

func (p *progressLog) add(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	p.items = append(p.items, r.Params)
	p.mu.Unlock()
}

func (p *progressLog) all() []*mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), p.items...)
}

func connect(t *testing.T, url, version string, pl *progressLog) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}
	if pl != nil {
		opts.ProgressNotificationHandler = pl.add
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: authTransport{testToken}}, DisableStandaloneSSE: true, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated %s, want %s", got, version)
	}
	return cs
}

var revisions = []string{"2025-11-25", "2026-07-28"}

func texts(r *mcp.CallToolResult) []string {
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

func TestCallsBothRevisions(t *testing.T) {
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			f := newFixture()
			ts, _ := startService(t, f, service.MCPOptions{})
			cs := connect(t, ts.URL+service.MCPPath, rev, nil)
			ctx := context.Background()
			// serverInfo names the service and the build that runs it.
			if si := cs.InitializeResult().ServerInfo; si == nil || si.Name != "test" || si.Version != version.Get().Version {
				t.Errorf("serverInfo = %+v, want name test, version %q (pkg/version)", si, version.Get().Version)
			}

			list, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range list.Tools {
				names = append(names, tl.Name)
				if tl.Name == "structured" {
					var want any
					_ = json.Unmarshal(countSchma, &want)
					if diff := cmp.Diff(want, tl.OutputSchema); diff != "" {
						t.Errorf("structured outputSchema (-want +got):\n%s", diff)
					}
				}
			}
			if want := []string{"bad_output", "echo", "fail", "image", "nil-result", "panic", "progress", "slow", "structured", "unknown"}; !cmp.Equal(names, want) {
				t.Errorf("tools/list names = %v, want %v", names, want)
			}

			tests := []struct {
				name      string
				tool      string
				args      any
				isError   bool
				unknown   bool
				text      string // a substring of the first text block
				structure string // structuredContent as JSON, "" for none
			}{
				{name: "text", tool: "echo", args: map[string]string{"text": "hi"}, text: "hi"},
				{name: "text at maxLength", tool: "echo", args: map[string]string{"text": "12345678"}, text: "12345678"},
				{name: "over maxLength", tool: "echo", args: map[string]string{"text": "123456789"}, isError: true, text: `at "/text": maxLength`},
				{name: "missing field", tool: "echo", args: map[string]string{}, isError: true, text: "missing property 'text'"},
				{name: "unknown field", tool: "echo", args: map[string]string{"text": "a", "x": "y"}, isError: true, text: "additional properties 'x'"},
				{name: "no arguments", tool: "structured", args: nil, text: `{"count":3}`, structure: `{"count":3}`},
				{name: "output schema mismatch", tool: "bad_output", args: map[string]any{}, isError: true, unknown: true, text: "does not match its output_schema"},
				{name: "error result skips output schema", tool: "fail", args: map[string]any{}, isError: true, text: "no such file", structure: `{"reason":"x"}`},
				{name: "unknown outcome", tool: "unknown", args: map[string]any{}, isError: true, unknown: true, text: "upstream dropped"},
				{name: "panic", tool: "panic", args: map[string]any{}, isError: true, unknown: true, text: "internal error in tool panic"},
				{name: "nil result", tool: "nil-result", args: map[string]any{}, isError: true, unknown: true, text: "returned no result"},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
					if err != nil {
						t.Fatal(err)
					}
					if res.IsError != tc.isError {
						t.Errorf("isError = %v, want %v (%v)", res.IsError, tc.isError, texts(res))
					}
					if got := res.Meta[service.MCPMetaUnknownOutcome] == true; got != tc.unknown {
						t.Errorf("unknown outcome meta = %v, want %v", got, tc.unknown)
					}
					if tx := texts(res); len(tx) == 0 || !strings.Contains(tx[0], tc.text) {
						t.Errorf("text = %q, want it to contain %q", tx, tc.text)
					}
					var gotS string
					if res.StructuredContent != nil {
						b, _ := json.Marshal(res.StructuredContent)
						gotS = string(b)
					}
					if gotS != tc.structure {
						t.Errorf("structuredContent = %s, want %s", gotS, tc.structure)
					}
				})
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "image", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			img, ok := res.Content[0].(*mcp.ImageContent)
			if !ok || string(img.Data) != "\x89PNG" || img.MIMEType != "image/png" {
				t.Errorf("image content = %#v", res.Content[0])
			}

			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}})
			if err == nil || !strings.Contains(err.Error(), `unknown tool "nope"`) {
				t.Errorf("unknown tool: err = %v", err)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			f := newFixture()
			ts, _ := startService(t, f, service.MCPOptions{})
			cs := connect(t, ts.URL+service.MCPPath, rev, nil)
			var reqs []tool.Request
			for range 2 {
				if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]string{"text": "x"}}); err != nil {
					t.Fatal(err)
				}
				reqs = append(reqs, f.last())
			}
			for _, r := range reqs {
				if r.TenantID != "acme" {
					t.Errorf("tenant_id = %q, want the first of TOOL_TENANTS, acme", r.TenantID)
				}
				if !strings.HasPrefix(r.CallID, "mcp-call-") || len(r.CallID) < len("mcp-call-")+26 {
					t.Errorf("call_id = %q", r.CallID)
				}
				if err := r.Validate(); err != nil {
					t.Errorf("request: %v", err)
				}
			}
			if reqs[0].CallID == reqs[1].CallID {
				t.Error("two calls share a call_id")
			}
			if rev == "2025-11-25" {
				want := "mcp-" + cs.ID()
				if cs.ID() == "" || reqs[0].SessionID != want || reqs[1].SessionID != want {
					t.Errorf("session_ids = %q, %q, want both %q", reqs[0].SessionID, reqs[1].SessionID, want)
				}
			} else {
				if !strings.HasPrefix(reqs[0].SessionID, "mcp-req-") || reqs[0].SessionID == reqs[1].SessionID {
					t.Errorf("stateless session_ids = %q, %q, want two fresh mcp-req- IDs", reqs[0].SessionID, reqs[1].SessionID)
				}
			}
		})
	}
	t.Run("explicit tenant", func(t *testing.T) {
		f := newFixture()
		ts, _ := startService(t, f, service.MCPOptions{Tenant: "mcp"})
		cs := connect(t, ts.URL+service.MCPPath, "2026-07-28", nil)
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]string{"text": "x"}}); err != nil {
			t.Fatal(err)
		}
		if got := f.last().TenantID; got != "mcp" {
			t.Errorf("tenant_id = %q, want mcp", got)
		}
	})
}

// TestIdentityFromMeta: a host holding the token states the call's tenant,
// session and call in _meta, and the tool sees exactly those, on both
// revisions; invalid values fall back to the defaults.
func TestIdentityFromMeta(t *testing.T) {
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			f := newFixture()
			ts, _ := startService(t, f, service.MCPOptions{})
			cs := connect(t, ts.URL+service.MCPPath, rev, nil)
			tests := []struct {
				name                  string
				meta                  mcp.Meta
				tenant, session, call string // "" = the default applies
			}{
				{"all given", mcp.Meta{service.MCPMetaTenantID: "t9", service.MCPMetaSessionID: "ses_brain", service.MCPMetaCallID: "call_brain"}, "t9", "ses_brain", "call_brain"},
				{"session only", mcp.Meta{service.MCPMetaSessionID: "ses_other"}, "", "ses_other", ""},
				{"not strings", mcp.Meta{service.MCPMetaSessionID: 5, service.MCPMetaTenantID: true}, "", "", ""},
				{"too long", mcp.Meta{service.MCPMetaSessionID: strings.Repeat("s", service.MCPMaxMetaID+1)}, "", "", ""},
				{"empty", mcp.Meta{service.MCPMetaSessionID: ""}, "", "", ""},
			}
			for _, tt := range tests {
				p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]string{"text": "x"}, Meta: tt.meta}
				if _, err := cs.CallTool(context.Background(), p); err != nil {
					t.Fatal(err)
				}
				got := f.last()
				check := func(field, got, want, defPrefix string) {
					if want != "" && got != want || want == "" && !strings.HasPrefix(got, defPrefix) {
						t.Errorf("%s: %s = %q, want %q (or the default %s…)", tt.name, field, got, want, defPrefix)
					}
				}
				check("tenant_id", got.TenantID, tt.tenant, "acme")
				check("session_id", got.SessionID, tt.session, "mcp-")
				check("call_id", got.CallID, tt.call, "mcp-call-")
			}
		})
	}
}

func TestProgress(t *testing.T) {
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			f := newFixture()
			ts, _ := startService(t, f, service.MCPOptions{})
			pl := &progressLog{}
			cs := connect(t, ts.URL+service.MCPPath, rev, pl)

			// Without a token, progress is dropped and the call still works.
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("call without token: %v %v", err, res)
			}
			if n := len(pl.all()); n != 0 {
				t.Errorf("%d progress notifications without a token, want 0", n)
			}

			p := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{}}
			p.SetProgressToken("tok-1")
			if res, err = cs.CallTool(context.Background(), p); err != nil || res.IsError {
				t.Fatalf("call with token: %v %v", err, res)
			}
			// Notifications are handled asynchronously from the response.
			deadline := time.Now().Add(5 * time.Second)
			for len(pl.all()) < 2 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			got := pl.all()
			if len(got) != 2 {
				t.Fatalf("%d progress notifications, want 2", len(got))
			}
			for i, want := range []struct {
				n   float64
				msg string
			}{{1, `{"status":"one"}`}, {2, `{"done":2}`}} {
				if got[i].ProgressToken != "tok-1" || got[i].Progress != want.n || got[i].Message != want.msg {
					t.Errorf("progress[%d] = %+v, want token tok-1, progress %v, message %s", i, got[i], want.n, want.msg)
				}
			}
		})
	}
}

// rawSession runs the 2025-11-25 handshake by hand and returns a function
// that POSTs one JSON-RPC message on the session and returns the body.
func rawSession(t *testing.T, url string) func(body string) string {
	t.Helper()
	var sid string
	post := func(body string) string {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+testToken)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
			sid = s
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %s: %s", body, resp.Status, b)
		}
		return string(b)
	}
	post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return post
}

// sseMessages returns the JSON-RPC messages of an SSE body.
func sseMessages(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("event data %q: %v", data, err)
			}
			out = append(out, m)
		}
	}
	return out
}

// TestProgressTokenEcho checks on the wire that the client's token comes
// back as sent, 0 included.
func TestProgressTokenEcho(t *testing.T) {
	ts, _ := startService(t, newFixture(), service.MCPOptions{})
	post := rawSession(t, ts.URL+service.MCPPath)
	for i, token := range []string{`0`, `"0"`, `17`, `"abc"`} {
		body := post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"progress","arguments":{},"_meta":{"progressToken":%s}}}`, 10+i, token))
		var tokens []string
		var sawResult bool
		for _, m := range sseMessages(t, body) {
			if m["method"] == "notifications/progress" {
				b, _ := json.Marshal(m["params"].(map[string]any)["progressToken"])
				tokens = append(tokens, string(b))
			}
			if m["result"] != nil {
				sawResult = true
			}
		}
		if !sawResult || len(tokens) != 2 || tokens[0] != token || tokens[1] != token {
			t.Errorf("token %s: echoed %v (result %v) in %s", token, tokens, sawResult, body)
		}
	}
}

func TestCancellation(t *testing.T) {
	for _, rev := range revisions {
		t.Run(rev, func(t *testing.T) {
			f := newFixture()
			ts, _ := startService(t, f, service.MCPOptions{})
			pl := &progressLog{}
			cs := connect(t, ts.URL+service.MCPPath, rev, pl)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				p := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}}
				p.SetProgressToken(1)
				_, err := cs.CallTool(ctx, p)
				errc <- err
			}()
			// Cancel once the handler is running (its first progress arrived).
			deadline := time.Now().Add(5 * time.Second)
			for len(pl.all()) == 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("CallTool err = %v, want context.Canceled", err)
			}
			select {
			case <-f.cancelled:
			case <-time.After(5 * time.Second):
				close(f.release)
				t.Fatal("the tool's context was not cancelled")
			}
		})
	}
}

func TestAuthAndRoutes(t *testing.T) {
	ts, _ := startService(t, newFixture(), service.MCPOptions{})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	for _, tc := range []struct {
		name, method, path, auth, host string
		want                           int
		body, code, message            string // body "" sends init; code and message of a refusal
	}{
		{"malformed JSON", http.MethodPost, service.MCPPath, "Bearer " + testToken, "", http.StatusBadRequest, "{", "invalid_request", "mcp: "},
		{"no token", http.MethodPost, service.MCPPath, "", "", http.StatusUnauthorized, "", "", ""},
		{"wrong token", http.MethodPost, service.MCPPath, "Bearer nope", "", http.StatusUnauthorized, "", "", ""},
		{"token", http.MethodPost, service.MCPPath, "Bearer " + testToken, "", http.StatusOK, "", "", ""},
		{"GET without session", http.MethodGet, service.MCPPath, "Bearer " + testToken, "", http.StatusBadRequest, "", "invalid_request", "mcp: Bad Request: GET requires an Mcp-Session-Id header"},
		{"DELETE unknown session", http.MethodDelete, service.MCPPath, "Bearer " + testToken, "", http.StatusBadRequest, "", "", ""},
		{"GET no token", http.MethodGet, service.MCPPath, "", "", http.StatusUnauthorized, "", "", ""},
		{"rebinding Host", http.MethodPost, service.MCPPath, "Bearer " + testToken, "evil.example", http.StatusForbidden, "", "forbidden", "mcp: Forbidden: invalid Host header"},
		{"own route kept", http.MethodGet, "/own", "", "", http.StatusOK, "", "", ""},
		{"PUT", http.MethodPut, service.MCPPath, "Bearer " + testToken, "", http.StatusMethodNotAllowed, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := init
			if tc.body != "" {
				body = tc.body
			}
			req, _ := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s: %s, want %d: %s", tc.method, tc.path, resp.Status, tc.want, b)
			}
			if tc.want < 400 {
				return
			}
			// Every refusal, the go-sdk's included, is the suite's JSON body.
			var eb struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") || json.Unmarshal(b, &eb) != nil || eb.Error.Code == "" {
				t.Fatalf("refusal is %s %q, want a JSON error body", ct, b)
			}
			if tc.code != "" && (eb.Error.Code != tc.code || !strings.HasPrefix(eb.Error.Message, tc.message)) {
				t.Errorf("refusal %s %q, want %s %q…", eb.Error.Code, eb.Error.Message, tc.code, tc.message)
			}
		})
	}
}

func TestSessionIdle(t *testing.T) {
	ts, _ := startService(t, newFixture(), service.MCPOptions{SessionIdle: 50 * time.Millisecond})
	cs := connect(t, ts.URL+service.MCPPath, "2025-11-25", nil)
	time.Sleep(200 * time.Millisecond)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]string{"text": "x"}})
	if !errors.Is(err, mcp.ErrSessionMissing) {
		t.Errorf("call on an idle-closed session: err = %v, want ErrSessionMissing (404)", err)
	}
}

func TestNewRefuses(t *testing.T) {
	h := func(context.Context, *service.Call) *tool.Result { return tool.TextResult("x") }
	mk := func(name string, in, out json.RawMessage) service.Tool {
		return service.Tool{Binding: tool.Binding{Name: name, Description: "d", InputSchema: in, OutputSchema: out}, Handler: h}
	}
	long := strings.Repeat("a", 64)
	tests := []struct {
		name   string
		tools  []service.Tool
		tenant string
		want   string // "" = accepted
	}{
		{"64-character name", []service.Tool{mk(long, objSchema, nil)}, "t", ""},
		{"hyphen and digits", []service.Tool{mk("get-2_x", objSchema, nil)}, "t", ""},
		{"65-character name", []service.Tool{mk(long+"a", objSchema, nil)}, "t", `name must match ^[a-z0-9_-]{1,64}$`},
		{"upper case", []service.Tool{mk("Echo", objSchema, nil)}, "t", `tool "Echo": name must match`},
		{"dot", []service.Tool{mk("a.b", objSchema, nil)}, "t", `tool "a.b": name must match`},
		{"empty name", []service.Tool{mk("", objSchema, nil)}, "t", `tool "": name must match`},
		{"duplicate", []service.Tool{mk("a", objSchema, nil), mk("a", objSchema, nil)}, "t", `tool "a": duplicate name`},
		{"array input schema", []service.Tool{mk("a", json.RawMessage(`{"type":"array"}`), nil)}, "t", `input_schema: type must be "object"`},
		{"no input schema", []service.Tool{mk("a", nil, nil)}, "t", "input_schema: must be a JSON Schema object"},
		{"bad input schema", []service.Tool{mk("a", json.RawMessage(`{"type":"object","properties":{"x":{"type":7}}}`), nil)}, "t", "input_schema: does not compile"},
		{"external ref", []service.Tool{mk("a", json.RawMessage(`{"type":"object","$ref":"https://example.com/s.json"}`), nil)}, "t", "input_schema"},
		{"bad output schema", []service.Tool{mk("a", objSchema, json.RawMessage(`{"type":"nope"}`))}, "t", "output_schema: does not compile"},
		{"nil handler", []service.Tool{{Binding: tool.Binding{Name: "a", InputSchema: objSchema}}}, "t", `tool "a": no handler`},
		{"no tenant", nil, "", "Options.Tenant is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := service.NewMCPHandler(tc.tools, service.MCPOptions{Tenant: tc.tenant})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("New: %v, want success", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestRequestBodyLimit(t *testing.T) {
	ts, _ := startService(t, newFixture(), service.MCPOptions{MaxRequestBytes: 1024})
	big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"` + strings.Repeat("x", 1024) + `","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, ts.URL+service.MCPPath, strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge && resp.StatusCode != http.StatusBadRequest {
		t.Errorf("oversized body: %s, want 413 or 400", resp.Status)
	}
}

// TestOriginChecked: a request with an Origin other than the server's own
// (a browser page elsewhere: DNS rebinding) is refused with 403 naming it;
// the server's own origin and no Origin at all pass.
func TestOriginChecked(t *testing.T) {
	f := newFixture()
	ts, _ := startService(t, f, service.MCPOptions{})
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	tests := []struct {
		origin string
		status int
	}{
		{"", http.StatusOK},
		{ts.URL, http.StatusOK},
		{"http://evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+service.MCPPath, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("Origin %q: status %d, want %d: %s", tt.origin, resp.StatusCode, tt.status, data)
		}
		if tt.status == http.StatusForbidden && !strings.Contains(string(data), "is not this server's origin") {
			t.Errorf("Origin %q: body %s", tt.origin, data)
		}
	}
}

// TestCallOriginAndOwnTools: Options.Tools replaces the service's tools
// over MCP (POST /tools keeps its own), and a handler learns from
// service.MCPCallOrigin where its session_id came from: the client's MCP
// session, a stateless request of its own, or a host's _meta.
func TestCallOriginAndOwnTools(t *testing.T) {
	f := newFixture()
	originTool := service.Tool{
		Binding: tool.Binding{Name: "origin", Description: "tell the origin", InputSchema: objSchema},
		Handler: func(ctx context.Context, c *service.Call) *tool.Result {
			o, ok := service.MCPCallOrigin(ctx)
			return tool.TextResult("%d %v", o, ok)
		},
	}
	ts, srv := startService(t, f, service.MCPOptions{Tools: []service.Tool{originTool}})
	if _, ok := service.MCPCallOrigin(context.Background()); ok {
		t.Fatal("CallOrigin of a context that is no MCP call's says ok")
	}
	if len(srv.Tools) == 0 || srv.Tools[0].Binding.Name != "echo" {
		t.Fatalf("the service's own tools changed: %v", srv.Tools)
	}
	tests := []struct {
		rev  string
		meta mcp.Meta
		want service.MCPOrigin
	}{
		{"2025-11-25", nil, service.MCPOriginSession},
		{"2026-07-28", nil, service.MCPOriginRequest},
		{"2025-11-25", mcp.Meta{service.MCPMetaSessionID: "ses_1"}, service.MCPOriginHost},
		{"2026-07-28", mcp.Meta{service.MCPMetaSessionID: "ses_1"}, service.MCPOriginHost},
		{"2026-07-28", mcp.Meta{service.MCPMetaTenantID: "acme"}, service.MCPOriginRequest},
	}
	for _, tt := range tests {
		cs := connect(t, ts.URL+service.MCPPath, tt.rev, nil)
		list, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(list.Tools) != 1 || list.Tools[0].Name != "origin" {
			t.Fatalf("%s: tools/list = %v, %v; want only origin", tt.rev, list, err)
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "origin", Arguments: map[string]any{}, Meta: tt.meta})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := texts(res)[0], fmt.Sprintf("%d true", tt.want); got != want {
			t.Errorf("%s with _meta %v: origin %s, want %s", tt.rev, tt.meta, got, want)
		}
	}
}
