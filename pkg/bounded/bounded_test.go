package bounded_test

import (
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/bounded"
)

// TestWait: work that returns within the bound is waited for; work that
// does not is left running once the bound has passed, not waited for
// longer.
func TestWait(t *testing.T) {
	const d = 100 * time.Millisecond
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	for _, tc := range []struct {
		name string
		f    func()
		want bool
	}{
		{"returns at once", func() {}, true},
		{"returns within the bound", func() { time.Sleep(d / 4) }, true},
		{"hangs", func() { <-release }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got := bounded.Wait(d, tc.f)
			took := time.Since(start)
			if got != tc.want {
				t.Errorf("Wait = %v, want %v", got, tc.want)
			}
			if !tc.want && (took < d || took > 10*d) {
				t.Errorf("gave up after %s, want about %s", took, d)
			}
		})
	}
}
