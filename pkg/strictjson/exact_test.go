package strictjson

import (
	"encoding/json"
	"testing"
)

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

func TestExactFields(t *testing.T) {
	tests := []struct {
		body, wantField string
	}{
		{`{"tool":"echo","config":{"allowed_tools":["a"]},"Untagged":1}`, ""},
		{`{"Tool":"echo"}`, "Tool"},
		{`{"tool":"echo","TOOL":"x"}`, "TOOL"},
		{`{"config":{"Allowed_Tools":[]}}`, "config.Allowed_Tools"},
		{`{"items":[{},{"ALLOWED_TOOLS":[]}]}`, "items[1].ALLOWED_TOOLS"},
		{`{"by_name":{"x":{"Allowed_tools":[]}}}`, "by_name.x.Allowed_tools"},
		{`{"arguments":{"Tool":1,"anything":2}}`, ""}, // raw: not looked into
		{`{"untagged":1}`, "untagged"},
		{`[1,2]`, ""},
		{`{`, ""},
	}
	for _, tt := range tests {
		err := ExactFields([]byte(tt.body), &exactDoc{})
		if tt.wantField == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.body, err)
			}
			continue
		}
		fe, ok := err.(*FieldError)
		if !ok || fe.Field != tt.wantField {
			t.Errorf("%s: err %v, want a FieldError for %s", tt.body, err, tt.wantField)
		}
	}
}
