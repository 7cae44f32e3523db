package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// Who a call works for, and in which workspace.
//
// A call of the host (brain over HTTP, or over MCP with its _meta
// identity) works in the workspace of its tenant_id and session_id, in the
// Sessions pool. An MCP client without the host's identity works in the
// MCP pool, whose quota is its own (SANDBOX_MCP_MAX_WORKSPACES), so MCP
// traffic can never take the workspaces brain's sessions need:
//
//   - a client with an MCP session (2025-11-25) in its session's workspace;
//   - a stateless request (2026-07-28) has no session to come back in: its
//     call works in a workspace of its own that is removed when the call
//     ends (one-shot), unless it passes a workspace handle;
//   - a call passing a handle (the `workspace` argument, which only the MCP
//     tools publish) works in that handle's workspace, and its jobs belong
//     to the handle (jobs.HandleOwner): every call of the tenant that
//     presents the handle may read and cancel them, which is the one
//     deliberate exception to "a job belongs to its session". A handle is
//     128 bits from crypto/rand, issued by sandbox_workspace_open to one
//     tenant and valid only for that tenant, until sandbox_workspace_close
//     or SANDBOX_IDLE without use.

// scope is the owner and workspace use of one call.
type scope struct {
	owner jobs.Owner
	use   workspace.Use
	// oneShot is a stateless request without a handle: nothing kept for
	// it is ever asked for again.
	oneShot bool
}

// scopeOf works out the call's scope; a refusal is an is_error result
// naming the workspace argument.
func (s *Service) scopeOf(ctx context.Context, call *service.Call, handle *string) (scope, *tool.Result) {
	origin, overMCP := service.MCPCallOrigin(ctx)
	client := overMCP && origin != service.MCPOriginHost
	if handle != nil {
		switch {
		case !overMCP:
			return scope{}, fieldErr("workspace", "a workspace handle is for MCP clients without a session of their own; this call's session (%s) has its workspace", call.SessionID)
		case !client:
			return scope{}, fieldErr("workspace", "this call names its host's session (%s), which has its workspace; a handle is for MCP clients without one", call.SessionID)
		case !strings.HasPrefix(*handle, workspace.HandlePrefix) || !jobs.ValidID(strings.TrimPrefix(*handle, workspace.HandlePrefix)):
			return scope{}, fieldErr("workspace", "%q is not a workspace handle (ws_ and 26 characters of a-z and 2-7, from sandbox_workspace_open)", *handle)
		}
		return scope{owner: jobs.HandleOwner(call.TenantID, *handle), use: workspace.Use{Pool: workspace.MCP}}, nil
	}
	sc := scope{owner: jobs.CallOwner(call)}
	if client {
		sc.use.Pool = workspace.MCP
		sc.oneShot = origin == service.MCPOriginRequest
		sc.use.Once = sc.oneShot
	}
	return sc, nil
}

// jobScope is scopeOf for the job tools, which open no workspace: a
// handle must still name an open workspace of the tenant.
func (s *Service) jobScope(ctx context.Context, call *service.Call, handle *string) (scope, *tool.Result) {
	sc, bad := s.scopeOf(ctx, call, handle)
	if bad == nil && sc.owner.Handle != "" && !s.ws.HasHandle(sc.owner.Tenant, sc.owner.Handle) {
		return sc, s.workspaceRefusal(call, workspace.ErrNoHandle, workspace.MCP)
	}
	return sc, bad
}

// acquire opens the workspace of the call's scope.
func (s *Service) acquire(ctx context.Context, call *service.Call, handle *string) (*workspace.Workspace, func(), *tool.Result) {
	sc, bad := s.scopeOf(ctx, call, handle)
	if bad != nil {
		return nil, nil, bad
	}
	return s.acquireScope(call, sc)
}

func (s *Service) acquireScope(call *service.Call, sc scope) (*workspace.Workspace, func(), *tool.Result) {
	ws, release, err := s.ws.AcquireFor(sc.owner, sc.use)
	if err != nil {
		return nil, nil, s.workspaceRefusal(call, err, sc.use.Pool)
	}
	return ws, release, nil
}

