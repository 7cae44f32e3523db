package mcpcall

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/brain-tools/suite/pkg/bearer"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
)

// TestOwnServiceOverMCP calls a tool service's tools through its /mcp
// endpoint (service.NewMCPHandler), as a binding with mcp_tool pointing at a
// service of the suite would: both halves of the issue against each other,
// on both revisions.
func TestOwnServiceOverMCP(t *testing.T) {
	obj := json.RawMessage(`{"type":"object"}`)
	seen := make(chan tool.Request, 10)
	tools := []service.Tool{
		service.NewTool(tool.Binding{Name: "echo", Description: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
			func(_ context.Context, c *service.Call, a struct {
				Text string `json:"text"`
			}) (*tool.Result, error) {
				select {
				case seen <- c.Request:
				default:
				}
				_ = c.Progress(map[string]string{"status": "echoing"})
				return tool.TextResult("%s", a.Text), nil
			}),
		{Binding: tool.Binding{Name: "flaky", Description: "flaky", InputSchema: obj},
			Handler: func(context.Context, *service.Call) *tool.Result {
				return &tool.Result{Content: []tool.Content{tool.Text("upstream timed out")}, IsError: true, UnknownOutcome: true}
			}},
		{Binding: tool.Binding{Name: "count", Description: "count", InputSchema: obj, OutputSchema: json.RawMessage(`{"type":"object","required":["n"]}`)},
			Handler: func(context.Context, *service.Call) *tool.Result {
				r, _ := tool.StructuredResult(map[string]int{"n": 7}, "")
				return r
			}},
	}
	h, err := service.NewMCPHandler(tools, service.MCPOptions{Tenant: "local"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(bearer.Require(secret, h))
	defer ts.Close()

	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(rev, func(t *testing.T) {
			c := New(Options{ProtocolVersion: rev})
			defer c.Close()
			var mu sync.Mutex
			var progress []string
			o := c.Call(context.Background(), bind(t, "echo", ts.URL, "echo", nil), request(`{"text":"over mcp"}`), func(d json.RawMessage) {
				mu.Lock()
				progress = append(progress, string(d))
				mu.Unlock()
			})
			if o.Status != invoke.StatusSucceeded || o.Result.Content[0].Text != "over mcp" {
				t.Fatalf("echo: %+v", o)
			}
			// The tool sees brain's identity, not the pooled MCP session's:
			// per-session state (a sandbox workspace) follows brain's session.
			want := request(`{}`)
			if got := <-seen; got.TenantID != want.TenantID || got.SessionID != want.SessionID || got.CallID != want.CallID {
				t.Errorf("tool saw tenant %q session %q call %q, want brain's %q %q %q", got.TenantID, got.SessionID, got.CallID, want.TenantID, want.SessionID, want.CallID)
			}
			if got := agreed(t, c, ts.URL); got != rev {
				t.Errorf("revision %s, want %s", got, rev)
			}
			mu.Lock()
			// Progress may trail the result; what arrived is in order and
			// carries the service's payload as the message.
			if len(progress) > 1 || (len(progress) == 1 && progress[0] != `{"progress":1,"message":"{\"status\":\"echoing\"}"}`) {
				t.Errorf("progress = %q", progress)
			}
			mu.Unlock()

			o = c.Call(context.Background(), bind(t, "flaky", ts.URL, "flaky", nil), request(`{}`), nil)
			if o.ErrorCode != invoke.CodeToolError || !o.Result.UnknownOutcome {
				t.Errorf("unknown_outcome did not survive MCP: %+v", o)
			}
			o = c.Call(context.Background(), bind(t, "count", ts.URL, "count", func(b map[string]any) {
				b["output_schema"] = map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}
			}), request(`{}`), nil)
			if o.Status != invoke.StatusSucceeded || string(o.Result.StructuredContent) != `{"n":7}` || !cmp.Equal(o.Result.Content, []tool.Content{tool.Text(`{"n":7}`)}) {
				t.Errorf("structured: %+v", o)
			}
		})
	}
}
