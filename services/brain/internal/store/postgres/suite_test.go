package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/pgtest"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/brain-tools/suite/services/brain/internal/store/storetest"
)

var pg *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, "brain postgres store", &pg) }

// openDB opens a store on url as replica.
func openDB(t *testing.T, url, replica string, o Options) *DB {
	t.Helper()
	o.URL, o.Replica = url, replica
	if o.Lease == 0 {
		o.Lease = time.Minute
	}
	db, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestSuite runs the store suite every backend passes.
func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func(func(store.Event)) store.Store {
		url := pg.NewDatabase(t)
		// Each open is another replica, as each process is (brain names
		// its replica anew at every start): a reopen is a restart.
		opens := 0
		return func(onCommit func(store.Event)) store.Store {
			t.Helper()
			opens++
			return openDB(t, url, fmt.Sprintf("r%d", opens), Options{OnCommit: onCommit})
		}
	})
}
