package extract

import (
	"fmt"
	"unicode/utf8"
)

// Paginate cuts s by characters (Unicode code points, so a UTF-8 sequence
// is never split): the page is characters [start, start+max). total is the
// character count of s; next is the start of the following page, or 0 when
// the page reaches the end. Consecutive pages join back to s exactly. A
// start past the end is an error naming total_length; start equal to the
// length of an empty s is an empty page.
func Paginate(s string, start, max int) (page string, total, next int, err error) {
	total = utf8.RuneCountInString(s)
	if start < 0 || max < 1 {
		return "", total, 0, fmt.Errorf("start_index must be >= 0 and max_length >= 1")
	}
	if start >= total && !(start == 0 && total == 0) {
		return "", total, 0, fmt.Errorf("start_index %d is past the end of the content (total_length %d)", start, total)
	}
	from := byteOffset(s, 0, start)
	to := byteOffset(s, from, max)
	if start+max < total {
		next = start + max
	}
	return s[from:to], total, next, nil
}

// byteOffset returns the byte index n characters after byte index from.
func byteOffset(s string, from, n int) int {
	i := from
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}
