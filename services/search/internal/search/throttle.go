package search

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Throttle spaces a provider's requests and holds them back after the
// provider said to slow down, so a burst of calls never hammers it:
//
//   - a token bucket (golang.org/x/time/rate) at the provider's request
//     rate, which SetRate adjusts from rate-limit headers;
//   - a "not before" time set by Block after a 429 or an exhausted window:
//     calls that would wait longer than maxWait fail at once with
//     KindRateLimited instead of queueing, the others wait for it.
type Throttle struct {
	limiter *rate.Limiter
	maxWait time.Duration
	now     func() time.Time

	mu        sync.Mutex
	notBefore time.Time
	// blocked is closed (and replaced) by Block, waking calls queued in
	// the token bucket so they fail fast instead of queueing behind a
	// closed window.
	blocked chan struct{}
}

// NewThrottle allows perSecond requests a second (0 or less: no spacing)
// and waits at most maxWait for a blocked window to reopen.
func NewThrottle(perSecond float64, maxWait time.Duration) *Throttle {
	lim := rate.NewLimiter(rate.Inf, 1)
	if perSecond > 0 {
		lim = rate.NewLimiter(rate.Limit(perSecond), burst(perSecond))
	}
	return &Throttle{limiter: lim, maxWait: maxWait, now: time.Now, blocked: make(chan struct{})}
}

func burst(perSecond float64) int {
	if perSecond < 1 {
		return 1
	}
	return int(perSecond)
}

// SetRate sets the request rate, e.g. from Brave's X-RateLimit-Limit.
func (t *Throttle) SetRate(perSecond float64) {
	if perSecond <= 0 || rate.Limit(perSecond) == t.limiter.Limit() {
		return
	}
	t.limiter.SetLimit(rate.Limit(perSecond))
	t.limiter.SetBurst(burst(perSecond))
}

// Block holds every request back until now + d (a longer block wins).
func (t *Throttle) Block(d time.Duration) {
	if d <= 0 {
		return
	}
	until := t.now().Add(d)
	t.mu.Lock()
	if until.After(t.notBefore) {
		t.notBefore = until
		close(t.blocked)
		t.blocked = make(chan struct{})
	}
	t.mu.Unlock()
}

// Blocked returns how long requests are still held back.
func (t *Throttle) Blocked() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.notBefore.Sub(t.now())
}

// Wait blocks until a request may go out. It returns the remaining block
// (with ok false) without waiting when that is longer than maxWait, and
// ctx's error when ctx ends first.
func (t *Throttle) Wait(ctx context.Context) (retryAfter time.Duration, ok bool, err error) {
	for {
		wait := t.Blocked()
		if wait > t.maxWait {
			return wait, false, nil
		}
		if wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return 0, false, ctx.Err()
			case <-timer.C:
			}
			continue
		}
		t.mu.Lock()
		woken := t.blocked
		t.mu.Unlock()
		r := t.limiter.Reserve()
		if delay := r.Delay(); delay > 0 {
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
				r.Cancel()
				return 0, false, errors.New("the request rate leaves no room before the call's deadline")
			}
			timer := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				timer.Stop()
				r.Cancel()
				return 0, false, ctx.Err()
			case <-woken:
				// Blocked meanwhile: give the token back and look again.
				timer.Stop()
				r.Cancel()
				continue
			case <-timer.C:
			}
		}
		// A response that arrived while this call waited for its token may
		// have blocked the window: look again before going out.
		if t.Blocked() <= 0 {
			return 0, true, nil
		}
	}
}

// MaxWait is the longest Wait waits for a blocked window.
func (t *Throttle) MaxWait() time.Duration { return t.maxWait }
