package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/brain-tools/suite/services/brain/internal/store/postgres"
	"github.com/brain-tools/suite/services/brain/internal/store/sqlite"
)

// lockDataDir takes an exclusive flock on dir/brain.lock so that two brain
// processes never share a data dir: the session cache and the start-up
// recovery of unfinished calls both rely on being the only writer. The
// kernel drops the lock when the process dies, SIGKILL included.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "brain.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock data dir: %s is in use by another brain process", dir)
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	return f, nil
}

// Migrate brings the store of o (PostgreSQL at o.DatabaseURL, under
// goose's advisory lock; else the SQLite database in o.DataDir, under the
// data directory's lock) to the schema version this build knows, and
// returns the versions it applied (none when it was up to date) and the
// version the store is at: `brain migrate`. New does the same at start.
func Migrate(ctx context.Context, o Options) (applied []int64, version int64, err error) {
	if o.DatabaseURL != "" {
		return postgres.Migrate(ctx, o.DatabaseURL, o.StatementTimeout)
	}
	if o.DataDir == "" {
		return nil, 0, errors.New("migrate: data dir is required")
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, 0, fmt.Errorf("migrate: data dir: %w", err)
	}
	lock, err := lockDataDir(o.DataDir)
	if err != nil {
		return nil, 0, fmt.Errorf("migrate: %w", err)
	}
	defer lock.Close()
	return sqlite.Migrate(ctx, filepath.Join(o.DataDir, "brain.db"))
}
