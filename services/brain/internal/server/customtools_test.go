package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/netguard"
	"github.com/brain-tools/suite/pkg/netguard/dnstest"
	"github.com/brain-tools/suite/pkg/tool"
)

// TestCustomToolRevisions: an update naming the current revision makes a
// new one; one naming a stale revision is 409 naming the current; a call
// started before the update completes with the old definition and records
// that revision, and the next call runs the new one.
func TestCustomToolRevisions(t *testing.T) {
	b := startBrain(t, allowLoopback)
	v1 := b.secretTool("t1", "crm", "slow", nil)
	if !strings.HasPrefix(v1.CurrentRevisionID, "rev_") || !strings.HasPrefix(v1.ID, "ctool_") {
		t.Fatalf("created %+v", v1)
	}
	sess := b.session("t1", "crm")
	st, running := b.call("t1", sess.ID, "crm", map[string]any{}, 0)
	if st != http.StatusAccepted {
		t.Fatalf("slow call: %d %+v", st, running)
	}
	waitStarted(t, b.tools)

	update := map[string]any{"description": "echo now", "url": b.tools.URL + "/tools/echo", "auth_secret_name": "tools",
		"input_schema":        map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []string{"text"}},
		"current_revision_id": v1.CurrentRevisionID}
	var v2 CustomToolJSON
	b.ok("PUT", "/custom_tools/"+v1.ID, "t1", update, &v2)
	if v2.CurrentRevisionID == v1.CurrentRevisionID || v2.Name != "crm" || v2.Description != "echo now" || v2.ID != v1.ID {
		t.Fatalf("updated %+v from %+v", v2, v1)
	}
	// The same update again names a revision that is no longer current.
	wantRefusal(t, b.do("PUT", "/custom_tools/"+v1.ID, "t1", update), http.StatusConflict, httpapi.CodeConflict,
		"current_revision_id", v1.CurrentRevisionID, v2.CurrentRevisionID)

	b.tools.releaseAll()
	old := b.waitCall("t1", running.ID)
	if text, _ := resultText(t, old.Result); old.Status != "succeeded" || text != "slow done" {
		t.Fatalf("call started before the update: %s %s, want the old definition's answer", old.Status, old.Result)
	}
	if old.RevisionID == nil || *old.RevisionID != v1.CurrentRevisionID {
		t.Errorf("call started before the update records revision %v, want %s", old.RevisionID, v1.CurrentRevisionID)
	}
	_, fresh := b.call("t1", sess.ID, "crm", map[string]any{"text": "hi"}, 5)
	if text, _ := resultText(t, fresh.Result); fresh.Status != "succeeded" || text != "hi" || fresh.RevisionID == nil || *fresh.RevisionID != v2.CurrentRevisionID {
		t.Fatalf("call after the update: %s %s revision %v, want the new definition (%s)", fresh.Status, fresh.Result, fresh.RevisionID, v2.CurrentRevisionID)
	}
	// The new revision's schema holds: no text, refused before sending.
	if _, c := b.call("t1", sess.ID, "crm", map[string]any{}, 5); c.ErrorCode == nil || *c.ErrorCode != "invalid_arguments" {
		t.Errorf("call without text: %+v", c)
	}
	// Both revisions stay readable; the tool.call event names the revision.
	var r1 RevisionJSON
	b.ok("GET", "/tool_revisions/"+v1.CurrentRevisionID, "t1", nil, &r1)
	if r1.URL != b.tools.URL+"/tools/slow" || r1.ToolID != v1.ID {
		t.Errorf("revision 1 = %+v", r1)
	}
	for _, e := range b.events("t1", sess.ID) {
		if e.Type == "tool.call" && e.CallID == running.ID && !strings.Contains(string(e.Data), v1.CurrentRevisionID) {
			t.Errorf("tool.call event %s does not name its revision", e.Data)
		}
	}
	// The catalog shows the custom tool beside the host config's, with
	// which is which.
	var cat struct{ Tools []map[string]any }
	b.ok("GET", "/catalog", "t1", nil, &cat)
	sources := map[string]any{}
	for _, e := range cat.Tools {
		sources[e["name"].(string)] = e["source"]
		if e["name"] == "crm" && (e["current_revision_id"] != v2.CurrentRevisionID || e["id"] != v1.ID || e["url"] != nil) {
			t.Errorf("catalog entry of crm: %v", e)
		}
		if e["source"] == "host_config" && e["current_revision_id"] != nil {
			t.Errorf("host-config entry %v has a revision", e)
		}
	}
	if sources["crm"] != "custom" || sources["echo"] != "host_config" {
		t.Errorf("catalog sources %v", sources)
	}
}

