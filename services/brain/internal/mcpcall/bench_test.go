package mcpcall

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
)

var echoBinding = tool.Binding{Name: "echo", Description: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}

func echoHandler(_ context.Context, c *service.Call) *tool.Result {
	var a struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c.Arguments, &a); err != nil {
		return tool.Errorf("arguments: %v", err)
	}
	return tool.TextResult("%s", a.Text)
}

// echoService is a tool service with one echo tool, serving POST
// /tools/echo and /mcp behind the same token.
func echoService(b *testing.B) string {
	b.Helper()
	cfg, err := service.ParseEnv[service.Config](map[string]string{"ADDR": "127.0.0.1:0", "BRAIN_TOOLS_KEY": secret})
	if err != nil {
		b.Fatal(err)
	}
	srv := &service.Server{Name: "bench", Config: cfg, Tools: []service.Tool{{Binding: echoBinding, Handler: echoHandler}}}
	ts := httptest.NewServer(srv.Handler())
	b.Cleanup(ts.Close)
	return ts.URL
}

// BenchmarkEchoCall compares one echo call through brain's two callers
// against the same service: HTTP (POST /tools/echo, package invoke) and MCP
// (tools/call on /mcp) on each revision. Run:
//
//	go test -run '^$' -bench EchoCall -benchtime 2000x ./services/brain/internal/mcpcall
func BenchmarkEchoCall(b *testing.B) {
	base := echoService(b)
	httpTool := bind(b, "echo", base+"/tools/echo", "x", func(m map[string]any) { delete(m, "mcp_tool") })
	mcpTool := bind(b, "echo", base+service.MCPPath, "echo", nil)
	req := request(`{"text":"hello"}`)

	b.Run("http", func(b *testing.B) {
		c := invoke.New(invoke.Options{})
		for b.Loop() {
			if o := c.Call(context.Background(), httpTool, req, nil); o.Status != invoke.StatusSucceeded {
				b.Fatal(o.ErrorMessage)
			}
		}
	})
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		b.Run("mcp-"+rev, func(b *testing.B) {
			c := New(Options{ProtocolVersion: rev})
			defer c.Close()
			// The session is opened once, before timing.
			if o := c.Call(context.Background(), mcpTool, req, nil); o.Status != invoke.StatusSucceeded {
				b.Fatal(o.ErrorMessage)
			}
			for b.Loop() {
				if o := c.Call(context.Background(), mcpTool, req, nil); o.Status != invoke.StatusSucceeded {
					b.Fatal(o.ErrorMessage)
				}
			}
		})
	}
}
