package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type inner struct {
	N int `json:"n"`
}

type doc struct {
	Name  string   `json:"name"`
	Count int      `json:"count"`
	Tags  []string `json:"tags"`
	In    inner    `json:"in"`
	Flag  bool     `json:"flag"`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		limit     int64
		wantField string
		wantIn    string // substring of the error; "" = success
		tooLarge  bool
	}{
		{name: "ok", body: `{"name":"a","count":2}`},
		{name: "ok with trailing whitespace", body: "{\"name\":\"a\"}\n\t "},
		{name: "unknown field", body: `{"name":"a","nope":1}`, wantField: "nope", wantIn: "unknown field"},
		{name: "wrong type top", body: `{"count":"two"}`, wantField: "count", wantIn: "got string, want integer"},
		{name: "wrong type nested", body: `{"in":{"n":true}}`, wantField: "in.n", wantIn: "got bool, want integer"},
		{name: "wrong type array", body: `{"tags":"x"}`, wantField: "tags", wantIn: "want array"},
		{name: "wrong type bool", body: `{"flag":1}`, wantField: "flag", wantIn: "want boolean"},
		{name: "not an object", body: `[1,2]`, wantIn: "wrong type"},
		{name: "malformed", body: `{"name":}`, wantIn: "malformed JSON at byte"},
		{name: "truncated", body: `{"name":"a"`, wantIn: "unexpected end of input"},
		{name: "empty", body: ``, wantIn: "body is empty"},
		{name: "trailing value", body: `{"name":"a"}{"name":"b"}`, wantIn: "unexpected data after"},
		{name: "trailing garbage", body: `{"name":"a"} x`, wantIn: "unexpected data after"},
		{name: "at limit", body: `{"name":"abc"}`, limit: 14},
		{name: "over limit by one", body: `{"name":"abcd"}`, limit: 14, tooLarge: true},
		{name: "over limit with trailing newline", body: "{\"name\":\"abc\"}\n", limit: 14, tooLarge: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d doc
			err := Decode(strings.NewReader(tt.body), tt.limit, &d)
			if tt.tooLarge {
				var tl *TooLargeError
				if !errors.As(err, &tl) || tl.Limit != tt.limit {
					t.Fatalf("err = %v, want TooLargeError{%d}", err, tt.limit)
				}
				return
			}
			if tt.wantIn == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v (%T), want *FieldError", err, err)
			}
			if fe.Field != tt.wantField {
				t.Errorf("field = %q, want %q (err %v)", fe.Field, tt.wantField, err)
			}
			if !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("err = %q, want it to contain %q", err, tt.wantIn)
			}
		})
	}
}

func TestUnmarshalDecodesValues(t *testing.T) {
	var d doc
	if err := Unmarshal([]byte(`{"name":"x","count":3,"tags":["a"],"in":{"n":4},"flag":true}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Name != "x" || d.Count != 3 || len(d.Tags) != 1 || d.In.N != 4 || !d.Flag {
		t.Fatalf("decoded %+v", d)
	}
}

type exactInner struct {
	AllowedTools []string `json:"allowed_tools"`
}

type exactDoc struct {
	Tool      string                `json:"tool"`
	Config    *exactInner           `json:"config"`
	Items     []exactInner          `json:"items"`
	ByName    map[string]exactInner `json:"by_name"`
	Arguments json.RawMessage       `json:"arguments"`
	Untagged  int
}

// TestStrictNames: names match exactly; a name that differs only in case is
// an unknown field with a hint, wherever it is nested; duplicates and
// invalid UTF-8 are refused.
func TestStrictNames(t *testing.T) {
	tests := []struct {
		body, wantField, wantIn string
	}{
		{`{"tool":"echo","config":{"allowed_tools":["a"]},"Untagged":1}`, "", ""},
		{`{"Tool":"echo"}`, "Tool", `did you mean "tool"`},
		{`{"tool":"echo","TOOL":"x"}`, "TOOL", `did you mean "tool"`},
		{`{"config":{"Allowed_Tools":[]}}`, "config.Allowed_Tools", `did you mean "allowed_tools"`},
		{`{"items":[{},{"ALLOWED_TOOLS":[]}]}`, "items[1].ALLOWED_TOOLS", `did you mean "allowed_tools"`},
		{`{"by_name":{"x":{"Allowed_tools":[]}}}`, "by_name.x.Allowed_tools", `did you mean "allowed_tools"`},
		{`{"arguments":{"Tool":1,"anything":2}}`, "", ""}, // raw: not looked into
		{`{"untagged":1}`, "untagged", `did you mean "Untagged"`},
		{`{"nothing_like_it":1}`, "nothing_like_it", "unknown field"},
		{`{"tool":"a","tool":"b"}`, "tool", "duplicate field"},
		{`{"config":{"allowed_tools":[],"allowed_tools":[]}}`, "config.allowed_tools", "duplicate field"},
		{"{\"tool\":\"a\xffb\"}", "tool", "not valid UTF-8"},
	}
	for _, tt := range tests {
		err := Unmarshal([]byte(tt.body), &exactDoc{})
		if tt.wantField == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.body, err)
			}
			continue
		}
		fe, ok := err.(*FieldError)
		if !ok || fe.Field != tt.wantField || !strings.Contains(fe.Problem, tt.wantIn) {
			t.Errorf("%s: err %v, want a FieldError for %s containing %q", tt.body, err, tt.wantField, tt.wantIn)
		}
	}
}

// TestDecodeKeepsNothingOfItsBuffer: Decode reuses its read buffer, so
// whatever it decoded must not point into it.
func TestDecodeKeepsNothingOfItsBuffer(t *testing.T) {
	type doc struct {
		Name string          `json:"name"`
		Raw  json.RawMessage `json:"raw"`
	}
	var first doc
	if err := Decode(strings.NewReader(`{"name":"first","raw":{"a":"aaaaaaaa"}}`), 0, &first); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		var d doc
		if err := Decode(strings.NewReader(`{"name":"xxxxx","raw":{"b":"bbbbbbbb"}}`), 0, &d); err != nil {
			t.Fatal(err)
		}
	}
	if first.Name != "first" || string(first.Raw) != `{"a":"aaaaaaaa"}` {
		t.Errorf("first decode changed to %+v", first)
	}
}
