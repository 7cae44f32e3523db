package schema

import (
	"strings"
	"testing"
	"unicode/utf8"
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
		// A short literal of a huge value: the exponent is bounded too, so
		// no document makes the validator build a million-digit rational
		// or a message that prints one.
		{`{"n":1e1000000}`, `at /n: number 1e1000000 has an exponent beyond ±400 (RFC 7493 I-JSON)`},
		{`{"n":-1E-1000000}`, `number -1E-1000000 has an exponent beyond ±400`},
		{`{"n":1e401}`, `exponent beyond ±400`},
		{`{"n":1e+401}`, `exponent beyond ±400`},
		{`{"n":1e99999999999999999999}`, `exponent beyond ±400`},
		{`{"n":1e400}`, `at "/n": maximum: got 1e+400, want 10`},
		{`{"n":1e-400}`, `at "/n": got number, want integer`},
		{`{"n":123456789012345678901234567890123456789012345}`, `maximum: got 1.2345678901234568e+44, want 10`},
		{`{"n":1234567890123456789012345678901234567890}`, `maximum: got 1234567890123456789012345678901234567890, want 10`},
	} {
		err := s.ValidateObject("arguments", []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.20s…: err %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// TestMessages: a property name that fails propertyNames is reported at
// its object's place (read from the schema's path while jsonschema reports
// it wrongly), and numbers carry no thousands separators, while quoted
// values keep their commas.
func TestMessages(t *testing.T) {
	s, err := Compile("input_schema", []byte(`{"type":"object","$defs":{"names":{"type":"object","propertyNames":{"pattern":"^[A-Z]+$"}}},
		"properties":{
			"env":{"type":"object","propertyNames":{"pattern":"^[A-Z_]+$"}},
			"a b":{"type":"object","properties":{"x/y":{"type":"object","propertyNames":{"maxLength":2}}}},
			"list":{"type":"array","items":{"type":"object","propertyNames":{"maxLength":1}}},
			"ref":{"$ref":"#/$defs/names"},
			"n":{"type":"integer","maximum":3600},
			"f":{"type":"number","exclusiveMaximum":0.25,"multipleOf":0.01},
			"big":{"type":"integer","minimum":1000000},
			"s":{"type":"string","maxLength":1000},
			"e":{"enum":["1,000"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ doc, want string }{
		{`{"env":{"A=B":"c"},"n":1}`, `at "/env": property name "A=B": 'A=B' does not match pattern '^[A-Z_]+$'`},
		// Another failing member after it used to overwrite the place.
		{`{"env":{"A=B":"c"},"n":3601}`, `at "/env": property name "A=B":`},
		{`{"a b":{"x/y":{"abc":1}}}`, `at "/a b/x~1y": property name "abc": maxLength: got 3, want 2`},
		{`{"list":[{"ab":1}]}`, `at an object: property name "ab": maxLength: got 2, want 1`},
		{`{"ref":{"a":1}}`, `at an object: property name "a":`},
		{`{"n":3601}`, `at "/n": maximum: got 3601, want 3600`},
		{`{"big":999999}`, `at "/big": minimum: got 999999, want 1000000`},
		{`{"s":"` + strings.Repeat("x", 1001) + `"}`, `maxLength: got 1001, want 1000`},
		{`{"e":"2,000"}`, `value must be '1,000'`},
		{`{"n":3600.5}`, `at "/n": got number, want integer`},
		{`{"n":1e4}`, `maximum: got 10000, want 3600`},
		{`{"f":0.5}`, `exclusiveMaximum: got 0.5, want 0.25`},
		{`{"f":0.125}`, `multipleOf: got 0.125, want 0.01`},
	}
	for _, tt := range tests {
		err := s.ValidateObject("arguments", []byte(tt.doc))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.60s: err = %v, want %q", tt.doc, err, tt.want)
		}
	}
	// A long value in a message is cut, so a small document gets a small
	// message however long its names.
	long := strings.Repeat("é", 5000)
	err = s.ValidateObject("arguments", []byte(`{"env":{"`+long+`":"x"},"s":"`+strings.Repeat("x", 1001)+`"}`))
	if err == nil || len(err.Error()) > 2*maxLeafBytes || !strings.Contains(err.Error(), "…") || !utf8.ValidString(err.Error()) {
		t.Errorf("message for a 10,000-byte name: %d bytes, valid UTF-8 %v: %.100s", len(err.Error()), utf8.ValidString(err.Error()), err)
	}
	for in, want := range map[string]string{
		"got 3,601, want 3,600":       "got 3601, want 3600",
		"got 1,000,000.5":             "got 1000000.5",
		"value 'a,123' and 1,2345":    "value 'a,123' and 1,2345",
		`value 'it\'s 1,000' and 1,0`: `value 'it\'s 1,000' and 1,0`,
		"subschemas 0, 1 matched":     "subschemas 0, 1 matched",
	} {
		if got := ungroup(in); got != want {
			t.Errorf("ungroup(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRequiredChoice: a oneOf whose alternatives each require one property
// reads as the choice it is, wherever it sits; any other oneOf keeps
// jsonschema's words.
func TestRequiredChoice(t *testing.T) {
	s, err := Compile("input_schema", []byte(`{"type":"object",
		"properties":{"text":{"type":"string"},"data_base64":{"type":"string"},
			"inner":{"type":"object","oneOf":[{"required":["a"]},{"required":["b"]},{"required":["c"]}]},
			"other":{"oneOf":[{"type":"string"},{"type":"string","minLength":1}]}},
		"oneOf":[{"required":["text"]},{"required":["data_base64"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ doc, want string }{
		{`{"text":"a","data_base64":"YQ=="}`, `at (root): give exactly one of text or data_base64 (got text and data_base64)`},
		{`{}`, `at (root): give exactly one of text or data_base64 (got none)`},
		{`{"text":"a","inner":{"a":1,"c":2}}`, `at "/inner": give exactly one of a, b or c (got a and c)`},
		{`{"text":"a","other":"x"}`, `at "/other": 'oneOf' failed, subschemas 0, 1 matched`},
	} {
		err := s.ValidateObject("arguments", []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.doc, err, tc.want)
		}
	}
	if err := s.ValidateObject("arguments", []byte(`{"text":"a"}`)); err != nil {
		t.Errorf("one of them: %v", err)
	}
}
