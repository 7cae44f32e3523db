package output

import (
	"bytes"
	"strings"
	"testing"
)

func TestBufferKeepsHeadAndTail(t *testing.T) {
	tests := []struct {
		name       string
		head, tail int
		writes     []string
		want       Text
	}{
		{"empty", 4, 4, nil, Text{}},
		{"fits", 4, 4, []string{"abc", "def"}, Text{Head: "abcdef", Total: 6}},
		{"exactly head plus tail", 3, 3, []string{"abcdef"}, Text{Head: "abcdef", Total: 6}},
		{"one over", 3, 3, []string{"abcdefg"}, Text{Head: "abc", Tail: "efg", Dropped: 1, Total: 7}},
		{"many small writes", 2, 3, []string{"a", "b", "c", "d", "e", "f", "g", "h"}, Text{Head: "ab", Tail: "fgh", Dropped: 3, Total: 8}},
		{"big write", 2, 3, []string{"0123456789"}, Text{Head: "01", Tail: "789", Dropped: 5, Total: 10}},
		{"wraps the ring", 1, 4, []string{"x", "abc", "def", "gh"}, Text{Head: "x", Tail: "efgh", Dropped: 4, Total: 9}},
		{"no tail", 3, 0, []string{"abcdef"}, Text{Head: "abc", Dropped: 3, Total: 6}},
		{"no head", 0, 3, []string{"abcdef"}, Text{Tail: "def", Dropped: 3, Total: 6}},
		// A character split across writes stays whole.
		{"split character", 16, 16, []string{"caf\xc3", "\xa9!"}, Text{Head: "café!", Total: 6}},
		{"split 4-byte character", 16, 16, []string{"\xf0\x9f", "\x98", "\x80"}, Text{Head: "😀", Total: 4}},
		// Invalid bytes become one U+FFFD each.
		{"invalid bytes", 16, 16, []string{"a\xff\xfeb"}, Text{Head: "a\uFFFD\uFFFDb", Total: 4}},
		{"truncated at end of stream", 16, 16, []string{"a\xc3"}, Text{Head: "a\uFFFD", Total: 2}},
		// A character cut by the head limit is dropped, not replaced.
		{"head cuts a character", 2, 2, []string{"aé", "xyz"}, Text{Head: "a", Tail: "yz", Dropped: 3, Total: 6}},
		// A character cut by the tail limit is dropped, not replaced.
		{"tail cuts a character", 1, 2, []string{"abcéz"}, Text{Head: "a", Tail: "z", Dropped: 4, Total: 6}},
		{"tail keeps whole character", 1, 3, []string{"abcdé"}, Text{Head: "a", Tail: "dé", Dropped: 2, Total: 6}},
		// ANSI escapes pass through untouched.
		{"ansi", 32, 32, []string{"\x1b[31mred\x1b[0m"}, Text{Head: "\x1b[31mred\x1b[0m", Total: 12}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(tt.head, tt.tail)
			for _, w := range tt.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := b.Text(); got != tt.want {
				t.Errorf("Text() = %+v, want %+v", got, tt.want)
			}
			if got := b.Total(); got != tt.want.Total {
				t.Errorf("Total() = %d, want %d", got, tt.want.Total)
			}
		})
	}
}

func TestBufferMatchesNaiveModel(t *testing.T) {
	// Every split of a fixed stream into writes gives the same text as the
	// naive "keep it all, then cut" model.
	stream := []byte(strings.Repeat("héllo wörld ✓ 😀 ", 40))
	for _, head := range []int{0, 1, 7, 64} {
		for _, tail := range []int{0, 1, 5, 100} {
			for _, chunk := range []int{1, 2, 3, 7, 50, 1000} {
				b := New(head, tail)
				for p := stream; len(p) > 0; {
					k := min(chunk, len(p))
					b.Write(p[:k])
					p = p[k:]
				}
				got := b.Text()
				if got.Total != int64(len(stream)) {
					t.Fatalf("head %d tail %d chunk %d: total %d", head, tail, chunk, got.Total)
				}
				if got.Dropped == 0 {
					if got.Head != string(stream) {
						t.Fatalf("head %d tail %d chunk %d: lost bytes", head, tail, chunk)
					}
					continue
				}
				kept := int64(len(got.Head) + len(got.Tail))
				if kept+got.Dropped != got.Total {
					t.Fatalf("head %d tail %d chunk %d: kept %d + dropped %d != total %d", head, tail, chunk, kept, got.Dropped, got.Total)
				}
				if !bytes.HasPrefix(stream, []byte(got.Head)) || !bytes.HasSuffix(stream, []byte(got.Tail)) {
					t.Fatalf("head %d tail %d chunk %d: %q / %q not a prefix / suffix", head, tail, chunk, got.Head, got.Tail)
				}
				if strings.ContainsRune(got.Head+got.Tail, '\uFFFD') {
					t.Fatalf("head %d tail %d chunk %d: replacement character in valid stream", head, tail, chunk)
				}
			}
		}
	}
}

func TestBufferMemoryIsBounded(t *testing.T) {
	b := New(100, 100)
	chunk := bytes.Repeat([]byte("0123456789"), 3277)
	for range 1000 {
		b.Write(chunk)
	}
	if cap(b.head) > 4096 || cap(b.ring) != 100 {
		t.Fatalf("buffers grew: head cap %d, ring cap %d", cap(b.head), cap(b.ring))
	}
	got := b.Text()
	if got.Total != int64(len(chunk))*1000 || got.Dropped != got.Total-200 {
		t.Fatalf("got total %d dropped %d", got.Total, got.Dropped)
	}
}

func TestTextString(t *testing.T) {
	if got := (Text{Head: "ab", Total: 2}).String(); got != "ab" {
		t.Errorf("String() = %q", got)
	}
	if got := (Text{Head: "ab", Tail: "yz", Dropped: 5, Total: 9}).String(); got != "ab\n[... 5 bytes dropped ...]\nyz" {
		t.Errorf("String() = %q", got)
	}
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		name   string
		pieces []string
		want   []string
		flush  string
	}{
		{"ascii", []string{"ab", "cd"}, []string{"ab", "cd"}, ""},
		{"split 2-byte", []string{"x\xc3", "\xa9y"}, []string{"x", "éy"}, ""},
		{"split 3-byte thrice", []string{"\xe2", "\x9c", "\x93"}, []string{"", "", "✓"}, ""},
		{"invalid", []string{"\xff", "a"}, []string{"\uFFFD", "a"}, ""},
		{"ends inside character", []string{"a\xe2\x9c"}, []string{"a"}, "\uFFFD\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Decoder
			for i, p := range tt.pieces {
				if got := d.Decode([]byte(p)); got != tt.want[i] {
					t.Errorf("Decode(%q) = %q, want %q", p, got, tt.want[i])
				}
			}
			if got := d.Flush(); got != tt.flush {
				t.Errorf("Flush() = %q, want %q", got, tt.flush)
			}
		})
	}
}
