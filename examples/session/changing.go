package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// changingTools shows tools that change while brain runs, as a tenant
// makes them through the API: a secret, a custom tool updated to a new
// revision (and a stale update refused), a toolset of it and echo, then a
// second session made from the toolset, whose tool set is replaced with
// one PUT — the custom tool, a function tool the demo answers, and the
// local service's MCP endpoint with allowed_tools — read back with its
// secret redacted, and each of its tools called.
//
// The custom tool and the MCP server are the local service on loopback:
// the tenant's urls go through brain's SSRF guard, and make run starts
// brain with BRAIN_TENANT_URL_ALLOW=127.0.0.1 to let exactly that address
// through. The local service's token is BRAIN_TOOLS_KEY, stored as the
// tenant's secret.
func changingTools(ctx context.Context, c *client, localURL string, p func(string, ...any)) error {
	token := os.Getenv("BRAIN_TOOLS_KEY")
	if token == "" {
		p("\n== tools that change while brain runs: skipped (BRAIN_TOOLS_KEY, the local service's token, is not set)")
		return nil
	}
	p("\n== tools that change while brain runs")
	if _, err := c.do(ctx, http.MethodPut, "/secrets/local-tools", map[string]any{"value": token}, nil); err != nil {
		return err
	}
	p("  PUT /secrets/local-tools: stored (write-only: brain never shows its value)")
	schema := map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string", "maxLength": 4096}},
		"required": []string{"text"}, "additionalProperties": false}
	def := map[string]any{"name": "shout", "description": "Repeat text back (the tenant's own tool, served by the local echo).",
		"url": localURL + "/tools/echo", "auth_secret_name": "local-tools", "input_schema": schema}
	var tool struct {
		ID                string `json:"id"`
		Description       string `json:"description"`
		CurrentRevisionID string `json:"current_revision_id"`
	}
	if _, err := c.do(ctx, http.MethodPost, "/custom_tools", def, &tool); err != nil {
		return err
	}
	first := tool.CurrentRevisionID
	p("  POST /custom_tools shout → %s at revision %s", tool.ID, first)
	def["description"] = "Repeat text back, word for word (revised)."
	def["current_revision_id"] = first
	if _, err := c.do(ctx, http.MethodPut, "/custom_tools/"+tool.ID, def, &tool); err != nil {
		return err
	}
	p("  PUT /custom_tools/%s from %s → revision %s", tool.ID, first, tool.CurrentRevisionID)
	_, err := c.do(ctx, http.MethodPut, "/custom_tools/"+tool.ID, def, nil)
	var ae *apiError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		return fmt.Errorf("an update from a stale revision: %v, want 409", err)
	}
	p("  PUT again from %s (stale) → %d %s: %s", first, ae.Status, ae.Body.Error.Code, ae.Body.Error.Message)

	// A toolset: a named list of the tenant's tools, the operator's and its
	// own; a session made from it starts with those tools.
	var toolset struct {
		ID    string   `json:"id"`
		Tools []string `json:"tools"`
	}
	if _, err := c.do(ctx, http.MethodPost, "/toolsets", map[string]any{"name": "delivery desk", "description": "What the delivery agent may use.",
		"tools": []string{"shout", "echo"}}, &toolset); err != nil {
		return err
	}
	p("  POST /toolsets \"delivery desk\" → %s with %v", toolset.ID, toolset.Tools)
	var session struct {
		ID    string   `json:"id"`
		Tools []string `json:"tools"`
	}
	if _, err := c.do(ctx, http.MethodPost, "/sessions", map[string]any{"config": map[string]any{"toolset_id": toolset.ID}}, &session); err != nil {
		return err
	}
	p("  POST /sessions with toolset_id %s → %s with tools %v", toolset.ID, session.ID, session.Tools)
	tc, err := c.call(ctx, session.ID, "echo", map[string]any{"text": "a tool of the toolset"})
	if err != nil {
		return err
	}
	p("  echo (from the toolset) → %s: %s", tc.Status, text(tc.Result))
	set := []any{
		map[string]any{"name": "shout"},
		map[string]any{"type": "function", "name": "confirm_address", "description": "Ask the application to confirm a delivery address.",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"address": map[string]any{"type": "string"}}, "required": []string{"address"}}},
		map[string]any{"type": "mcp", "name": "local", "url": localURL + "/mcp", "authorization": token, "allowed_tools": []string{"echo"}, "required": true},
	}
	var readBack json.RawMessage
	if _, err := c.do(ctx, http.MethodPut, "/sessions/"+session.ID+"/tools", map[string]any{"tools": set}, &readBack); err != nil {
		return err
	}
	if strings.Contains(string(readBack), token) {
		return errors.New("the tool set's read-back shows the MCP server's authorization")
	}
	p("\n== PUT /sessions/%s/tools → the set as brain reads it back (authorization redacted):\n%s", session.ID, indent(string(readBack)))
	tc, err = c.call(ctx, session.ID, "shout", map[string]any{"text": "a custom tool, at its current revision"})
	if err != nil {
		return err
	}
	rev := ""
	if tc.RevisionID != nil {
		rev = *tc.RevisionID
	}
	p("\n== shout (custom tool, revision %s) → %s\n%s", rev, tc.Status, indent(text(tc.Result)))
	tc, err = c.call(ctx, session.ID, "local.echo", map[string]any{"text": "through the session's own MCP server"})
	if err != nil {
		return err
	}
	p("\n== local.echo (the session's MCP server) → %s\n%s", tc.Status, indent(text(tc.Result)))
	var pending toolCall
	if _, err := c.do(ctx, http.MethodPost, "/sessions/"+session.ID+"/tool_calls",
		map[string]any{"tool": "confirm_address", "arguments": map[string]any{"address": "1 Main St"}}, &pending); err != nil {
		return err
	}
	if _, err := c.do(ctx, http.MethodPost, "/tool_calls/"+pending.ID+"/respond",
		map[string]any{"content": []any{map[string]any{"type": "text", "text": "confirmed: 1 Main St"}}}, &pending); err != nil {
		return err
	}
	p("\n== confirm_address (the session's function tool) waited in requires_input; the demo answered → %s\n%s",
		pending.Status, indent(text(pending.Result)))
	_, err = c.do(ctx, http.MethodPost, "/sessions/"+session.ID+"/close", nil, nil)
	return err
}
