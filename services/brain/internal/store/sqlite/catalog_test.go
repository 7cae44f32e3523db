package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/brain-tools/suite/services/brain/internal/store"
)

// TestCatalogUpgrade: a brain.db at schema version 4, from before the
// catalog, takes version 5 when it opens, with its calls intact (revision
// "" for each), and the catalog works on it.
func TestCatalogUpgrade(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "brain.db")
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	p, err := provider(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 4); err != nil {
		t.Fatalf("migrate to version 4: %v", err)
	}
	for _, q := range []string{
		`INSERT INTO sessions (id, tenant_id, status, tools, config, created_at, updated_at) VALUES ('ses_1', 't1', 'active', '[]', '{}', 1, 1)`,
		`INSERT INTO tool_calls (id, seq, session_id, tenant_id, tool, status, arguments, created_at, ord) VALUES ('call_1', 1, 'ses_1', 't1', 'echo', 'succeeded', '{}', 1, 1)`,
	} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("open a version 4 database: %v", err)
	}
	defer db.Close()
	got, err := db.Call(ctx, "t1", "call_1")
	if err != nil || got.RevisionID != "" || got.Tool != "echo" {
		t.Fatalf("call after the upgrade: %+v %v", got, err)
	}
	if _, err := db.PutSecret(ctx, &store.Secret{TenantID: "t1", Name: "k", Sealed: []byte{1}}, 10); err != nil {
		t.Fatalf("catalog after the upgrade: %v", err)
	}
}
