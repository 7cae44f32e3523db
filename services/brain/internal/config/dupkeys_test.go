package config

import (
	"github.com/brain-tools/suite/pkg/strictjson"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDuplicateKeys(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		want    []duplicateKey
		wantErr string
	}{
		{"none", `{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, nil, ""},
		{"scalar document", `7`, nil, ""},
		{"empty object and array", `{"a":{},"b":[]}`, nil, ""},
		{"top level", `{"a":1,"a":2}`, []duplicateKey{{nil, "a"}}, ""},
		{"reported once per object", `{"a":1,"a":2,"a":3}`, []duplicateKey{{nil, "a"}}, ""},
		{"different values kinds", `{"a":{"x":1},"a":[1]}`, []duplicateKey{{nil, "a"}}, ""},
		{"nested in array", `{"tools":[{"n":1},{"n":1,"u":2,"n":3}]}`, []duplicateKey{{[]any{"tools", 1}, "n"}}, ""},
		{"deep", `{"t":[{"s":{"p":{"x":{},"x":{}}}}]}`, []duplicateKey{{[]any{"t", 0, "s", "p"}, "x"}}, ""},
		{"escaped spelling", `{"ab":1,"a\u0062":2}`, []duplicateKey{{nil, "ab"}}, ""},
		{"case differs: not a duplicate", `{"a":1,"A":2}`, nil, ""},
		{"same key in sibling objects", `[{"a":1},{"a":1}]`, nil, ""},
		{"several, in document order", `{"z":{"k":1,"k":2},"y":0,"y":1}`, []duplicateKey{{[]any{"z"}, "k"}, {nil, "y"}}, ""},
		{"malformed keeps what it found", `{"a":1,"a":2,`, []duplicateKey{{nil, "a"}}, "EOF"},
		{"trailing data", `{} {}`, nil, "after the JSON value"},
		{"too deep", strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2), nil, "nested deeper than 10000"},
		{"at the depth limit", strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := duplicateKeys([]byte(tt.doc))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("duplicates (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFieldPath(t *testing.T) {
	tests := []struct {
		path []any
		want string
	}{
		{nil, ""},
		{[]any{"tools"}, "tools"},
		{[]any{"tenants", 2}, "tenants[2]"},
		{[]any{"input_schema", "properties", "text"}, "input_schema.properties.text"},
		{[]any{"properties", "a.b", "type"}, `properties["a.b"].type`},
		{[]any{"", 0}, `[""][0]`},
		{[]any{"p", "2x"}, `p["2x"]`},
	}
	for _, tt := range tests {
		if got := fieldPath(tt.path); got != tt.want {
			t.Errorf("fieldPath(%v) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

// TestExactFields: the config's field names are case-sensitive, and a
// near miss says which name was meant.
func TestExactFields(t *testing.T) {
	type inner struct {
		Deep string `json:"deep_field"`
	}
	type sample struct {
		inner
		Name  string `json:"name"`
		Plain string
		Skip  string `json:"-"`
		Opt   int    `json:"opt,omitempty"`
	}
	tests := []struct {
		raw  string
		want string // "" = accepted
	}{
		{`{"name":"x","opt":1,"deep_field":"d","Plain":"p"}`, ""},
		{`{"unknown":1}`, "unknown: unknown field"},
		{`[1]`, "wrong type"},
		{`{"Name":"x"}`, `Name: unknown field (field names are case-sensitive: did you mean "name"?)`},
		{`{"OPT":1}`, `did you mean "opt"`},
		{`{"Deep_Field":"d"}`, `did you mean "deep_field"`},
		{`{"plain":"p"}`, `did you mean "Plain"`},
	}
	for _, tt := range tests {
		var s sample
		err := strictjson.Unmarshal([]byte(tt.raw), &s)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Unmarshal(%s) = %v, want %q", tt.raw, err, tt.want)
		}
	}
}
