package mcpcall

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
)

// Unavailable is an MCP server a new session cannot reach: the data of the
// session's mcp.unavailable event, and what a refusal names when the
// server is required.
type Unavailable struct {
	// Server is the server's URL as the bindings name it.
	Server string `json:"server"`
	// Reason says what went wrong, e.g. "connect: connection refused".
	Reason string `json:"reason"`
	// Tools are the session's tools served by that server, by binding name.
	Tools []string `json:"tools"`
	// Required is true when one of those bindings is marked required.
	Required bool `json:"required"`
}

// Probe connects to every MCP server that tools use (bindings with
// mcp_tool; others are ignored), at once, each within Options.ProbeTimeout
// and ctx, and returns the servers it could not reach, in URL order. A
// server reached stays pooled for the session's calls. required reports
// whether a binding is marked required; nil means none is.
//
// The session API turns the result into one mcp.unavailable event per
// server, or, when any is Required, refuses to create the session with a
// 4xx whose message is RequiredError's.
func (c *Caller) Probe(ctx context.Context, tools []*config.Tool, required func(*config.Tool) bool) []Unavailable {
	type group struct {
		ep Endpoint
		u  Unavailable
	}
	groups := map[string]*group{}
	for _, t := range tools {
		if t.MCPTool == "" {
			continue
		}
		ep := endpointOf(t)
		key := ep.key()
		g := groups[key]
		if g == nil {
			g = &group{ep: ep, u: Unavailable{Server: t.URL}}
			groups[key] = g
		}
		g.u.Tools = append(g.u.Tools, t.Name)
		if required != nil && required(t) {
			g.u.Required = true
		}
	}
	var (
		mu  sync.Mutex
		out []Unavailable
		wg  sync.WaitGroup
	)
	for _, g := range groups {
		wg.Go(func() {
			pctx, cancel := context.WithTimeoutCause(ctx, c.opts.ProbeTimeout, fmt.Errorf("no answer within %s", c.opts.ProbeTimeout))
			defer cancel()
			if _, err := c.pool.get(pctx, g.ep); err != nil {
				u := g.u
				u.Reason = mcpReason(err)
				if pctx.Err() != nil {
					u.Reason = context.Cause(pctx).Error()
				}
				mu.Lock()
				out = append(out, u)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out
}

// RequiredError is the refusal of a session whose required MCP servers are
// unreachable: it names each server and what went wrong. It is nil when no
// server in u is required.
func RequiredError(u []Unavailable) error {
	var parts []string
	for _, s := range u {
		if s.Required {
			parts = append(parts, fmt.Sprintf("%s: %s (tools %s)", s.Server, s.Reason, strings.Join(s.Tools, ", ")))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("required MCP server unavailable: %s; the session cannot start without it: fix the server, or set \"required\": false on its bindings to start with fewer tools", strings.Join(parts, "; "))
}

// EventData is u as the JSON data of an mcp.unavailable event.
func (u Unavailable) EventData() json.RawMessage {
	data, _ := json.Marshal(u)
	return data
}

var _ invoke.Invoker = (*Caller)(nil)
