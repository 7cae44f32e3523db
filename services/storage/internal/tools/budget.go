package tools

import (
	"encoding/json"
	"unicode/utf8"
)

// sseMargin covers the framing a result gets when the response is an SSE
// stream ("event: result\ndata: " and the blank line) and the newline
// after a JSON body.
const sseMargin = 64

// encodedLen returns how many bytes v takes as JSON, the way the service
// encodes results (encoding/json, HTML-escaped).
func encodedLen(v any) int {
	data, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(data)
}

// fitText returns the longest prefix of s (whole runes) whose JSON string
// encoding, as encoding/json writes it, takes at most budget bytes besides
// the quotes, and that encoded length.
func fitText(s string, budget int) (string, int) {
	used := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf && c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			if used+1 > budget {
				return s[:i], used
			}
			used++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n := escapedLen(r, size)
		if used+n > budget {
			return s[:i], used
		}
		used += n
		i += size
	}
	return s, used
}

// escapedLen is the size of one rune inside a JSON string written by
// encoding/json: two-byte escapes for " \ \n \r \t, \u00XX for other
// control characters and for < > & (HTML escaping), \u2028 and \u2029, and
// \ufffd for an invalid byte.
func escapedLen(r rune, size int) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
		return 6
	case r == utf8.RuneError && size == 1:
		return 6
	}
	return size
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b (at
// most 3 bytes), which a byte range can cut off mid-character.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return b // ASCII: nothing partial
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}
