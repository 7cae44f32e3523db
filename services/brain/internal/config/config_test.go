package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var testEnv = map[string]string{
	"BRAIN_TOOLS_KEY": "tools-secret",
	"BRAIN_API_KEY":   "client-secret",
	"OTHER_API_KEY":   "other-secret",
	"SAME_API_KEY":    "client-secret",
	"EMPTY_VAR":       "",
}

func getenv(k string) string { return testEnv[k] }

// binding returns a valid binding with every field written out; edit
// changes it before it is encoded.
func binding(name string, edit func(b map[string]any)) map[string]any {
	b := map[string]any{
		"name":        name,
		"description": "Echo text through an external tool service.",
		"input_schema": map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"text": map[string]any{"type": "string", "maxLength": 16}},
			"required":             []string{"text"},
			"additionalProperties": false,
		},
		"output_schema": map[string]any{
			"type":       "object",
			"properties": map[string]any{"echo": map[string]any{"type": "string"}},
			"required":   []string{"echo"},
		},
		"url":              "http://127.0.0.1:8081/tools/" + name,
		"token_env":        "BRAIN_TOOLS_KEY",
		"tenants":          []string{"local"},
		"timeout_seconds":  300,
		"max_output_bytes": 1048576,
		"inspect_session":  false,
	}
	if edit != nil {
		edit(b)
	}
	return b
}

// document encodes a host config; keys nil means one key for tenant local
// (BRAIN_API_KEY), an empty non-nil list means "api_keys": [].
func document(t testing.TB, tools []map[string]any, keys []map[string]any) []byte {
	t.Helper()
	if keys == nil {
		keys = []map[string]any{{"env": "BRAIN_API_KEY", "tenant": "local"}}
	}
	doc := map[string]any{"tools": tools, "api_keys": keys}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseValid(t *testing.T) {
	data := document(t,
		[]map[string]any{
			binding("echo", nil),
			binding("minimal", func(b map[string]any) {
				for _, k := range []string{"output_schema", "token_env", "timeout_seconds", "max_output_bytes", "inspect_session"} {
					delete(b, k)
				}
				b["tenants"] = []string{"local", "team_b"}
			}),
			binding("remote_search", func(b map[string]any) { b["mcp_tool"] = "search"; b["inspect_session"] = true }),
		},
		[]map[string]any{{"env": "BRAIN_API_KEY", "tenant": "local"}, {"env": "OTHER_API_KEY", "tenant": "team_b"}},
	)
	c, err := Parse(data, getenv)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(c.Tools) != 3 {
		t.Fatalf("got %d tools, want 3", len(c.Tools))
	}
	echo, ok := c.Tool("echo")
	if !ok {
		t.Fatal("Tool(echo) not found")
	}
	if echo.Token != "tools-secret" {
		t.Errorf("echo token = %q, want the value of BRAIN_TOOLS_KEY", echo.Token)
	}
	minimal, _ := c.Tool("minimal")
	if got, want := minimal.Timeout().Seconds(), 300.0; got != want {
		t.Errorf("default timeout = %vs, want %vs", got, want)
	}
	if got, want := minimal.MaxOutputBytes(), int64(1<<20); got != want {
		t.Errorf("default max_output_bytes = %d, want %d", got, want)
	}
	if minimal.Binding.TimeoutSeconds != 300 || minimal.Binding.MaxOutputBytes != 1<<20 {
		t.Errorf("defaults not written into the binding: %+v", minimal.Binding)
	}
	if minimal.Token != "" || minimal.HasOutputSchema() {
		t.Errorf("minimal binding: token %q, output schema %v", minimal.Token, minimal.HasOutputSchema())
	}
	remote, _ := c.Tool("remote_search")
	if remote.MCPTool != "search" || !remote.InspectSession {
		t.Errorf("mcp_tool/inspect_session not kept: %+v", remote.Binding)
	}
	if _, ok := c.Tool("nope"); ok {
		t.Error("Tool(nope) found")
	}

	for _, tc := range []struct {
		key, tenant string
		ok          bool
	}{
		{"client-secret", "local", true},
		{"other-secret", "team_b", true},
		{"client-secre", "", false},
		{"", "", false},
		{"tools-secret", "", false},
	} {
		tenant, ok := c.TenantForKey(tc.key)
		if tenant != tc.tenant || ok != tc.ok {
			t.Errorf("TenantForKey(%q) = %q, %v; want %q, %v", tc.key, tenant, ok, tc.tenant, tc.ok)
		}
	}

	local := c.Catalog("local")
	if got := names(local); !cmp.Equal(got, []string{"echo", "minimal", "remote_search"}) {
		t.Errorf("Catalog(local) = %v", got)
	}
	if got := names(c.Catalog("team_b")); !cmp.Equal(got, []string{"minimal"}) {
		t.Errorf("Catalog(team_b) = %v", got)
	}
	if got := c.Catalog("nobody"); got == nil || len(got) != 0 {
		t.Errorf("Catalog(nobody) = %#v, want an empty non-nil list", got)
	}
	out, err := json.Marshal(local)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"url", "token_env", "127.0.0.1", "BRAIN_TOOLS_KEY", "timeout_seconds", "tools-secret"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("catalog shows %q: %s", secret, out)
		}
	}
	if !strings.Contains(string(out), `"output_schema"`) {
		t.Errorf("catalog lacks output_schema: %s", out)
	}
}

