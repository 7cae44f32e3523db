package schema

import (
	"strings"
	"testing"
)

func TestCompile(t *testing.T) {
	tests := []struct {
		name, doc, wantErr string
	}{
		{"object", `{"type":"object"}`, ""},
		{"internal ref", `{"$defs":{"a":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, ""},
		{"external ref refused", `{"properties":{"x":{"$ref":"https://example.com/s.json"}}}`, "is not loaded"},
		{"file ref refused", `{"$ref":"file:///etc/passwd"}`, "is not loaded"},
		{"unknown $schema refused", `{"$schema":"https://example.com/draft","type":"object"}`, "input_schema"},
		{"not JSON", `{`, "not valid JSON"},
		{"bad keyword value", `{"type":"strong"}`, "does not compile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile("input_schema", []byte(tt.doc))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	s, err := Compile("input_schema", []byte(`{"type":"object","properties":{"text":{"type":"string","maxLength":3},"url":{"type":"string","format":"uri"},"when":{"type":"string","format":"date-time"}},"required":["text"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, doc, wantErr string
	}{
		{"ok", `{"text":"abc"}`, ""},
		{"at maxLength", `{"text":"ééé"}`, ""},
		{"over maxLength", `{"text":"abcd"}`, `arguments: at "/text": maxLength`},
		{"missing required", `{}`, `arguments: at (root): missing property 'text'`},
		{"extra property", `{"text":"a","x":1}`, `at (root): additional properties 'x' not allowed`},
		{"format uri asserted", `{"text":"a","url":"not a uri"}`, `at "/url"`},
		{"format date-time asserted", `{"text":"a","when":"yesterday"}`, `at "/when"`},
		{"not an object", `[1]`, `arguments: must be a JSON object`},
		{"empty", ``, `arguments: required`},
		{"not JSON", `{"text":`, `not valid JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.ValidateObject("arguments", []byte(tt.doc))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if err := s.Validate("structured_content", []byte(`"a string"`)); err == nil || !strings.Contains(err.Error(), "structured_content: at (root)") {
		t.Fatalf("non-object through Validate: %v", err)
	}
}

func TestErrorsAreCapped(t *testing.T) {
	s, err := Compile("s", []byte(`{"type":"array","items":{"type":"integer"}}`))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Validate("v", []byte(`["a","b","c","d","e","f","g"]`))
	if err == nil || strings.Count(err.Error(), "at \"/") != MaxErrors || !strings.Contains(err.Error(), "and 2 more") {
		t.Fatalf("err = %v", err)
	}
}

// TestLongNumbers: a number literal past MaxNumberLength is refused, named
// by its pointer, before the validator (which compares numbers exactly, in
// time quadratic in their length) sees it; one at the limit is validated.
func TestLongNumbers(t *testing.T) {
	s, err := Compile("input_schema", []byte(`{"type":"object","properties":{"n":{"type":"integer","maximum":10},"l":{"type":"array"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("1", MaxNumberLength+1)
	for _, tc := range []struct{ doc, want string }{
		{`{"n":` + long + `}`, `arguments: at /n: number is 401 characters long`},
		{`{"l":[1,2,` + long + `]}`, `arguments: at /l/2: number is 401`},
		{`{"a/b~c":` + long + `}`, `at /a~1b~0c: number`},
		{`{"n":` + long[:MaxNumberLength] + `}`, `maximum`},
		{`{"n":1e` + strings.Repeat("9", 1<<20) + `}`, `number is 1048578 characters long`},
	} {
		err := s.ValidateObject("arguments", []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.20s…: err %v, want %q", tc.doc, err, tc.want)
		}
	}
}
