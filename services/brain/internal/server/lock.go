package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
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
