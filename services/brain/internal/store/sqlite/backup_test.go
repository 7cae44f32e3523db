package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/brain-tools/suite/services/brain/internal/store/storetest"
)

// TestBackupUnderWriteLoad: brain backup (Backup) of a database that eight
// writers keep writing to gives a copy that passes SQLite's integrity check
// and brain's own: every session's events numbered 1..N with no gap, every
// call with its tool.call event, every finished call with its tool.result;
// the copy opens as a store and takes new writes after its last event.
func TestBackupUnderWriteLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "brain.db")
	db := open(t, path, nil)
	load := storetest.StartLoad(t, db, 8)
	load.WaitFor(200)

	backup := filepath.Join(t.TempDir(), "backup.db")
	if err := Backup(ctx, path, backup); err != nil {
		t.Fatal(err)
	}
	atBackup := load.Stop()
	if err := Backup(ctx, path, backup); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("backup over an existing file: %v, want a refusal", err)
	}

	// Restore: the copy in place of brain.db of a new data dir.
	restored := filepath.Join(t.TempDir(), "brain.db")
	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(restored, data, 0o600); err != nil {
		t.Fatal(err)
	}
	checkIntegrity(t, restored)
	rdb := open(t, restored, nil)
	calls, err := rdb.Calls(ctx, store.CallFilter{TenantID: "t1", Limit: store.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) == 0 {
		t.Fatal("the backup has no calls")
	}
	t.Logf("backup taken while 8 writers finished %d calls", atBackup)
	c, ev := storetest.NewCall("call_after_restore", "ses_w0", "t1")
	if err := rdb.CreateCall(ctx, c, ev); err != nil {
		t.Fatal(err)
	}
	var last int64
	q, _ := sql.Open("sqlite", "file:"+restored+"?mode=ro")
	defer q.Close()
	if err := q.QueryRow(`SELECT MAX(seq) FROM events WHERE session_id = 'ses_w0'`).Scan(&last); err != nil || ev.ID != last {
		t.Errorf("new event after restore has ID %d, the session's last is %d (%v)", ev.ID, last, err)
	}
}

// checkIntegrity fails t unless the database at path passes SQLite's
// integrity check and brain's: events numbered 1..N per session, calls and
// their events in agreement.
func checkIntegrity(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+uriPath.Replace(path)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Fatalf("integrity_check: %q, %v", res, err)
	}
	checks := []struct{ name, q string }{
		{"sessions whose event IDs are not 1..N", `SELECT COUNT(*) FROM (SELECT session_id FROM events GROUP BY session_id
			HAVING MIN(seq) != 1 OR MAX(seq) != COUNT(*) OR COUNT(DISTINCT seq) != COUNT(*))`},
		{"events of no session", `SELECT COUNT(*) FROM events WHERE session_id NOT IN (SELECT id FROM sessions)`},
		{"calls without their tool.call event", `SELECT COUNT(*) FROM tool_calls c WHERE NOT EXISTS
			(SELECT 1 FROM events e WHERE e.session_id = c.session_id AND e.call_id = c.id AND e.type = 'tool.call')`},
		{"finished calls without their tool.result event", `SELECT COUNT(*) FROM tool_calls c WHERE c.status IN
			('succeeded', 'failed', 'cancelled', 'timed_out') AND NOT EXISTS
			(SELECT 1 FROM events e WHERE e.session_id = c.session_id AND e.call_id = c.id AND e.type = 'tool.result')`},
		{"tool.result events of unfinished calls", `SELECT COUNT(*) FROM events e JOIN tool_calls c ON c.id = e.call_id
			WHERE e.type = 'tool.result' AND c.status NOT IN ('succeeded', 'failed', 'cancelled', 'timed_out')`},
	}
	for _, c := range checks {
		var n int
		if err := db.QueryRow(c.q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n != 0 {
			t.Errorf("%s: %d", c.name, n)
		}
	}
}

// TestBackupDestinations: Backup writes the file it is given, whatever its
// name looks like to SQLite (":memory:", a "file:" URI with mode=memory),
// and refuses, naming the problem, a destination it cannot write: none, an
// existing file, a directory, a directory that does not exist.
func TestBackupDestinations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "brain.db")
	open(t, path, nil)
	cwd := t.TempDir()
	t.Chdir(cwd) // relative destinations are the working directory's
	if err := os.WriteFile("taken.db", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dest    string
		written string // the file that must hold the copy, or
		refused string // what the refusal says
	}{
		{dest: "", refused: "the file to write is empty"},
		{dest: ":memory:", written: filepath.Join(cwd, ":memory:")},
		{dest: "file:uri.db?mode=memory", written: filepath.Join(cwd, "file:uri.db?mode=memory")},
		{dest: "sub", written: filepath.Join(cwd, "sub")},
		{dest: "taken.db", refused: "the file exists"},
		{dest: cwd, refused: "the file exists"},
		{dest: filepath.Join(cwd, "missing", "x.db"), refused: "directory " + filepath.Join(cwd, "missing") + " does not exist"},
		{dest: "taken.db/x.db", refused: filepath.Join(cwd, "taken.db") + " is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.dest, func(t *testing.T) {
			err := Backup(ctx, path, tt.dest)
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("Backup to %q: %v, want a refusal saying %q", tt.dest, err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("Backup to %q: %v", tt.dest, err)
			}
			checkIntegrity(t, tt.written)
		})
	}
}
