package mcpcall

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
)

// cursorMiddleware rewrites the server's own tools/list cursors: every
// next cursor the client sees is out(n) for the n-th page, and a cursor the
// client sends is translated back to the server's real one. With out
// returning the same string twice, the server repeats a cursor.
func cursorMiddleware(out func(page int) string) mcp.Middleware {
	var (
		page int
		real = map[string]string{}
	)
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			lr := req.(*mcp.ListToolsRequest)
			if lr.Params != nil && lr.Params.Cursor != "" {
				lr.Params.Cursor = real[lr.Params.Cursor]
			}
			res, err := next(ctx, method, req)
			if err != nil {
				return nil, err
			}
			r := res.(*mcp.ListToolsResult)
			page++
			if r.NextCursor != "" {
				fake := out(page)
				real[fake] = r.NextCursor
				r.NextCursor = fake
			}
			return r, nil
		}
	}
}

func toolNames(d *Discovery) []string {
	var out []string
	for _, t := range d.Tools {
		out = append(out, t.Name)
	}
	return out
}

func TestDiscoverPagination(t *testing.T) {
	extra := []string{"t1", "t2", "t3", "t4", "t5"}
	// The fixture server has 11 tools of its own plus extra: 16, one per
	// page.
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			for _, tc := range []struct {
				name     string
				mw       mcp.Middleware
				maxPages int
				pages    int
				stop     string
			}{
				{name: "to the last page", pages: 16, stop: "last page"},
				{name: "repeated cursor", mw: cursorMiddleware(func(int) string { return "same" }), pages: 2, stop: "repeated cursor"},
				{name: "cursor repeated later", mw: cursorMiddleware(func(p int) string { return fmt.Sprint("c", min(p, 3)) }), pages: 4, stop: "repeated cursor"},
				{name: "page cap", maxPages: 5, pages: 5, stop: "page cap"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					s := newMCPServer(t, serverOpts{stateless: k.stateless, pageSize: 1, tools: extra, mw: tc.mw})
					c := newCaller(t)
					d, err := c.Discover(context.Background(), s.ts.URL, secret, tc.maxPages)
					if err != nil {
						t.Fatal(err)
					}
					if d.Pages != tc.pages || d.Stop != tc.stop || len(d.Tools) != tc.pages {
						t.Errorf("pages %d, stop %q, %d tools; want %d pages, %q", d.Pages, d.Stop, len(d.Tools), tc.pages, tc.stop)
					}
					if d.ProtocolVersion != k.revision {
						t.Errorf("revision %s, want %s", d.ProtocolVersion, k.revision)
					}
					seen := map[string]bool{}
					for _, n := range toolNames(d) {
						if seen[n] {
							t.Errorf("tool %s listed twice", n)
						}
						seen[n] = true
					}
				})
			}
		})
	}
}

// stuckPageMiddleware makes the server repeat its second page: that page's
// next cursor is "stuck", and a tools/list with cursor "stuck" answers the
// same page again with the same cursor, never advancing.
func stuckPageMiddleware() mcp.Middleware {
	var (
		page   int
		second *mcp.ListToolsResult
	)
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			if lr := req.(*mcp.ListToolsRequest); lr.Params != nil && lr.Params.Cursor == "stuck" {
				again := *second
				return &again, nil
			}
			res, err := next(ctx, method, req)
			if err != nil {
				return nil, err
			}
			if page++; page == 2 {
				r := *res.(*mcp.ListToolsResult)
				r.NextCursor = "stuck"
				second = &r
				return &r, nil
			}
			return res, nil
		}
	}
}

// TestDiscoverRepeatedPage: a server that answers a cursor with the page
// it came from (a non-advancing cursor) lists each tool once, and brain
// mcp discover prints one binding per tool, not a second "_2" copy.
func TestDiscoverRepeatedPage(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			s := newMCPServer(t, serverOpts{stateless: k.stateless, pageSize: 2, mw: stuckPageMiddleware()})
			d, err := newCaller(t).Discover(context.Background(), s.ts.URL, secret, 0)
			if err != nil {
				t.Fatal(err)
			}
			if d.Stop != "repeated cursor" || d.Pages != 3 {
				t.Errorf("stop %q after %d pages, want repeated cursor after 3", d.Stop, d.Pages)
			}
			names := toolNames(d)
			if len(names) != 4 {
				t.Errorf("tools %v, want the 4 of the first two pages once each", names)
			}
			bindings, err := Bindings(d, "MCP_KEY", []string{"local"})
			if err != nil {
				t.Fatal(err)
			}
			mcpNames := map[string]int{}
			for _, b := range bindings {
				if mcpNames[b.MCPTool]++; mcpNames[b.MCPTool] > 1 || strings.HasSuffix(b.Name, "_2") {
					t.Errorf("binding %q for MCP tool %q: the tool is bound twice", b.Name, b.MCPTool)
				}
			}
		})
	}
}

