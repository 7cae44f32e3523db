// Package bounded waits for blocking work for a limited time: a pool's
// close, a WaitGroup's goroutines, anything that may hang on a peer that
// does not answer, where a stopping process must not hang with it.
package bounded

import "time"

// Wait runs f and waits up to d for it to return, reporting whether it
// did. Past d, f goes on in its own goroutine and is left to end when it
// can (or with the process).
func Wait(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
