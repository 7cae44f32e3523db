package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpClient connects go-sdk's client to the service's /mcp on revision
// version.
func (h *harness) mcpClient(t *testing.T, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "sandbox-test", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: h.url + service.MCPPath, HTTPClient: &http.Client{Transport: bearerTransport{testToken}}, DisableStandaloneSSE: true, MaxRetries: -1}
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

// mcpCall calls a tool and returns its structured content (nil without)
// and its text.
func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, meta mcp.Meta) (map[string]any, string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	var m map[string]any
	if res.StructuredContent != nil {
		data, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(data, &m)
	}
	return m, strings.Join(text, "\n"), res.IsError
}

func textOf(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// TestStatelessMCPClient is the tester's report: on the 2026-07-28
// revision every request got a fresh session, so a file written in one
// call was gone in the next, sandbox_status and sandbox_cancel never found
// a job of sandbox_start, and every one-shot call held a workspace for 30
// minutes, until brain's sessions were locked out. Here a stateless client
// of go-sdk does multi-step work through a workspace handle; 1,000
// one-shot calls leave no workspace held, and a brain session still gets
// one.
func TestStatelessMCPClient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"SANDBOX_MAX_WORKSPACES": "2", "SANDBOX_MCP_MAX_WORKSPACES": "3"})
	cs := h.mcpClient(t, "2026-07-28")

	open, text, isErr := mcpCall(t, cs, "sandbox_workspace_open", map[string]any{}, nil)
	handle, _ := open["workspace"].(string)
	if isErr || !strings.HasPrefix(handle, workspace.HandlePrefix) || len(handle) != 29 {
		t.Fatalf("open: %s", text)
	}
	with := func(args map[string]any) map[string]any { args["workspace"] = handle; return args }

	if _, text, isErr := mcpCall(t, cs, "sandbox_write_file", with(map[string]any{"path": "in.txt", "content": "hello from one call"}), nil); isErr {
		t.Fatalf("write: %s", text)
	}
	m, text, _ := mcpCall(t, cs, "sandbox_exec", with(map[string]any{"command": "cat in.txt"}), nil)
	if m["stdout"] != "hello from one call" {
		t.Fatalf("exec in the next call: %s", text)
	}
	m, text, _ = mcpCall(t, cs, "sandbox_start", with(map[string]any{"command": "echo begun; sleep 100"}), nil)
	id, _ := m["job_id"].(string)
	if id == "" {
		t.Fatalf("start: %s", text)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, text, _ = mcpCall(t, cs, "sandbox_status", with(map[string]any{"job_id": id}), nil)
		out, _ := m["output"].(map[string]any)
		if m["state"] == "running" && out["stdout"] == "begun\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status: %s", text)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Without the handle, a stateless request has no session: not found,
	// and told what to pass. Another tenant with the handle: no workspace.
	if _, text, isErr := mcpCall(t, cs, "sandbox_status", map[string]any{"job_id": id}, nil); !isErr || !strings.Contains(text, "no command "+id) || !strings.Contains(text, "pass the workspace handle") {
		t.Errorf("status without the handle: %s", text)
	}
	if _, text, isErr := mcpCall(t, cs, "sandbox_status", with(map[string]any{"job_id": id}), mcp.Meta{service.MCPMetaTenantID: "tenant-b"}); !isErr || !strings.Contains(text, "no workspace with this handle for this tenant") {
		t.Errorf("status with the handle as another tenant: %s", text)
	}
	if _, text, isErr := mcpCall(t, cs, "sandbox_start", map[string]any{"command": "true"}, nil); !isErr || !strings.Contains(text, "sandbox_workspace_open") {
		t.Errorf("start without a handle: %s", text)
	}
	m, text, _ = mcpCall(t, cs, "sandbox_cancel", with(map[string]any{"job_id": id}), nil)
	if m["state"] != "cancelled" {
		t.Fatalf("cancel: %s", text)
	}
	if _, text, isErr := mcpCall(t, cs, "sandbox_workspace_close", map[string]any{"workspace": handle}, nil); isErr {
		t.Fatalf("close: %s", text)
	}
	if _, text, isErr := mcpCall(t, cs, "sandbox_list_files", with(map[string]any{}), nil); !isErr || !strings.Contains(text, "no workspace with this handle") {
		t.Errorf("a closed handle: %s", text)
	}
	// The handle's job belongs to the handle, not to brain: HTTP callers
	// cannot pass one (the HTTP bindings do not take it).
	if a := h.call("s1", "sandbox_list_files", map[string]any{"workspace": handle}); !a.Result.IsError || !strings.Contains(a.Text(), "additional properties 'workspace' not allowed") {
		t.Errorf("HTTP with a handle: %s", a.Text())
	}

	// 1,000 one-shot calls, three at a time: each works in a workspace of
	// its own, removed when the call ends, so the MCP pool of 3 never
	// fills.
	const calls = 1000
	var wg sync.WaitGroup
	errs := make(chan string, calls)
	next := make(chan int)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name, args := "sandbox_write_file", map[string]any{"path": fmt.Sprintf("f%d", i), "content": "x"}
				switch {
				case i%20 == 0:
					name, args = "sandbox_exec", map[string]any{"command": "ls | wc -l"}
				case i%2 == 0:
					name, args = "sandbox_list_files", map[string]any{}
				}
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
				if err != nil || res.IsError {
					errs <- fmt.Sprintf("call %d %s: %v %s", i, name, err, textOf(res))
					continue
				}
				if name == "sandbox_exec" {
					data, _ := json.Marshal(res.StructuredContent)
					if !strings.Contains(string(data), `"stdout":"0\n"`) {
						errs <- fmt.Sprintf("call %d: a one-shot call saw an earlier one's files: %s", i, data)
					}
				}
			}
		}()
	}
	for i := range calls {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	n := 0
	for e := range errs {
		if n++; n <= 5 {
			t.Error(e)
		}
	}
	if n > 0 {
		t.Fatalf("%d of %d one-shot calls failed", n, calls)
	}
	if got, busy := h.svc.Workspaces.CountIn(workspace.MCP); got != 0 || busy != 0 {
		t.Fatalf("after %d one-shot calls, %d MCP workspaces exist (%d in use), want none", calls, got, busy)
	}
	// brain's sessions have their pool, whatever MCP traffic does.
	for _, s := range []string{"brain-1", "brain-2"} {
		if _, m := h.exec(s, map[string]any{"command": "echo mine"}); m["stdout"] != "mine\n" {
			t.Fatalf("brain session %s: %v", s, m)
		}
	}
}

