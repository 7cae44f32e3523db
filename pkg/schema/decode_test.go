package schema

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestDecodeJSONMatchesTheValidatorsOwn: decodeJSON gives the validator
// the same values as jsonschema.UnmarshalJSON, and refuses what it
// refuses.
func TestDecodeJSONMatchesTheValidatorsOwn(t *testing.T) {
	docs := []string{
		`{"text":"hi","n":3,"f":-1.5e3,"big":123456789012345678901234567890,"ok":true,"no":false,"nil":null}`,
		`{"a":[1,[2,{"b":"c"}],[]],"o":{}}`,
		`{"dup":1,"dup":2}`,
		`{"esc":"\u00e9\n\"\\ \ud83d\ude00"}`,
		"{\"bad\":\"\xff\"}",
		`  [1, 2]  `, `"s"`, `0`, `null`,
		`{`, `{"a":}`, `{"a":1} x`, `[1,]`, ``, `{"a" 1}`,
	}
	for _, doc := range docs {
		want, wantErr := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(doc)))
		got, err := decodeJSON([]byte(doc))
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%q: err %v, want %v", doc, err, wantErr)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q (-UnmarshalJSON +decodeJSON):\n%s", doc, diff)
		}
	}
}
