package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/brain-tools/suite/services/brain/internal/store/storetest"
	"github.com/google/go-cmp/cmp"
)

func open(t *testing.T, path string, onCommit func(store.Event)) *DB {
	t.Helper()
	db, err := Open(path, Options{OnCommit: onCommit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var (
	newSession = storetest.NewSession
	newCall    = storetest.NewCall
)

// TestGroupCommit drives many concurrent writers so batches hold several ops,
// some refused, and checks what SQLite promises beyond the store suite: the
// commit hook sees each session's IDs with no gap (one writer), and a
// reopened file has everything.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "brain.db")
	var (
		mu   sync.Mutex
		last = map[string]int64{} // session → its last event ID
		bad  bool
	)
	db := open(t, path, func(ev store.Event) {
		mu.Lock()
		// IDs count up by one within each session, in commit order.
		bad = bad || ev.ID != last[ev.SessionID]+1
		last[ev.SessionID] = ev.ID
		mu.Unlock()
	})
	for i := range 4 {
		s, ev := newSession(fmt.Sprint("ses_", i), "t1")
		if i%2 == 1 {
			s.Status = store.SessionClosed
		}
		if err := db.CreateSession(ctx, s, ev); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Go(func() {
			c, ev := newCall(fmt.Sprint("call_", i), fmt.Sprint("ses_", i%4), "t1")
			errs[i] = db.CreateCall(ctx, c, ev)
		})
	}
	wg.Wait()
	for i, err := range errs {
		var se *store.StateError
		switch {
		case i%4%2 == 0 && err != nil:
			t.Errorf("call_%d in active session: %v", i, err)
		case i%4%2 == 1 && (!errors.As(err, &se) || se.Status != store.SessionClosed):
			t.Errorf("call_%d in closed session: err = %v, want StateError closed", i, err)
		}
	}
	if bad {
		t.Error("commit hook saw a session's event IDs out of order or with a gap")
	}
	calls, err := db.Calls(ctx, store.CallFilter{TenantID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 100 {
		t.Errorf("stored %d calls, want 100", len(calls))
	}
	unfinished, err := db.UnfinishedCalls(ctx)
	if err != nil || len(unfinished) != 100 {
		t.Errorf("UnfinishedCalls = %d, %v; want 100", len(unfinished), err)
	}
	for _, s := range []string{"ses_0", "ses_2"} {
		evs, err := db.Events(ctx, s, 0, 0)
		if err != nil || len(evs) != 51 {
			t.Errorf("events of %s = %d, %v; want 51", s, len(evs), err)
		}
	}
	filtered, err := db.Calls(ctx, store.CallFilter{TenantID: "t1", SessionID: "ses_2", Status: store.CallRunning, Tool: "echo", Limit: 7})
	if err != nil || len(filtered) != 7 {
		t.Errorf("filtered Calls = %d, %v; want 7", len(filtered), err)
	}

	// Reopen: everything committed is still there.
	db.Close()
	db2 := open(t, path, nil)
	evs, err := db2.Events(ctx, "ses_0", 0, 0)
	if err != nil || len(evs) != 51 {
		t.Errorf("after reopen: events of ses_0 = %d, %v; want 51", len(evs), err)
	}
}

func TestOpenRefusesBadSynchronous(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "x.db"), Options{Synchronous: "OFF"})
	if err == nil {
		t.Fatal("Open with synchronous OFF succeeded")
	}
}

// TestMigrateEventsToPerSessionIDs: a database written with one global
// event sequence opens with each session's events renumbered from 1 in
// their order, nothing lost, and opens again unchanged.
func TestMigrateEventsToPerSessionIDs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "brain.db")
	old, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE events (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, call_id TEXT NOT NULL DEFAULT '',
			type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL)`,
		`CREATE INDEX events_session ON events (session_id, id)`,
		`INSERT INTO events (id, session_id, call_id, type, time, data) VALUES
			(1, 'ses_a', '', 'session.created', 10, '{"n":1}'),
			(2, 'ses_b', '', 'session.created', 11, '{"n":2}'),
			(3, 'ses_a', 'call_1', 'tool.call', 12, '{"n":3}'),
			(7, 'ses_a', 'call_1', 'tool.result', 13, '{"n":4}'),
			(9, 'ses_b', '', 'session.closed', 14, '{"n":5}')`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	want := map[string][]string{
		"ses_a": {`1 session.created  {"n":1}`, `2 tool.call call_1 {"n":3}`, `3 tool.result call_1 {"n":4}`},
		"ses_b": {`1 session.created  {"n":2}`, `2 session.closed  {"n":5}`},
	}
	for range 2 {
		db, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for session, w := range want {
			evs, err := db.Events(context.Background(), session, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range evs {
				got = append(got, fmt.Sprintf("%d %s %s %s", e.ID, e.Type, e.CallID, e.Data))
			}
			if diff := cmp.Diff(w, got); diff != "" {
				t.Errorf("%s after migration (-want +got):\n%s", session, diff)
			}
		}
		db.Close()
	}
	// New events continue their session's numbering.
	db := open(t, path, nil)
	s, ev := newSession("ses_b", "t2")
	if err := db.CreateSession(context.Background(), s, ev); err != nil {
		t.Fatal(err)
	}
	if ev.ID != 3 {
		t.Errorf("next ses_b event got ID %d, want 3", ev.ID)
	}
}

// TestOpenPathWithURICharacters: a directory whose name holds characters a
// file: URI gives a meaning (#, ?, %) still holds the database.
func TestOpenPathWithURICharacters(t *testing.T) {
	for _, name := range []string{"d#x", "d?mode=ro", "d%41"} {
		dir := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "brain.db")
		db, err := Open(path, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		db.Close()
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: the database is not at %s: %v", name, path, err)
		}
	}
}

// TestUpgradeFromBeforeWaitingCalls opens a copy of a brain.db written by
// brain before calls could wait (testdata: two sessions, five calls
// interleaved across them, one running, one queued), twice: every session,
// call and event is still there, the calls are numbered in the order they
// were made, the new fields read as their defaults, and the database takes
// new calls after them.
func TestUpgradeFromBeforeWaitingCalls(t *testing.T) {
	ctx := context.Background()
	old, err := os.ReadFile("testdata/brain-before-requires-input.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "brain.db")
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	wantOrder := []string{"call_a1", "call_b1", "call_a2", "call_b2", "call_a3"}
	for round := range 2 {
		db, err := Open(path, Options{})
		if err != nil {
			t.Fatalf("open %d: %v", round, err)
		}
		calls, err := db.Calls(ctx, store.CallFilter{TenantID: "local"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i, c := range calls {
			ids = append(ids, c.ID)
			if c.Ord != int64(i+1) || c.CallerType != store.CallerAPI || c.ParentID != "" || c.InputKind != "" ||
				c.Prompt != "" || c.ResponseSchema != nil || !c.ResponseExpiresAt.IsZero() {
				t.Errorf("open %d: call %s after the upgrade: %+v", round, c.ID, c)
			}
			wantRetry := c.Status == store.CallFailed
			if (c.Retryable != nil) != wantRetry || (c.Retryable != nil && *c.Retryable) {
				t.Errorf("open %d: call %s (%s) retryable %v, want false for a failure, nil otherwise", round, c.ID, c.Status, c.Retryable)
			}
			if c.ID != "call_new" && string(c.Arguments) != `{"text":"`+c.ID+`"}` {
				t.Errorf("call %s arguments %s", c.ID, c.Arguments)
			}
		}
		if !cmp.Equal(ids, wantOrder) {
			t.Errorf("open %d: calls %v, want them in the order made %v", round, ids, wantOrder)
		}
		page, err := db.Calls(ctx, store.CallFilter{TenantID: "local", After: "call_b1", Limit: 2})
		if err != nil || len(page) != 2 || page[0].ID != "call_a2" || page[1].ID != "call_b2" {
			t.Errorf("open %d: page after call_b1 = %v, %v", round, page, err)
		}
		unfinished, err := db.UnfinishedCalls(ctx)
		if err != nil || len(unfinished) != 2+round || unfinished[0].ID != "call_b2" || unfinished[1].ID != "call_a3" {
			t.Errorf("open %d: unfinished %v, %v", round, unfinished, err)
		}
		for _, sid := range []string{"ses_a", "ses_b"} {
			evs, err := db.Events(ctx, sid, 0, 0)
			if err != nil || len(evs) != map[string]int{"ses_a": 6 + round, "ses_b": 4}[sid] {
				t.Errorf("open %d: %d events of %s, %v", round, len(evs), sid, err)
			}
		}
		if round == 0 {
			c, ev := newCall("call_new", "ses_a", "local")
			if err := db.CreateCall(ctx, c, ev); err != nil || c.Ord != 6 {
				t.Errorf("new call after the upgrade: ord %d, %v; want 6", c.Ord, err)
			}
			wantOrder = append(wantOrder, "call_new")
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