func names(es []CatalogEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

// TestParseInvalid breaks each field of the contract's binding table, and
// each rule of api_keys, and checks that the error names the entry and the
// field.
func TestParseInvalid(t *testing.T) {
	set := func(k string, v any) func(map[string]any) { return func(b map[string]any) { b[k] = v } }
	del := func(k string) func(map[string]any) { return func(b map[string]any) { delete(b, k) } }
	schema := func(s string) json.RawMessage { return json.RawMessage(s) }
	keys := []map[string]any{{"env": "BRAIN_API_KEY", "tenant": "local"}}

	type tc struct {
		name  string
		edit  func(map[string]any)
		where string // the entry named in the error
		field string
	}
	cases := []tc{
		{"name missing", del("name"), "tools[1]", "name: required"},
		{"name starts with digit", set("name", "9echo"), `tools[1] "9echo"`, "name:"},
		{"name starts with underscore", set("name", "_echo"), `tools[1] "_echo"`, "name:"},
		{"name has dash", set("name", "echo-2"), `tools[1] "echo-2"`, "name:"},
		{"name has dot", set("name", "echo.v2"), `tools[1] "echo.v2"`, "name:"},
		{"name 65 chars", set("name", "a"+strings.Repeat("b", 64)), `tools[1] "a` + strings.Repeat("b", 64) + `"`, "name:"},
		{"name duplicate", set("name", "first"), `tools[1] "first"`, "name: duplicate of tools[0]"},
		{"name wrong type", set("name", 7), "tools[1]", "name: wrong type"},
		{"description missing", del("description"), `tools[1] "second"`, "description: required"},
		{"description empty", set("description", ""), `tools[1] "second"`, "description: required"},
		{"description blank", set("description", "  \n"), `tools[1] "second"`, "description: required"},
		{"input_schema missing", del("input_schema"), `tools[1] "second"`, "input_schema: required"},
		{"input_schema null", set("input_schema", nil), `tools[1] "second"`, "input_schema: must be a JSON Schema object"},
		{"input_schema not an object", set("input_schema", "object"), `tools[1] "second"`, "input_schema:"},
		{"input_schema bad type keyword", set("input_schema", schema(`{"type":"objekt"}`)), `tools[1] "second"`, "input_schema: does not compile"},
		{"input_schema bad regex", set("input_schema", schema(`{"type":"string","pattern":"(?<=a)b"}`)), `tools[1] "second"`, "input_schema: does not compile"},
		{"input_schema external ref", set("input_schema", schema(`{"$ref":"https://example.com/schema.json"}`)), `tools[1] "second"`, "input_schema: does not compile"},
		{"input_schema relative ref", set("input_schema", schema(`{"$ref":"other.json#/defs/x"}`)), `tools[1] "second"`, "input_schema: does not compile"},
		{"input_schema file ref", set("input_schema", schema(`{"$ref":"file:///etc/passwd"}`)), `tools[1] "second"`, "input_schema: does not compile"},
		{"input_schema unknown metaschema", set("input_schema", schema(`{"$schema":"https://example.com/meta","type":"object"}`)), `tools[1] "second"`, "input_schema: does not compile"},
		{"input_schema dangling local ref", set("input_schema", schema(`{"$ref":"#/$defs/missing"}`)), `tools[1] "second"`, "input_schema: does not compile"},
		{"input_schema refers to itself", set("input_schema", schema(`{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`)), `tools[1] "second"`, "input_schema: reference cycle: #/$defs/a → #/$defs/a"},
		{"input_schema cycle a→b→a", set("input_schema", schema(`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`)), `tools[1] "second"`, "input_schema: reference cycle: #/$defs/a → #/$defs/b → #/$defs/a"},
		{"output_schema cycle", set("output_schema", schema(`{"anyOf":[{"$ref":"#"}]}`)), `tools[1] "second"`, "output_schema: reference cycle: # → #/anyOf/0 → #"},
		{"output_schema null", set("output_schema", nil), `tools[1] "second"`, "output_schema:"},
		{"output_schema array", set("output_schema", []int{1}), `tools[1] "second"`, "output_schema:"},
		{"output_schema bad keyword", set("output_schema", schema(`{"minLength":-1}`)), `tools[1] "second"`, "output_schema: does not compile"},
		{"output_schema external ref", set("output_schema", schema(`{"$ref":"http://127.0.0.1:1/x.json"}`)), `tools[1] "second"`, "output_schema: does not compile"},
		{"url missing", del("url"), `tools[1] "second"`, "url: required"},
		{"url ftp", set("url", "ftp://127.0.0.1/tools/x"), `tools[1] "second"`, "url: scheme must be http or https"},
		{"url no scheme", set("url", "127.0.0.1:8081/tools/x"), `tools[1] "second"`, "url:"},
		{"url relative", set("url", "/tools/x"), `tools[1] "second"`, "url:"},
		{"url credentials", set("url", "http://user:pass@127.0.0.1/tools/x"), `tools[1] "second"`, "url: must not contain credentials"},
		{"url user only", set("url", "http://user@127.0.0.1/tools/x"), `tools[1] "second"`, "url: must not contain credentials"},
		{"url fragment", set("url", "http://127.0.0.1/tools/x#frag"), `tools[1] "second"`, "url: must not contain a fragment"},
		{"url empty fragment", set("url", "http://127.0.0.1/tools/x#"), `tools[1] "second"`, "url: must not contain a fragment"},
		{"url no host", set("url", "http:///tools/x"), `tools[1] "second"`, "url: has no host"},
		{"url opaque", set("url", "http:tools/x"), `tools[1] "second"`, "url: has no host"},
		{"url bad port", set("url", "http://127.0.0.1:http/x"), `tools[1] "second"`, "url: not a valid URL"},
		{"tenants missing", del("tenants"), `tools[1] "second"`, "tenants: required"},
		{"tenants empty", set("tenants", []string{}), `tools[1] "second"`, "tenants: required"},
		{"tenants empty name", set("tenants", []string{"local", ""}), `tools[1] "second"`, "tenants[1]: must not be empty"},
		{"tenants not a list", set("tenants", "local"), `tools[1] "second"`, "tenants: wrong type"},
		{"tenant listed twice", set("tenants", []string{"local", "team_b", "local"}), `tools[1] "second"`, `tenants[2]: "local" is listed twice (also tenants[0])`},
		{"tenant without an api key", set("tenants", []string{"local", "team_b"}), `tools[1] "second"`, `tenants[1]: tenant "team_b" has no api_keys entry, so nobody could call this tool for it`},
		{"input_schema type string", set("input_schema", schema(`{"type":"string"}`)), `tools[1] "second"`, `input_schema: type: must be "object"`},
		{"input_schema type array", set("input_schema", schema(`{"type":"array","items":{}}`)), `tools[1] "second"`, `input_schema: type: must be "object"`},
		{"input_schema type null", set("input_schema", schema(`{"type":"null"}`)), `tools[1] "second"`, `input_schema: type: must be "object"`},
		{"input_schema type list without object", set("input_schema", schema(`{"type":["string","null"]}`)), `tools[1] "second"`, `input_schema: type: must include "object" (brain sends arguments as a JSON object and refuses any other), got ["string","null"]`},
		{"field name in the wrong case", set("NAME", "second"), `tools[1] "second"`, `NAME: unknown field (field names are case-sensitive: did you mean "name"?)`},
		{"field name capitalized", set("Tenants", []string{"local"}), `tools[1] "second"`, `Tenants: unknown field (field names are case-sensitive: did you mean "tenants"?)`},
		{"token_env unset", set("token_env", "NOT_SET_ANYWHERE"), `tools[1] "second"`, "token_env: NOT_SET_ANYWHERE is not set"},
		{"token_env empty value", set("token_env", "EMPTY_VAR"), `tools[1] "second"`, "token_env: EMPTY_VAR is not set"},
		{"token_env empty name", set("token_env", ""), `tools[1] "second"`, "token_env: must name"},
		{"timeout_seconds 0", set("timeout_seconds", 0), `tools[1] "second"`, "timeout_seconds: must be from 1 to 86400, got 0"},
		{"timeout_seconds negative", set("timeout_seconds", -1), `tools[1] "second"`, "timeout_seconds: must be from 1 to 86400, got -1"},
		{"timeout_seconds 86401", set("timeout_seconds", 86401), `tools[1] "second"`, "timeout_seconds: must be from 1 to 86400, got 86401"},
		{"timeout_seconds fraction", set("timeout_seconds", 1.5), `tools[1] "second"`, "timeout_seconds: wrong type"},
		{"timeout_seconds string", set("timeout_seconds", "300"), `tools[1] "second"`, "timeout_seconds: wrong type"},
		{"max_output_bytes 0", set("max_output_bytes", 0), `tools[1] "second"`, "max_output_bytes: must be from 1 to 2097152"},
		{"max_output_bytes negative", set("max_output_bytes", -5), `tools[1] "second"`, "max_output_bytes: must be from 1 to 2097152"},
		{"max_output_bytes 2MiB+1", set("max_output_bytes", 2<<20+1), `tools[1] "second"`, "max_output_bytes: must be from 1 to 2097152 (2 MiB), got 2097153"},
		{"inspect_session string", set("inspect_session", "yes"), `tools[1] "second"`, "inspect_session: wrong type"},
		{"mcp_tool empty", set("mcp_tool", ""), `tools[1] "second"`, "mcp_tool: must name"},
		{"mcp_tool wrong type", set("mcp_tool", true), `tools[1] "second"`, "mcp_tool: wrong type"},
		{"unknown field", set("timeout", 30), `tools[1] "second"`, "timeout: unknown field"},
		{"type empty", set("type", ""), `tools[1] "second"`, `type: must be "function"; omit it for a tool brain calls at url`},
		{"type unknown", set("type", "webhook"), `tools[1] "second"`, `type: must be "function" (a tool the application answers) or omitted (a tool called at url), got "webhook"`},
		{"function tool with url", set("type", "function"), `tools[1] "second"`, "url: a function tool is answered by the application"},
		{"function tool without url, with token_env", func(b map[string]any) { b["type"] = "function"; delete(b, "url") }, `tools[1] "second"`, "token_env: a function tool"},
		{"require_approval empty", set("require_approval", ""), `tools[1] "second"`, `require_approval: must be "always" or "never", got ""`},
		{"require_approval yes", set("require_approval", "yes"), `tools[1] "second"`, `require_approval: must be "always" or "never", got "yes"`},
		{"require_approval bool", set("require_approval", true), `tools[1] "second"`, "require_approval: wrong type"},
		{"max_concurrency 0", set("max_concurrency", 0), `tools[1] "second"`, "max_concurrency: must be from 1 to 10000, got 0; omit it for no cap"},
		{"max_concurrency negative", set("max_concurrency", -2), `tools[1] "second"`, "max_concurrency: must be from 1 to 10000 (omit it for no cap), got -2"},
		{"max_concurrency 10001", set("max_concurrency", 10001), `tools[1] "second"`, "max_concurrency: must be from 1 to 10000 (omit it for no cap), got 10001"},
		{"max_concurrency fraction", set("max_concurrency", 1.5), `tools[1] "second"`, "max_concurrency: wrong type"},
		{"maxConcurrency", set("maxConcurrency", 2), `tools[1] "second"`, "maxConcurrency: unknown field"},
		{"unknown field camel case", set("inputSchema", map[string]any{}), `tools[1] "second"`, "inputSchema: unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := document(t, []map[string]any{binding("first", nil), binding("second", c.edit)}, keys)
			_, err := Parse(data, getenv)
			if err == nil {
				t.Fatal("Parse accepted the config")
			}
			want := c.where + ": " + c.field
			t.Log(err)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q\ndoes not contain %q", err, want)
			}
			if strings.Contains(err.Error(), "tools[0]") && !strings.Contains(c.field, "tools[0]") {
				t.Errorf("error blames the valid binding: %q", err)
			}
		})
	}

	keyCases := []struct {
		name string
		keys []map[string]any
		want string
	}{
		{"env unset", []map[string]any{{"env": "NOT_SET_ANYWHERE", "tenant": "local"}}, "api_keys[0]: env: NOT_SET_ANYWHERE is not set"},
		{"env empty value", []map[string]any{{"env": "EMPTY_VAR", "tenant": "local"}}, "api_keys[0]: env: EMPTY_VAR is not set"},
		{"env missing", []map[string]any{{"tenant": "local"}}, "api_keys[0]: env: required"},
		{"tenant missing", []map[string]any{{"env": "BRAIN_API_KEY"}}, "api_keys[0]: tenant: required"},
		{"same value twice", []map[string]any{{"env": "BRAIN_API_KEY", "tenant": "local"}, {"env": "SAME_API_KEY", "tenant": "team_b"}}, "api_keys[1]: env: SAME_API_KEY has the same value as api_keys[0]"},
		{"same env twice", []map[string]any{{"env": "BRAIN_API_KEY", "tenant": "local"}, {"env": "BRAIN_API_KEY", "tenant": "local"}}, "api_keys[1]: env: BRAIN_API_KEY has the same value as api_keys[0]"},
		{"unknown field", []map[string]any{{"env": "BRAIN_API_KEY", "tenant": "local", "value": "x"}}, "api_keys[0]: value: unknown field"},
		{"not an object", []map[string]any{nil}, "api_keys[0]: must be an object"},
		{"none", []map[string]any{}, "api_keys: required: at least one"},
		{"field name in the wrong case", []map[string]any{{"env": "BRAIN_API_KEY", "Tenant": "local"}}, `api_keys[0]: Tenant: unknown field (field names are case-sensitive: did you mean "tenant"?)`},
		{"binding tenant missing from the keys", []map[string]any{{"env": "OTHER_API_KEY", "tenant": "team_b"}}, `tools[0] "first": tenants[0]: tenant "local" has no api_keys entry`},
	}
	for _, c := range keyCases {
		t.Run("api_keys "+c.name, func(t *testing.T) {
			_, err := Parse(document(t, []map[string]any{binding("first", nil)}, c.keys), getenv)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}

func TestParseDocument(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{``, "config: must be a JSON object"},
		{`null`, "config: must be a JSON object"},
		{`[]`, "config: must be a JSON object"},
		{`{"tools":[],"extra":1}`, "config: extra: unknown field"},
		{`{"tools":[]} {}`, "config: unexpected data after the JSON value"},
		{`{"tools":{}}`, "config: tools: wrong type"},
		{`{"tools":[`, "config: malformed JSON"},
		{`{"tools":[7]}`, "tools[0]: must be a binding object"},
		{`{"tools":[null]}`, "tools[0]: must be a binding object"},
	} {
		_, err := Parse([]byte(c.doc), getenv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) error %v, want it to contain %q", c.doc, err, c.want)
		}
	}
	// No tools is valid; no API keys is not (no client could call brain).
	c, err := Parse([]byte(`{"api_keys":[{"env":"BRAIN_API_KEY","tenant":"local"}]}`), getenv)
	if err != nil || len(c.Tools) != 0 || len(c.APIKeys) != 1 {
		t.Errorf("Parse(no tools) = %+v, %v", c, err)
	}
	for _, doc := range []string{`{}`, `{"tools":[],"api_keys":[]}`, `{"api_keys":null}`} {
		if _, err := Parse([]byte(doc), getenv); err == nil || !strings.Contains(err.Error(), "api_keys: required") {
			t.Errorf("Parse(%s) error %v, want api_keys: required", doc, err)
		}
	}
}

