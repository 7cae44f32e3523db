package bufpool

import "testing"

func TestPool(t *testing.T) {
	p := New(1024)
	for _, tc := range []struct {
		name string
		cap  int
		kept bool
	}{
		{"within the bound", 1024, true},
		{"past the bound", 1025, false},
		{"empty", 0, false},
	} {
		h := p.Get()
		if len(*h) != 0 {
			t.Fatalf("%s: Get gave a buffer of length %d", tc.name, len(*h))
		}
		buf := append(make([]byte, 0, tc.cap), "data"[:min(4, tc.cap)]...)
		p.Put(h, buf)
		// sync.Pool may drop anything, so only what is never kept is
		// checked strictly: a buffer past the bound never comes back.
		if got := p.Get(); !tc.kept && cap(*got) == tc.cap && tc.cap > 0 {
			t.Errorf("%s: a buffer of capacity %d came back", tc.name, tc.cap)
		} else if len(*got) != 0 {
			t.Errorf("%s: Get gave a buffer of length %d", tc.name, len(*got))
		}
	}
	p.Put(nil, make([]byte, 8)) // a buffer from elsewhere is taken too
}
