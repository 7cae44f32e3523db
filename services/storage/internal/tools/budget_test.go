package tools

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// fitText's count must equal what encoding/json writes, or results could
// overrun the output limit.
func TestFitTextMatchesEncodingJSON(t *testing.T) {
	alphabet := []string{"a", " ", "\"", "\\", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "<", ">", "&", "é", "😀", "\u2028", "\u2029", "\xff", "\xe2\x82"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		enc, _ := json.Marshal(s)
		whole, n := fitText(s, 1<<30)
		if whole != s || n != len(enc)-2 {
			t.Fatalf("fitText(%q) = %d bytes, encoding/json writes %d", s, n, len(enc)-2)
		}
		budget := rng.IntN(n + 1)
		part, m := fitText(s, budget)
		enc, _ = json.Marshal(part)
		if m > budget || m != len(enc)-2 || !strings.HasPrefix(s, part) {
			t.Fatalf("fitText(%q, %d) = %q (%d), encoded %d", s, budget, part, m, len(enc)-2)
		}
		if utf8.ValidString(s) && !utf8.ValidString(part) {
			t.Fatalf("fitText split a character: %q", part)
		}
	}
}

func TestTrimPartialRune(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"abc", "abc"},
		{"aé", "aé"},
		{"a\xc3", "a"},
		{"a\xe2\x82", "a"},
		{"a\xf0\x9f\x98", "a"},
		{"a😀", "a😀"},
		{"", ""},
	} {
		if got := string(trimPartialRune([]byte(tc.in))); got != tc.want {
			t.Errorf("trimPartialRune(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
