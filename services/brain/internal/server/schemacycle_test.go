package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Schemas with a reference cycle, which no value reaching the cycle can
// pass (every call failed invalid_arguments, "reference cycle"), and a
// recursive one that steps into the value and is a tree.
var (
	cyclicSchemas = []struct{ name, doc, cycle string }{
		{"direct self-reference", `{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "#/$defs/a → #/$defs/a"},
		{"two steps a→b→a", `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "#/$defs/a → #/$defs/b → #/$defs/a"},
		{"under a property", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}]}}}`, "#/$defs/a → #/$defs/a/allOf/0 → #/$defs/a"},
	}
	treeSchema = json.RawMessage(`{"$defs":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}`)
	treeValid  = map[string]any{"kids": []any{map[string]any{"kids": []any{}}, map[string]any{}}}
	treeBad    = map[string]any{"kids": []any{map[string]any{"kids": []any{7}}}}
)

// TestSessionFunctionToolRefCycle: PUT /sessions/{id}/tools refuses a
// function tool whose parameters have a reference cycle, naming the field
// and the cycle, as it refuses other schemas that do not compile; a
// recursive tree schema is accepted and its calls are validated.
func TestSessionFunctionToolRefCycle(t *testing.T) {
	b := startBrain(t, allowLoopback)
	sess := b.session("t1", "echo")
	fn := func(params json.RawMessage) []any {
		return []any{map[string]any{"type": "function", "name": "walk", "description": "d", "parameters": params}}
	}
	for _, tt := range cyclicSchemas {
		t.Run(tt.name, func(t *testing.T) {
			wantRefusal(t, b.putTools("t1", sess.ID, fn(json.RawMessage(tt.doc))), 400, httpapi.CodeInvalidRequest,
				"tools[0].parameters: reference cycle: "+tt.cycle)
		})
	}
	t.Run("recursive tree", func(t *testing.T) {
		if r := b.putTools("t1", sess.ID, fn(treeSchema)); r.status != http.StatusOK {
			t.Fatalf("put: %d %s", r.status, r.body)
		}
		if st, c := b.call("t1", sess.ID, "walk", treeValid, 0); st != http.StatusAccepted || c.Status != "requires_input" {
			t.Errorf("valid call: %d %+v", st, c)
		}
		if _, c := b.call("t1", sess.ID, "walk", treeBad, 5); deref(c.ErrorCode) != "invalid_arguments" || !strings.Contains(deref(c.ErrorMessage), "/kids/0/kids/0") {
			t.Errorf("invalid call: %+v", c)
		}
	})
}

// TestCustomToolRefCycle: a custom tool, created or given a new revision,
// is refused with a reference cycle in input_schema or output_schema.
func TestCustomToolRefCycle(t *testing.T) {
	b := startBrain(t, allowLoopback)
	body := func(name string, in, out json.RawMessage) map[string]any {
		m := map[string]any{"name": name, "description": "d", "url": b.tools.URL + "/tools/echo", "input_schema": in}
		if out != nil {
			m["output_schema"] = out
		}
		return m
	}
	for i, tt := range cyclicSchemas {
		name := fmt.Sprintf("loop%d", i)
		t.Run("create input_schema "+tt.name, func(t *testing.T) {
			wantRefusal(t, b.do("POST", "/custom_tools", "t1", body(name, json.RawMessage(tt.doc), nil)), 400, httpapi.CodeInvalidRequest,
				"input_schema: reference cycle: "+tt.cycle)
		})
		t.Run("create output_schema "+tt.name, func(t *testing.T) {
			wantRefusal(t, b.do("POST", "/custom_tools", "t1", body(name, treeSchema, json.RawMessage(tt.doc))), 400, httpapi.CodeInvalidRequest,
				"output_schema: reference cycle: "+tt.cycle)
		})
	}
	var ct CustomToolJSON
	b.created("/custom_tools", "t1", body("walk", treeSchema, nil), &ct)
	for _, tt := range cyclicSchemas {
		t.Run("new revision "+tt.name, func(t *testing.T) {
			m := body("walk", json.RawMessage(tt.doc), nil)
			m["current_revision_id"] = ct.CurrentRevisionID
			wantRefusal(t, b.do("PUT", "/custom_tools/"+ct.ID, "t1", m), 400, httpapi.CodeInvalidRequest,
				"input_schema: reference cycle: "+tt.cycle)
		})
	}
	sess := b.session("t1", "walk")
	if _, c := b.call("t1", sess.ID, "walk", treeBad, 5); deref(c.ErrorCode) != "invalid_arguments" {
		t.Errorf("invalid call of the tree tool: %+v", c)
	}
	if _, c := b.call("t1", sess.ID, "walk", treeValid, 5); deref(c.ErrorCode) == "invalid_arguments" {
		t.Errorf("valid call of the tree tool refused: %+v", c)
	}
}

// TestSessionMCPToolRefCycle: a tool of a session's MCP server whose input
// schema has a reference cycle is left out of the session, as one whose
// schema does not compile is; the server's other tools stay.
func TestSessionMCPToolRefCycle(t *testing.T) {
	logs := &syncBuffer{}
	b := startBrain(t, allowLoopback, func(o *Options) { o.Logger = service.NewLogger(logs, slog.LevelDebug) })
	srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	add := func(name string, schema json.RawMessage) {
		srv.AddTool(&mcp.Tool{Name: name, Description: "d", InputSchema: schema},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " ran"}}}, nil
			})
	}
	// The go-sdk server wants "type": "object" at the top.
	object := func(doc string) json.RawMessage {
		if strings.HasPrefix(doc, `{"type":"object"`) {
			return json.RawMessage(doc)
		}
		return json.RawMessage(`{"type":"object",` + doc[1:])
	}
	add("tree", object(string(treeSchema)))
	for i, tt := range cyclicSchemas {
		add(fmt.Sprintf("loop%d", i), object(tt.doc))
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	sess := b.session("t1", "echo")
	if r := b.putTools("t1", sess.ID, []any{map[string]any{"type": "mcp", "name": "docs", "url": ts.URL + "/mcp"}}); r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	var s SessionJSON
	b.ok("GET", "/sessions/"+sess.ID, "t1", nil, &s)
	if !slices.Equal(s.Tools, []string{"docs.tree"}) {
		t.Errorf("session tools %v, want only docs.tree (the cyclic ones left out); log:\n%s", s.Tools, logs)
	}
	for i, tt := range cyclicSchemas {
		if want := fmt.Sprintf(`"tool":"loop%d","err":"input_schema: reference cycle: %s`, i, tt.cycle); !strings.Contains(logs.String(), want) {
			t.Errorf("no warning %s in the log:\n%s", want, logs)
		}
	}
	if _, c := b.call("t1", sess.ID, "docs.tree", treeValid, 5); c.Status != "succeeded" {
		t.Errorf("docs.tree: %+v", c)
	}
	if _, c := b.call("t1", sess.ID, "docs.tree", treeBad, 5); deref(c.ErrorCode) != "invalid_arguments" {
		t.Errorf("docs.tree with a bad tree: %+v", c)
	}
}

