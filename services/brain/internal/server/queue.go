package server

import (
	"cmp"
	"slices"
	"sync"

	"github.com/brain-tools/suite/services/brain/internal/config"
)

// DefaultMaxQueued is the most calls of one binding and tenant that may wait
// queued at once (Options.MaxQueued); one more is refused before it is sent,
// failed with queue_full and retryable.
const DefaultMaxQueued = 1000

// queue holds the calls of one binding and tenant beyond the binding's
// max_concurrency. A call takes a slot when one is free and nobody waits;
// otherwise it waits, and slots go to the waiting calls in their stored
// order (store.Call.Ord), first come first served. A call holds its slot
// while it is sent (running), or, for a function tool, while it waits for
// the application's answer; a queued call holds nothing.
//
// A call's ord is given when it is stored, after take decided its place;
// so a call that is to wait is stored only once every call that took a
// slot before it is (storing, settled): the stored order and the order of
// admission agree on every store.
//
// The queue lives in this process (brain runs one process per data dir);
// the order it keeps is the stored one, so a queue shared by replicas can
// be read from the store in the same order.
type queue struct {
	max int

	mu     sync.Mutex
	active int // slots held
	// storing counts the calls that took a slot at start and are not
	// stored yet: their ords are still to come. A call queued behind them
	// is stored only once they are (settled is closed then), so that it
	// gets a later ord and the stored order is the order of admission.
	storing int
	settled chan struct{}
	// pending counts calls that found no free slot and are being stored as
	// queued: until they join waiting, no slot is handed out, since one of
	// them may come before the waiting calls in the stored order.
	pending int
	waiting []*running // by ord
}

// slot is what take found for a new call.
type slot int

const (
	slotTaken  slot = iota // the call holds a slot
	slotQueued             // the call is to be stored queued, then join
	slotFull               // the queue is full: refuse the call
)

// queueFor returns the queue of binding t for tenant, made on first use.
func (s *Server) queueFor(tenant string, t *config.Tool) *queue {
	key := tenant + "\x00" + t.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[key]
	if q == nil {
		q = &queue{max: t.MaxConcurrency}
		s.queues[key] = q
	} else {
		q.resize(t.MaxConcurrency)
	}
	return q
}

// closed is a channel that is always closed.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// resize gives the queue the max_concurrency of a reloaded binding: more
// slots are handed out at once; fewer are taken back as calls leave.
func (q *queue) resize(max int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if max > 0 && max != q.max {
		q.max = max
		q.dispatch()
	}
}

// take gives rc a slot when one is free and no call waits (stored must
// follow once the call is stored, or failed to be); otherwise, with fewer
// than limit calls waiting, the call is to wait: it is stored once the
// channel take returns is closed, when every call that took a slot before
// it has its ord, and then joins (or unpends when it is not stored).
func (q *queue) take(rc *running, limit int) (slot, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.active < q.max && len(q.waiting) == 0 && q.pending == 0:
		q.active++
		rc.holding = true
		if q.storing == 0 {
			q.settled = make(chan struct{})
		}
		q.storing++
		return slotTaken, nil
	case len(q.waiting)+q.pending >= limit:
		return slotFull, nil
	}
	q.pending++
	if q.storing == 0 {
		return slotQueued, closed
	}
	return slotQueued, q.settled
}

// stored says that a call take gave a slot has its ord, or will never
// have one.
func (q *queue) stored() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.storing--; q.storing == 0 {
		close(q.settled)
	}
}

// unpend drops a call take queued that was never stored.
func (q *queue) unpend() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending--
	q.dispatch()
}

// join puts a stored call (rc.ord set) among the waiting calls in its
// stored order and hands out free slots; pending says the call came from
// take. When a slot is free for it, rc.admitted is closed before join
// returns.
func (q *queue) join(rc *running, pending bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if pending {
		q.pending--
	}
	i, _ := slices.BinarySearchFunc(q.waiting, rc.ord, func(w *running, ord int64) int { return cmp.Compare(w.ord, ord) })
	q.waiting = slices.Insert(q.waiting, i, rc)
	q.dispatch()
}

// hold gives rc a slot whatever the count: a function call that was
// waiting for its answer when brain stopped holds it again.
func (q *queue) hold(rc *running) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.active++
	rc.holding = true
}

// holds reports whether rc holds a slot.
func (q *queue) holds(rc *running) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return rc.holding
}

// leave takes rc out: from the waiting calls, or it gives back its slot to
// the next call waiting. It is a no-op for a call that has neither.
func (q *queue) leave(rc *running) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := slices.Index(q.waiting, rc); i >= 0 {
		q.waiting = slices.Delete(q.waiting, i, i+1)
		return
	}
	if rc.holding {
		rc.holding = false
		q.active--
		q.dispatch()
	}
}

// position is rc's place among the waiting calls, 1 for the next to go;
// 0 when it is not waiting.
func (q *queue) position(rc *running) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Index(q.waiting, rc) + 1
}

// dispatch hands free slots to the waiting calls in order. q.mu is held.
func (q *queue) dispatch() {
	for q.pending == 0 && q.active < q.max && len(q.waiting) > 0 {
		rc := q.waiting[0]
		q.waiting = slices.Delete(q.waiting, 0, 1)
		q.active++
		rc.holding = true
		close(rc.admitted)
	}
}
