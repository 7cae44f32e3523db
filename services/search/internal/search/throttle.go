package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Throttle spaces a provider's requests, holds them back after the
// provider said to slow down, and shares the waiting fairly between
// tenants, so that a burst of calls neither hammers the provider nor
// waits past what a call can afford:
//
//   - spacing: a token bucket (golang.org/x/time/rate) at the provider's
//     request rate, which SetRate adjusts from rate-limit headers, and at
//     most as many requests in flight as the rate allows a second, so a
//     request never overtakes the answer whose headers would have held it
//     back;
//   - a "not before" time set by Block after a 429 or an exhausted window;
//   - fairness: waiting calls queue per tenant, and each free slot goes to
//     the next tenant in turn (round robin), so one tenant's burst does not
//     stand between another tenant and the provider;
//   - an answer at once: a call whose turn would come later than its
//     budget (the throttle's maxWait, or less when the call's context
//     ends sooner) gets *WaitError with the wait it would have had, and a
//     queued call whose budget runs out before its turn leaves with one.
type Throttle struct {
	limiter *rate.Limiter // nil: no spacing and no in-flight cap
	maxWait time.Duration
	now     func() time.Time

	mu        sync.Mutex
	notBefore time.Time
	inFlight  int
	queues    map[string][]*waiter // per tenant, oldest first
	ring      []string             // tenants with waiters, in turn order
	timer     *time.Timer          // the next dispatch, when armed
}

type waiter struct {
	tenant   string
	deadline time.Time     // when its budget runs out
	ready    chan struct{} // closed when granted or shed
	granted  bool
	// shed is set when a Block pushed the next slot past deadline: the
	// call is answered at once with this wait instead of waiting out its
	// budget.
	shed time.Duration
}

// WaitError is the answer of Acquire to a call that cannot go out within
// its budget: RetryAfter is when it would have gone, from now.
type WaitError struct {
	RetryAfter time.Duration
	// Budget is what the call could wait: maxWait, or its context's
	// remaining time when shorter.
	Budget time.Duration
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("the next request slot is %s away, more than this call can wait (%s)", roundUp(e.RetryAfter), e.Budget.Round(time.Millisecond))
}

// NewThrottle allows perSecond requests a second (0 or less: no spacing and
// no in-flight cap) and lets a call wait at most maxWait for its turn.
func NewThrottle(perSecond float64, maxWait time.Duration) *Throttle {
	t := &Throttle{maxWait: maxWait, now: time.Now, queues: map[string][]*waiter{}}
	if perSecond > 0 {
		t.limiter = rate.NewLimiter(rate.Limit(perSecond), burst(perSecond))
	}
	return t
}

func burst(perSecond float64) int {
	if perSecond < 1 {
		return 1
	}
	return int(perSecond)
}

// SetRate sets the request rate, e.g. from Brave's X-RateLimit-Limit. It
// does not turn spacing on for a throttle made without it.
func (t *Throttle) SetRate(perSecond float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.limiter == nil || perSecond <= 0 || rate.Limit(perSecond) == t.limiter.Limit() {
		return
	}
	now := t.now()
	t.limiter.SetLimitAt(now, rate.Limit(perSecond))
	t.limiter.SetBurstAt(now, burst(perSecond))
	t.dispatchLocked(now)
}

// Block holds every request back until now + d (a longer block wins).
func (t *Throttle) Block(d time.Duration) {
	if d <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if until := now.Add(d); until.After(t.notBefore) {
		t.notBefore = until
	}
	// Calls whose budget ends before the window reopens are answered now.
	gate := t.gateLocked(now)
	for _, q := range t.queues {
		for _, w := range q {
			if gate.After(w.deadline) {
				w.shed = gate.Sub(now)
			}
		}
	}
	for _, q := range t.queues {
		for _, w := range slices.Clone(q) {
			if w.shed > 0 {
				t.removeLocked(w)
				close(w.ready)
			}
		}
	}
}

// Blocked returns how long requests are still held back by Block.
func (t *Throttle) Blocked() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.notBefore.Sub(t.now())
}

// MaxWait is the longest a call waits for its turn.
func (t *Throttle) MaxWait() time.Duration { return t.maxWait }

// Acquire waits for tenant's turn to send one request and returns the
// function that ends it: call done once the provider's answer (and its
// rate-limit headers) has been read, or the request failed. It answers at
// once with *WaitError when the turn would come later than the call can
// wait (maxWait, or the time left before ctx's deadline minus reserve, the
// time the request itself may take), and with ctx's error when ctx ends.
func (t *Throttle) Acquire(ctx context.Context, tenant string, reserve time.Duration) (done func(), err error) {
	budget := t.maxWait
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - reserve; left < budget {
			budget = max(left, 0)
		}
	}
	t.mu.Lock()
	now := t.now()
	if wait := t.estimateLocked(tenant, now); wait > budget {
		t.mu.Unlock()
		return nil, &WaitError{RetryAfter: wait, Budget: budget}
	}
	w := &waiter{tenant: tenant, deadline: now.Add(budget), ready: make(chan struct{})}
	if len(t.queues[tenant]) == 0 {
		t.ring = append(t.ring, tenant)
	}
	t.queues[tenant] = append(t.queues[tenant], w)
	t.dispatchLocked(now)
	t.mu.Unlock()

	timer := time.NewTimer(budget)
	defer timer.Stop()
	select {
	case <-w.ready:
		if !w.granted {
			return nil, &WaitError{RetryAfter: w.shed, Budget: budget}
		}
		return t.release, nil
	case <-timer.C:
	case <-ctx.Done():
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case w.granted: // granted while the timer fired: take the turn
		return t.release, nil
	case w.shed > 0:
		return nil, &WaitError{RetryAfter: w.shed, Budget: budget}
	}
	t.removeLocked(w)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, &WaitError{RetryAfter: max(t.estimateLocked(tenant, t.now()), budget), Budget: budget}
}