// TestParseDuplicateKeys: a key written twice anywhere in the file is
// refused, naming the entry and the field; the checks of every entry still
// run.
func TestParseDuplicateKeys(t *testing.T) {
	const key = `{"env":"BRAIN_API_KEY","tenant":"local"}`
	bind := func(extra string) string {
		return `{"name":"echo","description":"d","input_schema":{"type":"object"},` + extra + `"url":"http://127.0.0.1:8081/tools/echo","tenants":["local"]}`
	}
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"binding field", `{"tools":[` + bind(`"url":"http://127.0.0.1:1/x",`) + `],"api_keys":[` + key + `]}`,
			[]string{`tools[0] "echo": url: duplicate key`}},
		{"binding name", `{"tools":[{"name":"a","name":"b","description":"d","input_schema":{},"url":"http://h/x","tenants":["local"]}],"api_keys":[` + key + `]}`,
			[]string{`tools[0] "b": name: duplicate key`}},
		{"schema property", `{"tools":[` + bind(`"output_schema":{"properties":{"text":{"type":"string"},"text":{"type":"integer"}}},`) + `],"api_keys":[` + key + `]}`,
			[]string{`tools[0] "echo": output_schema.properties.text: duplicate key`}},
		{"schema keyword", `{"tools":[{"name":"echo","description":"d","input_schema":{"type":"object","type":"string"},"url":"http://h/x","tenants":["local"]}],"api_keys":[` + key + `]}`,
			[]string{`tools[0] "echo": input_schema.type: duplicate key`}},
		{"odd property name", `{"tools":[` + bind(`"output_schema":{"properties":{"a.b":{},"a.b":{}}},`) + `],"api_keys":[` + key + `]}`,
			[]string{`tools[0] "echo": output_schema.properties["a.b"]: duplicate key`}},
		{"api key field", `{"tools":[],"api_keys":[{"env":"BRAIN_API_KEY","tenant":"x","tenant":"local"}]}`,
			[]string{`api_keys[0]: tenant: duplicate key`}},
		{"top level", `{"tools":[],"api_keys":[` + key + `],"tools":[]}`,
			[]string{`config: tools: duplicate key`}},
		{"with another error", `{"tools":[` + bind(`"timeout_seconds":0,"url":"http://h/y",`) + `],"api_keys":[` + key + `]}`,
			[]string{`tools[0] "echo": url: duplicate key`, `tools[0] "echo": timeout_seconds: must be from 1`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), getenv)
			if err == nil {
				t.Fatal("Parse accepted the config")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
	// The same document without the duplicate passes.
	if _, err := Parse([]byte(`{"tools":[`+bind("")+`],"api_keys":[`+key+`]}`), getenv); err != nil {
		t.Errorf("valid document: %v", err)
	}
}

