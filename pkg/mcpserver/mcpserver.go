// Package mcpserver names the suite's MCP endpoint for the packages that
// speak to it from outside pkg/service: the _meta keys brain's MCP client
// reads and writes, and the path. The endpoint itself is part of the
// service runtime: every service.Server serves its tools over MCP at /mcp
// (Streamable HTTP, revisions 2025-11-25 and 2026-07-28) by default,
// behind its bearer token, through the same call core as POST
// /tools/<name> (see service.MCPHandler for identities, results and
// progress).
//
// New and Attach predate that and keep working: Attach only sets the
// options of the endpoint a Server now serves on its own.
package mcpserver

import (
	"errors"
	"strings"

	"github.com/brain-tools/suite/pkg/service"
)

// Path is where a service.Server serves MCP.
const Path = service.MCPPath

// MetaUnknownOutcome is the CallToolResult _meta key that carries the
// contract's unknown_outcome (service.MCPMetaUnknownOutcome).
const MetaUnknownOutcome = service.MCPMetaUnknownOutcome

// The _meta keys of a tools/call request through which a host that holds
// the service's bearer token (brain) states the call's identity
// (service.MCPMetaTenantID and the rest).
const (
	MetaTenantID  = service.MCPMetaTenantID
	MetaSessionID = service.MCPMetaSessionID
	MetaCallID    = service.MCPMetaCallID
)

// maxMetaID caps an identity given in _meta (service.MCPMaxMetaID).
const maxMetaID = service.MCPMaxMetaID

// DefaultSessionIdle is Options.SessionIdle when unset.
const DefaultSessionIdle = service.DefaultSessionIdle

// ValidName reports whether name may be published as an MCP tool name:
// ^[a-z0-9_-]{1,64}$.
func ValidName(name string) bool { return service.ValidMCPName(name) }

// Options configure the MCP endpoint.
//
// Deprecated: use service.MCPOptions (Server.MCP), which this is.
type Options = service.MCPOptions

// Handler serves MCP at one endpoint.
//
// Deprecated: use service.MCPHandler, which this is.
type Handler = service.MCPHandler

// New builds the MCP endpoint for tools; see service.NewMCPHandler.
//
// Deprecated: a service.Server serves /mcp on its own; use
// service.NewMCPHandler to mount the endpoint elsewhere.
func New(tools []service.Tool, o Options) (*Handler, error) {
	h, err := service.NewMCPHandler(tools, o)
	if err != nil {
		return nil, errors.New("mcpserver: " + strings.TrimPrefix(err.Error(), "mcp: "))
	}
	return h, nil
}

// Attach sets the options of the /mcp endpoint s serves (unset ones come
// from s, see service.MCPOptions) and checks that s's tools can be served
// over MCP. Call it before s.Handler.
//
// Deprecated: /mcp is on by default; set s.MCP instead. Phase 2 of issue
// 16 removes the Attach calls from the services.
func Attach(s *service.Server, o Options) error {
	if s.Built() {
		return errors.New("attach /mcp: the service's handler is already built, so /mcp would never be served: attach before Handler or Run")
	}
	s.MCP = o
	if err := s.CheckMCP(); err != nil {
		return errors.New("mcpserver: " + strings.TrimPrefix(err.Error(), "mcp: "))
	}
	return nil
}
