package server

import (
	"github.com/brain-tools/suite/pkg/httpapi"

	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestToolsets: create, read, list, update, delete; a session made from a
// toolset gets its tools (host config and custom) as they are then; every
// refusal names its field.
func TestToolsets(t *testing.T) {
	b := startBrain(t, allowLoopback, func(o *Options) { o.Limits.Toolsets = 2 })
	b.secretTool("t1", "crm", "echo", nil)
	var ts ToolsetJSON
	b.created("/toolsets", "t1", map[string]any{"name": "checkout tools", "description": "for checkout", "tools": []string{"echo", "crm"}}, &ts)
	if !strings.HasPrefix(ts.ID, "tset_") || !slices.Equal(ts.Tools, []string{"echo", "crm"}) || ts.Description == nil {
		t.Fatalf("created %+v", ts)
	}
	var got ToolsetJSON
	b.ok("GET", "/toolsets/"+ts.ID, "t1", nil, &got)
	if got.Name != "checkout tools" {
		t.Errorf("read %+v", got)
	}
	var sess SessionJSON
	b.created("/sessions", "t1", map[string]any{"config": map[string]any{"toolset_id": ts.ID}}, &sess)
	if !slices.Equal(sess.Tools, []string{"echo", "crm"}) {
		t.Fatalf("session from toolset: tools %v", sess.Tools)
	}
	if _, c := b.call("t1", sess.ID, "crm", map[string]any{"text": "via toolset"}, 5); c.Status != "succeeded" {
		t.Fatalf("custom tool from a toolset: %+v", c)
	}
	// Changing the toolset changes no session already made from it.
	b.ok("PUT", "/toolsets/"+ts.ID, "t1", map[string]any{"name": "just echo", "tools": []string{"echo"}}, &got)
	if got.Name != "just echo" || !slices.Equal(got.Tools, []string{"echo"}) || got.Description != nil || got.CreatedAt != ts.CreatedAt {
		t.Errorf("updated %+v", got)
	}
	var again SessionJSON
	b.ok("GET", "/sessions/"+sess.ID, "t1", nil, &again)
	if !slices.Equal(again.Tools, []string{"echo", "crm"}) {
		t.Errorf("session after its toolset changed: %v", again.Tools)
	}
	many := make([]string, MaxSessionTools+1)
	for i := range many {
		many[i] = "echo"
	}
	tests := []struct {
		name string
		body any
		want []string
	}{
		{"no name", map[string]any{"tools": []string{}}, []string{"name", "required"}},
		{"blank name", map[string]any{"name": " "}, []string{"name", "blank"}},
		{"long name", map[string]any{"name": strings.Repeat("é", MaxToolsetNameChars+1)}, []string{"name", "64"}},
		{"long description", map[string]any{"name": "x", "description": strings.Repeat("d", MaxToolsetDescriptionChars+1)}, []string{"description", "1024"}},
		{"unknown tool", map[string]any{"name": "x", "tools": []string{"nope"}}, []string{"tools[0]", "nope"}},
		{"other tenant's tool", map[string]any{"name": "x", "tools": []string{"secret"}}, []string{"tools[0]", "secret"}},
		{"duplicate", map[string]any{"name": "x", "tools": []string{"echo", "echo"}}, []string{"tools[1]", "twice"}},
		{"too many", map[string]any{"name": "x", "tools": many}, []string{"tools", "33", "32"}},
		{"null tool", map[string]any{"name": "x", "tools": []any{nil}}, []string{"tools[0]"}},
		{"unknown field", map[string]any{"name": "x", "toolNames": []string{}}, []string{"toolNames", "unknown field"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantRefusal(t, b.do("POST", "/toolsets", "t1", tt.body), 400, httpapi.CodeInvalidRequest, tt.want...)
		})
	}
	t.Run("longest name and description, 32 tools", func(t *testing.T) {
		b := b.with(t)
		full := []string{}
		for i := range MaxSessionTools {
			name := fmt.Sprintf("c%d", i)
			b.created("/custom_tools", "t1", map[string]any{"name": name, "description": "d", "url": b.tools.URL + "/tools/echo", "input_schema": map[string]any{"type": "object"}}, &CustomToolJSON{})
			full = append(full, name)
		}
		var ok ToolsetJSON
		b.created("/toolsets", "t1", map[string]any{"name": strings.Repeat("é", MaxToolsetNameChars),
			"description": strings.Repeat("d", MaxToolsetDescriptionChars), "tools": full}, &ok)
		var s SessionJSON
		b.created("/sessions", "t1", map[string]any{"config": map[string]any{"tools": full}}, &s)
		wantRefusal(t, b.do("POST", "/toolsets", "t1", map[string]any{"name": "third"}), 409, httpapi.CodeConflict, "toolsets", "2")
	})
	sessionRefusals := []struct {
		name string
		cfg  map[string]any
		want []string
	}{
		{"both", map[string]any{"tools": []string{"echo"}, "toolset_id": ts.ID}, []string{"config.toolset_id", "not both"}},
		{"unknown toolset", map[string]any{"toolset_id": "tset_nope"}, []string{"config.toolset_id", "tset_nope"}},
		{"too many tools", map[string]any{"tools": many}, []string{"config.tools", "32"}},
	}
	for _, tt := range sessionRefusals {
		t.Run("session "+tt.name, func(t *testing.T) {
			wantRefusal(t, b.do("POST", "/sessions", "t1", map[string]any{"config": tt.cfg}), 400, httpapi.CodeInvalidRequest, tt.want...)
		})
	}
	t.Run("a toolset naming a tool deleted since", func(t *testing.T) {
		var ct CustomToolJSON
		b.created("/custom_tools", "t1", map[string]any{"name": "gone", "description": "d", "url": b.tools.URL + "/tools/echo", "input_schema": map[string]any{"type": "object"}}, &ct)
		var gone ToolsetJSON
		b.ok("PUT", "/toolsets/"+ts.ID, "t1", map[string]any{"name": "x", "tools": []string{"gone"}}, &gone)
		b.ok("DELETE", "/custom_tools/"+ct.ID, "t1", nil, nil)
		wantRefusal(t, b.do("POST", "/sessions", "t1", map[string]any{"config": map[string]any{"toolset_id": ts.ID}}), 400, httpapi.CodeInvalidRequest,
			"config.toolset_id", ts.ID, "gone")
	})
	t.Run("delete", func(t *testing.T) {
		b.ok("DELETE", "/toolsets/"+ts.ID, "t1", nil, nil)
		for _, m := range []string{"GET", "DELETE"} {
			wantRefusal(t, b.do(m, "/toolsets/"+ts.ID, "t1", nil), 404, httpapi.CodeNotFound, ts.ID)
		}
		wantRefusal(t, b.do("PUT", "/toolsets/"+ts.ID, "t1", map[string]any{"name": "x"}), 404, httpapi.CodeNotFound, ts.ID)
		var list struct{ Toolsets []ToolsetJSON }
		b.ok("GET", "/toolsets", "t1", nil, &list)
		if len(list.Toolsets) != 1 {
			t.Errorf("list after delete: %d toolsets", len(list.Toolsets))
		}
	})
}
