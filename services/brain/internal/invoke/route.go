package invoke

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
)

// Invoker calls one tool and classifies what came back: *Caller over
// HTTP, mcpcall's Caller over MCP, and Route between them, which the
// server calls every tool through. Call never returns before the call has
// ended (see Caller.Call).
type Invoker interface {
	Call(ctx context.Context, t *config.Tool, req tool.Request, onProgress func(data json.RawMessage)) Outcome
}

var _ Invoker = (*Caller)(nil)

// Route is the one Invoker for the server: bindings with mcp_tool go to
// mcp, every other binding to http. With mcp nil, a binding with mcp_tool
// is refused before anything is sent (CodeMCPNotSupported).
func Route(http, mcp Invoker) Invoker { return router{http: http, mcp: mcp} }

type router struct{ http, mcp Invoker }

func (r router) Call(ctx context.Context, t *config.Tool, req tool.Request, onProgress func(data json.RawMessage)) Outcome {
	if t.MCPTool == "" {
		return r.http.Call(ctx, t, req, onProgress)
	}
	if r.mcp == nil {
		return mcpNotSupported(t)
	}
	return r.mcp.Call(ctx, t, req, onProgress)
}

// mcpNotSupported refuses a binding with mcp_tool given to a caller that
// does not speak MCP (the HTTP Caller, a Route without an MCP caller).
func mcpNotSupported(t *config.Tool) Outcome {
	return Refused(CodeMCPNotSupported, fmt.Sprintf("tool %s: MCP tool %q needs an MCP caller, and this invoker has none (invoke.Route)", t.Name, t.MCPTool))
}