// TestInputSchemaTypes: only a top-level type that lets an object through
// is accepted.
func TestInputSchemaTypes(t *testing.T) {
	for _, tc := range []struct {
		schema string
		ok     bool
	}{
		{`{"type":"object"}`, true},
		{`{}`, true},
		{`{"properties":{"a":{"type":"string"}}}`, true},
		{`{"type":["object","null"]}`, true},
		{`{"type":["object"]}`, true},
		{`{"TYPE":"string"}`, true}, // not a keyword: JSON Schema is case-sensitive
		{`{"type":"string"}`, false},
		{`{"type":"integer"}`, false},
		{`{"type":["array","string"]}`, false},
		{`{"type":[]}`, false}, // does not compile
	} {
		b := binding("edge", func(b map[string]any) { b["input_schema"] = json.RawMessage(tc.schema) })
		_, err := Parse(document(t, []map[string]any{b}, nil), getenv)
		if (err == nil) != tc.ok {
			t.Errorf("input_schema %s: err = %v, want ok=%v", tc.schema, err, tc.ok)
		}
	}
}

// TestParseReportsEveryEntry shows that -check lists every broken binding
// at once, not only the first.
func TestParseReportsEveryEntry(t *testing.T) {
	data := document(t, []map[string]any{
		binding("a", func(b map[string]any) { b["timeout_seconds"] = 0 }),
		binding("b", nil),
		binding("c", func(b map[string]any) { b["url"] = "http://x/#y" }),
	}, []map[string]any{{"env": "UNSET", "tenant": "local"}})
	_, err := Parse(data, getenv)
	if err == nil {
		t.Fatal("Parse accepted the config")
	}
	for _, want := range []string{`tools[0] "a": timeout_seconds`, `tools[2] "c": url`, `api_keys[0]: env: UNSET`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), `"b"`) {
		t.Errorf("error blames the valid binding b: %q", err)
	}
}