func TestDiscoverErrors(t *testing.T) {
	s := newMCPServer(t, serverOpts{stateless: true})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://" + ln.Addr().String()
	ln.Close()
	c := newCaller(t)
	for _, tc := range []struct{ name, url, token, want string }{
		{"bad url", "ftp://x", secret, "url: scheme must be http or https"},
		{"refused", closed, secret, "connection refused"},
		{"unauthorized", s.ts.URL, "wrong", "HTTP 401 Unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Discover(context.Background(), tc.url, tc.token, 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestBindingName(t *testing.T) {
	taken := map[string]bool{}
	long := strings.Repeat("a", 70)
	for _, tc := range []struct{ in, want string }{
		{"echo", "echo"},
		{"get-weather.v2", "get_weather_v2"},
		{"get_weather_v2", "get_weather_v2_2"},
		{"2fa", "mcp_2fa"},
		{"--", "mcp_"},
		{"ünïcode", "n_code"},
		{long, long[:64]},
		{long + "b", long[:62] + "_2"},
	} {
		got := bindingName(tc.in, taken)
		if got != tc.want {
			t.Errorf("bindingName(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !tool.ValidName(got) {
			t.Errorf("bindingName(%q) = %q is not a valid binding name", tc.in, got)
		}
	}
}

func TestRunDiscover(t *testing.T) {
	s := newMCPServer(t, serverOpts{pageSize: 4, tools: []string{"get-forecast"}})
	s.srv.AddTool(&mcp.Tool{Name: "typed", Description: "", Title: "A typed tool",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil })
	// A schema brain cannot use: an external $ref.
	s.srv.AddTool(&mcp.Tool{Name: "remote-ref", Description: "refers out",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"https://example.com/x.json"}}}`),
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil })
	getenv := func(k string) string { return testEnv[k] }

	var stdout, stderr bytes.Buffer
	if err := RunDiscover(context.Background(), []string{s.ts.URL, "--token-env", "MCP_KEY", "--tenant=acme", "--tenant", "local"}, getenv, &stdout, &stderr); err != nil {
		t.Fatalf("RunDiscover: %v\n%s", err, stderr.String())
	}
	var doc struct {
		Tools []tool.Binding `json:"tools"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatalf("stdout is not a tools document: %v\n%s", err, stdout.String())
	}
	by := map[string]tool.Binding{}
	for _, b := range doc.Tools {
		by[b.MCPTool] = b
		if b.URL != s.ts.URL || b.TokenEnv != "MCP_KEY" || !cmp.Equal(b.Tenants, []string{"acme", "local"}) {
			t.Errorf("binding %s: url %q token_env %q tenants %v", b.Name, b.URL, b.TokenEnv, b.Tenants)
		}
	}
	if len(doc.Tools) != 14 {
		t.Errorf("%d bindings, want the server's 14 tools", len(doc.Tools))
	}
	if b := by["get-forecast"]; b.Name != "get_forecast" || b.Description != "tool get-forecast" {
		t.Errorf("get-forecast binding: %+v", b)
	}
	typed := by["typed"]
	var in, out map[string]any
	_ = json.Unmarshal(typed.InputSchema, &in)
	_ = json.Unmarshal(typed.OutputSchema, &out)
	if typed.Description != "A typed tool" || !cmp.Equal(in["required"], []any{"q"}) || out["properties"] == nil {
		t.Errorf("typed binding: %s %s %s", typed.Description, typed.InputSchema, typed.OutputSchema)
	}
	if !strings.Contains(stderr.String(), "14 tools on 4 pages (last page), MCP 2025-11-25") {
		t.Errorf("summary: %s", stderr.String())
	}
	if !strings.Contains(stderr.String(), `warning: binding "remote_ref" (MCP tool "remote-ref") would not pass brain -check`) {
		t.Errorf("no warning for the external $ref: %s", stderr.String())
	}
	if n := strings.Count(stderr.String(), "warning:"); n != 1 {
		t.Errorf("%d warnings, want only the one for remote_ref: %s", n, stderr.String())
	}

	// The printed bindings (less the one warned about) are a valid host
	// config, and calling through one works.
	var keep []tool.Binding
	for _, b := range doc.Tools {
		if b.MCPTool != "remote-ref" {
			keep = append(keep, b)
		}
	}
	cfgDoc, _ := json.Marshal(map[string]any{"tools": keep, "api_keys": []map[string]string{
		{"env": "MCP_KEY", "tenant": "acme"}, {"env": "WRONG_KEY", "tenant": "local"}}})
	cfg, err := config.Parse(cfgDoc, getenv)
	if err != nil {
		t.Fatalf("discovered bindings do not pass the host config check: %v", err)
	}
	echo, _ := cfg.Tool("echo")
	if o := newCaller(t).Call(context.Background(), echo, request(`{"text":"via discovery"}`), nil); o.Result.Content[0].Text != "via discovery" {
		t.Errorf("call through a discovered binding: %+v", o)
	}
}

func TestRunDiscoverUsage(t *testing.T) {
	getenv := func(k string) string { return testEnv[k] }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "usage: brain mcp discover URL"},
		{[]string{"--token-env", "MCP_KEY"}, "usage: brain mcp discover URL"},
		{[]string{"http://127.0.0.1:1/mcp", "extra"}, `unexpected argument "extra"`},
		{[]string{"http://127.0.0.1:1/mcp", "--bogus"}, `unknown flag "--bogus"`},
		{[]string{"http://127.0.0.1:1/mcp", "--token-env"}, "flag --token-env needs a value"},
		{[]string{"http://127.0.0.1:1/mcp", "--token-env="}, "flag --token-env: must not be empty"},
		{[]string{"http://127.0.0.1:1/mcp", "--token-env", "UNSET_KEY"}, "--token-env: UNSET_KEY is not set"},
		{[]string{"http://user:pw@127.0.0.1:1/mcp"}, "must not contain credentials"},
	} {
		var out, errOut bytes.Buffer
		err := RunDiscover(context.Background(), tc.args, getenv, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("RunDiscover(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("RunDiscover(%q) printed %q on failure", tc.args, out.String())
		}
	}
}

