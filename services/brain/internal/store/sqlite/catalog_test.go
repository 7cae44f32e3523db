package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/brain-tools/suite/services/brain/internal/store/storetest"
)

// TestCatalogSuite runs the catalog cases every backend passes.
func TestCatalogSuite(t *testing.T) {
	storetest.RunCatalog(t, func(t *testing.T) func(func(store.Event)) store.Store {
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

// TestCatalogUpgrade: a brain.db from before the catalog (no catalog
// tables, no tool_calls.revision_id) takes them in one step when it opens,
// with its calls intact, and opening again changes nothing.
func TestCatalogUpgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "brain.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sess, ev := &store.Session{ID: "ses_1", TenantID: "t1", Status: store.SessionActive, Tools: []string{}, Config: []byte(`{}`)},
		&store.Event{Type: store.EventSessionCreated, SessionID: "ses_1", Data: []byte(`{}`)}
	if err := db.CreateSession(ctx, sess, ev); err != nil {
		t.Fatal(err)
	}
	c := &store.Call{ID: "call_1", SessionID: "ses_1", TenantID: "t1", Tool: "echo", Status: store.CallRunning, Arguments: []byte(`{}`)}
	if err := db.CreateCall(ctx, c, &store.Event{Type: store.EventToolCall, SessionID: "ses_1", CallID: "call_1", Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`ALTER TABLE tool_calls DROP COLUMN revision_id`, `DROP TABLE custom_tools`, `DROP TABLE tool_revisions`,
		`DROP TABLE secrets`, `DROP TABLE toolsets`, `DROP TABLE session_tools`} {
		if _, err := db.write.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	for range 2 {
		db, err = Open(path, Options{})
		if err != nil {
			t.Fatalf("open a database from before the catalog: %v", err)
		}
		got, err := db.Call(ctx, "t1", "call_1")
		if err != nil || got.RevisionID != "" || got.Tool != "echo" {
			t.Fatalf("call after the upgrade: %+v %v", got, err)
		}
		if _, err := db.Secrets(ctx, "t1"); err != nil {
			t.Fatalf("catalog after the upgrade: %v", err)
		}
		db.Close()
	}
}