// restartWithCyclicWalk stores a session whose tool set is echo and a
// function tool walk with the cyclic schema an earlier brain accepted (the
// entries as given, its parameters replaced in the store), then stops that
// brain and starts the next on the same store with opts: the next brain
// and the session.
func restartWithCyclicWalk(t *testing.T, opts ...func(*Options)) (*brain, SessionJSON) {
	t.Helper()
	b := startBrain(t, allowLoopback)
	sess := b.session("t1", "echo")
	set := []any{map[string]any{"name": "echo"}, map[string]any{"type": "function", "name": "walk", "description": "d", "parameters": treeSchema}}
	if r := b.putTools("t1", sess.ID, set); r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	ctx := context.Background()
	st, err := b.srv.store.SessionTools(ctx, "t1", sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	cyclic := strings.Replace(string(st.Entries), string(treeSchema), cyclicSchemas[0].doc, 1)
	if cyclic == string(st.Entries) {
		t.Fatalf("the stored tool set does not hold the schema as given: %s", st.Entries)
	}
	st.Entries = json.RawMessage(cyclic)
	if err := b.srv.store.PutSessionTools(ctx, st); err != nil {
		t.Fatal(err)
	}
	if err := b.srv.Close(); err != nil {
		t.Fatal(err)
	}
	return startBrain(t, append([]func(*Options){allowLoopback, sameStore(b)}, opts...)...), sess
}

// TestStoredCyclicFunctionToolLeftOut: a session tool set stored by an
// earlier brain with a function tool whose parameters have a reference
// cycle (accepted then, refused since) still loads: that tool is left out
// with a warning naming it, its calls are refused before anything is
// recorded, and the session's other tools go on working. Before, the whole
// set failed to load and every call of the session was a 500.
func TestStoredCyclicFunctionToolLeftOut(t *testing.T) {
	if testStore == storeReplicas {
		t.Skip("restarts one brain in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	var logs syncBuffer
	next, sess := restartWithCyclicWalk(t, func(o *Options) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })

	if r := next.do("GET", "/sessions/"+sess.ID, "t1", nil); r.status != http.StatusOK {
		t.Fatalf("GET the session: %d %s", r.status, r.body)
	}
	if _, c := next.call("t1", sess.ID, "echo", map[string]any{"text": "hi"}, 5); c.Status != "succeeded" {
		t.Errorf("echo in the session whose stored set has a cyclic function tool: %s %s", c.Status, deref(c.ErrorMessage))
	}
	r := next.do("POST", "/sessions/"+sess.ID+"/tool_calls", "t1", map[string]any{"tool": "walk", "arguments": treeValid})
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "walk") {
		t.Errorf("call of the left-out tool: %d %s, want 400 naming it", r.status, r.body)
	}
	if !logs.warned(map[string]string{"tool": "walk", "err": "reference cycle"}) {
		t.Errorf("no WARN naming the left-out tool walk and its reference cycle; logs:\n%s", logs.String())
	}
}

// TestStoredCyclicFunctionToolNotReadBack: a function tool an earlier
// brain stored with a cyclic schema is left out of the session (its calls
// are refused), so the session must not say it has it. Today GET
// /sessions/{id} lists it in tools, GET /sessions/{id}/tools reads it back,
// and the refusal of its call contradicts itself: `tool: "walk" is not
// enabled in session "…" (enabled: echo, walk)`.
func TestStoredCyclicFunctionToolNotReadBack(t *testing.T) {
	if testStore == storeReplicas {
		t.Skip("restarts one brain in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	next, sess := restartWithCyclicWalk(t)

	r := next.do("POST", "/sessions/"+sess.ID+"/tool_calls", "t1", map[string]any{"tool": "walk", "arguments": treeValid})
	if r.status != http.StatusBadRequest {
		t.Fatalf("call of the left-out tool: %d %s, want 400", r.status, r.body)
	}
	if strings.Contains(string(r.body), "enabled: echo, walk") {
		t.Errorf("the refusal lists the refused tool as enabled: %s", r.body)
	}
	var got struct {
		Tools []string `json:"tools"`
	}
	r = next.do("GET", "/sessions/"+sess.ID, "t1", nil)
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("GET the session: %d %s", r.status, r.body)
	}
	if slices.Contains(got.Tools, "walk") {
		t.Errorf("GET /sessions/{id} tools = %v: lists walk, which the session cannot call", got.Tools)
	}
	// The owner still sees the entry, marked as not in force and why.
	rb := next.readTools("t1", sess.ID)
	if len(rb.Tools) != 2 || rb.Tools[1]["name"] != "walk" {
		t.Fatalf("read-back %s, want echo and walk", mustJSON(rb))
	}
	if e := rb.Tools[0]; string(mustJSON(e)) != `{"name":"echo"}` {
		t.Errorf("echo entry %s, want {\"name\":\"echo\"}", mustJSON(e))
	}
	if e := rb.Tools[1]; e["status"] != "unavailable" || !strings.Contains(fmt.Sprint(e["reason"]), "reference cycle") {
		t.Errorf("walk entry %s, want status unavailable with the reason (reference cycle)", mustJSON(e))
	}
	// The read-back goes back to PUT: refused for walk's parameters, by
	// name; without walk it is accepted.
	wantRefusal(t, next.do("PUT", "/sessions/"+sess.ID+"/tools", "t1", rb), 400, httpapi.CodeInvalidRequest, "tools[1].parameters: reference cycle")
	rb.Tools = rb.Tools[:1]
	if r := next.do("PUT", "/sessions/"+sess.ID+"/tools", "t1", rb); r.status != http.StatusOK {
		t.Errorf("read-back without walk PUT again: %d %s", r.status, r.body)
	}
}

// TestStoredCyclicMCPToolNotListed: an MCP server's tool stored in a
// listing by an earlier brain with a schema this one does not compile is
// left out of the session, and nothing says the session has it: not the
// session's tools, not the refusal's "enabled:" list, not the server's
// allowed_tools in the read-back (the intersection, as for a tool the
// server lists with a schema that does not compile).
func TestStoredCyclicMCPToolNotListed(t *testing.T) {
	if testStore == storeReplicas {
		t.Skip("restarts one brain in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	b := startBrain(t, allowLoopback)
	docs := newMCPTestServer(t, "search", "walk")
	sess := b.session("t1")
	if r := b.putTools("t1", sess.ID, []any{map[string]any{"type": "mcp", "name": "docs", "url": docs.url}}); r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	ctx := context.Background()
	st, err := b.srv.store.SessionTools(ctx, "t1", sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string][]map[string]any
	if err := json.Unmarshal(st.Entries, &stored); err != nil {
		t.Fatal(err)
	}
	listed, _ := stored["tools"][0]["listed"].([]any)
	if len(listed) != 2 {
		t.Fatalf("stored listing %s, want search and walk", st.Entries)
	}
	for _, lt := range listed {
		if lt := lt.(map[string]any); lt["name"] == "walk" {
			lt["input_schema"] = json.RawMessage(cyclicSchemas[0].doc)
		}
	}
	st.Entries = mustJSON(stored)
	if err := b.srv.store.PutSessionTools(ctx, st); err != nil {
		t.Fatal(err)
	}
	if err := b.srv.Close(); err != nil {
		t.Fatal(err)
	}
	next := startBrain(t, allowLoopback, sameStore(b))

	r := next.do("POST", "/sessions/"+sess.ID+"/tool_calls", "t1", map[string]any{"tool": "docs.walk", "arguments": map[string]any{}})
	wantRefusal(t, r, 400, httpapi.CodeInvalidRequest, `"docs.walk" is not enabled`, "(enabled: docs.search)")
	var got SessionJSON
	next.ok("GET", "/sessions/"+sess.ID, "t1", nil, &got)
	if !slices.Equal(got.Tools, []string{"docs.search"}) {
		t.Errorf("GET /sessions/{id} tools = %v, want [docs.search]", got.Tools)
	}
	rb := next.readTools("t1", sess.ID)
	if len(rb.Tools) != 1 || rb.Tools[0]["status"] != "available" || string(mustJSON(rb.Tools[0]["allowed_tools"])) != `["search"]` {
		t.Errorf("read-back %s, want docs available with allowed_tools [search]", mustJSON(rb))
	}
	if _, c := next.call("t1", sess.ID, "docs.search", map[string]any{}, 5); c.Status != "succeeded" {
		t.Errorf("docs.search: %s %s", c.Status, deref(c.ErrorMessage))
	}
}

// TestStoredCyclicCustomToolLeftOut: a custom tool whose current revision
// was stored by an earlier brain with a cyclic input_schema reads as a
// tool the tenant does not have — a call naming it is refused with 400,
// not a 500 — with a warning naming the revision; a later revision that
// compiles brings it back.
func TestStoredCyclicCustomToolLeftOut(t *testing.T) {
	var logs syncBuffer
	b := startBrain(t, allowLoopback, func(o *Options) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	r := b.do("POST", "/custom_tools", "t1", map[string]any{"name": "walker", "description": "d", "url": b.tools.URL + "/tools/echo", "input_schema": treeSchema})
	if r.status != http.StatusCreated {
		t.Fatalf("create walker: %d %s", r.status, r.body)
	}
	var ct CustomToolJSON
	r.json(t, &ct)
	sess := b.session("t1", "walker")

	ctx := context.Background()
	cur, err := b.srv.store.CustomToolByName(ctx, "t1", "walker")
	if err != nil {
		t.Fatal(err)
	}
	def := strings.Replace(string(cur.Revision.Definition), string(treeSchema), cyclicSchemas[1].doc, 1)
	if def == string(cur.Revision.Definition) {
		t.Fatalf("the stored revision does not hold the schema as given: %s", cur.Revision.Definition)
	}
	stale := &store.ToolRevision{ID: newID("rev"), ToolID: ct.ID, TenantID: "t1", Definition: json.RawMessage(def), CreatedAt: time.Now()}
	if _, err := b.srv.store.UpdateCustomTool(ctx, "t1", ct.ID, ct.CurrentRevisionID, stale, 0); err != nil {
		t.Fatal(err)
	}

	r = b.do("POST", "/sessions/"+sess.ID+"/tool_calls", "t1", map[string]any{"tool": "walker", "arguments": treeValid})
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "walker") {
		t.Errorf("call of the custom tool whose stored revision does not compile: %d %s, want 400 naming it", r.status, r.body)
	}
	if !logs.warned(map[string]string{"revision_id": stale.ID, "err": "reference cycle"}) {
		t.Errorf("no WARN naming revision %s and its reference cycle; logs:\n%s", stale.ID, logs.String())
	}

	var fixed CustomToolJSON
	b.ok("PUT", "/custom_tools/"+ct.ID, "t1", map[string]any{"description": "d", "url": b.tools.URL + "/tools/echo", "input_schema": treeSchema, "current_revision_id": stale.ID}, &fixed)
	// The test tool server wants a token walker has none of: a 401 from
	// it is the call sent.
	if st, c := b.call("t1", sess.ID, "walker", treeValid, 5); st != http.StatusOK || !strings.Contains(deref(c.ErrorMessage), "answered HTTP 401") {
		t.Errorf("call after a revision that compiles: %d %s %s, want it sent to the tool", st, c.Status, deref(c.ErrorMessage))
	}
}

// TestSessionMCPLeftOutReadBack: an mcp entry's read-back lists the
// server's tools that allowed_tools allows and the session does not have,
// each with why (a schema that does not compile, a name MCP does not allow,
// a name the server does not list, past MaxServerTools), so that the
// developer need not read brain's log; it goes back to PUT as read.
func TestSessionMCPLeftOutReadBack(t *testing.T) {
	b := startBrain(t, allowLoopback)
	serve := func(names ...string) string {
		srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
		for _, name := range names {
			schema := json.RawMessage(`{"type":"object"}`)
			if name == "loop" {
				schema = json.RawMessage(`{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`)
			}
			srv.AddTool(&mcp.Tool{Name: name, Description: "d", InputSchema: schema},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
				})
		}
		ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(ts.Close)
		return ts.URL + "/mcp"
	}
	mixed := serve("tree", "loop", "x y", "other")
	var many []string
	for i := range MaxServerTools + 42 {
		many = append(many, fmt.Sprintf("t%03d", i))
	}
	crowded := serve(many...)
	type leftOut struct{ Name, Reason string }
	tests := []struct {
		name        string
		url         string
		allowed     []string
		wantAllowed []string
		wantLeftOut []leftOut // reasons: a part of each
		wantReason  string
	}{
		{"allowed_tools given", mixed, []string{"tree", "loop", "ghost"}, []string{"tree"}, []leftOut{
			{"loop", "its schema does not compile: input_schema: reference cycle: #/$defs/a → #/$defs/a"},
			{"ghost", "allowed_tools names it, and the server does not list it"}}, ""},
		{"allowed_tools omitted", mixed, nil, []string{"other", "tree"}, []leftOut{
			{"loop", "reference cycle"}, {"x y", "not an MCP tool name"}}, ""},
		{"more tools than a session takes", crowded, nil, many[:MaxServerTools], func() []leftOut {
			var lo []leftOut
			for _, n := range many[MaxServerTools : MaxServerTools+MaxLeftOutListed] {
				lo = append(lo, leftOut{n, fmt.Sprintf("the server lists more than %d tools", MaxServerTools)})
			}
			return lo
		}(), "42 tools left out, the first 32 in left_out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sess := b.session("t1")
			entry := map[string]any{"type": "mcp", "name": "docs", "url": tt.url}
			if tt.allowed != nil {
				entry["allowed_tools"] = tt.allowed
			}
			if r := b.putTools("t1", sess.ID, []any{entry}); r.status != http.StatusOK {
				t.Fatalf("put: %d %s", r.status, r.body)
			}
			got := b.readTools("t1", sess.ID)
			var e struct {
				Status       string    `json:"status"`
				Reason       string    `json:"reason"`
				AllowedTools []string  `json:"allowed_tools"`
				LeftOut      []leftOut `json:"left_out"`
			}
			if err := json.Unmarshal(mustJSON(got.Tools[0]), &e); err != nil {
				t.Fatal(err)
			}
			if e.Status != "available" || !slices.Equal(e.AllowedTools, tt.wantAllowed) || e.Reason != tt.wantReason {
				t.Errorf("read back status %q, reason %q, allowed_tools %v; want available, %q, %v", e.Status, e.Reason, e.AllowedTools, tt.wantReason, tt.wantAllowed)
			}
			if len(e.LeftOut) != len(tt.wantLeftOut) {
				t.Fatalf("left_out %+v, want %+v", e.LeftOut, tt.wantLeftOut)
			}
			for i, w := range tt.wantLeftOut {
				if e.LeftOut[i].Name != w.Name || !strings.Contains(e.LeftOut[i].Reason, w.Reason) {
					t.Errorf("left_out[%d] %+v, want %s: ...%s...", i, e.LeftOut[i], w.Name, w.Reason)
				}
			}
			// As read, it goes back to PUT, and gives the same tools: its
			// allowed_tools are those in force, so nothing it allows is
			// left out now.
			var before SessionJSON
			b.ok("GET", "/sessions/"+sess.ID, "t1", nil, &before)
			if r := b.do("PUT", "/sessions/"+sess.ID+"/tools", "t1", got); r.status != http.StatusOK {
				t.Fatalf("read-back PUT again: %d %s", r.status, r.body)
			}
			var after SessionJSON
			b.ok("GET", "/sessions/"+sess.ID, "t1", nil, &after)
			again := b.readTools("t1", sess.ID)
			if !slices.Equal(before.Tools, after.Tools) || len(before.Tools) != len(tt.wantAllowed) ||
				!slices.Equal(again.Tools[0]["allowed_tools"].([]any), got.Tools[0]["allowed_tools"].([]any)) {
				t.Errorf("after the read-back was PUT again: tools %v (were %v), read back %s", after.Tools, before.Tools, mustJSON(again))
			}
		})
	}
	t.Run("left_out is brain's to say", func(t *testing.T) {
		sess := b.session("t1")
		for _, tc := range []struct {
			entry map[string]any
			want  string
		}{
			{map[string]any{"type": "mcp", "name": "docs", "url": mixed, "left_out": "loop"}, "tools[0].left_out: must be an array when sent back from a read, got a string"},
			{map[string]any{"type": "mcp", "name": "docs", "url": mixed, "left_out": map[string]any{}}, "tools[0].left_out: must be an array when sent back from a read, got an object"},
			{map[string]any{"type": "function", "name": "f", "description": "d", "left_out": []any{}}, "tools[0].left_out: unknown field; a function entry accepts"},
		} {
			r := b.putTools("t1", sess.ID, []any{tc.entry})
			if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), tc.want) {
				t.Errorf("PUT %v: %d %s, want 400 %q", tc.entry, r.status, r.body, tc.want)
			}
		}
	})
}
