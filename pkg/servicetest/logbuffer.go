package servicetest

import (
	"bytes"
	"sync"
)

// LogBuffer is a log sink a server's goroutines may write to at once: give
// it to slog.NewJSONHandler, read what was written with String.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
