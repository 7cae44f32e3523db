package server

import (
	"github.com/brain-tools/suite/pkg/httpapi"

	"bytes"
	"net/http"
	"strings"
	"testing"
)

// TestTenantsKeepToThemselves: whatever IDs and names it sends, a tenant
// never sees, calls, updates or deletes another tenant's custom tools,
// revisions, toolsets, secrets or session tool sets; each reads as not
// found (or, named in a body, as unknown), the same as one that never
// existed.
func TestTenantsKeepToThemselves(t *testing.T) {
	b := startBrain(t, allowLoopback)
	// t1's things.
	ct := b.secretTool("t1", "crm", "echo", nil) // also t1's secret "tools"
	if r := b.do("PUT", "/secrets/only-t1", "t1", map[string]any{"value": "t1-only-secret-value"}); r.status != http.StatusCreated {
		t.Fatalf("put secret: %d %s", r.status, r.body)
	}
	var ts ToolsetJSON
	b.created("/toolsets", "t1", map[string]any{"name": "t1 set", "tools": []string{"crm"}}, &ts)
	sess := b.session("t1", "crm")
	b.ok("PUT", "/sessions/"+sess.ID+"/tools", "t1", map[string]any{"tools": []any{
		map[string]any{"name": "crm"}, map[string]any{"type": "function", "name": "lookup", "description": "d"}}}, nil)

	customBody := map[string]any{"name": "crm", "description": "mine", "url": b.tools.URL + "/tools/echo",
		"input_schema": map[string]any{"type": "object"}, "current_revision_id": ct.CurrentRevisionID}
	notFound := []struct {
		method, path string
		body         any
	}{
		{"GET", "/custom_tools/" + ct.ID, nil},
		{"PUT", "/custom_tools/" + ct.ID, customBody},
		{"DELETE", "/custom_tools/" + ct.ID, nil},
		{"GET", "/tool_revisions/" + ct.CurrentRevisionID, nil},
		{"GET", "/toolsets/" + ts.ID, nil},
		{"PUT", "/toolsets/" + ts.ID, map[string]any{"name": "taken"}},
		{"DELETE", "/toolsets/" + ts.ID, nil},
		{"GET", "/secrets/only-t1", nil},
		{"DELETE", "/secrets/only-t1", nil},
		{"GET", "/sessions/" + sess.ID + "/tools", nil},
		{"PUT", "/sessions/" + sess.ID + "/tools", map[string]any{"tools": []any{}}},
		{"POST", "/sessions/" + sess.ID + "/tool_calls", map[string]any{"tool": "crm"}},
	}
	// t1's ids, each with one of the same kind that never existed: what t2
	// gets for t1's must be what it gets for the made-up one, word for word
	// but for the id, so that nothing tells t2 that t1's exists.
	madeUp := strings.NewReplacer(ct.ID, "ctool_madeup", ct.CurrentRevisionID, "rev_madeup", ts.ID, "tset_madeup",
		"only-t1", "made-up", sess.ID, "ses_madeup")
	for _, tt := range notFound {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := b.do(tt.method, tt.path, "t2", tt.body)
			wantRefusal(t, r, http.StatusNotFound, httpapi.CodeNotFound)
			never := b.do(tt.method, madeUp.Replace(tt.path), "t2", tt.body)
			var got, want errBody
			r.json(t, &got)
			never.json(t, &want)
			if never.status != r.status || madeUp.Replace(got.Error.Message) != want.Error.Message || got.Error.Code != want.Error.Code {
				t.Errorf("t1's id as t2: %d %q; an id that never existed: %d %q", r.status, got.Error.Message, never.status, want.Error.Message)
			}
		})
	}
	unknown := []struct {
		name, path string
		body       any
		want       string
	}{
		{"session with t1's custom tool", "/sessions", map[string]any{"config": map[string]any{"tools": []string{"crm"}}}, "config.tools[0]"},
		{"session with t1's toolset", "/sessions", map[string]any{"config": map[string]any{"toolset_id": ts.ID}}, "config.toolset_id"},
		{"toolset with t1's custom tool", "/toolsets", map[string]any{"name": "x", "tools": []string{"crm"}}, "tools[0]"},
		{"custom tool with t1's secret", "/custom_tools", map[string]any{"name": "mine", "description": "d", "url": b.tools.URL + "/tools/echo",
			"input_schema": map[string]any{"type": "object"}, "auth_secret_name": "only-t1"}, "auth_secret_name"},
	}
	for _, tt := range unknown {
		t.Run(tt.name, func(t *testing.T) {
			wantRefusal(t, b.do("POST", tt.path, "t2", tt.body), http.StatusBadRequest, httpapi.CodeInvalidRequest, tt.want)
		})
	}
	t2sess := b.session("t2", "echo")
	t.Run("session tool set with t1's custom tool", func(t *testing.T) {
		wantRefusal(t, b.putTools("t2", t2sess.ID, []any{map[string]any{"name": "crm"}}), http.StatusBadRequest, httpapi.CodeInvalidRequest, "tools[0].name", "crm")
	})
	t.Run("lists and catalog show nothing of t1's", func(t *testing.T) {
		for _, path := range []string{"/custom_tools", "/toolsets", "/secrets", "/catalog"} {
			r := b.do("GET", path, "t2", nil)
			for _, leak := range []string{ct.ID, ts.ID, "only-t1", `"crm"`, ct.CurrentRevisionID} {
				if bytes.Contains(r.body, []byte(leak)) {
					t.Errorf("GET %s as t2 shows %s: %s", path, leak, r.body)
				}
			}
		}
		var call CallJSON
		_, call = b.call("t1", sess.ID, "crm", map[string]any{"text": "x"}, 5)
		wantRefusal(t, b.do("GET", "/tool_calls/"+call.ID, "t2", nil), http.StatusNotFound, httpapi.CodeNotFound)
	})
	t.Run("t2's own names do not touch t1's", func(t *testing.T) {
		b := b.with(t)
		// The same secret name and tool name, t2's own: created, not conflicting.
		if r := b.do("PUT", "/secrets/tools", "t2", map[string]any{"value": "t2-other-value-0123"}); r.status != http.StatusCreated {
			t.Fatalf("t2's secret of t1's name: %d %s", r.status, r.body)
		}
		b.created("/custom_tools", "t2", map[string]any{"name": "crm", "description": "t2's", "url": b.tools.URL + "/tools/echo",
			"input_schema": map[string]any{"type": "object"}, "auth_secret_name": "tools"}, &CustomToolJSON{})
		// t1's tool still runs with t1's secret.
		if _, c := b.call("t1", sess.ID, "crm", map[string]any{"text": "still t1"}, 5); c.Status != "succeeded" {
			t.Errorf("t1's crm after t2 wrote its own: %+v", c)
		}
		var t1 CustomToolJSON
		b.ok("GET", "/custom_tools/"+ct.ID, "t1", nil, &t1)
		if t1.Description != ct.Description || t1.CurrentRevisionID != ct.CurrentRevisionID {
			t.Errorf("t1's tool changed: %+v", t1)
		}
		if got := b.readTools("t1", sess.ID).Tools; len(got) != 2 {
			t.Errorf("t1's session tool set changed: %v", got)
		}
	})
}