// workspaceRefusal is the answer for a workspace that could not be had.
func (s *Service) workspaceRefusal(call *service.Call, err error, pool workspace.Pool) *tool.Result {
	switch {
	case errors.Is(err, workspace.ErrNoHandle):
		return fieldErr("workspace", "no workspace with this handle for this tenant: it was closed, or unused for %s and removed, or never issued; open a new one with sandbox_workspace_open", forHumans(s.ws.Idle()))
	case errors.Is(err, workspace.ErrFull) && pool == workspace.MCP:
		return tool.Errorf("sandbox: no room for a new workspace for MCP clients (the service's limit of MCP workspaces is reached; brain's sessions have their own); close handles you no longer need with sandbox_workspace_close, or try again later")
	case errors.Is(err, workspace.ErrFull):
		return tool.Errorf("sandbox: no room for a new workspace (the service's workspace limit is reached); try again later")
	}
	call.Logger.Error("acquire workspace", "err", err)
	return tool.Errorf("sandbox: open the session's workspace: internal error")
}

// guard makes every tool refuse a tenant outside Limits.Tenants: the
// service serves the tenants its operator listed, whatever a caller
// holding the token (or an MCP host's _meta) names.
func (s *Service) guard(ts []service.Tool) []service.Tool {
	for i := range ts {
		h := ts[i].Handler
		name := ts[i].Binding.Name
		ts[i].Handler = func(ctx context.Context, call *service.Call) *tool.Result {
			if !s.tenants[call.TenantID] {
				call.Logger.Warn("tenant refused", "tenant_id", call.TenantID)
				return tool.Errorf("%s: tenant %q is not served here (the service's TOOL_TENANTS does not list it)", name, strictjson.Clip(call.TenantID, 64))
			}
			return h(ctx, call)
		}
	}
	return ts
}

// handleDescription describes the workspace argument of the MCP tools.
const handleDescription = "A workspace handle from sandbox_workspace_open, for MCP clients without a session (the stateless 2026-07-28 revision): " +
	"calls that pass it share one workspace and its jobs. Without it, a stateless request works in a workspace of its own that is removed when the call ends."

// MCPTools returns the tools as /mcp serves them: Tools with an optional
// `workspace` argument (a handle) on each, plus sandbox_workspace_open and
// sandbox_workspace_close, which issue and withdraw handles. See "Who a
// call works for" above.
func (s *Service) MCPTools() []service.Tool {
	return append(s.tools(true), s.guard([]service.Tool{s.openTool(), s.closeTool()})...)
}

// declare is service.NewTool for one of the seven tools: b as POST
// /tools/<name> serves it, or with handle set its MCP twin, whose input
// schema also takes the workspace argument (every argument type has the
// Workspace field; over HTTP the schema refuses it).
func declare[In any](b tool.Binding, handle bool, fn service.TypedHandler[In, *tool.Result]) service.Tool {
	if handle {
		b.InputSchema = withHandle(b.InputSchema)
	}
	return service.NewTool(b, fn)
}

// withHandle adds the optional workspace property to an object schema.
func withHandle(in json.RawMessage) json.RawMessage {
	var m map[string]any
	if err := json.Unmarshal(in, &m); err != nil {
		panic(err)
	}
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	props["workspace"] = map[string]any{"type": "string", "pattern": workspace.HandlePattern, "description": handleDescription}
	m["properties"] = props
	return mustJSON(m)
}

var handleOutputSchema = mustJSON(map[string]any{
	"type": "object",
	"properties": map[string]any{
		"workspace":         map[string]any{"type": "string"},
		"idle_seconds":      map[string]any{"type": "integer", "description": "The workspace is removed after this long without a call."},
		"cancelled_job_ids": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
	},
	"required": []string{"workspace"},
})

type noArgs struct{}

type closeArgs struct {
	Workspace string `json:"workspace"`
}

