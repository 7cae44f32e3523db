package server

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/brain-tools/suite/services/brain/internal/config"
)

// closedURL returns an MCP endpoint on 127.0.0.1 where nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/mcp"
}

// TestMCPServerUnavailableAtSessionCreation: an optional MCP server that
// cannot be reached gives the session an mcp.unavailable event naming the
// server and the reason; a required one refuses the session with a 4xx
// naming the server.
func TestMCPServerUnavailableAtSessionCreation(t *testing.T) {
	optional, required := closedURL(t), closedURL(t)
	doc := map[string]any{
		"tools": []any{
			map[string]any{"name": "docs_search", "description": "d", "url": optional, "mcp_tool": "search", "tenants": []string{"t1"}, "input_schema": map[string]any{"type": "object"}},
			map[string]any{"name": "crm_lookup", "description": "d", "url": required, "mcp_tool": "lookup", "required": true, "tenants": []string{"t1"}, "input_schema": map[string]any{"type": "object"}},
			map[string]any{"name": "echo", "description": "d", "url": "http://127.0.0.1:1/tools/echo", "tenants": []string{"t1"}, "input_schema": map[string]any{"type": "object"}},
		},
		"api_keys": []any{map[string]string{"env": "KEY_ONE", "tenant": "t1"}},
	}
	data, _ := json.Marshal(doc)
	cfg, err := config.Parse(data, func(k string) string { return map[string]string{"KEY_ONE": apiKeys["t1"]}[k] })
	if err != nil {
		t.Fatal(err)
	}
	b := startBrain(t, func(o *Options) { o.Config = cfg })

	t.Run("optional server: session starts, event names it", func(t *testing.T) {
		s := b.session("t1", "docs_search", "echo")
		var found bool
		for _, e := range b.events("t1", s.ID) {
			if e.Type != "mcp.unavailable" {
				continue
			}
			found = true
			var d struct {
				Server, Reason string
				Tools          []string
				Required       bool
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			if d.Server != optional || d.Reason == "" || len(d.Tools) != 1 || d.Tools[0] != "docs_search" || d.Required {
				t.Errorf("mcp.unavailable data %s", e.Data)
			}
		}
		if !found {
			t.Fatalf("no mcp.unavailable event: %v", eventTypes(b.events("t1", s.ID)))
		}
	})
	t.Run("required server: creation refused naming it", func(t *testing.T) {
		r := b.do(http.MethodPost, "/sessions", "t1", map[string]any{"config": map[string]any{"tools": []string{"crm_lookup"}}})
		wantRefusal(t, r, http.StatusBadRequest, "invalid_request", required, "crm_lookup", "required")
	})
	t.Run("no MCP tools: nothing probed, no event", func(t *testing.T) {
		s := b.session("t1", "echo")
		for _, e := range b.events("t1", s.ID) {
			if strings.HasPrefix(e.Type, "mcp.") {
				t.Fatalf("unexpected %s", e.Type)
			}
		}
	})
}
