package strictjson

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
	"unicode/utf8"
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
		{name: "ok under the largest limit", body: `{"name":"a"}`, limit: math.MaxInt64},
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
		{`{"tool":"a\ud800b"}`, "tool", "unpaired UTF-16 surrogate"},
		{`{"config":{"allowed_tools":["\udc00"]}}`, "config.allowed_tools[0]", "unpaired UTF-16 surrogate"},
	}
	for _, tt := range tests {
		err := Unmarshal([]byte(tt.body), &exactDoc{})
		if tt.wantField == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.body, err)
			}
			continue
		}
		var fe *FieldError
		ok := errors.As(err, &fe)
		if !ok || fe.Field != tt.wantField || !strings.Contains(fe.Problem, tt.wantIn) {
			t.Errorf("%s: err %v, want a FieldError for %s containing %q", tt.body, err, tt.wantField, tt.wantIn)
		}
	}
}

// TestDecodeKeepsNothingOfItsBuffer: whatever Decode decoded must not
// point into its read buffer, which a caller's pool may reuse.
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

// TestIntegers: a JSON number whose value is an integer decodes into a Go
// integer however it is written, as JSON Schema's "integer" accepts it; a
// fraction or a value out of the type's range is refused, naming the field.
func TestIntegers(t *testing.T) {
	type nums struct {
		I   int    `json:"i"`
		I8  int8   `json:"i8"`
		U   uint   `json:"u"`
		U16 uint16 `json:"u16"`
		P   *int64 `json:"p"`
		L   []int  `json:"l"`
	}
	tests := []struct {
		body, field, wantIn string
		want                nums
	}{
		{body: `{"i":1000}`, want: nums{I: 1000}},
		{body: `{"i":1e3}`, want: nums{I: 1000}},
		{body: `{"i":1000.0}`, want: nums{I: 1000}},
		{body: `{"i":-2.5e1}`, want: nums{I: -25}},
		{body: `{"i":-0.0}`, want: nums{I: 0}},
		{body: `{"i8":127,"u16":65535}`, want: nums{I8: 127, U16: 65535}},
		{body: `{"i8":-128}`, want: nums{I8: -128}},
		{body: `{"l":[1,2e0,3.0]}`, want: nums{L: []int{1, 2, 3}}},
		{body: `{"i":1.5}`, field: "i", wantIn: "wrong type: got number 1.5, want integer"},
		{body: `{"i":"1"}`, field: "i", wantIn: "wrong type: got string, want integer"},
		{body: `{"i8":128}`, field: "i8", wantIn: "number 128 is out of range (-128 to 127)"},
		{body: `{"u":-1}`, field: "u", wantIn: "number -1 is out of range (0 to 18446744073709551615)"},
		{body: `{"i":99999999999999999999}`, field: "i", wantIn: "number 99999999999999999999 is out of range"},
		{body: `{"i":1e400}`, field: "i", wantIn: "number 1e400 is out of range"},
		{body: `{"i":1e999999999}`, field: "i", wantIn: "out of range"},
		{body: `{"i":1e-999999999}`, field: "i", wantIn: "want integer"},
		{body: `{"i":0e999999999}`, want: nums{I: 0}},
		{body: `{"i":120e-1}`, want: nums{I: 12}},
		{body: `{"i":0.00012e5}`, want: nums{I: 12}},
		{body: `{"i":1234567890123456789012345}`, field: "i", wantIn: "out of range"},
		{body: `{"i":1e0000000000001}`, want: nums{I: 10}},
		{body: `{"i":1e1234567890123}`, field: "i", wantIn: "out of range"},
		{body: `{"i":1e-1234567890123}`, field: "i", wantIn: "want integer"},
		{body: `{"i":0e1234567890123}`, want: nums{I: 0}},
		{body: `{"p":12e-1}`, field: "p", wantIn: "want integer"},
		{body: `{"l":[1,2.5]}`, field: "l[1]", wantIn: "want integer"},
	}
	var f struct {
		F float32 `json:"f"`
	}
	if err := Unmarshal([]byte(`{"f":1e39}`), &f); err == nil || !strings.Contains(err.Error(), "f: number 1e39 is out of range for number") {
		t.Errorf("float32 1e39: err %v, want out of range naming f", err)
	}
	for _, tt := range tests {
		var got nums
		err := Unmarshal([]byte(tt.body), &got)
		if tt.wantIn == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.body, err)
			} else if got.I != tt.want.I || got.I8 != tt.want.I8 || got.U16 != tt.want.U16 || len(got.L) != len(tt.want.L) {
				t.Errorf("%s: decoded %+v, want %+v", tt.body, got, tt.want)
			}
			continue
		}
		var fe *FieldError
		ok := errors.As(err, &fe)
		if !ok || fe.Field != tt.field || !strings.Contains(fe.Problem, tt.wantIn) {
			t.Errorf("%s: err %v, want field %s with %q", tt.body, err, tt.field, tt.wantIn)
		}
	}
}

