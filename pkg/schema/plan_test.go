package schema

import (
	"strings"
	"testing"
)

// planSchemas are the shapes the tools of the suite declare (written by
// hand or inferred by For), and the documents checked against each: every
// row says whether the full validator accepts it (valid) and whether the
// plan must decide it on its own (fast: a valid document of the common
// shape that would otherwise pay for the full validator).
var planSchemas = []struct {
	name   string
	schema string
	noPlan bool // the schema is outside the plan's subset
	docs   []planDoc
}{
	{name: "echo", schema: `{"type":"object","properties":{"text":{"type":"string","maxLength":4096}},"required":["text"],"additionalProperties":false}`,
		docs: []planDoc{
			{`{"text":"hello"}`, true, true},
			{` { "text" : "hello" } `, true, true},
			{`{"text":"` + strings.Repeat("é", 4096) + `"}`, true, true},
			{`{"text":"` + strings.Repeat("é", 4097) + `"}`, false, false},
			{`{"text":"a\u00e9\n"}`, true, true},
			{`{"te\u0078t":"escaped name"}`, true, true},
			{`{}`, false, false},
			{`{"text":1}`, false, false},
			{`{"text":null}`, false, false},
			{`{"text":"a","x":1}`, false, false},
			{`{"text":"a","text":"b"}`, true, false}, // duplicate names: the full validator's rule
			{"{\"text\":\"\xff\"}", true, false},     // invalid UTF-8: the full validator's rule
			{`{"text":"a"} x`, false, false},
			{`{"text":"a"}{}`, false, false},
			{`["text"]`, false, false},
			{`{"text":`, false, false},
		}},
	{name: "inferred", schema: `{"type":"object","properties":{"seconds":{"type":"integer","minimum":1,"maximum":3600},` +
		`"mode":{"type":"string","enum":["text","markdown"],"default":"text"},"tags":{"type":["null","array"],"items":{"type":"string","maxLength":3,"pattern":"^[a-z]+$"},"maxItems":2},` +
		`"ratio":{"type":"number"},"note":{"type":["null","string"],"description":"d"},"on":{"type":"boolean"},"meta":{"type":"object","additionalProperties":{"type":"integer"}}},` +
		`"required":["seconds"],"additionalProperties":false}`,
		docs: []planDoc{
			{`{"seconds":1}`, true, true},
			{`{"seconds":3600,"mode":"markdown","tags":["ab","c"],"ratio":0.5,"note":null,"on":true,"meta":{"a":1,"b":-2}}`, true, true},
			{`{"seconds":10,"tags":null,"note":"n"}`, true, true},
			{`{"seconds":0}`, false, false},
			{`{"seconds":3601}`, false, false},
			{`{"seconds":-1}`, false, false},
			{`{"seconds":1.0}`, true, false},
			{`{"seconds":1e1}`, true, false},
			{`{"seconds":1.5}`, false, false},
			{`{"seconds":-0}`, false, false},
			{`{"seconds":99999999999999999999}`, false, false},
			{`{"seconds":1,"ratio":1e400}`, true, true},
			{`{"seconds":1,"ratio":1e401}`, false, false},
			{`{"seconds":1,"ratio":` + strings.Repeat("1", 401) + `}`, false, false},
			{`{"seconds":1,"mode":"html"}`, false, false},
			{`{"seconds":1,"mode":5}`, false, false},
			{`{"seconds":1,"tags":["ABC"]}`, false, false},
			{`{"seconds":1,"tags":["abcd"]}`, false, false},
			{`{"seconds":1,"tags":["a","b","c"]}`, false, false},
			{`{"seconds":1,"tags":"a"}`, false, false},
			{`{"seconds":1,"on":"yes"}`, false, false},
			{`{"seconds":1,"meta":{"a":"x"}}`, false, false},
			{`{"seconds":1,"meta":{"a":1.5}}`, false, false},
			{`{"seconds":1,"meta":[]}`, false, false},
			{`{"seconds":1,"ratio":"1"}`, false, false},
		}},
	{name: "choice", schema: `{"type":"object","properties":{"key":{"type":"string","minLength":1},"text":{"type":"string"},"data_base64":{"type":"string","contentEncoding":"base64"}},` +
		`"required":["key"],"oneOf":[{"required":["text"]},{"required":["data_base64"]}],"additionalProperties":false}`,
		docs: []planDoc{
			{`{"key":"k","text":"t"}`, true, true},
			{`{"key":"k","data_base64":"aGk="}`, true, true},
			{`{"key":"k"}`, false, false},
			{`{"key":"k","text":"t","data_base64":"aGk="}`, false, false},
			{`{"key":"","text":"t"}`, false, false},
		}},
	{name: "property names", schema: `{"type":"object","properties":{"metadata":{"type":"object","propertyNames":{"pattern":"^[a-z0-9_-]{1,128}$"},` +
		`"additionalProperties":{"type":"string","pattern":"^[\\x20-\\x7e]*$"}}}}`,
		docs: []planDoc{
			{`{"metadata":{"owner":"ann","x-y_1":"a b"}}`, true, true},
			{`{"metadata":{}}`, true, true},
			{`{"metadata":{"Owner":"ann"}}`, false, false},
			{`{"metadata":{"":"ann"}}`, false, false},
			{`{"metadata":{"owner":"\u00e9"}}`, false, false},
			{`{"metadata":{"owner":1}}`, false, false},
		}},
	{name: "formats", schema: `{"type":"object","properties":{"at":{"type":"string","format":"date-time"},"url":{"type":"string","format":"uri"},"n":{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10}}}`,
		docs: []planDoc{
			{`{"at":"2026-12-01T10:00:00Z","url":"https://example.com/a?b","n":5}`, true, true},
			{`{"at":"2026-12-01T10:00:00.123+01:00"}`, true, true},
			{`{"at":"2026-02-30T10:00:00Z"}`, false, false},
			{`{"at":"yesterday"}`, false, false},
			{`{"url":"/relative"}`, false, false},
			{`{"n":0}`, false, false},
			{`{"n":10}`, false, false},
			{`{"other":[1,{"deep":[null,true,"x",1e5]}]}`, true, true},
			{`{"other":[1,{"deep":[1e999]}]}`, false, false},
		}},
	{name: "required outside properties", schema: `{"type":"object","required":["a","b"],"properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}}`,
		docs: []planDoc{
			{`{"a":"x","b":1}`, true, true},
			{`{"a":"x","b":"y"}`, false, false},
			{`{"a":"x"}`, false, false},
			{`{"a":"x","b":1,"c":2}`, true, true},
		}},
	{name: "required closed", schema: `{"type":"object","required":["b"],"additionalProperties":false}`,
		docs: []planDoc{
			{`{"b":1}`, false, false},
			{`{}`, false, false},
		}},
	{name: "draft 2020 named", schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"a":true}}`,
		docs: []planDoc{{`{"a":[1,2]}`, true, true}, {`[]`, false, false}}},
	{name: "any", schema: `{}`, docs: []planDoc{{`{"a":1}`, true, true}, {`{"a":1e999}`, false, false}}},
	{name: "array root", schema: `{"type":"array","items":{"type":"integer"},"minItems":1}`,
		docs: []planDoc{{`[1,2]`, true, true}, {`[]`, false, false}, {`["a"]`, false, false}}},
	// Outside the subset: every document goes to the full validator.
	{name: "ref", noPlan: true, schema: `{"$defs":{"a":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`},
	{name: "multipleOf", noPlan: true, schema: `{"type":"integer","multipleOf":2}`},
	{name: "fractional bound", noPlan: true, schema: `{"type":"number","maximum":0.5}`},
	{name: "non-string enum", noPlan: true, schema: `{"enum":[1,"a"]}`},
	{name: "older draft", noPlan: true, schema: `{"$schema":"http://json-schema.org/draft-04/schema#","type":"integer","maximum":3,"exclusiveMaximum":true}`},
	{name: "anyOf", noPlan: true, schema: `{"anyOf":[{"type":"string"},{"type":"integer"}]}`},
	{name: "false", noPlan: true, schema: `{"properties":{"a":false}}`},
}

type planDoc struct {
	doc   string
	valid bool // the full validator accepts it
	fast  bool // the plan must accept it on its own
}

// TestPlanAgrees: the plan accepts only what the full validator accepts,
// and accepts the valid documents of the common shapes itself; Validate
// answers what the full validator answers.
func TestPlanAgrees(t *testing.T) {
	for _, tt := range planSchemas {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile("input_schema", []byte(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			if (s.plan == nil) != tt.noPlan {
				t.Fatalf("plan = %v, want none: %v", s.plan != nil, tt.noPlan)
			}
			for _, d := range tt.docs {
				full := s.full("arguments", []byte(d.doc), false)
				if (full == nil) != d.valid {
					t.Errorf("%.60s: full validator: %v, want valid=%v", d.doc, full, d.valid)
				}
				fast := s.plan != nil && s.plan.valid([]byte(d.doc), false)
				if fast && full != nil {
					t.Errorf("%.60s: the plan accepts what the full validator refuses: %v", d.doc, full)
				}
				if fast != d.fast {
					t.Errorf("%.60s: plan = %v, want %v", d.doc, fast, d.fast)
				}
				if got := s.Validate("arguments", []byte(d.doc)); errText(got) != errText(full) {
					t.Errorf("%.60s: Validate = %v, full = %v", d.doc, got, full)
				}
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzPlan: for any document, the plan accepts it only if the full
// validator does.
func FuzzPlan(f *testing.F) {
	var compiled []*Schema
	for _, tt := range planSchemas {
		s, err := Compile("s", []byte(tt.schema))
		if err != nil {
			f.Fatal(err)
		}
		if s.plan != nil {
			compiled = append(compiled, s)
		}
		for _, d := range tt.docs {
			f.Add(d.doc)
		}
	}
	f.Fuzz(func(t *testing.T, doc string) {
		for _, s := range compiled {
			if s.plan.valid([]byte(doc), false) {
				if err := s.full("v", []byte(doc), false); err != nil {
					t.Fatalf("the plan of %s accepts %q, which the full validator refuses: %v", s.s.Location, doc, err)
				}
			}
		}
	})
}

// TestPlanKeepsTheDepthLimit: a document deeper than MaxValueDepth is
// refused whether the schema has a plan or not; the plan used to accept
// what the full validator refuses.
func TestPlanKeepsTheDepthLimit(t *testing.T) {
	for _, schema := range []string{`{"type":"object"}`, `{"type":"object","$defs":{}}`} {
		s, err := Compile("input_schema", []byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		for _, levels := range []int{MaxValueDepth, MaxValueDepth + 1} {
			doc := `{"a":` + strings.Repeat("[", levels-1) + "0" + strings.Repeat("]", levels-1) + `}`
			err := s.ValidateObject("arguments", []byte(doc))
			if want := levels <= MaxValueDepth; (err == nil) != want {
				t.Errorf("%s, %d levels: err = %v, want valid = %v", schema, levels, err, want)
			}
		}
	}
}
