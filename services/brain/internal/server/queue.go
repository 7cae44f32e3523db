package server

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/store"
)

// DefaultMaxQueued is the most calls of one binding and tenant that may wait
// queued at once (Options.MaxQueued); one more is refused before it is sent,
// failed with queue_full and retryable.
const DefaultMaxQueued = 1000

// slots is a binding's max_concurrency queue of one tenant, as the call
// lifecycle uses it: queue in this process (SQLite), sharedQueue in the
// database replicas share (PostgreSQL).
type slots interface {
	// take gives rc a slot at once when one is free and no call waits
	// (slotTaken, then stored once the call is stored or failed to be), or
	// says the call is to be stored queued once the channel returned is
	// closed (nil: at once; slotQueued, then join or unpend), or refused
	// (slotFull: limit calls wait).
	take(rc *running, limit int) (slot, <-chan struct{})
	// stored says that a call take gave a slot has its ord, or will never
	// have one.
	stored()
	// unpend drops a call take queued that was never stored.
	unpend()
	// join puts stored call rc (rc.ord set) among the waiting calls in its
	// stored order and hands out free slots; pending says the call came
	// from take. rc.admitted is closed when it gets a slot.
	join(rc *running, pending bool)
	// hold gives rc a slot whatever the count: a function call that was
	// waiting for its answer when its brain stopped holds it again.
	hold(rc *running)
	// holds reports whether rc holds a slot.
	holds(rc *running) bool
	// leave takes rc out: from the waiting calls, or it gives its slot
	// back to the next call waiting.
	leave(rc *running)
	// done is told that rc's final state is stored.
	done(rc *running)
	// position is rc's place among the waiting calls, 1 for the next to
	// go; 0 when it is not waiting.
	position(rc *running) int
	// resize gives the queue the max_concurrency of a reloaded binding:
	// more slots are handed out at once; fewer are taken back as calls
	// leave.
	resize(max int)
}

var (
	_ slots = (*queue)(nil)
	_ slots = (*sharedQueue)(nil)
)

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

// queueFor returns the queue of binding t for tenant, made on first use:
// in the shared store when replicas share one, else in this process.
func (s *Server) queueFor(tenant string, t *config.Tool) slots {
	key := tenant + "\x00" + t.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[key]
	if q == nil {
		if s.shared != nil {
			q = &sharedQueue{s: s, q: store.Queue{TenantID: tenant, Tool: t.Name, Max: t.MaxConcurrency}, waiting: map[string]*running{}}
		} else {
			q = &queue{max: t.MaxConcurrency}
		}
		s.queues[key] = q
	} else {
		q.resize(t.MaxConcurrency)
	}
	return q
}

// closed is a channel that is always closed.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

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

func (q *queue) stored() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.storing--; q.storing == 0 {
		close(q.settled)
	}
}

func (q *queue) unpend() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending--
	q.dispatch()
}

// join: when a slot is free for rc, rc.admitted is closed before join
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

func (q *queue) hold(rc *running) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.active++
	rc.holding = true
}

func (q *queue) holds(rc *running) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return rc.holding
}

// leave is a no-op for a call that neither waits nor holds a slot.
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

func (q *queue) done(*running) {}

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

// sharedQueue is a binding's queue of one tenant across replicas: a slot
// is the holds_slot state of a call's row, handed out by the store in one
// transaction (store.Shared.Admit) to the calls stored first, whichever
// replica runs them. Every call waits here until the store says it holds
// a slot: a replica that gave out slots tells the others (SignalSlots),
// and the lease loop asks again every third of a lease, should a signal
// be lost. waiting are this replica's calls still waiting.
type sharedQueue struct {
	s *Server
	q store.Queue

	mu      sync.Mutex
	waiting map[string]*running
}

// storeWait bounds one store step of the queue.
const storeWait = 10 * time.Second

// queue is the store's name of this queue, with its max_concurrency now.
func (q *sharedQueue) queue() store.Queue {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.q
}

func (q *sharedQueue) resize(max int) {
	q.mu.Lock()
	changed := max > 0 && max != q.q.Max
	if changed {
		q.q.Max = max
	}
	q.mu.Unlock()
	if changed {
		q.admit("")
	}
}

func (q *sharedQueue) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(q.s.callsCtx, storeWait)
}

// take never hands a slot out at once: the order across replicas is the
// stored one, so the call is stored queued first and joins.
func (q *sharedQueue) take(_ *running, limit int) (slot, <-chan struct{}) {
	ctx, cancel := q.ctx()
	defer cancel()
	n, err := q.s.shared.Queued(ctx, q.queue())
	if err != nil {
		q.s.log.Warn("count queued calls", "tool", q.q.Tool, "err", err)
	} else if n >= limit {
		return slotFull, nil
	}
	return slotQueued, nil
}

func (q *sharedQueue) stored() {}

func (q *sharedQueue) unpend() {}

func (q *sharedQueue) join(rc *running, _ bool) {
	q.mu.Lock()
	q.waiting[rc.id] = rc
	q.mu.Unlock()
	q.admit("")
}

// admit asks the store to hand out free slots (after release gave its
// own back) and lets this replica's calls that hold one go on.
func (q *sharedQueue) admit(release string) {
	if q.s.isDraining() {
		// Shutting down: a slot given back now would go to a call that is
		// being parked. The rows stay as they are, and the next brain
		// hands the slots out from them.
		return
	}
	ctx, cancel := q.ctx()
	defer cancel()
	ids, err := q.s.shared.Admit(ctx, q.queue(), release)
	if err != nil {
		if q.s.callsCtx.Err() == nil {
			q.s.log.Warn("admit queued calls; the lease loop tries again", "tool", q.q.Tool, "err", err)
		}
		return
	}
	q.grant(ids)
}

// grant lets the waiting calls among ids, which hold a slot, go on.
func (q *sharedQueue) grant(ids []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		if rc, ok := q.waiting[id]; ok {
			delete(q.waiting, id)
			rc.holding = true
			close(rc.admitted)
		}
	}
}

// hasWaiting reports whether calls of this replica wait for a slot.
func (q *sharedQueue) hasWaiting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting) > 0
}

func (q *sharedQueue) hold(rc *running) {
	q.mu.Lock()
	defer q.mu.Unlock()
	rc.holding = true
}

func (q *sharedQueue) holds(rc *running) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return rc.holding
}

func (q *sharedQueue) leave(rc *running) {
	q.mu.Lock()
	if _, ok := q.waiting[rc.id]; ok {
		delete(q.waiting, rc.id)
		q.mu.Unlock()
		return
	}
	holding := rc.holding
	rc.holding = false
	q.mu.Unlock()
	if holding {
		q.admit(rc.id)
	}
}

// done: a call that ended while waiting may have been handed a slot at
// that moment; its final state gave the slot back, so the next call gets
// it now rather than at the lease loop's next pass.
func (q *sharedQueue) done(*running) { q.admit("") }

func (q *sharedQueue) position(rc *running) int {
	ctx, cancel := q.ctx()
	defer cancel()
	n, err := q.s.shared.QueuePosition(ctx, q.queue(), rc.id)
	if err != nil {
		return 0
	}
	return n
}
