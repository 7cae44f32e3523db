package schema

import (
	"strings"
	"testing"
)

// TestCompileRefCycle: a schema whose references lead back to where they
// started without stepping into a property or an item can validate no
// value that reaches them (jsonschema reports "reference cycle" on each
// call), so Compile refuses it, naming the field and the cycle; a
// recursive schema that steps into the value on its way round is a tree
// and compiles, and validates.
func TestCompileRefCycle(t *testing.T) {
	const tree = `{"$defs":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}`
	tests := []struct {
		name, doc string
		wantErr   string // "" to compile
		valid     string // with wantErr "": a document that must validate
		invalid   string // with wantErr "": one that must not, or ""
	}{
		{"direct self-reference", `{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
			"input_schema: reference cycle: #/$defs/a → #/$defs/a", "", ""},
		{"root refers to itself", `{"type":"object","$ref":"#"}`, "input_schema: reference cycle: # → #", "", ""},
		{"two steps a→b→a", `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
			"input_schema: reference cycle: #/$defs/a → #/$defs/b → #/$defs/a", "", ""},
		{"through allOf", `{"$defs":{"a":{"allOf":[{"type":"object"},{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`,
			"input_schema: reference cycle: #/$defs/a → #/$defs/a/allOf/1 → #/$defs/a", "", ""},
		{"through anyOf, not and then", `{"$defs":{"a":{"anyOf":[{"not":{"if":{"type":"string"},"then":{"$ref":"#/$defs/a"}}}]}},"$ref":"#/$defs/a"}`,
			"reference cycle", "", ""},
		{"through dependentSchemas", `{"type":"object","dependentSchemas":{"x":{"$ref":"#"}}}`, "reference cycle", "", ""},
		// An empty object never reaches this cycle: a trial validation
		// would pass it; every call with "x" would fail.
		{"under a property", `{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}}}`,
			"input_schema: reference cycle: #/$defs/a → #/$defs/b → #/$defs/a", "", ""},
		{"draft-07 dependencies", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"dependencies":{"x":{"$ref":"#/definitions/a"}}}},"properties":{"p":{"$ref":"#/definitions/a"}}}`,
			"reference cycle", "", ""},
		{"through $dynamicRef", `{"$defs":{"a":{"$anchor":"x","allOf":[{"$dynamicRef":"#x"}]}},"$ref":"#/$defs/a"}`,
			"input_schema: reference cycle: #/$defs/a → #/$defs/a/allOf/0 → #/$defs/a", "", ""},
		{"through $dynamicRef to a dynamic anchor", `{"$dynamicAnchor":"m","type":"object","anyOf":[{"$dynamicRef":"#m"}]}`,
			"input_schema: reference cycle: # → #/anyOf/0 → #", "", ""},
		// "#n" names leaf where it stands, but from root, whose dynamic
		// anchor is n too, it leads back to root: every call failed.
		{"through $dynamicRef to an outer dynamic anchor", `{"$id":"https://example.com/root","$dynamicAnchor":"n","type":"object","allOf":[{"$ref":"inner"}],` +
			`"$defs":{"inner":{"$id":"https://example.com/inner","$defs":{"leaf":{"$dynamicAnchor":"n","type":"object"}},"$dynamicRef":"#n"}}}`,
			"input_schema: reference cycle: # → #/allOf/0 → #/$defs/inner → #", "", ""},
		{"draft 2019-09 $recursiveRef", `{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,"type":"object","allOf":[{"$recursiveRef":"#"}]}`,
			"reference cycle", "", ""},
		{"recursive tree through $dynamicRef", `{"$dynamicAnchor":"n","type":"object","properties":{"kids":{"type":"array","items":{"$dynamicRef":"#n"}}}}`,
			"", `{"kids":[{"kids":[]},{}]}`, `{"kids":[7]}`},
		{"recursive tree", tree, "", `{"kids":[{"kids":[]},{"kids":[{}]}]}`, `{"kids":[{"kids":[7]}]}`},
		{"linked list", `{"$defs":{"l":{"type":"object","properties":{"next":{"$ref":"#/$defs/l"}},"required":["v"]}},"$ref":"#/$defs/l"}`,
			"", `{"v":1,"next":{"v":2,"next":{"v":3}}}`, `{"v":1,"next":{"next":{"v":3}}}`},
		{"shared definition, no cycle", `{"$defs":{"s":{"type":"string"},"p":{"allOf":[{"$ref":"#/$defs/s"}],"anyOf":[{"$ref":"#/$defs/s"}]}},"properties":{"a":{"$ref":"#/$defs/p"},"b":{"$ref":"#/$defs/p"}}}`,
			"", `{"a":"x","b":"y"}`, `{"a":1}`},
		{"the 2020-12 metaschema", `{"type":"object","properties":{"s":{"$ref":"https://json-schema.org/draft/2020-12/schema"}}}`,
			"", `{"s":{"type":"object","properties":{"a":{"$ref":"#"}}}}`, `{"s":{"type":"strong"}}`},
		{"the draft-07 metaschema", `{"type":"object","properties":{"s":{"$ref":"http://json-schema.org/draft-07/schema#"}}}`,
			"", `{"s":{"anyOf":[{"type":"string"}]}}`, `{"s":{"minLength":-1}}`},
		{"recursion through propertyNames", `{"type":"object","propertyNames":{"$ref":"#/$defs/k"},"$defs":{"k":{"type":"string","maxLength":3}}}`,
			"", `{"abc":1}`, `{"abcd":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile("input_schema", []byte(tt.doc))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if err := s.ValidateObject("arguments", []byte(tt.valid)); err != nil {
				t.Fatalf("valid document refused: %v", err)
			}
			if tt.invalid != "" {
				if err := s.ValidateObject("arguments", []byte(tt.invalid)); err == nil || strings.Contains(err.Error(), "cycle") {
					t.Fatalf("invalid document: err = %v, want a validation failure", err)
				}
			}
		})
	}
}
