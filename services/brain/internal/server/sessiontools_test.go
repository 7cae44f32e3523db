package server

import (
	"github.com/brain-tools/suite/pkg/httpapi"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpTestServer is a real go-sdk MCP server (Streamable HTTP) on
// 127.0.0.1 whose tools answer "<name> ran"; it records the headers of
// each request and answers 503 while down is set, or refuse's status
// while that is set (401, say), or refuseList's to a tools/list.
type mcpTestServer struct {
	url        string
	down       atomic.Bool
	refuse     atomic.Int32
	refuseList atomic.Int32
	ran        sync.Map // tool name → true

	mu      sync.Mutex
	apiKeys []string
	auths   []string
}

func newMCPTestServer(t *testing.T, tools ...string) *mcpTestServer {
	t.Helper()
	m := &mcpTestServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	for _, name := range tools {
		srv.AddTool(&mcp.Tool{Name: name, Description: "the " + name + " tool", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				m.ran.Store(name, true)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " ran"}}}, nil
			})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.down.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		if code := int(m.refuse.Load()); code != 0 {
			http.Error(w, http.StatusText(code), code)
			return
		}
		if code := int(m.refuseList.Load()); code != 0 {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"method":"tools/list"`)) {
				http.Error(w, http.StatusText(code), code)
				return
			}
		}
		m.mu.Lock()
		m.apiKeys = append(m.apiKeys, r.Header.Get("X-Api-Key"))
		m.auths = append(m.auths, r.Header.Get("Authorization"))
		m.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	m.url = ts.URL + "/mcp"
	return m
}

func (m *mcpTestServer) saw() (apiKeys, auths []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.apiKeys), slices.Clone(m.auths)
}

func (b *brain) putTools(tenant, session string, tools any) resp {
	b.t.Helper()
	return b.do("PUT", "/sessions/"+session+"/tools", tenant, map[string]any{"tools": tools})
}

// sessionTools is the answer of GET and PUT /sessions/{id}/tools.
type sessionTools struct {
	Object    string           `json:"object"`
	SessionID string           `json:"session_id"`
	Tools     []map[string]any `json:"tools"`
}

func (b *brain) readTools(tenant, session string) sessionTools {
	b.t.Helper()
	var st sessionTools
	b.ok("GET", "/sessions/"+session+"/tools", tenant, nil, &st)
	return st
}

// TestSessionToolSet: PUT replaces the whole set, GET reads it back in
// the same vocabulary, a function tool's calls wait for the application's
// answer, narrowing holds after the catalog changes, and a call in flight
// keeps its binding when the set changes.
func TestSessionToolSet(t *testing.T) {
	b := startBrain(t, allowLoopback)
	ct := b.secretTool("t1", "crm", "echo", nil)
	sess := b.session("t1", "echo")
	fn := map[string]any{"type": "function", "name": "lookup_order", "description": "Look up an order.",
		"parameters":      map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}, "required": []string{"order_id"}},
		"timeout_seconds": 60}
	set := []any{map[string]any{"name": "echo"}, map[string]any{"name": "crm"}, fn}
	r := b.putTools("t1", sess.ID, set)
	if r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	var put sessionTools
	r.json(t, &put)
	got := b.readTools("t1", sess.ID)
	if put.Object != "session.tools" || put.SessionID != sess.ID || string(mustJSON(put)) != string(mustJSON(got)) {
		t.Fatalf("PUT answered %+v, GET %+v", put, got)
	}
	// What was sent, with the function entry's status (in force).
	fnBack := maps.Clone(fn)
	fnBack["status"] = "available"
	if want := mustJSON([]any{set[0], set[1], fnBack}); !bytes.Equal(mustJSON(got.Tools), want) {
		t.Errorf("read back %s, want what was sent: %s", mustJSON(got.Tools), want)
	}
	var s SessionJSON
	b.ok("GET", "/sessions/"+sess.ID, "t1", nil, &s)
	if !slices.Equal(s.Tools, []string{"echo", "crm", "lookup_order"}) {
		t.Errorf("session tools %v", s.Tools)
	}
	// The read-back goes back to PUT as it is.
	if r := b.do("PUT", "/sessions/"+sess.ID+"/tools", "t1", got); r.status != http.StatusOK {
		t.Errorf("read-back PUT again: %d %s", r.status, r.body)
	}

	st, c := b.call("t1", sess.ID, "lookup_order", map[string]any{"order_id": "o-1"}, 0)
	if st != http.StatusAccepted || c.Status != "requires_input" {
		t.Fatalf("function call: %d %+v", st, c)
	}
	var answered CallJSON
	ar := b.respond("t1", c.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "shipped"}}})
	ar.json(t, &answered)
	if answered.Status != "succeeded" {
		t.Fatalf("answered: %d %s", ar.status, ar.body)
	}
	if _, c := b.call("t1", sess.ID, "lookup_order", map[string]any{}, 5); c.ErrorCode == nil || *c.ErrorCode != "invalid_arguments" {
		t.Errorf("function call without order_id: %+v", c)
	}
	for _, name := range []string{"echo", "crm"} {
		if _, c := b.call("t1", sess.ID, name, map[string]any{"text": "x"}, 5); c.Status != "succeeded" {
			t.Errorf("%s: %+v", name, c)
		}
	}

	t.Run("narrowing follows the catalog", func(t *testing.T) {
		b := b.with(t)
		b.ok("DELETE", "/custom_tools/"+ct.ID, "t1", nil, nil)
		names := []string{}
		for _, e := range b.readTools("t1", sess.ID).Tools {
			names = append(names, e["name"].(string))
		}
		if !slices.Equal(names, []string{"echo", "lookup_order"}) {
			t.Errorf("after the custom tool went: %v", names)
		}
		r := b.do("POST", "/sessions/"+sess.ID+"/tool_calls", "t1", map[string]any{"tool": "crm", "arguments": map[string]any{}})
		wantRefusal(t, r, 400, httpapi.CodeInvalidRequest, "tool", "crm", "no longer")
		// A new custom tool of the same name is the tenant's catalog again.
		b.secretTool("t1", "crm", "echo", nil)
		if _, c := b.call("t1", sess.ID, "crm", map[string]any{"text": "x"}, 5); c.Status != "succeeded" {
			t.Errorf("crm again: %+v", c)
		}
	})
	t.Run("a call in flight keeps its binding", func(t *testing.T) {
		b := b.with(t)
		if r := b.putTools("t1", sess.ID, []any{map[string]any{"name": "slow"}}); r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
		_, c := b.call("t1", sess.ID, "slow", nil, 0)
		waitStarted(t, b.tools)
		if r := b.putTools("t1", sess.ID, []any{}); r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if got := b.readTools("t1", sess.ID).Tools; len(got) != 0 {
			t.Errorf("after tools: []: %v", got)
		}
		b.tools.releaseAll()
		if done := b.waitCall("t1", c.ID); done.Status != "succeeded" {
			t.Errorf("call in flight across the PUT: %+v", done)
		}
		wantRefusal(t, b.do("POST", "/sessions/"+sess.ID+"/tool_calls", "t1", map[string]any{"tool": "echo"}), 400, httpapi.CodeInvalidRequest, "tool", "echo", "not enabled")
	})
	var types []string
	for _, e := range b.events("t1", sess.ID) {
		if e.Type == "session.tools" {
			types = append(types, e.Type)
		}
	}
	if len(types) < 3 {
		t.Errorf("session.tools events: %d, want one per PUT", len(types))
	}
}

// TestSessionToolSetRefusals: the second peer's refusals, each with its
// code and the field it names.
func TestSessionToolSetRefusals(t *testing.T) {
	b := startBrain(t, allowLoopback)
	sess := b.session("t1", "echo")
	other := b.session("t2", "echo")
	mcpURL := "http://127.0.0.1:1/mcp"
	fn := func(name string) map[string]any {
		return map[string]any{"type": "function", "name": name, "description": "d"}
	}
	with := func(m map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(out, kv[i].(string))
			} else {
				out[kv[i].(string)] = kv[i+1]
			}
		}
		return out
	}
	server := map[string]any{"type": "mcp", "name": "docs", "url": mcpURL}
	over := make([]any, MaxSessionTools+1)
	for i := range over {
		over[i] = fn(fmt.Sprintf("f%d", i))
	}
	tests := []struct {
		name string
		body any // the whole body
		want []string
	}{
		{"more than 32", map[string]any{"tools": over}, []string{"tools", "33", "32"}},
		{"no tools", map[string]any{}, []string{"tools", "required"}},
		{"unknown top-level field", map[string]any{"tools": []any{}, "text": nil}, []string{"text", "unknown field"}},
		{"wrong object", map[string]any{"tools": []any{}, "object": "session"}, []string{"object"}},
		{"another session's id", map[string]any{"tools": []any{}, "session_id": "ses_x"}, []string{"session_id", "ses_x"}},
		{"entry not an object", map[string]any{"tools": []any{"echo"}}, []string{"tools[0]", "object"}},
		{"empty name", map[string]any{"tools": []any{map[string]any{"name": ""}}}, []string{"tools[0].name", "1 to 64"}},
		{"name over 64", map[string]any{"tools": []any{fn("f" + strings.Repeat("x", 64))}}, []string{"tools[0].name", "1 to 64"}},
		{"no name", map[string]any{"tools": []any{map[string]any{"type": "function", "description": "d"}}}, []string{"tools[0].name", "required"}},
		{"duplicate name", map[string]any{"tools": []any{map[string]any{"name": "echo"}, fn("echo")}}, []string{"tools[1].name", "echo", "twice"}},
		{"duplicate server", map[string]any{"tools": []any{server, server}}, []string{"tools[1].name", "docs", "twice"}},
		{"a tool the tenant may not use", map[string]any{"tools": []any{map[string]any{"name": "secret"}}}, []string{"tools[0].name", "secret", "catalog"}},
		{"unknown tool", map[string]any{"tools": []any{map[string]any{"name": "nope"}}}, []string{"tools[0].name", "nope"}},
		{"unknown type", map[string]any{"tools": []any{map[string]any{"type": "web_search"}}}, []string{"tools[0].type", "web_search", "function", "mcp"}},
		{"unknown field in a catalog entry", map[string]any{"tools": []any{map[string]any{"name": "echo", "description": "x"}}}, []string{"tools[0].description", "unknown field", "accepts name"}},
		{"allowedTools for allowed_tools", map[string]any{"tools": []any{with(server, "allowedTools", []string{"a"})}}, []string{"tools[0].allowedTools", "unknown field", "type, name, url, headers, authorization, allowed_tools, required"}},
		{"cmd for command", map[string]any{"tools": []any{with(server, "cmd", "x")}}, []string{"tools[0].cmd", "allowed_tools"}},
		{"command", map[string]any{"tools": []any{with(server, "command", "npx x")}}, []string{"tools[0].command", "url", "allowed_tools"}},
		{"timeout for timeout_seconds", map[string]any{"tools": []any{with(fn("f"), "timeout", 5)}}, []string{"tools[0].timeout", "unknown field", "timeout_seconds"}},
		{"redacted sent back", map[string]any{"tools": []any{with(server, "redacted", []string{"authorization"})}}, []string{"tools[0].redacted", "re-send"}},
		{"required yes", map[string]any{"tools": []any{with(server, "required", "yes")}}, []string{"tools[0].required", "true or false", "string"}},
		{"required 1", map[string]any{"tools": []any{with(server, "required", 1)}}, []string{"tools[0].required", "true or false, got a number 1"}},
		{"required null", map[string]any{"tools": []any{with(server, "required", json.RawMessage(`null`))}}, []string{"tools[0].required", "true or false, got null"}},
		{"mcp without url", map[string]any{"tools": []any{with(server, "url", nil)}}, []string{"tools[0].url", "required"}},
		{"url that will not parse", map[string]any{"tools": []any{with(server, "url", "http://[::1")}}, []string{"tools[0].url"}},
		{"url not http", map[string]any{"tools": []any{with(server, "url", "file:///etc/passwd")}}, []string{"tools[0].url", "scheme"}},
		{"dotted server name", map[string]any{"tools": []any{with(server, "name", "a.b")}}, []string{"tools[0].name", "a.b"}},
		{"authorization header", map[string]any{"tools": []any{with(server, "headers", map[string]any{"authorization": "x"})}}, []string{"tools[0].headers.authorization", "authorization"}},
		{"reserved header", map[string]any{"tools": []any{with(server, "headers", map[string]any{"Mcp-Session-Id": "x"})}}, []string{"tools[0].headers.Mcp-Session-Id"}},
		{"bad header name", map[string]any{"tools": []any{with(server, "headers", map[string]any{"x y": "v"})}}, []string{"tools[0].headers.x y", "header name"}},
		{"header value with a newline", map[string]any{"tools": []any{with(server, "headers", map[string]any{"X-A": "v\r\nX-B: w"})}}, []string{"tools[0].headers.X-A", "value"}},
		{"header twice", map[string]any{"tools": []any{with(server, "headers", map[string]any{"X-A": "1", "x-a": "2"})}}, []string{"tools[0].headers.", "twice"}},
		{"header null", map[string]any{"tools": []any{with(server, "headers", map[string]any{"X-A": nil})}}, []string{"tools[0].headers.X-A", "null"}},
		{"header too long", map[string]any{"tools": []any{with(server, "headers", map[string]any{"X-A": strings.Repeat("v", MaxMCPSecretBytes+1)})}}, []string{"tools[0].headers.X-A", "4096"}},
		{"empty authorization", map[string]any{"tools": []any{with(server, "authorization", "")}}, []string{"tools[0].authorization"}},
		{"allowed_tools twice", map[string]any{"tools": []any{with(server, "allowed_tools", []string{"a", "a"})}}, []string{"tools[0].allowed_tools[1]", "twice"}},
		{"allowed_tools bad name", map[string]any{"tools": []any{with(server, "allowed_tools", []string{"a b"})}}, []string{"tools[0].allowed_tools[0]"}},
		{"function without description", map[string]any{"tools": []any{with(fn("f"), "description", nil)}}, []string{"tools[0].description", "required"}},
		{"function parameters not an object schema", map[string]any{"tools": []any{with(fn("f"), "parameters", map[string]any{"type": "string"})}}, []string{"tools[0].parameters"}},
		{"function timeout 0", map[string]any{"tools": []any{with(fn("f"), "timeout_seconds", 0)}}, []string{"tools[0].timeout_seconds"}},
		{"function dotted name", map[string]any{"tools": []any{fn("a.b")}}, []string{"tools[0].name"}},
		{"wrong type of field", map[string]any{"tools": []any{with(fn("f"), "description", 5)}}, []string{"tools[0].description"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantRefusal(t, b.do("PUT", "/sessions/"+sess.ID+"/tools", "t1", tt.body), 400, httpapi.CodeInvalidRequest, tt.want...)
		})
	}
	t.Run("required null says null once", func(t *testing.T) {
		r := b.do("PUT", "/sessions/"+sess.ID+"/tools", "t1", map[string]any{"tools": []any{with(server, "required", json.RawMessage(`null`))}})
		if strings.Contains(string(r.body), "null null") {
			t.Errorf("refusal %s", r.body)
		}
	})
	t.Run("32 entries", func(t *testing.T) {
		if r := b.putTools("t1", sess.ID, over[:MaxSessionTools]); r.status != http.StatusOK {
			t.Fatalf("32 entries: %d %s", r.status, r.body)
		}
	})
	t.Run("POST instead of PUT", func(t *testing.T) {
		wantRefusal(t, b.do("POST", "/sessions/"+sess.ID+"/tools", "t1", map[string]any{"tools": []any{}}), 400, httpapi.CodeInvalidRequest, "replaced, not appended", "PUT")
	})
	t.Run("another tenant's session", func(t *testing.T) {
		wantRefusal(t, b.putTools("t1", other.ID, []any{}), 404, httpapi.CodeNotFound, other.ID)
		wantRefusal(t, b.do("GET", "/sessions/"+other.ID+"/tools", "t1", nil), 404, httpapi.CodeNotFound, other.ID)
	})
	t.Run("content type", func(t *testing.T) {
		wantRefusal(t, b.do("PUT", "/sessions/"+sess.ID+"/tools", "t1", `{"tools":[]}`, "Content-Type", "text/plain"), 415, httpapi.CodeUnsupportedMedia, "Content-Type must be application/json")
	})
	t.Run("a url the guard refuses", func(t *testing.T) {
		strict := startBrain(t)
		s := strict.session("t1")
		wantRefusal(t, strict.putTools("t1", s.ID, []any{server}), 400, httpapi.CodeInvalidRequest, "tools[0].url", "refused")
	})
	t.Run("a closed session", func(t *testing.T) {
		b := b.with(t)
		b.ok("POST", "/sessions/"+sess.ID+"/close", "t1", nil, nil)
		wantRefusal(t, b.putTools("t1", sess.ID, []any{}), 409, httpapi.CodeConflict, sess.ID, "closed")
	})
}

// TestSessionMCPServers runs real go-sdk MCP servers on loopback:
// allowed_tools narrows what the session gets; header values and the
// authorization are sent, withheld on read (named in redacted) and refused
// when sent back as redacted; a required server that is down refuses the
// session's calls naming the server and the cause, until it answers; an
// optional one is recorded as mcp.unavailable and the session goes on.
func TestSessionMCPServers(t *testing.T) {
	b := startBrain(t, allowLoopback)
	docs := newMCPTestServer(t, "search", "fetch", "delete")
	const apiKey, token = "key-0123456789abcdef", "tok-0123456789abcdef"
	sess := b.session("t1", "echo")
	r := b.putTools("t1", sess.ID, []any{map[string]any{"type": "mcp", "name": "docs", "url": docs.url,
		"headers": map[string]any{"x-api-key": apiKey}, "authorization": token,
		"allowed_tools": []string{"search", "fetch", "nope"}, "required": true}})
	if r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	if bytes.Contains(r.body, []byte(apiKey)) || bytes.Contains(r.body, []byte(token)) {
		t.Fatalf("the answer shows a secret: %s", r.body)
	}
	got := b.readTools("t1", sess.ID)
	if len(got.Tools) != 1 {
		t.Fatalf("read back %+v", got)
	}
	e := got.Tools[0]
	var allowed []string
	for _, n := range e["allowed_tools"].([]any) {
		allowed = append(allowed, n.(string))
	}
	slices.Sort(allowed)
	if e["type"] != "mcp" || e["url"] != docs.url || e["required"] != true || !slices.Equal(allowed, []string{"fetch", "search"}) ||
		fmt.Sprint(e["redacted"]) != "[authorization headers.X-Api-Key]" || e["headers"] != nil || e["authorization"] != nil {
		t.Errorf("read back %v: want allowed_tools the intersection [fetch search], secrets withheld and named in redacted", e)
	}
	var s SessionJSON
	b.ok("GET", "/sessions/"+sess.ID, "t1", nil, &s)
	slices.Sort(s.Tools)
	if !slices.Equal(s.Tools, []string{"docs.fetch", "docs.search"}) {
		t.Errorf("session tools %v", s.Tools)
	}
	_, c := b.call("t1", sess.ID, "docs.search", map[string]any{}, 5)
	if text, _ := resultText(t, c.Result); c.Status != "succeeded" || text != "search ran" {
		t.Fatalf("docs.search: %+v", c)
	}
	keys, auths := docs.saw()
	if !slices.Contains(keys, apiKey) || !slices.Contains(auths, "Bearer "+token) {
		t.Errorf("the server saw X-Api-Key %q and Authorization %q", keys, auths)
	}
	wantRefusal(t, b.do("POST", "/sessions/"+sess.ID+"/tool_calls", "t1", map[string]any{"tool": "docs.delete"}), 400, httpapi.CodeInvalidRequest, "docs.delete", "not enabled")
	if _, ran := docs.ran.Load("delete"); ran {
		t.Error("a tool allowed_tools left out ran")
	}
	// What was read, sent back: refused naming redacted.
	wantRefusal(t, b.do("PUT", "/sessions/"+sess.ID+"/tools", "t1", got), 400, httpapi.CodeInvalidRequest, "tools[0].redacted")
	if dump := b.storeDump(); !bytes.Contains(dump, []byte(sess.ID)) || bytes.Contains(dump, []byte(apiKey)) || bytes.Contains(dump, []byte(token)) {
		t.Errorf("the store's dump holds an MCP secret in the clear (or not the session at all)")
	}

	t.Run("a required server that is down refuses the session's calls", func(t *testing.T) {
		b := b.with(t)
		down := closedURL(t)
		s := b.session("t1", "echo")
		if r := b.putTools("t1", s.ID, []any{map[string]any{"name": "echo"}, map[string]any{"type": "mcp", "name": "crm", "url": down, "required": true}}); r.status != http.StatusOK {
			t.Fatalf("put: %d %s", r.status, r.body)
		}
		r := b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", map[string]any{"tool": "echo", "arguments": map[string]any{"text": "x"}})
		wantRefusal(t, r, 400, httpapi.CodeInvalidRequest, "crm", "connection refused", "required: true", "cannot start")
		if ev := findEvent(b.events("t1", s.ID), "mcp.unavailable"); !strings.Contains(string(ev), `"server":"crm"`) || !strings.Contains(string(ev), `"required":true`) {
			t.Errorf("mcp.unavailable %s", ev)
		}
	})
	t.Run("a required server fixed: the session runs", func(t *testing.T) {
		b := b.with(t)
		flaky := newMCPTestServer(t, "lookup")
		flaky.down.Store(true)
		s := b.session("t1", "echo")
		b.putTools("t1", s.ID, []any{map[string]any{"name": "echo"}, map[string]any{"type": "mcp", "name": "crm", "url": flaky.url, "required": true}})
		r := b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", map[string]any{"tool": "echo", "arguments": map[string]any{"text": "x"}})
		wantRefusal(t, r, 400, httpapi.CodeInvalidRequest, "crm", "Service Unavailable")
		flaky.down.Store(false)
		if _, c := b.call("t1", s.ID, "crm.lookup", map[string]any{}, 5); c.Status != "succeeded" {
			t.Fatalf("crm.lookup once the server answers: %+v", c)
		}
	})
	t.Run("an optional server that is down: mcp.unavailable, and the session goes on", func(t *testing.T) {
		b := b.with(t)
		down := closedURL(t)
		s := b.session("t1")
		if r := b.putTools("t1", s.ID, []any{map[string]any{"name": "echo"}, map[string]any{"type": "mcp", "name": "maybe", "url": down, "allowed_tools": []string{"x"}}}); r.status != http.StatusOK {
			t.Fatalf("put: %d %s", r.status, r.body)
		}
		var d unavailableData
		if err := json.Unmarshal(findEvent(b.events("t1", s.ID), "mcp.unavailable"), &d); err != nil {
			t.Fatal(err)
		}
		if d.Type != "mcp_unavailable" || d.Server != "maybe" || d.Required || !strings.Contains(d.Reason, "connection refused") {
			t.Errorf("mcp.unavailable %+v", d)
		}
		if _, c := b.call("t1", s.ID, "echo", map[string]any{"text": "on"}, 5); c.Status != "succeeded" {
			t.Errorf("echo beside an optional server that is down: %+v", c)
		}
		// Its read-back keeps what was asked, for when it answers again,
		// and says it is not in force.
		e := b.readTools("t1", s.ID).Tools[1]
		if e["name"] != "maybe" || e["required"] != false || fmt.Sprint(e["allowed_tools"]) != "[x]" || e["status"] != "unavailable" {
			t.Errorf("read back %v", e)
		}
	})
	t.Run("a tenant's MCP server is guarded", func(t *testing.T) {
		strict := startBrain(t)
		s := strict.session("t1")
		wantRefusal(t, strict.putTools("t1", s.ID, []any{map[string]any{"type": "mcp", "name": "docs", "url": docs.url}}), 400, httpapi.CodeInvalidRequest, "tools[0].url", "loopback")
	})
}

// TestSessionMCPReadBack: the read-back of an MCP entry says what is in
// force. A server that could not be listed keeps allowed_tools as asked
// (for a PUT of the read-back once it answers) and says so with status
// "unavailable" and the reason — it gives the session no tools; one that
// was listed reads "available" with allowed_tools the tools it gives.
func TestSessionMCPReadBack(t *testing.T) {
	b := startBrain(t, allowLoopback)
	locked := newMCPTestServer(t, "echo", "search")
	locked.refuse.Store(http.StatusUnauthorized)
	docs := newMCPTestServer(t, "echo", "search")
	noList := newMCPTestServer(t, "echo", "search")
	noList.refuseList.Store(http.StatusUnauthorized)
	tests := []struct {
		name        string
		url         string
		allowed     []string
		wantStatus  string
		wantReason  string // in reason; "" when there is none
		wantAllowed []string
		wantTools   []string // the session's tools
	}{
		{"optional server answers 401", locked.url, []string{"nope1", "echo"}, "unavailable", "HTTP 401 Unauthorized", []string{"nope1", "echo"}, []string{}},
		{"optional server refuses tools/list", noList.url, []string{"echo"}, "unavailable", "tools/list page 1: Unauthorized", []string{"echo"}, []string{}},
		{"optional server refuses the connection", closedURL(t), []string{"nope1", "echo"}, "unavailable", "connection refused", []string{"nope1", "echo"}, []string{}},
		{"optional server down, allowed_tools omitted", closedURL(t), nil, "unavailable", "connection refused", nil, []string{}},
		{"allowed_tools names a tool the server lacks", docs.url, []string{"nope1", "echo"}, "available", "", []string{"echo"}, []string{"docs.echo"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := b.with(t)
			sess := b.session("t1")
			entry := map[string]any{"type": "mcp", "name": "docs", "url": tt.url, "required": false}
			if tt.allowed != nil {
				entry["allowed_tools"] = tt.allowed
			}
			r := b.putTools("t1", sess.ID, []any{entry})
			if r.status != http.StatusOK {
				t.Fatalf("put: %d %s", r.status, r.body)
			}
			var put sessionTools
			r.json(t, &put)
			got := b.readTools("t1", sess.ID)
			if string(mustJSON(put)) != string(mustJSON(got)) {
				t.Errorf("PUT answered %s, GET %s", mustJSON(put), mustJSON(got))
			}
			if len(got.Tools) != 1 {
				t.Fatalf("read back %s", mustJSON(got))
			}
			e := got.Tools[0]
			if e["status"] != tt.wantStatus {
				t.Errorf("status %v, want %q: %s", e["status"], tt.wantStatus, mustJSON(e))
			}
			reason, _ := e["reason"].(string)
			if tt.wantReason == "" && e["reason"] != nil || !strings.Contains(reason, tt.wantReason) {
				t.Errorf("reason %v, want it to say %q: %s", e["reason"], tt.wantReason, mustJSON(e))
			}
			if strings.Contains(reason, tt.url) {
				t.Errorf("reason %q shows the url", reason)
			}
			var allowed []string
			if a, ok := e["allowed_tools"].([]any); ok {
				allowed = []string{}
				for _, n := range a {
					allowed = append(allowed, n.(string))
				}
			}
			if (allowed == nil) != (tt.wantAllowed == nil) || !slices.Equal(allowed, tt.wantAllowed) {
				t.Errorf("allowed_tools %v, want %v", e["allowed_tools"], tt.wantAllowed)
			}
			var s SessionJSON
			b.ok("GET", "/sessions/"+sess.ID, "t1", nil, &s)
			if !slices.Equal(s.Tools, tt.wantTools) {
				t.Errorf("session tools %v, want %v", s.Tools, tt.wantTools)
			}
			// The read-back goes back to PUT as it is, and says the same.
			r = b.do("PUT", "/sessions/"+sess.ID+"/tools", "t1", got)
			if r.status != http.StatusOK {
				t.Fatalf("read-back PUT again: %d %s", r.status, r.body)
			}
			if again := b.readTools("t1", sess.ID); again.Tools[0]["status"] != tt.wantStatus {
				t.Errorf("after the read-back was PUT again: %s", mustJSON(again))
			}
		})
	}
	t.Run("status and reason are brain's to say", func(t *testing.T) {
		b := b.with(t)
		sess := b.session("t1")
		entry := map[string]any{"type": "mcp", "name": "docs", "url": docs.url, "status": "unavailable", "reason": "made up"}
		if r := b.putTools("t1", sess.ID, []any{entry}); r.status != http.StatusOK {
			t.Fatalf("put: %d %s", r.status, r.body)
		}
		if e := b.readTools("t1", sess.ID).Tools[0]; e["status"] != "available" || e["reason"] != nil {
			t.Errorf("a server that answers, sent with status unavailable, reads back %s", mustJSON(e))
		}
		// A function entry's status and reason go back as read, too, and
		// are ignored: brain compiles the parameters.
		fn := map[string]any{"type": "function", "name": "f", "description": "d", "status": "unavailable", "reason": "left out: …"}
		if r := b.putTools("t1", sess.ID, []any{fn}); r.status != http.StatusOK {
			t.Fatalf("put: %d %s", r.status, r.body)
		}
		if e := b.readTools("t1", sess.ID).Tools[0]; e["status"] != "available" || e["reason"] != nil {
			t.Errorf("a function that compiles, sent with status unavailable, reads back %s", mustJSON(e))
		}
		for _, tc := range []struct {
			typ, key string
			val      any
			want     []string
		}{
			{"mcp", "status", "up", []string{"tools[0].status", "available", "unavailable"}},
			{"mcp", "status", true, []string{"tools[0].status"}},
			{"mcp", "reason", 5, []string{"tools[0].reason"}},
			{"function", "status", "up", []string{"tools[0].status", "available", "unavailable", "compiles the parameters"}},
			{"function", "reason", 5, []string{"tools[0].reason"}},
		} {
			bad := map[string]any{"type": "mcp", "name": "docs", "url": docs.url, tc.key: tc.val}
			if tc.typ == "function" {
				bad = map[string]any{"type": "function", "name": "f", "description": "d", tc.key: tc.val}
			}
			wantRefusal(t, b.putTools("t1", sess.ID, []any{bad}), 400, httpapi.CodeInvalidRequest, tc.want...)
		}
		// A catalog entry has no status: an unknown field there.
		wantRefusal(t, b.putTools("t1", sess.ID, []any{map[string]any{"name": "echo", "status": "available"}}), 400, httpapi.CodeInvalidRequest, "tools[0].status", "unknown field")
	})
}

// findEvent returns the data of the first event of type typ.
func findEvent(evs []EventJSON, typ string) json.RawMessage {
	for _, e := range evs {
		if e.Type == typ {
			return e.Data
		}
	}
	return nil
}

// TestToolSetsSurviveRestart: a session's tool set (its MCP server's
// listing and sealed headers included), a custom tool with its secret, and
// a function call left waiting are all there for the next brain on the
// same data dir, which needs nothing re-sent.
func TestToolSetsSurviveRestart(t *testing.T) {
	// On PostgreSQL the next brain takes the first one's waiting call up
	// once its lease has run out.
	lease := func(o *Options) { o.Lease = time.Second }
	b := startBrain(t, allowLoopback, lease)
	docs := newMCPTestServer(t, "search")
	const apiKey = "restart-key-0123456789"
	b.secretTool("t1", "crm", "echo", nil)
	sess := b.session("t1")
	if r := b.putTools("t1", sess.ID, []any{map[string]any{"name": "crm"},
		map[string]any{"type": "function", "name": "lookup", "description": "d"},
		map[string]any{"type": "mcp", "name": "docs", "url": docs.url, "headers": map[string]any{"X-Api-Key": apiKey}}}); r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	before := b.readTools("t1", sess.ID)
	_, waiting := b.call("t1", sess.ID, "lookup", map[string]any{}, 0)
	if waiting.Status != "requires_input" {
		t.Fatalf("function call: %+v", waiting)
	}
	if err := b.srv.Close(); err != nil {
		t.Fatal(err)
	}

	b2 := startBrain(t, allowLoopback, sameStore(b), lease)
	b2.tools = b.tools // the custom tool's url is the first brain's tool server
	if after := b2.readTools("t1", sess.ID); string(mustJSON(after)) != string(mustJSON(before)) {
		t.Errorf("tool set after restart %s, before %s", mustJSON(after), mustJSON(before))
	}
	var answered CallJSON
	for deadline := time.Now().Add(10 * time.Second); ; {
		r := b2.respond("t1", waiting.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "found"}}})
		if r.status == http.StatusOK || time.Now().After(deadline) {
			r.json(t, &answered)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if answered.Status != "succeeded" {
		t.Errorf("function call answered after restart: %+v", answered)
	}
	if _, c := b2.call("t1", sess.ID, "crm", map[string]any{"text": "x"}, 5); c.Status != "succeeded" {
		t.Errorf("custom tool after restart (its secret opened with the key file): %+v", c)
	}
	if _, c := b2.call("t1", sess.ID, "docs.search", map[string]any{}, 5); c.Status != "succeeded" {
		t.Fatalf("MCP tool after restart: %+v", c)
	}
	keys, _ := docs.saw()
	if keys[len(keys)-1] != apiKey {
		t.Errorf("the server's last request carried X-Api-Key %q after restart", keys[len(keys)-1])
	}
}

// TestToolSetAcrossReplicas: two brains on one PostgreSQL database; a
// tool set one of them applies is the one the other reads and calls with,
// however it had cached the session's tools before.
func TestToolSetAcrossReplicas(t *testing.T) {
	if testStore != storePostgres {
		t.Skip("needs the PostgreSQL store: BRAIN_TEST_STORE=postgres (make test runs it)")
	}
	a := startBrain(t, allowLoopback)
	b := startBrain(t, allowLoopback, sameStore(a))
	sess := a.session("t1", "echo")
	if got := b.readTools("t1", sess.ID).Tools; len(got) != 1 || got[0]["name"] != "echo" {
		t.Fatalf("replica b before the PUT: %v", got)
	}
	if r := a.putTools("t1", sess.ID, []any{map[string]any{"type": "function", "name": "lookup", "description": "d"}}); r.status != http.StatusOK {
		t.Fatalf("put on replica a: %d %s", r.status, r.body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := b.readTools("t1", sess.ID).Tools
		if len(got) == 1 && got[0]["name"] == "lookup" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica b still reads %v 5 s after replica a replaced the set", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st, c := b.call("t1", sess.ID, "lookup", map[string]any{}, 0); st != http.StatusAccepted || c.Status != "requires_input" {
		t.Fatalf("replica b calls the new set's function tool: %d %+v", st, c)
	}
	wantRefusal(t, b.do("POST", "/sessions/"+sess.ID+"/tool_calls", "t1", map[string]any{"tool": "echo"}), 400, httpapi.CodeInvalidRequest, "echo", "not enabled")
}
