package approval

import (
	"context"
	"testing"
	"time"
)

// TestOnStoreStack: a store call handed to the workers runs exactly once
// and its caller sees its effects; a panic reaches the caller (where the
// call core turns it into an is_error result) instead of killing the
// process from a worker; after shutdown began the call still runs, on the
// caller's goroutine, and never hangs.
func TestOnStoreStack(t *testing.T) {
	for _, tc := range []struct {
		name      string
		closed    bool // the service is shut down first
		panics    bool
		wantPanic any
	}{
		{name: "runs on a worker"},
		{name: "panic reaches the caller", panics: true, wantPanic: "boom"},
		{name: "after shutdown, on the caller", closed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := New(context.Background(), Config{DataDir: t.TempDir(), PageURL: "http://operator.test", SweepInterval: time.Hour}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { svc.Close() })
			if tc.closed {
				svc.Close()
			}
			runs := 0
			var got any
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() { got = recover() }()
				svc.onStoreStack(func() {
					runs++
					if tc.panics {
						panic("boom")
					}
				})
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("onStoreStack did not return in 10 s")
			}
			if runs != 1 {
				t.Errorf("f ran %d times, want 1", runs)
			}
			if got != tc.wantPanic {
				t.Errorf("caller recovered %v, want %v", got, tc.wantPanic)
			}
		})
	}
}
