// Package servicetest is the test kit of a tool service: start a
// service.Server on 127.0.0.1:0, call its tools over HTTP (the contract's
// POST /tools/<name>, JSON or SSE) or over MCP (/mcp, the go-sdk client),
// and read each answer back as the contract's result with its progress.
//
//	srv := servicetest.Start(t, echo.Tool())
//	got := srv.Call(t, "echo", map[string]any{"text": "hi"})
//	if got.Result.IsError { ... }
//
// The server stops when the test ends. Failures of the kit itself (a
// server that does not start, a transport error) fail the test at once; a
// refusal or an is_error result is the test's to judge, in the Reply.
package servicetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/sse"
	"github.com/brain-tools/suite/pkg/tool"
)

// Token is the bearer token Start gives a server whose Config has none.
const Token = "servicetest-token-0123456789"

// Server is a service.Server running for one test.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL string
	// Token is the bearer token calls send.
	Token string
	// Server is the running server.
	Server *service.Server
	// Tenant, Session and Call fill the identity of HTTP calls; defaults
	// "local", "servicetest-session" and a counter.
	Tenant, Session string

	mu sync.Mutex
	n  int
}

// Start serves tools on a new server named "servicetest" with the
// default Config (service.ParseEnv of an empty environment), its token
// Token, on 127.0.0.1:0.
func Start(t testing.TB, tools ...service.Tool) *Server {
	t.Helper()
	return StartServer(t, &service.Server{Name: "servicetest", Tools: tools})
}

// StartServer serves srv on 127.0.0.1:0 until the test ends. A srv.Config
// without Addr is replaced by the default Config with Token (the other
// fields of a Config with an Addr are kept, the Addr itself is replaced).
func StartServer(t testing.TB, srv *service.Server) *Server {
	t.Helper()
	if srv.Config.Addr == "" {
		cfg, err := service.ParseEnv[service.Config](map[string]string{"BRAIN_TOOLS_KEY": Token})
		if err != nil {
			t.Fatalf("servicetest: config: %v", err)
		}
		srv.Config = cfg
	}
	srv.Config.Addr = "127.0.0.1:0"
	ln, err := service.Listen(srv.Config, srv.Logger)
	if err != nil {
		t.Fatalf("servicetest: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- service.Serve(ctx, ln, srv) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("servicetest: %v", err)
		}
	})
	return &Server{URL: "http://" + ln.Addr().String(), Token: srv.Config.Token, Server: srv, Tenant: "local", Session: "servicetest-session"}
}

// Reply is one call's answer.
type Reply struct {
	// Status is the HTTP status (200 for an MCP call that got a result).
	Status int
	// Result is the call's result; nil when the call was refused (then
	// Error holds the refusal body).
	Result *tool.Result
	// Progress holds the progress events in order: the SSE progress data,
	// or the MCP notifications as {"progress":N,"total":N,"message":"…"}.
	Progress []json.RawMessage
	// Streamed reports an SSE answer.
	Streamed bool
	// Error is the body of a refusal (a non-200 answer).
	Error string
	// Size is the length in bytes of the answer's body (JSON), or of the
	// result event's data (SSE): what a host holds to max_output_bytes.
	Size int
}