func FuzzIntegers(f *testing.F) {
	for _, s := range []string{"0", "-0", "1e3", "1.5", "-128", "1e400", "1E-400", "9223372036854775807", "9223372036854775808", "0.1e1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		var v struct {
			I int64 `json:"i"`
		}
		err := Unmarshal([]byte(`{"i":`+lit+`}`), &v)
		if err != nil {
			return
		}
		// Whatever decodes is the literal's exact value. The oracle is
		// kept to literals big.Float parses quickly: a long mantissa or
		// exponent is covered by TestIntegers and BenchmarkLongNumber.
		if lit = strings.TrimSpace(lit); len(lit) > 64 {
			return
		}
		want, _, perr := big.ParseFloat(lit, 10, 1024, big.ToNearestEven)
		if perr != nil {
			return // an exponent past big.Float's range: no oracle
		}
		if want.Cmp(new(big.Float).SetInt64(v.I)) != 0 {
			t.Fatalf("%q decoded to %d (parse %v %v)", lit, v.I, want, perr)
		}
	})
}

func TestTooDeep(t *testing.T) {
	var v struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	body := `{"arguments":` + strings.Repeat(`{"x":`, 10001) + `1` + strings.Repeat(`}`, 10001) + `}`
	err := Unmarshal([]byte(body), &v)
	var fe *FieldError
	ok := errors.As(err, &fe)
	if !ok || !strings.HasPrefix(fe.Field, "arguments.x.x") || len(fe.Field) > 130 || !strings.Contains(fe.Problem, "nested too deeply") || strings.Contains(fe.Problem, "malformed") {
		t.Errorf("err %v, want a short field path under arguments and 'nested too deeply'", err)
	}
}

// BenchmarkLongNumber: a megabyte of digits in an integer field is refused
// in about the time it takes to scan it (it was seconds: big.Int parsing
// is quadratic). Run: go test -run '^$' -bench LongNumber ./pkg/strictjson
func BenchmarkLongNumber(b *testing.B) {
	var v struct {
		I int `json:"i"`
	}
	digits := strings.Repeat("1", 1<<20)
	for _, lit := range []string{digits, "1e" + digits, "1.5e-" + digits, "0." + digits} {
		body := []byte(`{"i":` + lit + `}`)
		b.Run(lit[:3], func(b *testing.B) {
			for b.Loop() {
				if Unmarshal(body, &v) == nil {
					b.Fatal("accepted")
				}
			}
		})
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		s    string
		max  int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"", 0, ""},
		{"é", 1, "…"}, // never half a character
		{"aé", 2, "a…"},
		{"aéb", 3, "aé…"},
	} {
		if got := Clip(tc.s, tc.max); got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.want)
		}
	}
}

// TestFieldErrorIsBounded: a field name or problem of the document's own
// size comes back cut at MaxMessageBytes each, on a character boundary.
func TestFieldErrorIsBounded(t *testing.T) {
	var v struct{ A int }
	name := strings.Repeat("é", 50_000)
	err := Unmarshal([]byte(`{"`+name+`":1}`), &v)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != name {
		t.Fatalf("err %v, want a FieldError naming the whole field", err)
	}
	msg := err.Error()
	if len(msg) > 2*MaxMessageBytes+16 || !utf8.ValidString(msg) || !strings.HasSuffix(msg, ": unknown field") {
		t.Errorf("message of %d bytes (valid UTF-8: %v): %.80q…", len(msg), utf8.ValidString(msg), msg)
	}
	if got := (&FieldError{Field: "a", Problem: "b"}).Error(); got != "a: b" {
		t.Errorf("short error = %q", got)
	}
}
