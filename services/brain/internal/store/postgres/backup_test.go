package postgres

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/brain-tools/suite/services/brain/internal/store/storetest"
	"github.com/jackc/pgx/v5"
)

// TestDumpAndRestore is the README's PostgreSQL backup procedure: pg_dump
// (custom format) of a database that writers keep writing to, pg_restore
// into a new database, brain started on that one. The copy is consistent
// (every session's events 1..N, calls and their events in agreement), the
// schema version came along (nothing to migrate), and the store takes new
// writes after each session's last event.
func TestDumpAndRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pg.NewDatabase(t)
	db := openDB(t, url, "r1", Options{})
	load := storetest.StartLoad(t, db, 4)
	load.WaitFor(100)

	dump := filepath.Join(t.TempDir(), "brain.dump")
	if _, err := pg.Run("pg_dump", "--format=custom", "--file="+dump, "--dbname="+url); err != nil {
		t.Fatal(err)
	}
	load.Stop()

	name, err := pg.CreateDatabase()
	if err != nil {
		t.Fatal(err)
	}
	restored := pg.URL(name)
	if _, err := pg.Run("pg_restore", "--no-owner", "--exit-on-error", "--dbname="+restored, dump); err != nil {
		t.Fatal(err)
	}
	applied, _, err := Migrate(ctx, restored, 0)
	if err != nil || len(applied) != 0 {
		t.Errorf("migrate after restore: applied %v, %v; want nothing", applied, err)
	}
	conn, err := pgx.Connect(ctx, restored)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	checks := []struct{ name, q string }{
		{"sessions whose event IDs are not 1..last_seq", `SELECT count(*) FROM sessions s WHERE s.last_seq !=
			(SELECT count(*) FROM events e WHERE e.session_id = s.id) OR s.last_seq != (SELECT COALESCE(max(seq), 0) FROM events e WHERE e.session_id = s.id)`},
		{"calls without their tool.call event", `SELECT count(*) FROM tool_calls c WHERE NOT EXISTS
			(SELECT 1 FROM events e WHERE e.session_id = c.session_id AND e.call_id = c.id AND e.type = 'tool.call')`},
		{"finished calls without their tool.result event", `SELECT count(*) FROM tool_calls c WHERE c.status = 'succeeded' AND NOT EXISTS
			(SELECT 1 FROM events e WHERE e.session_id = c.session_id AND e.call_id = c.id AND e.type = 'tool.result')`},
		{"tool.result events of unfinished calls", `SELECT count(*) FROM events e JOIN tool_calls c ON c.id = e.call_id
			WHERE e.type = 'tool.result' AND c.status != 'succeeded'`},
	}
	for _, c := range checks {
		var n int
		if err := conn.QueryRow(ctx, c.q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n != 0 {
			t.Errorf("%s: %d", c.name, n)
		}
	}
	var calls int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM tool_calls`).Scan(&calls); err != nil || calls < 100 {
		t.Errorf("restored %d calls (%v), want at least the 100 before the dump", calls, err)
	}
	rdb := openDB(t, restored, "r2", Options{})
	c, ev := storetest.NewCall("call_after_restore", "ses_w0", "t1")
	if err := rdb.CreateCall(ctx, c, ev); err != nil {
		t.Fatal(err)
	}
	var last int64
	if err := conn.QueryRow(ctx, `SELECT max(seq) FROM events WHERE session_id = 'ses_w0'`).Scan(&last); err != nil || ev.ID != last {
		t.Errorf("new event after restore has ID %d, the session's last is %d (%v)", ev.ID, last, err)
	}
}