func TestProbe(t *testing.T) {
	up := newMCPServer(t, serverOpts{stateless: true})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	down := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	// A server that accepts connections and never answers.
	silent, _ := net.Listen("tcp", "127.0.0.1:0")
	defer silent.Close()
	var accepted atomic.Int32
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			defer conn.Close()
		}
	}()
	hang := "http://" + silent.Addr().String() + "/mcp"

	required := map[string]bool{"down_req": true}
	isRequired := func(t *config.Tool) bool { return required[t.Name] }
	tools := []*config.Tool{
		bind(t, "up", up.ts.URL, "echo", nil),
		bind(t, "down_opt", down, "a", nil),
		bind(t, "down_req", down, "b", nil),
		bind(t, "hang", hang, "c", nil),
		bind(t, "http_tool", "http://127.0.0.1:1/tools/x", "x", func(b map[string]any) { delete(b, "mcp_tool") }),
	}
	c := New(Options{ProbeTimeout: 300 * time.Millisecond})
	defer c.Close()
	got := c.Probe(context.Background(), tools, isRequired)
	if len(got) != 2 {
		t.Fatalf("Probe = %+v, want the two unreachable servers", got)
	}
	want := []Unavailable{
		{Server: down, Tools: []string{"down_opt", "down_req"}, Required: true},
		{Server: hang, Tools: []string{"hang"}},
	}
	sort.Slice(want, func(i, j int) bool { return want[i].Server < want[j].Server })
	for i := range want {
		if got[i].Server != want[i].Server || !cmp.Equal(got[i].Tools, want[i].Tools) || got[i].Required != want[i].Required || got[i].Reason == "" {
			t.Errorf("Probe[%d] = %+v, want %+v with a reason", i, got[i], want[i])
		}
	}
	for _, u := range got {
		switch u.Server {
		case down:
			if !strings.Contains(u.Reason, "connection refused") {
				t.Errorf("reason for %s: %q", down, u.Reason)
			}
		case hang:
			if !strings.Contains(u.Reason, "no answer within 300ms") {
				t.Errorf("reason for %s: %q", hang, u.Reason)
			}
		}
	}
	err := RequiredError(got)
	if err == nil || !strings.Contains(err.Error(), down+": ") || strings.Contains(err.Error(), hang) || !strings.Contains(err.Error(), `"required": false`) {
		t.Errorf("RequiredError = %v, want it to name only the required server", err)
	}
	if RequiredError(got[1:]) != nil && !got[1].Required {
		t.Error("RequiredError without a required server is not nil")
	}
	var ev map[string]any
	if err := json.Unmarshal(got[0].EventData(), &ev); err != nil || ev["server"] != got[0].Server || ev["reason"] == "" {
		t.Errorf("event data %s", got[0].EventData())
	}
	// The reachable server's session is pooled: the first call needs no
	// new handshake.
	inits := up.inits.Load()
	if o := c.Call(context.Background(), tools[0], request(`{"text":"x"}`), nil); o.Result.IsError {
		t.Fatal(o.ErrorMessage)
	}
	if up.inits.Load() != inits {
		t.Error("the call after Probe opened a new session")
	}
	if none := c.Probe(context.Background(), tools[:1], nil); len(none) != 0 {
		t.Errorf("Probe of a reachable server = %+v", none)
	}
}