func TestNameEdges(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"A1_", true},
		{"a" + strings.Repeat("_", 63), true},
		{"a" + strings.Repeat("1", 64), false},
		{"é", false},
		{"a b", false},
	} {
		_, err := Parse(document(t, []map[string]any{binding(c.name, nil)}, nil), getenv)
		if (err == nil) != c.ok {
			t.Errorf("name %q: err = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestLimitEdges(t *testing.T) {
	for _, c := range []struct {
		field string
		value any
		ok    bool
	}{
		{"timeout_seconds", 1, true},
		{"timeout_seconds", 86400, true},
		{"timeout_seconds", 86401, false},
		{"max_output_bytes", 1, true},
		{"max_output_bytes", 2 << 20, true},
		{"max_output_bytes", 2<<20 + 1, false},
	} {
		b := binding("edge", func(b map[string]any) { b[c.field] = c.value })
		conf, err := Parse(document(t, []map[string]any{b}, nil), getenv)
		if (err == nil) != c.ok {
			t.Errorf("%s=%v: err = %v, want ok=%v", c.field, c.value, err, c.ok)
			continue
		}
		if err != nil {
			continue
		}
		tool, _ := conf.Tool("edge")
		switch c.field {
		case "timeout_seconds":
			if got := int(tool.Timeout().Seconds()); got != c.value {
				t.Errorf("Timeout() = %v, want %vs", tool.Timeout(), c.value)
			}
		case "max_output_bytes":
			if got := tool.MaxOutputBytes(); got != int64(c.value.(int)) {
				t.Errorf("MaxOutputBytes() = %d, want %v", got, c.value)
			}
		}
	}
}

func TestValidateArguments(t *testing.T) {
	data := document(t, []map[string]any{binding("v", func(b map[string]any) {
		b["input_schema"] = json.RawMessage(`{
			"type": "object",
			"properties": {
				"text": {"type": "string", "maxLength": 4},
				"email": {"type": "string", "format": "email"},
				"when": {"type": "string", "format": "date-time"},
				"n": {"type": "integer", "maximum": 9007199254740993},
				"item": {"$ref": "#/$defs/item"},
				"a/b": {"type": "boolean"}
			},
			"required": ["text"],
			"additionalProperties": false,
			"$defs": {"item": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}}
		}`)
	})}, nil)
	c, err := Parse(data, getenv)
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := c.Tool("v")
	for _, tc := range []struct {
		args string
		want string // "" = valid
	}{
		{`{"text":"hi"}`, ""},
		{`{"text":"hi","email":"a@example.com","when":"2024-05-01T10:00:00Z","n":9007199254740993,"item":{"id":1}}`, ""},
		{`{"text":"hello"}`, `arguments: at "/text": `},
		{`{}`, `arguments: at (root): missing property 'text'`},
		{`{"text":"hi","email":"not an email"}`, `at "/email": 'not an email' is not valid email`},
		{`{"text":"hi","when":"yesterday"}`, `at "/when": `},
		{`{"text":"hi","n":9007199254740994}`, `at "/n": `},
		{`{"text":"hi","item":{}}`, `at "/item": missing property 'id'`},
		{`{"text":"hi","a/b":1}`, `at "/a~1b": `},
		{`{"text":"hi","extra":1}`, `at (root): additional properties 'extra' not allowed`},
		{`{"text":1,"email":2,"when":3,"n":"x","item":4,"a/b":5}`, `; and 1 more`},
		{`{"text":"hi"} x`, `arguments: not valid JSON`},
		{`{"text":`, `arguments: not valid JSON`},
		{``, `arguments: required`},
		{`null`, `arguments: must be a JSON object`},
		{`["text"]`, `arguments: must be a JSON object`},
	} {
		err := tool.ValidateArguments(json.RawMessage(tc.args))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ValidateArguments(%s) = %v, want nil", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ValidateArguments(%s) = %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

func TestValidateOutput(t *testing.T) {
	c, err := Parse(document(t, []map[string]any{binding("echo", nil), binding("plain", func(b map[string]any) { delete(b, "output_schema") })}, nil), getenv)
	if err != nil {
		t.Fatal(err)
	}
	echo, _ := c.Tool("echo")
	if err := echo.ValidateOutput(json.RawMessage(`{"echo":"hi"}`)); err != nil {
		t.Errorf("valid output: %v", err)
	}
	err = echo.ValidateOutput(json.RawMessage(`{"echo":5}`))
	if err == nil || !strings.Contains(err.Error(), `structured_content: at "/echo": `) {
		t.Errorf("invalid output: %v", err)
	}
	plain, _ := c.Tool("plain")
	if err := plain.ValidateOutput(json.RawMessage(`[1,2]`)); err != nil {
		t.Errorf("no output_schema: %v", err)
	}
}

// TestDraft2020Default shows that a schema without $schema is read as
// draft 2020-12 ($defs, prefixItems) and that an older draft named by
// $schema still works, since its metaschema ships with the library.
func TestDraft2020Default(t *testing.T) {
	c, err := Parse(document(t, []map[string]any{
		binding("tuple", func(b map[string]any) {
			b["input_schema"] = json.RawMessage(`{"type":"object","properties":{"p":{"type":"array","prefixItems":[{"type":"integer"}],"items":false}}}`)
		}),
		binding("old", func(b map[string]any) {
			b["input_schema"] = json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"e":{"type":"string","format":"email"}}}`)
		}),
	}, nil), getenv)
	if err != nil {
		t.Fatal(err)
	}
	tuple, _ := c.Tool("tuple")
	if err := tuple.ValidateArguments(json.RawMessage(`{"p":[1]}`)); err != nil {
		t.Errorf("prefixItems: %v", err)
	}
	if err := tuple.ValidateArguments(json.RawMessage(`{"p":[1,2]}`)); err == nil {
		t.Error("items:false after prefixItems accepted an extra item: schema not read as 2020-12")
	}
	old, _ := c.Tool("old")
	if err := old.ValidateArguments(json.RawMessage(`{"e":"nope"}`)); err == nil {
		t.Error("draft-07 format email not asserted")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "brain.json")
	if err := os.WriteFile(path, document(t, []map[string]any{binding("echo", nil)}, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, getenv)
	if err != nil || len(c.Tools) != 1 {
		t.Fatalf("Load = %+v, %v", c, err)
	}
	if _, err := Load(filepath.Join(dir, "missing.json"), getenv); err == nil || !strings.Contains(err.Error(), "load config") {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"tools":[]}`+strings.Repeat(" ", MaxFileBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big, getenv); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, document(t, []map[string]any{binding("echo", func(b map[string]any) { b["tenants"] = []string{} })}, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad, getenv); err == nil || !strings.Contains(err.Error(), bad+`: tools[0] "echo": tenants`) {
		t.Errorf("bad file: %v", err)
	}
}

// TestSecretsNotPrinted checks that formatting a Config or Tool for a log
// does not show the token or API key values.
func TestSecretsNotPrinted(t *testing.T) {
	c, err := Parse(document(t, []map[string]any{binding("echo", nil)}, []map[string]any{{"env": "BRAIN_API_KEY", "tenant": "local"}}), getenv)
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := c.Tool("echo")
	var sb strings.Builder
	logger := slog.New(slog.NewJSONHandler(&sb, nil))
	logger.Info("call", "tool", tool, "keys", c.APIKeys)
	sb.WriteString(fmt.Sprint(tool))
	for _, secret := range []string{"tools-secret", "client-secret"} {
		if strings.Contains(sb.String(), secret) {
			t.Errorf("output shows %q: %s", secret, sb.String())
		}
	}
}

// approvalTool is a binding that takes brain's approval request, as the
// local service's request_approval does.
func approvalTool(edit func(b map[string]any)) map[string]any {
	return binding("request_approval", func(b map[string]any) {
		b["input_schema"] = map[string]any{"type": "object", "required": []string{"action"}, "additionalProperties": false,
			"properties": map[string]any{"action": map[string]any{"type": "string"}, "details": map[string]any{"type": "string"},
				"timeout_seconds": map[string]any{"type": "integer", "minimum": 1, "maximum": 3600}}}
		delete(b, "output_schema")
		if edit != nil {
			edit(b)
		}
	})
}

// cancelTool is a binding that takes brain's withdrawal {"call_id"}, as
// local's approval_cancel.
func cancelTool(edit func(b map[string]any)) map[string]any {
	return binding("approval_cancel", func(b map[string]any) {
		b["input_schema"] = map[string]any{"type": "object", "additionalProperties": false,
			"properties": map[string]any{"call_id": map[string]any{"type": "string", "minLength": 1, "maxLength": 1024},
				"approval_id": map[string]any{"type": "string", "pattern": "^[a-z2-7]{26}$"}}}
		delete(b, "output_schema")
		if edit != nil {
			edit(b)
		}
	})
}

func functionTool(edit func(b map[string]any)) map[string]any {
	return binding("lookup_order", func(b map[string]any) {
		b["type"] = "function"
		delete(b, "url")
		delete(b, "token_env")
		if edit != nil {
			edit(b)
		}
	})
}

// TestFunctionToolsAndApprovals: a function tool (no url), a gated
// binding, a capped one and the approvals object load, and show in the
// catalog as the application needs to know them; each mistake in them is
// refused naming the field.
func TestFunctionToolsAndApprovals(t *testing.T) {
	gated := binding("storage_delete", func(b map[string]any) { b["require_approval"] = "always"; b["max_concurrency"] = 2 })
	doc := func(approvals any, tools ...map[string]any) []byte {
		data, _ := json.Marshal(map[string]any{"tools": tools, "approvals": approvals,
			"api_keys": []map[string]any{{"env": "BRAIN_API_KEY", "tenant": "local"}, {"env": "OTHER_API_KEY", "tenant": "team_b"}}})
		return data
	}
	c, err := Parse(doc(map[string]any{"tool": "request_approval", "timeout_seconds": 3600}, functionTool(nil), gated, approvalTool(nil)), getenv)
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := c.Tool("lookup_order")
	del, _ := c.Tool("storage_delete")
	if !fn.Function() || fn.URL != "" || fn.Token != "" || !del.Gated() || del.MaxConcurrency != 2 {
		t.Errorf("bindings: %+v %+v", fn.Binding, del.Binding)
	}
	if c.Approvals.Tool == nil || c.Approvals.Tool.Name != "request_approval" || c.Approvals.Timeout != time.Hour || c.Approvals.CancelTool != nil {
		t.Errorf("approvals %+v", c.Approvals)
	}
	withCancel, err := Parse(doc(map[string]any{"tool": "request_approval", "cancel_tool": "approval_cancel"}, approvalTool(nil), cancelTool(nil)), getenv)
	if err != nil || withCancel.Approvals.CancelTool == nil || withCancel.Approvals.CancelTool.Name != "approval_cancel" {
		t.Errorf("approvals with cancel_tool: %+v, %v", withCancel, err)
	}
	cat, _ := json.Marshal(c.Catalog("local"))
	for _, want := range []string{`"name":"lookup_order","description"`, `"type":"function"`, `"name":"storage_delete"`, `"require_approval":"always"`} {
		if !strings.Contains(string(cat), want) {
			t.Errorf("catalog %s lacks %s", cat, want)
		}
	}
	if strings.Count(string(cat), `"type":"function"`) != 1 || strings.Contains(string(cat), "max_concurrency") {
		t.Errorf("catalog %s", cat)
	}
	// The maxLength of details, which brain fits a gated call's arguments
	// in, is read from the approval tool's schema (0: none declared).
	for _, tc := range []struct {
		maxLength any
		want      int
	}{{nil, 0}, {1024, 1024}, {16384.0, 16384}, {1e12, 1 << 31}} {
		props := map[string]any{"action": map[string]any{"type": "string"}, "details": map[string]any{"type": "string"}}
		if tc.maxLength != nil {
			props["details"].(map[string]any)["maxLength"] = tc.maxLength
		}
		c, err := Parse(doc(map[string]any{"tool": "request_approval"}, approvalTool(func(b map[string]any) {
			b["input_schema"] = map[string]any{"type": "object", "properties": props}
		})), getenv)
		if err != nil {
			t.Errorf("details maxLength %v: %v", tc.maxLength, err)
		} else if c.Approvals.DetailsMaxChars != tc.want {
			t.Errorf("details maxLength %v: DetailsMaxChars %d, want %d", tc.maxLength, c.Approvals.DetailsMaxChars, tc.want)
		}
	}
	plain, err := Parse(doc(nil, functionTool(nil)), getenv)
	if err != nil || plain.Approvals.Tool != nil || plain.Approvals.Timeout != DefaultApprovalTimeoutSeconds*time.Second {
		t.Errorf("no approvals object: %+v, %v", plain, err)
	}

	for _, tc := range []struct {
		name      string
		approvals any
		tools     []map[string]any
		want      string
	}{
		{"tool not a binding", map[string]any{"tool": "nope"}, []map[string]any{gated}, `approvals: tool: "nope" is not a binding of this config`},
		{"tool empty", map[string]any{"tool": ""}, []map[string]any{gated}, "approvals: tool: must name a binding"},
		{"tool a function tool", map[string]any{"tool": "lookup_order"}, []map[string]any{functionTool(nil)}, `approvals: tool: "lookup_order" is a function tool`},
		{"tool gated itself", map[string]any{"tool": "request_approval"}, []map[string]any{approvalTool(func(b map[string]any) { b["require_approval"] = "always" })},
			`approvals: tool: "request_approval" has require_approval "always"`},
		{"tool takes other arguments", map[string]any{"tool": "echo"}, []map[string]any{binding("echo", nil)},
			`approvals: tool: "echo" does not take brain's approval request {action, details of 1024 characters, timeout_seconds: 300}: arguments: at (root): missing property 'text'`},
		{"timeout past what the tool takes", map[string]any{"tool": "request_approval", "timeout_seconds": 3601}, []map[string]any{approvalTool(nil)},
			`does not take brain's approval request {action, details of 1024 characters, timeout_seconds: 3601}`},
		{"details shorter than a call needs", map[string]any{"tool": "request_approval"}, []map[string]any{approvalTool(func(b map[string]any) {
			b["input_schema"].(map[string]any)["properties"].(map[string]any)["details"] = map[string]any{"type": "string", "maxLength": 1023}
		})}, `{action, details of 1024 characters, timeout_seconds: 300}: arguments: at "/details": maxLength: got 1024, want 1023`},
		{"tool not for a gated tenant", map[string]any{"tool": "request_approval"}, []map[string]any{
			binding("storage_delete", func(b map[string]any) { b["require_approval"] = "always"; b["tenants"] = []string{"local", "team_b"} }), approvalTool(nil)},
			`tools[0] "storage_delete": tenants[1]: approvals.tool "request_approval" is not allowed for tenant "team_b"`},
		{"cancel_tool without tool", map[string]any{"cancel_tool": "approval_cancel"}, []map[string]any{cancelTool(nil)},
			"approvals: cancel_tool: needs approvals.tool"},
		{"cancel_tool not a binding", map[string]any{"tool": "request_approval", "cancel_tool": "nope"}, []map[string]any{approvalTool(nil)},
			`approvals: cancel_tool: "nope" is not a binding of this config`},
		{"cancel_tool empty", map[string]any{"tool": "request_approval", "cancel_tool": ""}, []map[string]any{approvalTool(nil)},
			"approvals: cancel_tool: must name a binding"},
		{"cancel_tool a function tool", map[string]any{"tool": "request_approval", "cancel_tool": "lookup_order"},
			[]map[string]any{approvalTool(nil), functionTool(nil)}, `approvals: cancel_tool: "lookup_order" is a function tool`},
		{"cancel_tool gated itself", map[string]any{"tool": "request_approval", "cancel_tool": "approval_cancel"},
			[]map[string]any{approvalTool(nil), cancelTool(func(b map[string]any) { b["require_approval"] = "always" })},
			`approvals: cancel_tool: "approval_cancel" has require_approval "always"`},
		{"cancel_tool takes other arguments", map[string]any{"tool": "request_approval", "cancel_tool": "echo"},
			[]map[string]any{approvalTool(nil), binding("echo", nil)},
			`approvals: cancel_tool: "echo" does not take brain's withdrawal {call_id: the approval call's ID}: arguments: at (root): missing property 'text'`},
		{"cancel_tool not for a tenant of tool", map[string]any{"tool": "request_approval", "cancel_tool": "approval_cancel"},
			[]map[string]any{approvalTool(func(b map[string]any) { b["tenants"] = []string{"local", "team_b"} }), cancelTool(nil)},
			`approvals: cancel_tool: "approval_cancel" is not allowed for tenant "team_b", which approvals.tool "request_approval" is`},
		{"cancel_tool wrong type", map[string]any{"tool": "request_approval", "cancel_tool": 1}, []map[string]any{approvalTool(nil)},
			"approvals.cancel_tool: wrong type"},
		{"timeout 0", map[string]any{"timeout_seconds": 0}, nil, "approvals: timeout_seconds: must be from 1 to 86400, got 0"},
		{"timeout 86401", map[string]any{"timeout_seconds": 86401}, nil, "approvals: timeout_seconds: must be from 1 to 86400, got 86401"},
		{"timeout string", map[string]any{"timeout_seconds": "60"}, nil, "approvals.timeout_seconds: wrong type"},
		{"unknown field", map[string]any{"tool_name": "x"}, nil, "approvals.tool_name: unknown field"},
		{"not an object", []string{"request_approval"}, nil, "approvals: wrong type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(doc(tc.approvals, tc.tools...), getenv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
	// An approval tool whose binding is broken is reported for what is
	// wrong with it, not also as "not a binding".
	_, err = Parse(doc(map[string]any{"tool": "request_approval"}, approvalTool(func(b map[string]any) { b["timeout_seconds"] = 0 })), getenv)
	if err == nil || !strings.Contains(err.Error(), `"request_approval": timeout_seconds`) || strings.Contains(err.Error(), "not a binding") {
		t.Errorf("broken approval binding: %v", err)
	}
}
