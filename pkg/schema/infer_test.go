package schema

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/strictjson"
)

type inferIn struct {
	Text  string            `json:"text" jsonschema:"The text." schema:"minLength=1,maxLength=10"`
	N     *int              `json:"n,omitempty" schema:"minimum=1,maximum=5,default=2"`
	Tags  []string          `json:"tags,omitempty" schema:"maxItems=3,maxLength=4,pattern=^[a-z,]+$"`
	Mode  string            `json:"mode,omitempty" schema:"enum=a|b"`
	URL   string            `json:"url,omitempty" schema:"format=uri"`
	Ratio float64           `json:"ratio,omitempty" schema:"exclusiveMinimum=0,exclusiveMaximum=1"`
	Extra map[string]string `json:"extra,omitempty" schema:"maxProperties=2,maxLength=3"`
	Skip  string            `json:"-"`
}

func TestForTags(t *testing.T) {
	doc, err := For[inferIn]()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"text":{"type":"string","description":"The text.","minLength":1,"maxLength":10}`,
		`"n":{"type":"integer","default":2,"minimum":1,"maximum":5}`,
		`"items":{"type":"string","maxLength":4,"pattern":"^[a-z,]+$"},"maxItems":3`,
		`"mode":{"type":"string","enum":["a","b"]}`,
		`"format":"uri"`,
		`"exclusiveMinimum":0,"exclusiveMaximum":1`,
		`"maxProperties":2,"additionalProperties":{"type":"string","maxLength":3}`,
		`"required":["text"],"additionalProperties":false`,
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("schema lacks %s:\n%s", want, doc)
		}
	}
	if strings.Contains(string(doc), "Skip") {
		t.Errorf("json:\"-\" field in the schema: %s", doc)
	}
	// The inferred schema compiles and applies its limits.
	s, err := Compile("input_schema", doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate("arguments", []byte(`{"text":"01234567890"}`)); err == nil || !strings.Contains(err.Error(), "maxLength") {
		t.Errorf("11 characters: %v", err)
	}
	if err := s.Validate("arguments", []byte(`{"text":"ok","mode":"c"}`)); err == nil {
		t.Error("mode c passed the enum")
	}
}

func TestForRefusesBadTags(t *testing.T) {
	type unknown struct {
		A string `json:"a" schema:"maxLen=3"`
	}
	type notNumber struct {
		A int `json:"a" schema:"minimum=one"`
	}
	type noValue struct {
		A string `json:"a" schema:"maxLength"`
	}
	type badEnum struct {
		A int `json:"a" schema:"enum=1|two"`
	}
	type badType struct {
		C chan int `json:"c"`
	}
	for name, f := range map[string]func() error{
		"unknown keyword": func() error { _, err := For[unknown](); return err },
		"not a number":    func() error { _, err := For[notNumber](); return err },
		"no value":        func() error { _, err := For[noValue](); return err },
		"bad enum":        func() error { _, err := For[badEnum](); return err },
		"channel":         func() error { _, err := For[badType](); return err },
	} {
		err := f()
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if name != "channel" && !strings.Contains(err.Error(), "field ") {
			t.Errorf("%s: %v does not name the field", name, err)
		}
	}
}

// TestForEncodings: a value is described as encoding/json writes it, and a
// field Go omits when nil is not also null.
func TestForEncodings(t *testing.T) {
	type in struct {
		Raw     json.RawMessage   `json:"raw"`
		Bytes   []byte            `json:"bytes"`
		Data    strictjson.Base64 `json:"data"`
		When    time.Time         `json:"when"`
		Opt     *int              `json:"opt,omitempty"`
		Null    *int              `json:"null"`
		List    []string          `json:"list,omitzero"`
		NilList []string          `json:"nil_list"`
	}
	doc, err := For[in]()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"raw":true`,
		`"bytes":{"type":"string","contentEncoding":"base64"}`,
		`"data":{"type":"string","contentEncoding":"base64"}`,
		`"when":{"type":"string","format":"date-time"}`,
		`"opt":{"type":"integer"}`,
		`"null":{"type":["null","integer"]}`,
		`"list":{"type":"array","items":{"type":"string"}}`,
		`"nil_list":{"type":["null","array"],"items":{"type":"string"}}`,
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("schema lacks %s:\n%s", want, doc)
		}
	}
	s, err := Compile("output_schema", doc)
	if err != nil {
		t.Fatal(err)
	}
	v := in{Raw: json.RawMessage(`{"any":[1]}`), Bytes: []byte("hi"), Data: strictjson.Base64("hi"), When: time.Now()}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate("structured_content", data); err != nil {
		t.Errorf("encoding/json's own encoding of %T: %v", v, err)
	}
	if err := s.Validate("arguments", []byte(`{"raw":1,"bytes":"","data":"","when":"2026-01-01T00:00:00Z","opt":null,"null":null,"nil_list":null}`)); err == nil || !strings.Contains(err.Error(), `"/opt"`) {
		t.Errorf("null for an omitempty pointer: %v", err)
	}
}
