package operator

import (
	"strings"
	"testing"
)

// TestExact: bidi controls, invisible and unusual space characters are
// replaced by marked code points, look-alike letters flagged in place,
// and ordinary text — other scripts, accents, emoji, newlines — left as
// it is; the counts say what was marked.
func TestExact(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		has      []string // substrings of the HTML
		marks    string
	}{
		{"rtl override", "Pay invoice \u202Eexe.pdf\u202C now",
			[]string{`Pay invoice <mark class="char bidi-control" title="bidi control: U+202E RIGHT-TO-LEFT OVERRIDE">U+202E RLO</mark>exe.pdf<mark class="char bidi-control"`}, "2 bidi controls"},
		{"zero-width space", "rm -rf /srv/re\u200Bports", []string{`/srv/re<mark class="char invisible" title="invisible: U+200B ZERO WIDTH SPACE">U+200B ZWSP</mark>ports`}, "1 invisible"},
		{"isolates and marks", "a\u2067b\u2069\u200Fc", []string{"U+2067 RLI", "U+2069 PDI", "U+200F RLM"}, "3 bidi controls"},
		{"cyrillic a in a latin word", "p\u0430ypal.com", []string{`p<mark class="char look-alike" title="look-alike: U+0430 CYRILLIC SMALL LETTER A">а<small>U+0430</small></mark>ypal.com`}, "1 look-alike"},
		{"fullwidth", "ｒｍ -rf", []string{"U+FF52"}, "2 look-alikes"},
		{"no-break space", "100\u00A0USD", []string{"U+00A0 NBSP"}, "1 unusual space"},
		{"tag characters", "ok\U000E0041", []string{"U+E0041"}, "1 invisible"},
		{"control character", "a\x1bb\rc", []string{"U+001B", "U+000D"}, "2 invisible"},
		{"html is escaped", `<script>alert("x")</script>`, []string{`&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;`}, ""},
		{"plain other scripts stay", "Удалить 14 файлов · 削除 · naïve café 😀\n\tdone", []string{"Удалить 14 файлов · 削除 · naïve café 😀\n\tdone"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			html, m := exact(tc.in)
			for _, want := range tc.has {
				if !strings.Contains(string(html), want) {
					t.Errorf("exact(%q) = %s\nwant it to contain %s", tc.in, html, want)
				}
			}
			if m.String() != tc.marks {
				t.Errorf("marks %q, want %q", m.String(), tc.marks)
			}
			for _, r := range string(html) {
				if isBidi(r) || r == 0x200B {
					t.Errorf("exact(%q) still holds %U", tc.in, r)
				}
			}
		})
	}
}