// TestCustomToolRefusals: every refusal of the custom tool API, with its
// code and the field it names.
func TestCustomToolRefusals(t *testing.T) {
	b := startBrain(t, allowLoopback, func(o *Options) { o.Limits.CustomTools = 2 })
	base := func(edit map[string]any) map[string]any {
		m := map[string]any{"name": "crm", "description": "d", "url": b.tools.URL + "/tools/echo", "input_schema": map[string]any{"type": "object"}}
		for k, v := range edit {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	tests := []struct {
		name   string
		body   any
		status int
		code   string
		want   []string
	}{
		{"no name", base(map[string]any{"name": nil}), 400, httpapi.CodeInvalidRequest, []string{"name", "required"}},
		{"dotted name", base(map[string]any{"name": "crm.lookup"}), 400, httpapi.CodeInvalidRequest, []string{"name", "crm.lookup"}},
		{"name too long", base(map[string]any{"name": "a" + strings.Repeat("b", 64)}), 400, httpapi.CodeInvalidRequest, []string{"name"}},
		{"no description", base(map[string]any{"description": nil}), 400, httpapi.CodeInvalidRequest, []string{"description"}},
		{"blank description", base(map[string]any{"description": "  "}), 400, httpapi.CodeInvalidRequest, []string{"description"}},
		{"no url", base(map[string]any{"url": nil}), 400, httpapi.CodeInvalidRequest, []string{"url", "required"}},
		{"ftp url", base(map[string]any{"url": "ftp://example.com/x"}), 400, httpapi.CodeInvalidRequest, []string{"url", "scheme"}},
		{"url with credentials", base(map[string]any{"url": "http://u:p@example.com/x"}), 400, httpapi.CodeInvalidRequest, []string{"url", "credentials"}},
		{"url with fragment", base(map[string]any{"url": "http://example.com/x#f"}), 400, httpapi.CodeInvalidRequest, []string{"url", "fragment"}},
		{"no input_schema", base(map[string]any{"input_schema": nil}), 400, httpapi.CodeInvalidRequest, []string{"input_schema"}},
		{"string input_schema", base(map[string]any{"input_schema": map[string]any{"type": "string"}}), 400, httpapi.CodeInvalidRequest, []string{"input_schema", "object"}},
		{"external ref", base(map[string]any{"input_schema": map[string]any{"$ref": "https://example.com/s.json"}}), 400, httpapi.CodeInvalidRequest, []string{"input_schema"}},
		{"bad output_schema", base(map[string]any{"output_schema": "x"}), 400, httpapi.CodeInvalidRequest, []string{"output_schema"}},
		{"timeout 0", base(map[string]any{"timeout_seconds": 0}), 400, httpapi.CodeInvalidRequest, []string{"timeout_seconds", "1 to 86400"}},
		{"timeout too long", base(map[string]any{"timeout_seconds": 86401}), 400, httpapi.CodeInvalidRequest, []string{"timeout_seconds"}},
		{"output too large", base(map[string]any{"max_output_bytes": tool.MaxOutputBytesLimit + 1}), 400, httpapi.CodeInvalidRequest, []string{"max_output_bytes"}},
		{"token_env", base(map[string]any{"token_env": "BRAIN_TOOLS_KEY"}), 400, httpapi.CodeInvalidRequest, []string{"token_env", "auth_secret_name"}},
		{"tenants", base(map[string]any{"tenants": []string{"t2"}}), 400, httpapi.CodeInvalidRequest, []string{"tenants"}},
		{"inspect_session", base(map[string]any{"inspect_session": true}), 400, httpapi.CodeInvalidRequest, []string{"inspect_session"}},
		{"unknown field", base(map[string]any{"timeout": 5}), 400, httpapi.CodeInvalidRequest, []string{"timeout", "unknown field", "timeout_seconds"}},
		{"wrong type", base(map[string]any{"timeout_seconds": "5"}), 400, httpapi.CodeInvalidRequest, []string{"timeout_seconds"}},
		{"unknown secret", base(map[string]any{"auth_secret_name": "nope"}), 400, httpapi.CodeInvalidRequest, []string{"auth_secret_name", "nope"}},
		{"bad secret name", base(map[string]any{"auth_secret_name": "a b"}), 400, httpapi.CodeInvalidRequest, []string{"auth_secret_name"}},
		{"host config name", base(map[string]any{"name": "echo"}), 409, httpapi.CodeConflict, []string{"name", "echo", "host config"}},
		{"not an object", `[1]`, 400, httpapi.CodeInvalidRequest, []string{"body"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantRefusal(t, b.do("POST", "/custom_tools", "t1", tt.body), tt.status, tt.code, tt.want...)
		})
	}
	t.Run("content type", func(t *testing.T) {
		wantRefusal(t, b.do("POST", "/custom_tools", "t1", base(nil), "Content-Type", "text/plain"), 415, httpapi.CodeUnsupportedMedia, "Content-Type must be application/json")
	})
	t.Run("body too large", func(t *testing.T) {
		big := base(map[string]any{"description": strings.Repeat("x", MaxBodyBytes)})
		wantRefusal(t, b.do("POST", "/custom_tools", "t1", big), 413, httpapi.CodeTooLarge, "body")
	})
	var ct CustomToolJSON
	b.created("/custom_tools", "t1", base(nil), &ct)
	t.Run("name taken", func(t *testing.T) {
		wantRefusal(t, b.do("POST", "/custom_tools", "t1", base(nil)), 409, httpapi.CodeConflict, "name", "crm")
	})
	t.Run("limit", func(t *testing.T) {
		b := b.with(t)
		b.created("/custom_tools", "t1", base(map[string]any{"name": "crm2"}), &CustomToolJSON{})
		wantRefusal(t, b.do("POST", "/custom_tools", "t1", base(map[string]any{"name": "crm3"})), 409, httpapi.CodeConflict, "custom tools", "2")
	})
	update := func(edit map[string]any) map[string]any {
		m := base(edit)
		if _, ok := edit["current_revision_id"]; !ok {
			m["current_revision_id"] = ct.CurrentRevisionID
		}
		return m
	}
	updates := []struct {
		name   string
		id     string
		body   any
		status int
		code   string
		want   []string
	}{
		{"rename", ct.ID, update(map[string]any{"name": "other"}), 400, httpapi.CodeInvalidRequest, []string{"name", "immutable", "crm"}},
		{"no revision", ct.ID, update(map[string]any{"current_revision_id": nil}), 400, httpapi.CodeInvalidRequest, []string{"current_revision_id", "required", ct.CurrentRevisionID}},
		{"stale revision", ct.ID, update(map[string]any{"current_revision_id": "rev_stale"}), 409, httpapi.CodeConflict, []string{"current_revision_id", "rev_stale", ct.CurrentRevisionID}},
		{"bad field", ct.ID, update(map[string]any{"timeout_seconds": -1}), 400, httpapi.CodeInvalidRequest, []string{"timeout_seconds"}},
		{"unknown tool", "ctool_nope", update(nil), 404, httpapi.CodeNotFound, []string{"ctool_nope"}},
	}
	for _, tt := range updates {
		t.Run("update "+tt.name, func(t *testing.T) {
			wantRefusal(t, b.do("PUT", "/custom_tools/"+tt.id, "t1", tt.body), tt.status, tt.code, tt.want...)
		})
	}
	t.Run("same name again, without it", func(t *testing.T) {
		b := b.with(t)
		var got CustomToolJSON
		b.ok("PUT", "/custom_tools/"+ct.ID, "t1", update(map[string]any{"name": nil, "description": "again"}), &got)
		if got.Name != "crm" || got.Description != "again" {
			t.Errorf("update without name: %+v", got)
		}
	})
	t.Run("unknown ids", func(t *testing.T) {
		wantRefusal(t, b.do("GET", "/custom_tools/ctool_nope", "t1", nil), 404, httpapi.CodeNotFound, "ctool_nope")
		wantRefusal(t, b.do("DELETE", "/custom_tools/ctool_nope", "t1", nil), 404, httpapi.CodeNotFound, "ctool_nope")
		wantRefusal(t, b.do("GET", "/tool_revisions/rev_nope", "t1", nil), 404, httpapi.CodeNotFound, "rev_nope")
		wantRefusal(t, b.do("GET", "/custom_tools?x=1", "t1", nil), 400, httpapi.CodeInvalidRequest, "x")
	})
	t.Run("delete frees the name", func(t *testing.T) {
		b := b.with(t)
		b.ok("DELETE", "/custom_tools/"+ct.ID, "t1", nil, nil)
		wantRefusal(t, b.do("GET", "/custom_tools/"+ct.ID, "t1", nil), 404, httpapi.CodeNotFound, ct.ID)
		b.created("/custom_tools", "t1", base(nil), &CustomToolJSON{})
		var list struct {
			CustomTools []CustomToolJSON `json:"custom_tools"`
		}
		b.ok("GET", "/custom_tools", "t1", nil, &list)
		if len(list.CustomTools) != 2 {
			t.Errorf("list: %+v", list)
		}
	})
}

// TestCustomToolSSRF: a custom tool whose url is a loopback, link-local
// (metadata) or IPv6 loopback literal is refused at creation; one whose
// name resolves to loopback (IPv4 or IPv6), to the metadata address, or to
// a public address beside a loopback one is refused at dial, so that the
// listeners see nothing and nothing is dialed at all; a session's MCP
// server behind such a name is unavailable for the same reason; with the
// operator's allow-list, the same urls work.
func TestCustomToolSSRF(t *testing.T) {
	hits := func() http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"content":[{"type":"text","text":"reached"}]}`)
		})
	}
	victim := listen(t, "127.0.0.1:0", hits())
	port := victim.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	// The same port on ::1 when this machine has IPv6 loopback, so that a
	// url of [::1] has a listener that would see a connection.
	var victim6 *countingListener
	if ln, err := net.Listen("tcp", fmt.Sprintf("[::1]:%d", port)); err == nil {
		victim6 = &countingListener{Listener: ln}
		hs := &http.Server{Handler: hits()}
		go hs.Serve(victim6)
		t.Cleanup(func() { hs.Close() })
	} else {
		t.Logf("no listener on [::1]:%d (%v): the [::1] urls are still refused, without a listener to count", port, err)
	}
	loopback := netip.MustParseAddr("127.0.0.1")
	dns, err := dnstest.Start(map[string][]netip.Addr{
		"tools.example.test":    {loopback},
		"v6.example.test":       {netip.MustParseAddr("::1")},
		"metadata.example.test": {netip.MustParseAddr("169.254.169.254")},
		"mixed.example.test":    {netip.MustParseAddr("93.184.215.14"), loopback},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	// Every address the guard lets through to a dial; one that is not
	// loopback is vetoed, so that no packet of this test leaves the machine
	// even if the guard were wrong.
	var dialedMu sync.Mutex
	var dialed []netip.AddrPort
	guard := func(allow ...string) func(*Options) {
		var prefixes []netip.Prefix
		for _, a := range allow {
			prefixes = append(prefixes, netip.MustParsePrefix(a))
		}
		return func(o *Options) {
			o.Guard = netguard.New(netguard.Options{AnyPort: true, AllowPrefixes: prefixes, Resolver: dns.Resolver(),
				BeforeDial: func(_ string, ap netip.AddrPort) error {
					dialedMu.Lock()
					dialed = append(dialed, ap)
					dialedMu.Unlock()
					if !ap.Addr().IsLoopback() {
						return fmt.Errorf("test: %s is not loopback, not dialed", ap)
					}
					return nil
				}})
		}
	}
	dials := func() []netip.AddrPort {
		dialedMu.Lock()
		defer dialedMu.Unlock()
		return slices.Clone(dialed)
	}
	body := func(name, url string) map[string]any {
		return map[string]any{"name": name, "description": "d", "url": url, "input_schema": map[string]any{"type": "object"}}
	}
	b := startBrain(t, guard())
	for name, url := range map[string]string{
		"loopback":   fmt.Sprintf("http://127.0.0.1:%d/", port),
		"metadata":   "http://169.254.169.254/latest/meta-data/",
		"ipv6":       fmt.Sprintf("http://[::1]:%d/", port),
		"decimal":    fmt.Sprintf("http://2130706433:%d/", port),
		"localhost":  fmt.Sprintf("http://localhost:%d/", port),
		"private":    "http://10.0.0.1/",
		"v4 in v6":   fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", port),
		"unspecific": fmt.Sprintf("http://0.0.0.0:%d/", port),
	} {
		t.Run("creation refuses "+name, func(t *testing.T) {
			wantRefusal(t, b.do("POST", "/custom_tools", "t1", body("t_"+strings.ReplaceAll(name, " ", "_"), url)), 400, httpapi.CodeInvalidRequest, "url", "refused")
		})
	}
	for _, tt := range []struct{ host, where string }{
		{"tools.example.test", "127.0.0.1"},
		{"v6.example.test", "::1"},
		{"metadata.example.test", "169.254.169.254"},
		{"mixed.example.test", "127.0.0.1"},
	} {
		t.Run("a name resolving to "+tt.where+" is refused at dial: "+tt.host, func(t *testing.T) {
			b := b.with(t)
			name := "n_" + strings.ReplaceAll(strings.TrimSuffix(tt.host, ".example.test"), ".", "_")
			queries := dns.Queries()
			var ct CustomToolJSON
			b.created("/custom_tools", "t1", body(name, fmt.Sprintf("http://%s:%d/x", tt.host, port)), &ct)
			s := b.session("t1", name)
			_, c := b.call("t1", s.ID, name, map[string]any{}, 5)
			if c.Status != "failed" || c.ErrorCode == nil || *c.ErrorCode != "destination_refused" || c.UnknownOutcome {
				t.Fatalf("call: %s %v unknown=%v %s, want failed destination_refused with a known outcome", c.Status, c.ErrorCode, c.UnknownOutcome, c.Result)
			}
			if text, _ := resultText(t, c.Result); !strings.Contains(text, tt.where) {
				t.Errorf("result %q does not say where the name led (%s)", text, tt.where)
			}
			if dns.Queries() == queries {
				t.Error("the name was never resolved: the refusal did not come from the dial")
			}
		})
	}
	t.Run("a session's MCP server behind a name resolving to loopback", func(t *testing.T) {
		b := b.with(t)
		s := b.session("t1")
		url := fmt.Sprintf("http://tools.example.test:%d/mcp", port)
		if r := b.putTools("t1", s.ID, []any{map[string]any{"type": "mcp", "name": "docs", "url": url}}); r.status != http.StatusOK {
			t.Fatalf("put: %d %s", r.status, r.body)
		}
		var d unavailableData
		if err := json.Unmarshal(findEvent(b.events("t1", s.ID), "mcp.unavailable"), &d); err != nil {
			t.Fatal(err)
		}
		if d.Server != "docs" || !strings.Contains(d.Reason, "resolves to 127.0.0.1, a loopback address") {
			t.Errorf("mcp.unavailable %+v, want the guard's refusal of 127.0.0.1", d)
		}
		s2 := b.session("t1", "echo")
		if r := b.putTools("t1", s2.ID, []any{map[string]any{"name": "echo"}, map[string]any{"type": "mcp", "name": "docs", "url": url, "required": true}}); r.status != http.StatusOK {
			t.Fatalf("put: %d %s", r.status, r.body)
		}
		r := b.do("POST", "/sessions/"+s2.ID+"/tool_calls", "t1", map[string]any{"tool": "echo", "arguments": map[string]any{"text": "x"}})
		wantRefusal(t, r, 400, httpapi.CodeInvalidRequest, "docs: host tools.example.test resolves to 127.0.0.1, a loopback address", "required: true")
	})
	if n := victim.accepted.Load(); n != 0 {
		t.Fatalf("the victim listener on 127.0.0.1 accepted %d connections; want none", n)
	}
	if victim6 != nil && victim6.accepted.Load() != 0 {
		t.Fatalf("the victim listener on [::1] accepted %d connections; want none", victim6.accepted.Load())
	}
	if d := dials(); len(d) != 0 {
		t.Fatalf("the guard let these through to a dial: %v; want none", d)
	}
	t.Run("the operator's allow-list lets them through", func(t *testing.T) {
		ab := startBrain(t, guard("127.0.0.0/8", "::1/128"))
		urls := []string{fmt.Sprintf("http://127.0.0.1:%d/", port), fmt.Sprintf("http://tools.example.test:%d/x", port)}
		if victim6 != nil {
			urls = append(urls, fmt.Sprintf("http://[::1]:%d/", port), fmt.Sprintf("http://v6.example.test:%d/x", port))
		}
		for i, url := range urls {
			name := fmt.Sprintf("ok_%d", i)
			ab.created("/custom_tools", "t1", body(name, url), &CustomToolJSON{})
			s := ab.session("t1", name)
			if _, c := ab.call("t1", s.ID, name, map[string]any{}, 5); c.Status != "succeeded" {
				t.Fatalf("allowed %s: %s %s", url, c.Status, c.Result)
			}
		}
		if victim.accepted.Load() == 0 || (victim6 != nil && victim6.accepted.Load() == 0) {
			t.Error("allowed calls never reached the listeners")
		}
		// The allow-list opens loopback only: the metadata address stays shut.
		wantRefusal(t, ab.do("POST", "/custom_tools", "t1", body("meta", "http://169.254.169.254/")), 400, httpapi.CodeInvalidRequest, "url", "refused")
	})
	t.Run("the host config's bindings are not guarded", func(t *testing.T) {
		b := b.with(t)
		// Every test brain's host config points at 127.0.0.1 without an
		// allow-list: the operator's urls are trusted.
		s := b.session("t1", "echo")
		if _, c := b.call("t1", s.ID, "echo", map[string]any{"text": "x"}, 5); c.Status != "succeeded" {
			t.Fatalf("host binding on loopback: %s %s", c.Status, c.Result)
		}
	})
}

// TestSecrets: write-only, referenced by name, never returned, rotated by
// writing again, sealed in the database file.
func TestSecrets(t *testing.T) {
	b := startBrain(t, allowLoopback, func(o *Options) { o.Limits.Secrets = 3 })
	const value = "sekret-value-0123456789"
	r := b.do("PUT", "/secrets/crm-key", "t1", map[string]any{"value": value})
	if r.status != http.StatusCreated || bytes.Contains(r.body, []byte(value)) {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	var first SecretJSON
	r.json(t, &first)
	for _, path := range []string{"/secrets", "/secrets/crm-key"} {
		g := b.do("GET", path, "t1", nil)
		if g.status != http.StatusOK || bytes.Contains(g.body, []byte(value)) || !bytes.Contains(g.body, []byte("crm-key")) {
			t.Errorf("GET %s: %d %s", path, g.status, g.body)
		}
	}
	// A tool using it: the secret is its bearer token.
	ct := b.secretTool("t1", "crm", "echo", map[string]any{"auth_secret_name": "crm-key"})
	if bytes.Contains(mustJSON(ct), []byte(value)) {
		t.Fatal("custom tool shows the secret")
	}
	s := b.session("t1", "crm")
	if _, c := b.call("t1", s.ID, "crm", map[string]any{"text": "x"}, 5); c.ErrorCode == nil || *c.ErrorCode != "http_status" {
		t.Fatalf("call with the wrong token: %+v (the tool server wants the tools key)", c)
	}
	// Rotate: write it again.
	r = b.do("PUT", "/secrets/crm-key", "t1", map[string]any{"value": toolsKey})
	var rotated SecretJSON
	r.json(t, &rotated)
	if r.status != http.StatusOK || rotated.CreatedAt != first.CreatedAt || rotated.UpdatedAt == first.UpdatedAt {
		t.Fatalf("rotate: %d %s (first %+v)", r.status, r.body, first)
	}
	if _, c := b.call("t1", s.ID, "crm", map[string]any{"text": "rotated"}, 5); c.Status != "succeeded" {
		t.Fatalf("call after rotation: %+v", c)
	}
	// Neither value is in what the store keeps, which does hold the secret.
	if dump := b.storeDump(); !bytes.Contains(dump, []byte("crm-key")) || bytes.Contains(dump, []byte(value)) || bytes.Contains(dump, []byte(toolsKey)) {
		t.Errorf("the store's dump (%d bytes) names crm-key: %v; holds a secret value in the clear: %v", len(dump),
			bytes.Contains(dump, []byte("crm-key")), bytes.Contains(dump, []byte(value)) || bytes.Contains(dump, []byte(toolsKey)))
	}
	refusals := []struct {
		name string
		path string
		body any
		want []string
	}{
		{"no value", "/secrets/a", map[string]any{}, []string{"value", "required"}},
		{"empty", "/secrets/a", map[string]any{"value": ""}, []string{"value", "empty"}},
		{"too long", "/secrets/a", map[string]any{"value": strings.Repeat("v", MaxSecretBytes+1)}, []string{"value", "4096"}},
		{"whitespace", "/secrets/a", map[string]any{"value": " v "}, []string{"value", "whitespace"}},
		{"unknown field", "/secrets/a", map[string]any{"value": "v", "name": "a"}, []string{"name", "unknown field"}},
		{"bad name", "/secrets/a%20b", map[string]any{"value": "v"}, []string{"name", "a b"}},
		{"long name", "/secrets/" + strings.Repeat("n", 65), map[string]any{"value": "v"}, []string{"name"}},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			wantRefusal(t, b.do("PUT", tt.path, "t1", tt.body), 400, httpapi.CodeInvalidRequest, tt.want...)
		})
	}
	t.Run("longest value and name", func(t *testing.T) {
		b := b.with(t)
		if r := b.do("PUT", "/secrets/"+strings.Repeat("n", 64), "t1", map[string]any{"value": strings.Repeat("v", MaxSecretBytes)}); r.status != http.StatusCreated {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("limit", func(t *testing.T) {
		b := b.with(t)
		// crm-key, tools, nnn…: three; a fourth is refused, a rotation is not.
		wantRefusal(t, b.do("PUT", "/secrets/fourth", "t1", map[string]any{"value": "v"}), 409, httpapi.CodeConflict, "secrets", "3")
		if r := b.do("PUT", "/secrets/crm-key", "t1", map[string]any{"value": toolsKey}); r.status != http.StatusOK {
			t.Errorf("rotation at the limit: %d %s", r.status, r.body)
		}
	})
	t.Run("deleted: the tool is refused before sending", func(t *testing.T) {
		b := b.with(t)
		b.ok("DELETE", "/secrets/crm-key", "t1", nil, nil)
		wantRefusal(t, b.do("GET", "/secrets/crm-key", "t1", nil), 404, httpapi.CodeNotFound, "crm-key")
		wantRefusal(t, b.do("DELETE", "/secrets/crm-key", "t1", nil), 404, httpapi.CodeNotFound, "crm-key")
		_, c := b.call("t1", s.ID, "crm", map[string]any{"text": "x"}, 5)
		if c.ErrorCode == nil || *c.ErrorCode != "missing_credential" || c.UnknownOutcome {
			t.Fatalf("call without its secret: %+v", c)
		}
	})
	var list struct{ Secrets []json.RawMessage }
	b.ok("GET", "/secrets", "t1", nil, &list)
	for _, s := range list.Secrets {
		if bytes.Contains(s, []byte(`"value"`)) || bytes.Contains(s, []byte("sealed")) {
			t.Errorf("listed secret shows its value: %s", s)
		}
	}
}

// TestToolDefinitionSizeLimits: a tenant's tool definitions are capped at
// each edge — a description of MaxToolDescriptionBytes is taken and one
// byte more is 400 naming the field and the limit, for a custom tool (its
// creation and each new revision) and a session's function tool; likewise
// a url of MaxToolURLBytes, for a custom tool and a session's MCP server.
func TestToolDefinitionSizeLimits(t *testing.T) {
	b := startBrain(t, allowLoopback)
	sess := b.session("t1")
	// pad is s made n bytes long with letters at its end.
	pad := func(s string, n int) string { return s + strings.Repeat("a", n-len(s)) }
	urlOf := func(n int) string { return pad(b.tools.URL+"/tools/echo/", n) }
	custom := func(name, desc, url string) map[string]any {
		return map[string]any{"name": name, "description": desc, "url": url, "input_schema": map[string]any{"type": "object"}}
	}
	var base CustomToolJSON
	b.created("/custom_tools", "t1", custom("base", "d", b.tools.URL+"/tools/echo"), &base)
	update := func(desc, url string) resp {
		var cur CustomToolJSON
		b.ok("GET", "/custom_tools/"+base.ID, "t1", nil, &cur)
		body := custom("base", desc, url)
		body["current_revision_id"] = cur.CurrentRevisionID
		return b.do("PUT", "/custom_tools/"+base.ID, "t1", body)
	}
	okStatus := func(r resp) bool { return r.status == http.StatusOK || r.status == http.StatusCreated }
	const maxDesc, maxURL = MaxToolDescriptionBytes, MaxToolURLBytes
	tests := []struct {
		name  string
		limit int
		send  func(i, n int) resp // the i-th request, with the field n bytes long
		field string
	}{
		{"custom tool description", maxDesc, func(i, n int) resp {
			return b.do("POST", "/custom_tools", "t1", custom(fmt.Sprintf("d%d", i), pad("", n), b.tools.URL+"/tools/echo"))
		}, "description"},
		{"custom tool revision description", maxDesc, func(_, n int) resp { return update(pad("", n), b.tools.URL+"/tools/echo") }, "description"},
		{"custom tool url", maxURL, func(i, n int) resp {
			return b.do("POST", "/custom_tools", "t1", custom(fmt.Sprintf("u%d", i), "d", urlOf(n)))
		}, "url"},
		{"custom tool revision url", maxURL, func(_, n int) resp { return update("d", urlOf(n)) }, "url"},
		{"session function description", maxDesc, func(_, n int) resp {
			return b.putTools("t1", sess.ID, []any{map[string]any{"type": "function", "name": "f", "description": pad("", n)}})
		}, "tools[0].description"},
		{"session mcp url", maxURL, func(_, n int) resp {
			return b.putTools("t1", sess.ID, []any{map[string]any{"type": "mcp", "name": "docs", "url": pad(closedURL(t)+"/", n)}})
		}, "tools[0].url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := tt.send(0, tt.limit); !okStatus(r) {
				t.Fatalf("%s of %d bytes (the limit): %d %s", tt.field, tt.limit, r.status, r.body)
			}
			wantRefusal(t, tt.send(1, tt.limit+1), 400, httpapi.CodeInvalidRequest,
				tt.field+": ", fmt.Sprintf("%d bytes, longer than the limit of %d bytes", tt.limit+1, tt.limit))
		})
	}
}

// TestCustomToolRevisionLimit: a custom tool keeps at most
// Limits.Revisions revisions, its first one counted; the update past it is
// 409 saying how to go on (delete the tool and create it anew), which
// works, and the calls' revisions stay readable.
func TestCustomToolRevisionLimit(t *testing.T) {
	if DefaultMaxRevisions != 100 {
		t.Errorf("DefaultMaxRevisions = %d; the README says 100", DefaultMaxRevisions)
	}
	const limit = 3
	b := startBrain(t, allowLoopback, func(o *Options) { o.Limits.Revisions = limit })
	body := func(desc string) map[string]any {
		return map[string]any{"name": "crm", "description": desc, "url": b.tools.URL + "/tools/echo", "input_schema": map[string]any{"type": "object"}}
	}
	var ct CustomToolJSON
	b.created("/custom_tools", "t1", body("v1"), &ct)
	revs := []string{ct.CurrentRevisionID}
	for i := 2; i <= limit; i++ {
		up := body(fmt.Sprintf("v%d", i))
		up["current_revision_id"] = ct.CurrentRevisionID
		b.ok("PUT", "/custom_tools/"+ct.ID, "t1", up, &ct)
		revs = append(revs, ct.CurrentRevisionID)
	}
	over := body("one too many")
	over["current_revision_id"] = ct.CurrentRevisionID
	wantRefusal(t, b.do("PUT", "/custom_tools/"+ct.ID, "t1", over), 409, httpapi.CodeConflict,
		"revisions", fmt.Sprintf("has %d revisions", limit), "DELETE /custom_tools/"+ct.ID, "create it anew")
	var now CustomToolJSON
	b.ok("GET", "/custom_tools/"+ct.ID, "t1", nil, &now)
	if now.CurrentRevisionID != revs[limit-1] || now.Description != fmt.Sprintf("v%d", limit) {
		t.Errorf("after the refused update: %+v, want revision %s unchanged", now, revs[limit-1])
	}
	// How to go on: delete and create anew; the old revisions stay.
	b.ok("DELETE", "/custom_tools/"+ct.ID, "t1", nil, nil)
	var again CustomToolJSON
	b.created("/custom_tools", "t1", body("one too many"), &again)
	up := body("v2 of the new tool")
	up["current_revision_id"] = again.CurrentRevisionID
	b.ok("PUT", "/custom_tools/"+again.ID, "t1", up, &again)
	for _, id := range revs {
		var rev RevisionJSON
		b.ok("GET", "/tool_revisions/"+id, "t1", nil, &rev)
	}
}