// Text joins the result's text blocks with newlines.
func (r *Reply) Text() string {
	if r.Result == nil {
		return ""
	}
	var b bytes.Buffer
	for i, c := range r.Result.Content {
		if c.Type == tool.TypeText {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// Call calls tool name over HTTP as brain does (the contract's body and
// headers, Accept: application/json, text/event-stream) with args
// marshalled as the arguments, and reads the JSON or SSE answer. The call
// is of the session Session of the tenant Tenant.
func (s *Server) Call(t testing.TB, name string, args any) *Reply {
	t.Helper()
	return s.CallAs(t, s.Tenant, s.Session, name, args)
}

// CallAs is Call from the session session of tenant tenant.
func (s *Server) CallAs(t testing.TB, tenant, session, name string, args any) *Reply {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatalf("servicetest: arguments: %v", err)
	}
	s.mu.Lock()
	s.n++
	req := tool.Request{TenantID: tenant, SessionID: session, CallID: "servicetest-call-" + strconv.Itoa(s.n), Arguments: raw}
	s.mu.Unlock()
	return s.CallRequest(t, name, req)
}

// CallRequest is Call with the whole request body given.
func (s *Server) CallRequest(t testing.TB, name string, req tool.Request) *Reply {
	t.Helper()
	body, err := req.AppendJSON(nil)
	if err != nil {
		t.Fatalf("servicetest: request: %v", err)
	}
	hr, err := http.NewRequest(http.MethodPost, s.URL+"/tools/"+name, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("servicetest: %v", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json, text/event-stream")
	hr.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatalf("servicetest: call %s: %v", name, err)
	}
	defer resp.Body.Close()
	reply := &Reply{Status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		reply.Error = string(b)
		return reply
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "text/event-stream" {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("servicetest: read %s: %v", name, err)
		}
		reply.Size = len(b)
		if reply.Result, err = tool.DecodeResult(b); err != nil {
			t.Fatalf("servicetest: %s answered an invalid result: %v\n%s", name, err, b)
		}
		return reply
	}
	reply.Streamed = true
	for ev, err := range sse.Read(resp.Body, 4<<20) {
		if err != nil {
			t.Fatalf("servicetest: read the stream of %s: %v", name, err)
		}
		switch ev.Name {
		case sse.EventProgress:
			reply.Progress = append(reply.Progress, json.RawMessage(ev.Data))
		case sse.EventResult:
			reply.Size = len(ev.Data)
			if reply.Result, err = tool.DecodeResult([]byte(ev.Data)); err != nil {
				t.Fatalf("servicetest: %s streamed an invalid result: %v\n%s", name, err, ev.Data)
			}
			return reply
		default:
			t.Fatalf("servicetest: %s streamed an event %q the contract does not allow", name, ev.Name)
		}
	}
	t.Fatalf("servicetest: the stream of %s ended without a result", name)
	return nil
}

// CallMCP calls tool name over MCP at /mcp (a 2025-11-25 session of the
// go-sdk client, with the bearer token and a progress token) with args,
// as the same tenant and session as Call (stated in _meta, as brain's MCP
// client does), so that state a tool keeps per session (a job) is found
// over either transport,
// and turns the CallToolResult back into the contract's result: text and
// image blocks, structuredContent, isError, and unknown_outcome from _meta.
func (s *Server) CallMCP(t testing.TB, name string, args any) *Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		progress []json.RawMessage
	)
	cs := s.connect(ctx, t, func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		p := r.Params
		data, _ := json.Marshal(service.Progress{Progress: p.Progress, Total: p.Total, Message: p.Message})
		mu.Lock()
		progress = append(progress, data)
		mu.Unlock()
	})
	defer cs.Close()
	params := &mcp.CallToolParams{Name: name, Arguments: args,
		Meta: mcp.Meta{service.MCPMetaTenantID: s.Tenant, service.MCPMetaSessionID: s.Session}}
	params.SetProgressToken("servicetest")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("servicetest: MCP call %s: %v", name, err)
	}
	reply := &Reply{Status: http.StatusOK, Result: &tool.Result{IsError: res.IsError}}
	for i, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			reply.Result.Content = append(reply.Result.Content, tool.Text(c.Text))
		case *mcp.ImageContent:
			reply.Result.Content = append(reply.Result.Content, tool.Content{Type: tool.TypeImage, Data: base64.StdEncoding.EncodeToString(c.Data), MIMEType: c.MIMEType})
		default:
			t.Fatalf("servicetest: MCP result of %s: content[%d] is a %T, not text or an image", name, i, c)
		}
	}
	if res.StructuredContent != nil {
		if reply.Result.StructuredContent, err = json.Marshal(res.StructuredContent); err != nil {
			t.Fatalf("servicetest: MCP result of %s: structuredContent: %v", name, err)
		}
	}
	if v, ok := res.Meta[service.MCPMetaUnknownOutcome].(bool); ok {
		reply.Result.UnknownOutcome = v
	}
	mu.Lock()
	reply.Progress = progress
	mu.Unlock()
	return reply
}

// ListMCP lists the tools s serves over MCP (tools/list).
func ListMCP(t testing.TB, s *Server) []*mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := s.connect(ctx, t, nil)
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("servicetest: MCP tools/list: %v", err)
	}
	return res.Tools
}

// connect opens an MCP session with the bearer token.
func (s *Server) connect(ctx context.Context, t testing.TB, onProgress func(context.Context, *mcp.ProgressNotificationClientRequest)) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "servicetest", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: onProgress})
	transport := &mcp.StreamableClientTransport{Endpoint: s.URL + service.MCPPath,
		HTTPClient: &http.Client{Transport: bearerTransport{s.Token}}}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("servicetest: connect to %s: %v", service.MCPPath, err)
	}
	return cs
}

// Dial is a Server for a service already running at url (a binary a test
// started) with token: Call, CallMCP and ListMCP work on it as on one
// StartServer started.
func Dial(url, token string) *Server {
	return &Server{URL: url, Token: token, Tenant: "local", Session: "servicetest-session"}
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
