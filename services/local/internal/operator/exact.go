package operator

import (
	"fmt"
	"html/template"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/runenames"
)

// Kinds of characters the page shows marked instead of as the browser
// would render them.
const (
	markBidi       = "bidi control"
	markInvisible  = "invisible"
	markSpace      = "unusual space"
	markConfusable = "look-alike"
)

// marks counts the marked characters of a text by kind.
type marks map[string]int

// String lists the counts, "2 bidi controls, 1 invisible".
func (m marks) String() string {
	var parts []string
	for _, k := range []string{markBidi, markInvisible, markSpace, markConfusable} {
		if c := m[k]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, plural(k, c)))
		}
	}
	return strings.Join(parts, ", ")
}

func plural(kind string, n int) string {
	if n == 1 || kind == markInvisible {
		return kind
	}
	return kind + "s"
}

// classify says how the page must show r: "" to show it as it is, else the
// kind of mark. word tells whether r sits in a word that mixes Latin
// letters with letters of another script.
func classify(r rune, mixed bool) string {
	switch {
	case r == '\n' || r == '\t':
		return ""
	case isBidi(r):
		return markBidi
	case r == utf8.RuneError, unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cf, r), unicode.Is(unicode.Co, r), unicode.Is(unicode.Cs, r),
		unicode.Is(unicode.Mn, r) && r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF, // variation selectors
		r == 0x115F || r == 0x1160 || r == 0x3164 || r == 0xFFA0, // Hangul fillers: letters that draw nothing
		!unicode.IsPrint(r) && !unicode.IsSpace(r) && !unicode.IsGraphic(r):
		return markInvisible
	case unicode.IsSpace(r) && r != ' ', r == 0x2800: // NBSP, en space, ideographic space…; braille blank
		return markSpace
	case r >= 0xFF01 && r <= 0xFF5E: // fullwidth forms of ASCII
		return markConfusable
	case mixed && unicode.IsLetter(r) && !unicode.Is(unicode.Latin, r) && !unicode.Is(unicode.Common, r):
		return markConfusable
	}
	return ""
}

// isBidi reports the characters that reorder text: the embedding,
// override and isolate controls and the directional marks.
func isBidi(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069 || r == 0x200E || r == 0x200F || r == 0x061C
}

// mixedWords marks, for each byte offset of s that starts a rune, whether
// the rune sits in a word (a run of letters and digits) that has both
// Latin letters and letters of another script: "pаypal" with a Cyrillic
// а. A word wholly in one script is not marked.
func mixedWords(s string) map[int]bool {
	out := map[int]bool{}
	start := -1
	latin, other := false, false
	flush := func(end int) {
		if start >= 0 && latin && other {
			for i := start; i < end; {
				out[i] = true
				_, n := utf8.DecodeRuneInString(s[i:])
				i += n
			}
		}
		start, latin, other = -1, false, false
	}
	for i, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) {
			if start < 0 {
				start = i
			}
			switch {
			case unicode.Is(unicode.Latin, r):
				latin = true
			case unicode.IsLetter(r) && !unicode.Is(unicode.Common, r):
				other = true
			}
			continue
		}
		flush(i)
	}
	flush(len(s))
	return out
}

// exact renders s for the page so that the operator reads exactly what the
// agent sent: HTML-escaped, and every bidi control, invisible or unusual
// space character, and look-alike letter replaced by a visible, marked
// badge naming its code point ("U+202E RIGHT-TO-LEFT OVERRIDE"). Replaced
// characters cannot reorder or hide the text around them. It returns the
// counts by kind. The stored bytes are untouched: what is approved is what
// was sent, and its SHA-256 is shown beside it.
func exact(s string) (template.HTML, marks) {
	m := marks{}
	mixed := mixedWords(s)
	var b strings.Builder
	for i, r := range s {
		kind := classify(r, mixed[i])
		if kind == "" {
			template.HTMLEscape(&b, []byte(string(r)))
			continue
		}
		m[kind]++
		name := runenames.Name(r)
		if r == utf8.RuneError {
			name = "invalid UTF-8 or REPLACEMENT CHARACTER"
		}
		label := fmt.Sprintf("U+%04X", r)
		fmt.Fprintf(&b, `<mark class="char %s" title="%s: %s">`, strings.ReplaceAll(kind, " ", "-"), kind, template.HTMLEscapeString(label+" "+name))
		if kind == markConfusable {
			// The letter itself stays, flagged: the word must still read.
			template.HTMLEscape(&b, []byte(string(r)))
			b.WriteString(`<small>`)
			b.WriteString(label)
			b.WriteString(`</small>`)
		} else {
			b.WriteString(label)
			if short := shortName(r); short != "" {
				b.WriteByte(' ')
				b.WriteString(short)
			}
		}
		b.WriteString(`</mark>`)
	}
	return template.HTML(b.String()), m
}

// shortName is the usual abbreviation of a marked character, where it has
// one.
func shortName(r rune) string {
	switch r {
	case 0x202A:
		return "LRE"
	case 0x202B:
		return "RLE"
	case 0x202C:
		return "PDF"
	case 0x202D:
		return "LRO"
	case 0x202E:
		return "RLO"
	case 0x2066:
		return "LRI"
	case 0x2067:
		return "RLI"
	case 0x2068:
		return "FSI"
	case 0x2069:
		return "PDI"
	case 0x200E:
		return "LRM"
	case 0x200F:
		return "RLM"
	case 0x061C:
		return "ALM"
	case 0x200B:
		return "ZWSP"
	case 0x200C:
		return "ZWNJ"
	case 0x200D:
		return "ZWJ"
	case 0x2060:
		return "WJ"
	case 0xFEFF:
		return "BOM"
	case 0x00AD:
		return "SHY"
	case 0x00A0:
		return "NBSP"
	}
	return ""
}
