package strictjson

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func TestBase64(t *testing.T) {
	type args struct {
		Data *Base64  `json:"data_base64"`
		List []Base64 `json:"list"`
	}
	big := bytes.Repeat([]byte{0, 1, 2, 0xfe, 0xff}, 100_000)
	tests := []struct {
		name, body  string
		want        []byte // for Data
		null        bool   // Data stays nil
		field, errs string
	}{
		{name: "bytes", body: `{"data_base64":"AAEC/v8="}`, want: []byte{0, 1, 2, 0xfe, 0xff}},
		{name: "empty", body: `{"data_base64":""}`, want: []byte{}},
		{name: "large", body: `{"data_base64":"` + base64.StdEncoding.EncodeToString(big) + `"}`, want: big},
		{name: "escaped", body: `{"data_base64":"\u0041AEC\/v8="}`, want: []byte{0, 1, 2, 0xfe, 0xff}},
		{name: "absent", body: `{}`, null: true},
		{name: "null", body: `{"data_base64":null}`, null: true},
		{name: "in a list", body: `{"list":["AA==","AQ==",null]}`, null: true},
		{name: "unpadded", body: `{"data_base64":"AAEC/v8"}`, field: "data_base64", errs: "not standard base64"},
		{name: "url alphabet", body: `{"data_base64":"AAEC_v8="}`, field: "data_base64", errs: "not standard base64: illegal base64 data at input byte 4"},
		{name: "bad byte far in", body: `{"data_base64":"` + base64.StdEncoding.EncodeToString(big[:600])[:500] + `*AAA"}`, field: "data_base64", errs: "illegal base64 data at input byte 500"},
		{name: "cut short", body: `{"data_base64":"` + base64.StdEncoding.EncodeToString(big[:513])[:683] + `"}`, field: "data_base64", errs: "illegal base64 data at input byte 680"},
		{name: "space", body: `{"data_base64":"AAEC /v8="}`, field: "data_base64", errs: "not standard base64"},
		{name: "number", body: `{"data_base64":12}`, field: "data_base64", errs: "wrong type: got number, want string of base64"},
		{name: "object", body: `{"data_base64":{"a":[1]}}`, field: "data_base64", errs: "wrong type: got object"},
		{name: "list item", body: `{"list":["AA==",true]}`, field: "list[1]", errs: "wrong type: got bool"},
		{name: "bad escape", body: `{"data_base64":"\ud800AA=="}`, field: "data_base64", errs: "surrogate"},
		{name: "bad utf-8", body: "{\"data_base64\":\"AA\xff=\"}", field: "data_base64", errs: "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got args
			err := Unmarshal([]byte(tt.body), &got)
			if tt.errs != "" {
				var fe *FieldError
				ok := errors.As(err, &fe)
				if !ok || fe.Field != tt.field || !strings.Contains(fe.Problem, tt.errs) {
					t.Fatalf("err %#v, want field %q with %q", err, tt.field, tt.errs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.null && got.Data != nil:
				t.Fatalf("Data = %v, want nil", *got.Data)
			case !tt.null && (got.Data == nil || !bytes.Equal(*got.Data, tt.want) || *got.Data == nil):
				t.Fatalf("Data = %v, want %d bytes", got.Data, len(tt.want))
			}
		})
	}
	var l args
	if err := Unmarshal([]byte(`{"list":["AA==","AQI=",null]}`), &l); err != nil || len(l.List) != 3 || !bytes.Equal(l.List[1], []byte{1, 2}) || l.List[2] != nil {
		t.Fatalf("list: %v %v", l.List, err)
	}
}

func BenchmarkBase64(b *testing.B) {
	data := make([]byte, 256<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	doc := []byte(`{"data_base64":"` + base64.StdEncoding.EncodeToString(data) + `"}`)
	b.SetBytes(int64(len(doc)))
	b.Run("Base64", func(b *testing.B) {
		for b.Loop() {
			var v struct {
				Data *Base64 `json:"data_base64"`
			}
			if err := Unmarshal(doc, &v); err != nil || len(*v.Data) != len(data) {
				b.Fatal(err)
			}
		}
	})
	b.Run("string then decode", func(b *testing.B) {
		for b.Loop() {
			var v struct {
				Data *string `json:"data_base64"`
			}
			if err := Unmarshal(doc, &v); err != nil {
				b.Fatal(err)
			}
			if out, err := base64.StdEncoding.DecodeString(*v.Data); err != nil || len(out) != len(data) {
				b.Fatal(err)
			}
		}
	})
}

// FuzzBase64 holds Base64 to the slow path it replaces: decode the JSON
// string, then encoding/base64's StdEncoding. Both succeed with the same
// bytes, or both fail naming the same byte.
func FuzzBase64(f *testing.F) {
	for _, s := range []string{"", "AAEC/v8=", "QQ==", "QQ", "QUJD\\n", "\\u0041QID", "AA\\/A", "\\ud800", "A===", "QU JD", "\xff", "QUJD\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		doc := []byte(`{"d":"` + raw + `"}`)
		var ref struct {
			D *string `json:"d"`
		}
		var got struct {
			D *Base64 `json:"d"`
		}
		err := Unmarshal(doc, &got)
		if rerr := Unmarshal(doc, &ref); rerr != nil {
			if err == nil {
				t.Fatalf("%q: Base64 decoded a document the string decoder refuses: %v", raw, rerr)
			}
			return
		}
		want, werr := base64.StdEncoding.DecodeString(*ref.D)
		if (err == nil) != (werr == nil) || err == nil && !bytes.Equal(*got.D, want) || err != nil && !strings.Contains(err.Error(), werr.Error()) {
			t.Fatalf("%q: Base64 gives %v, %v; string then encoding/base64 gives %v, %v", raw, got.D, err, want, werr)
		}
	})
}

// TestAppendBase64: the bytes go after what dst holds, into its memory
// when it has room; on an error dst comes back as it was.
func TestAppendBase64(t *testing.T) {
	buf := make([]byte, 3, 64)
	copy(buf, "pre")
	for _, tc := range []struct{ doc, want, err string }{
		{`"AAEC"`, "pre\x00\x01\x02", ""},
		{`""`, "pre", ""},
		{`"AA="`, "pre", "not standard base64"},
		{`7`, "pre", "wrong type: got number"},
	} {
		dec := jsontext.NewDecoder(strings.NewReader(tc.doc))
		got, err := AppendBase64(buf, dec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.doc, err, tc.err)
			}
		} else if err != nil {
			t.Errorf("%s: %v", tc.doc, err)
		}
		if string(got) != tc.want || &got[0] != &buf[0] {
			t.Errorf("%s: got %q (same memory %v), want %q", tc.doc, got, &got[0] == &buf[0], tc.want)
		}
	}
}