func (s *Service) openTool() service.Tool {
	return service.NewTool(tool.Binding{
		Name:  "sandbox_workspace_open",
		Title: "Open a workspace",
		// It adds an empty workspace of the service's own.
		Annotations: &tool.Annotations{DestructiveHint: new(bool), OpenWorldHint: new(bool)},
		Description: "Open a sandbox workspace for several calls and return its handle. Pass the handle as `workspace` to the other sandbox tools: " +
			"they then share its files and jobs. For MCP clients without a session (the stateless 2026-07-28 revision), whose calls are otherwise one-shot. " +
			"The workspace is removed after it goes unused for a while, or by sandbox_workspace_close.",
		InputSchema:    mustJSON(map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false}),
		OutputSchema:   handleOutputSchema,
		TimeoutSeconds: 30,
	},
		func(ctx context.Context, call *service.Call, _ noArgs) (*tool.Result, error) {
			if o, ok := service.MCPCallOrigin(ctx); !ok || o == service.MCPOriginHost {
				return tool.Errorf("sandbox_workspace_open: this call's session (%s) has its workspace; handles are for MCP clients without one", call.SessionID), nil
			}
			h, _, err := s.ws.OpenHandle(call.TenantID)
			if err != nil {
				return s.workspaceRefusal(call, err, workspace.MCP), nil
			}
			call.Logger.Info("workspace handle opened")
			idle := int(s.ws.Idle().Seconds())
			return mustResult(tool.StructuredResult(map[string]any{"workspace": h, "idle_seconds": idle},
				fmt.Sprintf("Opened workspace %s. Pass it as workspace to the sandbox tools; it is removed after %s unused, or by sandbox_workspace_close.", h, forHumans(s.ws.Idle())))), nil
		})

}

func (s *Service) closeTool() service.Tool {
	return service.NewTool(tool.Binding{
		Name:  "sandbox_workspace_close",
		Title: "Close a workspace",
		// It removes the workspace's files and stops its jobs; closing
		// again changes nothing.
		Annotations: &tool.Annotations{IdempotentHint: true, OpenWorldHint: new(bool)},
		Description: "Close a workspace opened with sandbox_workspace_open: cancel its running jobs and remove its files. The handle is then no longer valid.",
		InputSchema: mustJSON(map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"workspace": map[string]any{"type": "string", "pattern": workspace.HandlePattern, "description": "The handle sandbox_workspace_open returned."}},
			"required":             []string{"workspace"},
			"additionalProperties": false,
		}),
		OutputSchema:   handleOutputSchema,
		TimeoutSeconds: 60,
	},
		func(ctx context.Context, call *service.Call, args closeArgs) (*tool.Result, error) {
			sc, bad := s.scopeOf(ctx, call, &args.Workspace)
			if bad != nil {
				return bad, nil
			}
			// The handle must be valid before its jobs are touched.
			_, release, bad := s.acquireScope(call, sc)
			if bad != nil {
				return bad, nil
			}
			release()
			cancelled := []string{}
			for _, id := range s.runningJobs(sc.owner) {
				if _, err := s.jobs.Cancel(ctx, sc.owner, id); err == nil {
					cancelled = append(cancelled, id)
				}
			}
			if err := s.ws.CloseHandle(ctx, call.TenantID, args.Workspace); err != nil && !errors.Is(err, workspace.ErrNoHandle) {
				call.Logger.Error("close workspace handle", "err", err)
				return tool.Errorf("sandbox_workspace_close: internal error"), nil
			}
			call.Logger.Info("workspace handle closed", "cancelled", len(cancelled))
			return mustResult(tool.StructuredResult(map[string]any{"workspace": args.Workspace, "cancelled_job_ids": cancelled},
				fmt.Sprintf("Closed workspace %s; cancelled %d running job(s).", args.Workspace, len(cancelled)))), nil
		})

}

// runningJobs returns the IDs of owner's jobs that have not ended.
func (s *Service) runningJobs(owner jobs.Owner) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, jr := range s.runs {
		if jr.owner == owner && jr.ended.IsZero() {
			ids = append(ids, id)
		}
	}
	return ids
}
