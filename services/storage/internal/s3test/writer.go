package s3test

import (
	"strings"
	"sync"
)

// syncWriter collects a child's output; os/exec writes it from a goroutine
// while Log may read it.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Keep at most 64 KiB: enough to explain a failure.
	if w.b.Len() < 64<<10 {
		w.b.Write(p)
	}
	return len(p), nil
}