// TestMCPSessionsUseTheMCPPool: a client on the 2025-11-25 revision keeps
// its MCP session's workspace across calls, in the MCP pool, so a full
// MCP pool never refuses brain; brain's own _meta identity over MCP is a
// brain session.
func TestMCPSessionsUseTheMCPPool(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"SANDBOX_MAX_WORKSPACES": "1", "SANDBOX_MCP_MAX_WORKSPACES": "1"})
	a := h.mcpClient(t, "2025-11-25")
	if _, text, isErr := mcpCall(t, a, "sandbox_write_file", map[string]any{"path": "kept", "content": "1"}, nil); isErr {
		t.Fatal(text)
	}
	if m, text, _ := mcpCall(t, a, "sandbox_read_file", map[string]any{"path": "kept"}, nil); m["content"] != "1" {
		t.Fatalf("the MCP session's file: %s", text)
	}
	b := h.mcpClient(t, "2025-11-25")
	if _, text, isErr := mcpCall(t, b, "sandbox_list_files", map[string]any{}, nil); !isErr || !strings.Contains(text, "workspace for MCP clients") {
		t.Fatalf("a second MCP session with the MCP pool full: %s", text)
	}
	if _, text, isErr := mcpCall(t, b, "sandbox_list_files", map[string]any{}, mcp.Meta{service.MCPMetaSessionID: "brain-session"}); isErr {
		t.Fatalf("brain over MCP with the MCP pool full: %s", text)
	}
	if _, text, isErr := mcpCall(t, b, "sandbox_workspace_open", map[string]any{}, mcp.Meta{service.MCPMetaSessionID: "brain-session"}); !isErr || !strings.Contains(text, "has its workspace") {
		t.Fatalf("a handle for brain's session: %s", text)
	}
}
