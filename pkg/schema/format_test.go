package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestIDNFormats: idn-hostname and idn-email are asserted (the validator
// library leaves them unchecked), on the fast path and the full validator
// alike, and a string far too long to be one is refused without being
// converted.
func TestIDNFormats(t *testing.T) {
	tests := []struct {
		format, value string
		valid         bool
	}{
		{"idn-hostname", "例え.テスト", true},
		{"idn-hostname", "münchen.de", true},
		{"idn-hostname", "example.com", true},
		{"idn-hostname", "xn--mnchen-3ya.de", true},
		{"idn-hostname", "-münchen.de", false},                   // a label starting with a hyphen
		{"idn-hostname", "münchen..de", false},                   // an empty label
		{"idn-hostname", "mün chen.de", false},                   // a space
		{"idn-hostname", "a\u200db.com", false},                  // a zero width joiner out of its context (RFC 5892 A.2)
		{"idn-hostname", "\u0300a.com", false},                   // a label starting with a combining mark (RFC 5891 4.2.3.2)
		{"idn-hostname", "MÜNCHEN.de", false},                    // not mapped for registration: upper case is not PVALID
		{"idn-hostname", strings.Repeat("ü", 64) + ".de", false}, // a label past 63 characters in its ASCII form
		{"idn-hostname", strings.Repeat("a.", 600), false},       // past the bytes worth converting
		{"idn-email", "用户@例子.广告", true},
		{"idn-email", "실례@실례.테스트", true},
		{"idn-email", "joe.bloggs@example.com", true},
		{"idn-email", "joe@[127.0.0.1]", true},
		{"idn-email", "用户例子.广告", false},    // no @
		{"idn-email", "用户@-例子.广告", false},  // a domain label starting with a hyphen
		{"idn-email", "用..户@例子.广告", false}, // consecutive dots
		{"idn-email", "用户@例子..广告", false},  // an empty domain label
		{"idn-email", strings.Repeat("用", 400) + "@例子.广告", false},
	}
	for _, tt := range tests {
		t.Run(tt.format+" "+tt.value[:min(len(tt.value), 24)], func(t *testing.T) {
			s, err := Compile("input_schema", []byte(`{"type":"object","properties":{"v":{"type":"string","format":"`+tt.format+`"}}}`))
			if err != nil {
				t.Fatal(err)
			}
			doc, _ := json.Marshal(map[string]string{"v": tt.value})
			// The plan's answer, then the full validator's.
			if got := s.plan != nil && s.plan.valid(doc, true); got != tt.valid {
				t.Errorf("fast path: valid = %v, want %v", got, tt.valid)
			}
			err = s.full("arguments", doc, true)
			if (err == nil) != tt.valid {
				t.Errorf("full validator: err = %v, want valid = %v", err, tt.valid)
			}
			if err != nil && !strings.Contains(err.Error(), tt.format) {
				t.Errorf("the error does not name the format: %v", err)
			}
		})
	}
}
