package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/store"
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

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

func newSession(id, tenant string) (*store.Session, *store.Event) {
	return &store.Session{ID: id, TenantID: tenant, Status: store.SessionActive, Tools: []string{"echo"},
			Config: json.RawMessage(`{"tools":["echo"]}`), CreatedAt: t0, UpdatedAt: t0},
		&store.Event{Type: store.EventSessionCreated, SessionID: id, Time: t0, Data: json.RawMessage(`{}`)}
}

func newCall(id, session, tenant string) (*store.Call, *store.Event) {
	return &store.Call{ID: id, SessionID: session, TenantID: tenant, Tool: "echo", Status: store.CallRunning,
			Arguments: json.RawMessage(`{"text":"hi"}`), CreatedAt: t0, StartedAt: t0},
		&store.Event{Type: store.EventToolCall, SessionID: session, CallID: id, Time: t0, Data: json.RawMessage(`{"tool":"echo"}`)}
}

func TestStoreLifecycle(t *testing.T) {
	ctx := context.Background()
	var (
		mu        sync.Mutex
		published []int64
	)
	db := open(t, filepath.Join(t.TempDir(), "brain.db"), func(ev store.Event) {
		mu.Lock()
		published = append(published, ev.ID)
		mu.Unlock()
	})
	s, ev := newSession("ses_a", "t1")
	if err := db.CreateSession(ctx, s, ev); err != nil {
		t.Fatal(err)
	}
	if ev.ID <= 0 {
		t.Fatalf("session.created id = %d, want > 0", ev.ID)
	}
	got, err := db.Session(ctx, "t1", "ses_a")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("session (-want +got):\n%s", diff)
	}
	c, cev := newCall("call_1", "ses_a", "t1")
	if err := db.CreateCall(ctx, c, cev); err != nil {
		t.Fatal(err)
	}
	c.Status, c.FinishedAt, c.Result = store.CallSucceeded, t0.Add(time.Second), json.RawMessage(`{"content":[]}`)
	rev := &store.Event{Type: store.EventToolResult, SessionID: "ses_a", CallID: "call_1", Time: t0, Data: json.RawMessage(`{}`)}
	if err := db.FinishCall(ctx, c, rev); err != nil {
		t.Fatal(err)
	}
	gotCall, err := db.Call(ctx, "t1", "call_1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, gotCall); diff != "" {
		t.Errorf("call (-want +got):\n%s", diff)
	}
	var se *store.StateError
	if err := db.FinishCall(ctx, c, &store.Event{Type: store.EventToolResult, SessionID: "ses_a", Data: json.RawMessage(`{}`)}); !errors.As(err, &se) || se.Status != store.CallSucceeded {
		t.Errorf("second FinishCall = %v, want StateError succeeded", err)
	}

	tests := []struct {
		name string
		err  error
	}{
		{"other tenant's session", func() error { _, err := db.Session(ctx, "t2", "ses_a"); return err }()},
		{"other tenant's call", func() error { _, err := db.Call(ctx, "t2", "call_1"); return err }()},
		{"unknown session", func() error { _, err := db.Session(ctx, "t1", "nope"); return err }()},
		{"status of other tenant's session", db.SetSessionStatus(ctx, "t2", "ses_a", []string{store.SessionActive}, store.SessionClosed, t0,
			&store.Event{Type: store.EventSessionClosed, SessionID: "ses_a", Data: json.RawMessage(`{}`)})},
		{"call in other tenant's session", func() error { c, ev := newCall("call_x", "ses_a", "t2"); return db.CreateCall(ctx, c, ev) }()},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, store.ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", tt.name, tt.err)
		}
	}

	if err := db.SetSessionStatus(ctx, "t1", "ses_a", []string{store.SessionActive}, store.SessionInterrupted, t0,
		&store.Event{Type: store.EventSessionInterrupted, SessionID: "ses_a", Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	c2, c2ev := newCall("call_2", "ses_a", "t1")
	if err := db.CreateCall(ctx, c2, c2ev); !errors.As(err, &se) || se.Status != store.SessionInterrupted {
		t.Errorf("CreateCall in interrupted session = %v, want StateError interrupted", err)
	}
	evs, err := db.Events(ctx, "ses_a", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var ids []int64
	for _, e := range evs {
		types = append(types, e.Type)
		ids = append(ids, e.ID)
	}
	if diff := cmp.Diff([]string{"session.created", "tool.call", "tool.result", "session.interrupted"}, types); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
	mu.Lock()
	if diff := cmp.Diff(ids, published); diff != "" {
		t.Errorf("published ids differ from stored (-stored +published):\n%s", diff)
	}
	mu.Unlock()
	after, err := db.Events(ctx, "ses_a", ids[1], 1)
	if err != nil || len(after) != 1 || after[0].ID != ids[2] {
		t.Errorf("Events(after=%d, limit=1) = %v, %v; want the one event %d", ids[1], after, err, ids[2])
	}
}

// TestGroupCommit drives many concurrent writers so batches hold several ops,
// some refused, and checks every accepted write landed and none refused did.
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

// TestEventIDsPerSession: each session numbers its events from 1, so an
// event ID tells a tenant nothing about other sessions' volume.
func TestEventIDsPerSession(t *testing.T) {
	ctx := context.Background()
	db := open(t, filepath.Join(t.TempDir(), "brain.db"), nil)
	for _, id := range []string{"ses_a", "ses_b"} {
		s, ev := newSession(id, map[string]string{"ses_a": "t1", "ses_b": "t2"}[id])
		if err := db.CreateSession(ctx, s, ev); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		c, ev := newCall(fmt.Sprint("call_a", i), "ses_a", "t1")
		if err := db.CreateCall(ctx, c, ev); err != nil {
			t.Fatal(err)
		}
	}
	c, ev := newCall("call_b", "ses_b", "t2")
	if err := db.CreateCall(ctx, c, ev); err != nil {
		t.Fatal(err)
	}
	for session, want := range map[string][]int64{"ses_a": {1, 2, 3, 4, 5, 6}, "ses_b": {1, 2}} {
		evs, err := db.Events(ctx, session, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, e := range evs {
			got = append(got, e.ID)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s event IDs (-want +got):\n%s", session, diff)
		}
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

// TestSessionStateAfterReopen: the writer's record of sessions starts empty
// in a new process, so status, tenant and the last event ID come from the
// file, and a refused write leaves the record as it was.
func TestSessionStateAfterReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "brain.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ses_open", "ses_closed"} {
		s, ev := newSession(id, "t1")
		if err := db.CreateSession(ctx, s, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.SetSessionStatus(ctx, "t1", "ses_closed", []string{store.SessionActive}, store.SessionClosed, t0,
		&store.Event{Type: store.EventSessionClosed, SessionID: "ses_closed", Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db = open(t, path, nil)
	var se *store.StateError
	c, ev := newCall("call_c", "ses_closed", "t1")
	if err := db.CreateCall(ctx, c, ev); !errors.As(err, &se) || se.Status != store.SessionClosed {
		t.Errorf("CreateCall in closed session after reopen = %v, want StateError closed", err)
	}
	c, ev = newCall("call_t2", "ses_open", "t2")
	if err := db.CreateCall(ctx, c, ev); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CreateCall in other tenant's session after reopen = %v, want ErrNotFound", err)
	}
	if err := db.SetSessionStatus(ctx, "t1", "ses_closed", []string{store.SessionActive}, store.SessionInterrupted, t0,
		&store.Event{Type: store.EventSessionInterrupted, SessionID: "ses_closed", Data: json.RawMessage(`{}`)}); !errors.As(err, &se) {
		t.Errorf("interrupt of closed session = %v, want StateError", err)
	}
	c, ev = newCall("call_ok", "ses_open", "t1")
	if err := db.CreateCall(ctx, c, ev); err != nil {
		t.Fatalf("CreateCall in open session after reopen: %v", err)
	}
	if ev.ID != 2 {
		t.Errorf("tool.call event ID %d, want 2 (after session.created)", ev.ID)
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

// TestWaitingCall walks a call through requires_input, queued and running
// to its end, with the events each step appends, and checks the refusals
// of a step from the wrong status.
func TestWaitingCall(t *testing.T) {
	ctx := context.Background()
	db := open(t, filepath.Join(t.TempDir(), "brain.db"), nil)
	s, sev := newSession("ses_a", "t1")
	if err := db.CreateSession(ctx, s, sev); err != nil {
		t.Fatal(err)
	}
	schema := json.RawMessage(`{"type":"object"}`)
	c, cev := newCall("call_w", "ses_a", "t1")
	c.Status, c.StartedAt, c.InputKind = store.CallRequiresInput, time.Time{}, store.InputApproval
	c.Prompt, c.ResponseSchema, c.ResponseExpiresAt = "approve?", schema, t0.Add(time.Minute)
	c.ParentID, c.CallerType = "", store.CallerAPI
	rev := &store.Event{Type: store.EventToolRequiresInput, SessionID: "ses_a", CallID: "call_w", Time: t0, Data: json.RawMessage(`{}`)}
	if err := db.CreateCall(ctx, c, cev, rev); err != nil {
		t.Fatal(err)
	}
	if cev.ID != 2 || rev.ID != 3 {
		t.Errorf("event ids %d %d, want 2 3", cev.ID, rev.ID)
	}
	child, chev := newCall("call_child", "ses_a", "t1")
	child.ParentID, child.CallerType = "call_w", store.CallerSystem
	if err := db.CreateCall(ctx, child, chev); err != nil {
		t.Fatal(err)
	}
	got, _ := db.Call(ctx, "t1", "call_child")
	if got.ParentID != "call_w" || got.CallerType != store.CallerSystem || got.Ord != c.Ord+1 {
		t.Errorf("child call %+v", got)
	}
	if got, _ := db.Call(ctx, "t1", "call_w"); !cmp.Equal(got, c) {
		t.Errorf("waiting call (-want +got):\n%s", cmp.Diff(c, got))
	}

	var se *store.StateError
	moved := *c
	moved.Status, moved.Prompt, moved.ResponseSchema, moved.ResponseExpiresAt = store.CallQueued, "", nil, time.Time{}
	if err := db.UpdateCall(ctx, &moved, []string{store.CallQueued}); !errors.As(err, &se) || se.Status != store.CallRequiresInput {
		t.Errorf("UpdateCall from the wrong status = %v, want StateError requires_input", err)
	}
	if err := db.UpdateCall(ctx, &store.Call{ID: "nope", Status: store.CallRunning}, []string{store.CallQueued}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateCall of no call = %v", err)
	}
	if err := db.UpdateCall(ctx, &store.Call{ID: "call_w", Status: store.CallSucceeded}, []string{store.CallRequiresInput}); err == nil {
		t.Error("UpdateCall to a final status succeeded")
	}
	answered := &store.Event{Type: store.EventToolResponded, SessionID: "ses_a", CallID: "call_w", Time: t0, Data: json.RawMessage(`{}`)}
	if err := db.UpdateCall(ctx, &moved, []string{store.CallRequiresInput}, answered); err != nil || answered.ID != 5 {
		t.Fatalf("UpdateCall requires_input → queued: %v (event %d)", err, answered.ID)
	}
	moved.Status, moved.StartedAt = store.CallRunning, t0.Add(2*time.Second)
	if err := db.UpdateCall(ctx, &moved, []string{store.CallQueued}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Call(ctx, "t1", "call_w"); !cmp.Equal(got, &moved) {
		t.Errorf("running call (-want +got):\n%s", cmp.Diff(&moved, got))
	}
	no := false
	moved.Status, moved.FinishedAt, moved.Retryable, moved.ErrorCode = store.CallFailed, t0.Add(3*time.Second), &no, "approval_denied"
	moved.Result = json.RawMessage(`{"content":[{"type":"text","text":"denied"}],"is_error":true}`)
	res := &store.Event{Type: store.EventToolResult, SessionID: "ses_a", CallID: "call_w", Time: t0, Data: json.RawMessage(`{}`)}
	if err := db.FinishCall(ctx, &moved, res); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Call(ctx, "t1", "call_w"); !cmp.Equal(got, &moved) {
		t.Errorf("finished call (-want +got):\n%s", cmp.Diff(&moved, got))
	}
	moved.Status = store.CallRunning
	if err := db.UpdateCall(ctx, &moved, []string{store.CallRunning}); !errors.As(err, &se) || se.Status != store.CallFailed {
		t.Errorf("UpdateCall of a finished call = %v, want StateError failed", err)
	}
	evs, _ := db.Events(ctx, "ses_a", 0, 0)
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	want := []string{"session.created", "tool.call", "tool.requires_input", "tool.call", "tool.responded", "tool.result"}
	if !cmp.Equal(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
}