func (t *Throttle) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inFlight--
	t.dispatchLocked(t.now())
}

// maxInFlight is how many requests may be out at once: the requests the
// rate allows a second (at least 1), so none goes out before the headers
// of the ones before it have been seen; unlimited without spacing.
func (t *Throttle) maxInFlight() int {
	if t.limiter == nil {
		return math.MaxInt
	}
	return t.limiter.Burst()
}

// gateLocked is the earliest time a request may go out, ignoring the
// in-flight cap.
func (t *Throttle) gateLocked(now time.Time) time.Time {
	gate := now
	if t.notBefore.After(gate) {
		gate = t.notBefore
	}
	if t.limiter != nil {
		// When the next token arrives, seen from gate (TokensAt does not
		// take one).
		if tokens := t.limiter.TokensAt(gate); tokens < 1 {
			gate = gate.Add(time.Duration((1 - tokens) / float64(t.limiter.Limit()) * float64(time.Second)))
		}
	}
	return gate
}

// estimateLocked is how long a new call of tenant would wait for its turn:
// the calls served before it under round robin (each tenant's queue up to
// the length of tenant's, and one more from each tenant whose queue is
// longer), one slot apart, from the next free slot.
func (t *Throttle) estimateLocked(tenant string, now time.Time) time.Duration {
	mine := len(t.queues[tenant])
	ahead := 0
	for name, q := range t.queues {
		ahead += min(len(q), mine)
		if name != tenant && len(q) > mine {
			ahead++
		}
	}
	if ahead == 0 && t.inFlight < t.maxInFlight() {
		return max(t.gateLocked(now).Sub(now), 0)
	}
	var slot time.Duration
	if t.limiter != nil {
		slot = time.Duration(float64(time.Second) / float64(t.limiter.Limit()))
	}
	wait := t.gateLocked(now).Sub(now) + time.Duration(ahead)*slot
	if t.inFlight >= t.maxInFlight() && wait < slot {
		// Waiting on an answer still out: at least one slot.
		wait = slot
	}
	return max(wait, 0)
}

// dispatchLocked grants turns while a request may go out now, each to the
// next tenant in the ring, and arms a timer for the next free slot.
func (t *Throttle) dispatchLocked(now time.Time) {
	for len(t.ring) > 0 && t.inFlight < t.maxInFlight() {
		if gate := t.gateLocked(now); gate.After(now) {
			t.armLocked(gate.Sub(now))
			return
		}
		if t.limiter != nil && !t.limiter.AllowN(now, 1) {
			t.armLocked(time.Millisecond)
			return
		}
		tenant := t.ring[0]
		q := t.queues[tenant]
		w := q[0]
		if len(q) == 1 {
			delete(t.queues, tenant)
			t.ring = t.ring[1:]
		} else {
			t.queues[tenant] = q[1:]
			t.ring = append(t.ring[1:], tenant) // its next call waits for the others' turns
		}
		w.granted = true
		t.inFlight++
		close(w.ready)
	}
}

func (t *Throttle) armLocked(d time.Duration) {
	if t.timer != nil {
		t.timer.Stop()
	}
	t.timer = time.AfterFunc(d, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.timer = nil
		t.dispatchLocked(t.now())
	})
}

// removeLocked takes a waiter that gave up out of its queue.
func (t *Throttle) removeLocked(w *waiter) {
	q := t.queues[w.tenant]
	if i := slices.Index(q, w); i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	if len(q) == 0 {
		delete(t.queues, w.tenant)
		if i := slices.Index(t.ring, w.tenant); i >= 0 {
			t.ring = slices.Delete(t.ring, i, i+1)
		}
		return
	}
	t.queues[w.tenant] = q
}

// RateLimited turns an Acquire failure into the provider's error: a
// *WaitError is rate limited with its retry time, a context's end is
// unavailable ("cancelled").
func RateLimited(provider string, err error) *Error {
	var we *WaitError
	if errors.As(err, &we) {
		return &Error{Provider: provider, Kind: KindRateLimited, RetryAfter: we.RetryAfter, Detail: we.Error(), Err: err}
	}
	return &Error{Provider: provider, Kind: KindUnavailable, Detail: "cancelled", Err: err}
}
