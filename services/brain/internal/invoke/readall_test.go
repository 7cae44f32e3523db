package invoke

import (
	"bytes"
	"testing"
)

// TestReadAllOneBuffer: a body of its declared length is read into the one
// buffer sized for it, not copied into a larger one to meet EOF.
func TestReadAllOneBuffer(t *testing.T) {
	for _, n := range []int{1, 511, 512, 4096, 350_000} {
		data := bytes.Repeat([]byte{'x'}, n)
		got, err := readAll(bytes.NewReader(data), int64(n))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: read %d, %v", n, len(got), err)
		}
		if cap(got) != n+bytes.MinRead {
			t.Errorf("%d bytes: buffer of capacity %d, want the first one (%d)", n, cap(got), n+bytes.MinRead)
		}
	}
}
