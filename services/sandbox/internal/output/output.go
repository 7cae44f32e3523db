// Package output keeps what a command writes to one stream within a fixed
// memory bound: the first Head bytes and the last Tail bytes, with a count of
// the bytes dropped in between, and turns them into valid UTF-8 text.
//
// A command may write gigabytes; the sandbox tools must still answer within
// the host's max_output_bytes (1 MiB by default, 2 MiB at most, from the
// tool contract), so the middle of a long output is dropped and the caller
// is told how much. Bytes are kept raw while the command runs and decoded
// once at the end, so a UTF-8 character split across two reads stays whole;
// only at the two cuts can a character be broken, and there its partial
// bytes are counted as dropped instead of turning into U+FFFD. Bytes that
// are not UTF-8 become U+FFFD, one per invalid byte. Everything else passes
// through unchanged, ANSI escape sequences included.
package output

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// Buffer keeps the head and tail of one output stream. It is safe for
// concurrent use. The zero value keeps nothing; use New.
type Buffer struct {
	mu      sync.Mutex
	headMax int
	head    []byte
	ring    []byte // the tail, a ring of cap tailMax
	ringPos int    // next write position in ring once it is full
	total   int64
}

// New returns a Buffer keeping at most head bytes from the start and tail
// bytes from the end. Negative sizes count as 0.
func New(head, tail int) *Buffer {
	head, tail = max(head, 0), max(tail, 0)
	return &Buffer{headMax: head, head: make([]byte, 0, min(head, 4096)), ring: make([]byte, 0, tail)}
}

// Write records p. It never fails and never keeps a reference to p.
func (b *Buffer) Write(p []byte) (int, error) {
	n := len(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(n)
	if room := b.headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || cap(b.ring) == 0 {
		return n, nil
	}
	tailMax := cap(b.ring)
	if len(p) >= tailMax {
		// p alone fills the tail: keep its end.
		b.ring = append(b.ring[:0], p[len(p)-tailMax:]...)
		b.ringPos = 0
		return n, nil
	}
	if room := tailMax - len(b.ring); room > 0 {
		k := min(room, len(p))
		b.ring = append(b.ring, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 {
		k := copy(b.ring[b.ringPos:], p)
		p = p[k:]
		b.ringPos = (b.ringPos + k) % tailMax
	}
	return n, nil
}

// Total returns how many bytes have been written.
func (b *Buffer) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Text is a snapshot of a Buffer as text.
type Text struct {
	// Head and Tail are the kept bytes as valid UTF-8. Tail is empty when
	// nothing was dropped (Head then holds everything).
	Head, Tail string
	// Dropped counts the bytes between Head and Tail that were not kept,
	// including the partial bytes of a character cut at either end.
	Dropped int64
	// Total counts every byte written.
	Total int64
}

// String joins Head and Tail with a marker line naming the dropped count
// when bytes were dropped, for a reader.
func (t Text) String() string {
	if t.Dropped == 0 {
		return t.Head + t.Tail
	}
	return fmt.Sprintf("%s\n[... %d bytes dropped ...]\n%s", t.Head, t.Dropped, t.Tail)
}

// Text returns the kept bytes as valid UTF-8.
func (b *Buffer) Text() Text {
	b.mu.Lock()
	head := append([]byte(nil), b.head...)
	tail := make([]byte, 0, len(b.ring))
	tail = append(tail, b.ring[b.ringPos:]...)
	tail = append(tail, b.ring[:b.ringPos]...)
	total := b.total
	b.mu.Unlock()

	dropped := total - int64(len(head)) - int64(len(tail))
	if dropped == 0 {
		// Everything is here, in order: decode it as one.
		return Text{Head: Valid(append(head, tail...)), Total: total}
	}
	// Cut at both ends: drop a character's partial bytes rather than
	// reporting U+FFFD for bytes that were valid in the stream.
	if n := incompleteSuffix(head); n > 0 {
		head = head[:len(head)-n]
		dropped += int64(n)
	}
	if n := continuationPrefix(tail); n > 0 {
		tail = tail[n:]
		dropped += int64(n)
	}
	return Text{Head: Valid(head), Tail: Valid(tail), Dropped: dropped, Total: total}
}

// Valid returns p as a string with each byte that is not part of a valid
// UTF-8 encoding replaced by U+FFFD.
func Valid(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	var sb strings.Builder
	sb.Grow(len(p) + 16)
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		if r == utf8.RuneError && size <= 1 {
			sb.WriteRune(utf8.RuneError)
			p = p[1:]
			continue
		}
		sb.Write(p[:size])
		p = p[size:]
	}
	return sb.String()
}

// incompleteSuffix returns the length of a valid but unfinished UTF-8
// sequence at the end of p (0 to 3).
func incompleteSuffix(p []byte) int {
	for i := 1; i <= min(3, len(p)); i++ {
		c := p[len(p)-i]
		if utf8.RuneStart(c) {
			if c >= 0xC0 && !utf8.FullRune(p[len(p)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}

// continuationPrefix returns the number of UTF-8 continuation bytes that
// open p (at most 3): the end of a character whose start was dropped.
func continuationPrefix(p []byte) int {
	n := 0
	for n < len(p) && n < 3 && !utf8.RuneStart(p[n]) {
		n++
	}
	return n
}

// Decoder turns a byte stream that arrives in pieces into valid UTF-8 text
// piece by piece, holding back the start of a character that the next piece
// completes. It is not safe for concurrent use.
type Decoder struct {
	carry []byte
}

// Decode returns the text of carry+p up to the last complete character.
func (d *Decoder) Decode(p []byte) string {
	buf := p
	if len(d.carry) > 0 {
		buf = append(d.carry, p...)
		d.carry = nil
	}
	n := incompleteSuffix(buf)
	if n > 0 {
		d.carry = append([]byte(nil), buf[len(buf)-n:]...)
		buf = buf[:len(buf)-n]
	}
	return Valid(buf)
}

// Flush returns what Decode held back, as U+FFFD for each byte: the stream
// ended inside a character.
func (d *Decoder) Flush() string {
	s := Valid(d.carry)
	d.carry = nil
	return s
}
