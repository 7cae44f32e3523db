package config

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"syscall"
	"time"
)

// DefaultPollInterval is how often a Watcher looks at the host config file
// for a change.
const DefaultPollInterval = 2 * time.Second

// Watcher reloads the host config without a restart: on every value of
// Signals (brain sends SIGHUP there) and when the file changes, looked at
// every Interval.
//
// A new config is checked in full first (Parse, as at start-up and as
// brain -check); a config that fails is refused and logged with the
// errors, each naming the binding and the field, and the running config
// stays. A good one is handed to Apply. The file is polled rather than
// watched with inotify: a poll sees every way a file is replaced — written
// in place, renamed over by an editor, a Kubernetes ConfigMap's symlink
// swapped, a bind mount or network file system where inotify sees nothing
// — with one stat per Interval and no watch to re-arm; SIGHUP stays the
// way to reload at once.
type Watcher struct {
	// Path is the host config file.
	Path string
	// Getenv resolves token_env and api_keys variables; nil: os.Getenv.
	Getenv func(string) string
	// Interval is the poll period; 0 or less turns polling off.
	Interval time.Duration
	// Signals, when not nil, asks for a reload on each value.
	Signals <-chan os.Signal
	// Apply receives each new config that passed the checks.
	Apply func(*Config)
	// Refused, when set, receives each refusal (already logged).
	Refused func(error)
	// Logger receives one record per reload or refusal; nil discards.
	Logger *slog.Logger

	// seen is the digest of the file content last loaded or refused, and
	// stat what it was read under: a poll reads the file again only when
	// its stat changed, and reloads only when its content did.
	seen [sha256.Size]byte
	stat fileStat
}

type fileStat struct {
	size  int64
	mtime time.Time
	ino   uint64
}

func statOf(fi os.FileInfo) fileStat {
	st := fileStat{size: fi.Size(), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}

// Load reads and checks the file as Load does, and remembers what it
// read, so that the first poll does not reload the config brain starts
// with.
func (w *Watcher) Load() (*Config, error) {
	fi, statErr := os.Stat(w.Path)
	data, err := readFile(w.Path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data, w.Getenv)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", w.Path, err)
	}
	w.seen = sha256.Sum256(data)
	if statErr == nil {
		w.stat = statOf(fi)
	}
	return c, nil
}

// Run reloads on signals and file changes until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	var tick <-chan time.Time
	if w.Interval > 0 {
		t := time.NewTicker(w.Interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case sig, ok := <-w.Signals:
			if !ok {
				w.Signals = nil
				continue
			}
			_ = w.Reload(sig.String()) // logged, and the running config stays
		case <-tick:
			w.poll()
		}
	}
}

func (w *Watcher) log() *slog.Logger {
	if w.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Logger
}

// triggerPoll is the trigger of a reload the poll asked for.
const triggerPoll = "file changed"

// poll reloads when the file's content changed since it was last read.
func (w *Watcher) poll() {
	fi, err := os.Stat(w.Path)
	if err != nil {
		return // Reload on the next change, or SIGHUP, says what is wrong
	}
	if statOf(fi) == w.stat {
		return
	}
	_ = w.Reload(triggerPoll) // logged, and the running config stays
}

// Reload reads and checks the file now, whatever changed, and applies it
// when it passes; trigger says why, for the log. It returns the refusal.
func (w *Watcher) Reload(trigger string) error {
	log := w.log()
	fi, statErr := os.Stat(w.Path)
	data, err := readFile(w.Path)
	var c *Config
	if err == nil {
		c, err = Parse(data, w.Getenv)
		if err != nil {
			err = fmt.Errorf("load config %s: %w", w.Path, err)
		}
	}
	sum := sha256.Sum256(data)
	if statErr == nil {
		w.stat = statOf(fi)
	}
	if trigger == triggerPoll && sum == w.seen {
		return nil // touched, not changed: applied or refused already
	}
	w.seen = sum
	if err != nil {
		log.Error("host config reload refused; the running config stays", "path", w.Path, "trigger", trigger, "err", err.Error())
		if w.Refused != nil {
			w.Refused(err)
		}
		return err
	}
	w.Apply(c)
	log.Info("host config reloaded", "path", w.Path, "trigger", trigger, "tools", len(c.Tools), "api_keys", len(c.APIKeys))
	return nil
}

// readFile reads the host config at path, at most MaxFileBytes.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("load config %s: larger than %d bytes", path, MaxFileBytes)
	}
	return data, nil
}
