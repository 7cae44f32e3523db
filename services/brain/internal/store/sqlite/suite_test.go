package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/brain-tools/suite/services/brain/internal/store/storetest"
)

// TestSuite runs the store suite every backend passes.
func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func(func(store.Event)) store.Store {
		path := filepath.Join(t.TempDir(), "brain.db")
		return func(onCommit func(store.Event)) store.Store {
			t.Helper()
			db, err := Open(path, Options{OnCommit: onCommit})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
	})
}
