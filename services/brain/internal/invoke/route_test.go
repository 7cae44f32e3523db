package invoke

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
)

// countingInvoker answers every call with its name and counts them.
type countingInvoker struct {
	name  string
	calls atomic.Int32
}

func (c *countingInvoker) Call(context.Context, *config.Tool, tool.Request, func(json.RawMessage)) Outcome {
	c.calls.Add(1)
	return Outcome{Result: *tool.TextResult("%s", c.name), Status: StatusSucceeded, Sent: true}
}

// TestRoute: a binding with mcp_tool goes to the MCP invoker and any other
// to the HTTP one; a Route without an MCP invoker, and the HTTP Caller
// itself, refuse a binding with mcp_tool before sending anything
// (mcp_not_supported, a known outcome).
func TestRoute(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	httpTool := newTool(t, srv.URL+"/tools/echo", nil)
	mcpTool := newTool(t, srv.URL+"/mcp", func(b map[string]any) { b["mcp_tool"] = "remote_echo" })
	req := tool.Request{TenantID: "local", SessionID: "s", CallID: "c", Arguments: json.RawMessage(`{"text":"x"}`)}

	h, m := &countingInvoker{name: "http"}, &countingInvoker{name: "mcp"}
	r := Route(h, m)
	if o := r.Call(context.Background(), httpTool, req, nil); o.Result.Content[0].Text != "http" {
		t.Errorf("HTTP binding: %+v", o)
	}
	if o := r.Call(context.Background(), mcpTool, req, nil); o.Result.Content[0].Text != "mcp" {
		t.Errorf("MCP binding: %+v", o)
	}
	if h.calls.Load() != 1 || m.calls.Load() != 1 {
		t.Errorf("calls: http %d, mcp %d, want 1 each", h.calls.Load(), m.calls.Load())
	}
	for name, inv := range map[string]Invoker{"Route without MCP": Route(h, nil), "the HTTP Caller": New(Options{})} {
		o := inv.Call(context.Background(), mcpTool, req, nil)
		if o.ErrorCode != CodeMCPNotSupported || o.Sent || o.Result.UnknownOutcome || !strings.Contains(o.ErrorMessage, `MCP tool "remote_echo"`) {
			t.Errorf("%s: %+v, want a known-outcome %s refusal", name, o, CodeMCPNotSupported)
		}
	}
	if hits.Load() != 0 || h.calls.Load() != 1 {
		t.Errorf("a refused MCP binding reached a transport: %d requests, %d HTTP calls", hits.Load(), h.calls.Load())
	}
}
