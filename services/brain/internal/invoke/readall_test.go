package invoke

import (
	"bytes"
	"runtime"
	"testing"
)

// TestReadAllOneBuffer: a body of its declared length is read into the one
// buffer sized for it, not copied into a larger one to meet EOF, and
// reads right after a buffer was recycled (sync.Pool may or may not hand
// it back; under -race it drops some on purpose).
func TestReadAllOneBuffer(t *testing.T) {
	for _, n := range []int{4096, 65_536, 350_000} {
		data := bytes.Repeat([]byte{'x'}, n)
		// Two collections empty the buffer pool, so readAll sizes its own.
		runtime.GC()
		runtime.GC()
		got, err := readAll(bytes.NewReader(data), int64(n))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: read %d, %v", n, len(got), err)
		}
		// Grown to meet EOF, it would hold twice n.
		if cap(got) < n+bytes.MinRead || cap(got) > n+n/2 {
			t.Errorf("%d bytes: buffer of capacity %d, want the first one (about %d)", n, cap(got), n+bytes.MinRead)
		}
		recycle(got)
		again, err := readAll(bytes.NewReader(data), int64(n))
		if err != nil || !bytes.Equal(again, data) {
			t.Errorf("%d bytes: after recycle, read %d bytes, %v", n, len(again), err)
		}
	}
}
