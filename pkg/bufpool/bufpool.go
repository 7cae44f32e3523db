// Package bufpool recycles byte buffers between requests, for the few
// places where a large body or result would otherwise cost a fresh
// allocation (and its zeroing and page faults) on every call: a service's
// JSON answers, brain's reads of tool results, storage's object bytes.
package bufpool

import "sync"

// Pool holds buffers for reuse; its zero value is not usable, use New. A
// buffer grown past the pool's bound is left to the garbage collector, so a
// rare huge one does not pin its memory.
type Pool struct {
	max int
	p   sync.Pool
}

// New returns a pool that keeps buffers of at most max bytes of capacity.
func New(max int) *Pool {
	return &Pool{max: max, p: sync.Pool{New: func() any { return new([]byte) }}}
}

// Get returns a handle whose buffer, *h, is empty (length 0) with whatever
// capacity an earlier Put left; the caller grows it as it needs.
func (p *Pool) Get() (h *[]byte) {
	h = p.p.Get().(*[]byte)
	*h = (*h)[:0]
	return h
}

// Put hands buf back through h (from Get; nil for a buffer that did not
// come from the pool): buf may have grown from *h, and it is kept unless it
// is larger than the pool's bound. Nothing may use buf after.
func (p *Pool) Put(h *[]byte, buf []byte) {
	if cap(buf) == 0 || cap(buf) > p.max {
		return
	}
	if h == nil {
		h = new([]byte)
	}
	*h = buf[:0]
	p.p.Put(h)
}
