package tool

import "unicode/utf8"

// Clip cuts s to at most max bytes, at a UTF-8 character boundary, and
// marks the cut with "…" (so a clipped string is up to max+3 bytes). It
// bounds a value repeated in a message: a refusal, an is_error text, a
// schema failure, whose input may be as large as a request.
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
