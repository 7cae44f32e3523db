package config

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func watchDoc(description string, extra string) string {
	return fmt.Sprintf(`{"tools":[{"name":"echo","description":%q,"url":"http://127.0.0.1:1/tools/echo","tenants":["local"],
		"input_schema":{"type":"object"}%s}],"api_keys":[{"env":"KEY","tenant":"local"}]}`, description, extra)
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWatcher: a change of the file is applied within a few polls; a file
// that fails the checks is refused once, logged with the field at fault,
// and nothing is applied; a touch without a change applies nothing; a
// signal reloads at once, changed or not.
func TestWatcher(t *testing.T) {
	path := filepath.Join(t.TempDir(), "brain.json")
	write := func(doc string) {
		t.Helper()
		// Renamed over the old file, as editors and ConfigMaps replace it.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(watchDoc("first", ""))
	applied := make(chan *Config, 10)
	refused := make(chan error, 10)
	var logs logBuffer
	sig := make(chan os.Signal, 1)
	w := &Watcher{Path: path, Getenv: func(string) string { return "an-api-key-0123456789" }, Interval: 5 * time.Millisecond,
		Signals: sig, Apply: func(c *Config) { applied <- c }, Refused: func(err error) { refused <- err },
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	c, err := w.Load()
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Tools[0].Description; d != "first" {
		t.Fatalf("loaded %q", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	next := func() *Config {
		t.Helper()
		select {
		case c := <-applied:
			return c
		case err := <-refused:
			t.Fatalf("refused: %v", err)
		case <-time.After(5 * time.Second):
			t.Fatal("nothing applied within 5 s")
		}
		return nil
	}
	quiet := func(what string) {
		t.Helper()
		select {
		case c := <-applied:
			t.Fatalf("%s: applied %q", what, c.Tools[0].Description)
		case <-time.After(100 * time.Millisecond):
		}
	}
	// Nothing changed yet: the first polls apply nothing.
	quiet("unchanged file")
	write(watchDoc("second", ""))
	if d := next().Tools[0].Description; d != "second" {
		t.Fatalf("applied %q, want second", d)
	}
	write(watchDoc("broken", `,"timeout_seconds":0`))
	select {
	case err := <-refused:
		if !strings.Contains(err.Error(), `tools[0] "echo": timeout_seconds`) {
			t.Errorf("refusal %v does not name the field", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a broken file was not refused within 5 s")
	}
	quiet("broken file")
	if n := strings.Count(logs.String(), "host config reload refused"); n != 1 {
		t.Errorf("refusal logged %d times, want once for one broken file:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "timeout_seconds") {
		t.Errorf("log does not name the field:\n%s", logs.String())
	}
	write(watchDoc("third", ""))
	if d := next().Tools[0].Description; d != "third" {
		t.Fatalf("applied %q, want third", d)
	}
	// Touched (new mtime, same content): nothing to apply.
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	quiet("touched file")
	sig <- syscall.SIGHUP
	if d := next().Tools[0].Description; d != "third" {
		t.Fatalf("SIGHUP applied %q", d)
	}
	// Apply comes before the record of it: wait for the record.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), `"trigger":"hangup"`); {
		if time.Now().After(deadline) {
			t.Fatalf("log does not say SIGHUP asked:\n%s", logs.String())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWatcherMissingFile: a file that went away is refused (named in the
// error), and the running config stays.
func TestWatcherMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "brain.json")
	os.WriteFile(path, []byte(watchDoc("x", "")), 0o600)
	w := &Watcher{Path: path, Getenv: func(string) string { return "an-api-key-0123456789" }, Apply: func(*Config) { t.Error("applied") }}
	if _, err := w.Load(); err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := w.Reload("test"); err == nil || !strings.Contains(err.Error(), "brain.json") {
		t.Errorf("reload of a missing file: %v", err)
	}
}
