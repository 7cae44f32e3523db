package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// golden is testdata/session5/golden.json: what the brain of tag
// session5-base answered about the data dir beside it just before it was
// killed (testdata/session5/make.sh).
type golden struct {
	Sessions []struct {
		ID        string          `json:"id"`
		TenantID  string          `json:"tenant_id"`
		Status    string          `json:"status"`
		Harness   *string         `json:"harness"`
		Config    json.RawMessage `json:"config"`
		Tools     []string        `json:"tools"`
		CreatedAt string          `json:"created_at"`
		UpdatedAt string          `json:"updated_at"`
	} `json:"sessions"`
	Calls []struct {
		ID             string          `json:"id"`
		SessionID      string          `json:"session_id"`
		TenantID       string          `json:"tenant_id"`
		Tool           string          `json:"tool"`
		Status         string          `json:"status"`
		Arguments      json.RawMessage `json:"arguments"`
		CreatedAt      string          `json:"created_at"`
		StartedAt      *string         `json:"started_at"`
		FinishedAt     *string         `json:"finished_at"`
		ErrorCode      *string         `json:"error_code"`
		ErrorMessage   *string         `json:"error_message"`
		UnknownOutcome bool            `json:"unknown_outcome"`
		Result         json.RawMessage `json:"result"`
	} `json:"calls"`
	Events map[string][]struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		SessionID string          `json:"session_id"`
		CallID    string          `json:"call_id"`
		Time      string          `json:"time"`
		Data      json.RawMessage `json:"data"`
	} `json:"events"`
}

// copySession5 copies the crashed data dir of testdata/session5 (its
// database and write-ahead log) to a new directory and returns the
// database's path there.
func copySession5(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"brain.db", "brain.db-wal"} {
		data, err := os.ReadFile(filepath.Join("testdata", "session5", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "brain.db")
}

func loadGolden(t *testing.T) *golden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "session5", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Sessions) == 0 || len(g.Calls) == 0 {
		t.Fatal("golden.json has no sessions or calls")
	}
	return &g
}

func parseTime(t *testing.T, s *string) time.Time {
	t.Helper()
	if s == nil {
		return time.Time{}
	}
	v, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		t.Fatal(err)
	}
	return v.UTC()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestUpgradeSession5 opens a data dir that the brain of tag session5-base
// wrote (and was killed in, a call still running) with today's store: the
// migrations bring it to the current version and every session, call and
// event reads as that brain answered, the running call included.
func TestUpgradeSession5(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := copySession5(t)
	g := loadGolden(t)

	applied, version, err := Migrate(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) == 0 || applied[0] != 1 || applied[len(applied)-1] != version {
		t.Errorf("first migrate applied %v, at version %d; want 1..%d", applied, version, version)
	}
	// brain migrate, a second time: nothing to do, nothing changed.
	before := dump(t, path)
	again, version2, err := Migrate(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 || version2 != version {
		t.Errorf("second migrate applied %v, at version %d; want none, %d", again, version2, version)
	}
	if diff := cmp.Diff(before, dump(t, path)); diff != "" {
		t.Errorf("second migrate changed the database (-before +after):\n%s", diff)
	}

	db := open(t, path, nil)
	for _, want := range g.Sessions {
		got, err := db.Session(ctx, want.TenantID, want.ID)
		if err != nil {
			t.Fatalf("session %s: %v", want.ID, err)
		}
		w := &store.Session{ID: want.ID, TenantID: want.TenantID, Status: want.Status, Harness: deref(want.Harness),
			Tools: want.Tools, Config: want.Config, CreatedAt: parseTime(t, &want.CreatedAt), UpdatedAt: parseTime(t, &want.UpdatedAt)}
		if diff := cmp.Diff(w, got, cmp.Comparer(jsonEqual)); diff != "" {
			t.Errorf("session %s (-want +got):\n%s", want.ID, diff)
		}
		evs, err := db.Events(ctx, want.ID, 0, store.MaxListLimit)
		if err != nil {
			t.Fatal(err)
		}
		var wantEvs []store.Event
		for _, e := range g.Events[want.ID] {
			id, _ := strconv.ParseInt(e.ID, 10, 64)
			wantEvs = append(wantEvs, store.Event{ID: id, Type: e.Type, SessionID: e.SessionID, CallID: e.CallID,
				Time: parseTime(t, &e.Time), Data: e.Data})
		}
		if diff := cmp.Diff(wantEvs, evs, cmp.Comparer(jsonEqual)); diff != "" {
			t.Errorf("events of %s (-want +got):\n%s", want.ID, diff)
		}
	}
	running := 0
	var ords []*store.Call
	for _, want := range g.Calls {
		got, err := db.Call(ctx, want.TenantID, want.ID)
		if err != nil {
			t.Fatalf("call %s: %v", want.ID, err)
		}
		var result json.RawMessage
		if string(want.Result) != "null" {
			result = want.Result
		}
		w := &store.Call{ID: want.ID, SessionID: want.SessionID, TenantID: want.TenantID, Tool: want.Tool, Status: want.Status,
			Arguments: want.Arguments, CreatedAt: parseTime(t, &want.CreatedAt), StartedAt: parseTime(t, want.StartedAt),
			FinishedAt: parseTime(t, want.FinishedAt), ErrorCode: deref(want.ErrorCode), ErrorMessage: deref(want.ErrorMessage),
			UnknownOutcome: want.UnknownOutcome, Result: result}
		// The fields calls that wait brought (schema version 3): made by
		// an application, retryable once failed only when cancelled before
		// it was sent; ord is checked below.
		w.CallerType = store.CallerAPI
		switch w.Status {
		case store.CallFailed, store.CallCancelled, store.CallTimedOut:
			r := !w.UnknownOutcome && w.ErrorCode == "cancelled"
			w.Retryable = &r
		}
		if diff := cmp.Diff(w, got, cmp.Comparer(jsonEqual), cmpopts.IgnoreFields(store.Call{}, "Ord")); diff != "" {
			t.Errorf("call %s (-want +got):\n%s", want.ID, diff)
		}
		ords = append(ords, got)
		if want.Status == store.CallRunning {
			running++
		}
	}
	// ord numbers the calls 1..N in the order they were created.
	slices.SortFunc(ords, func(a, b *store.Call) int { return int(a.Ord - b.Ord) })
	for i, c := range ords {
		if c.Ord != int64(i+1) || i > 0 && c.CreatedAt.Before(ords[i-1].CreatedAt) {
			t.Errorf("call %s has ord %d (created %v), want 1..%d in creation order", c.ID, c.Ord, c.CreatedAt, len(ords))
		}
	}
	unfinished, err := db.UnfinishedCalls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(unfinished) != running || running == 0 {
		t.Errorf("unfinished calls after the upgrade: %d, want the %d the crash left running", len(unfinished), running)
	}
	// And the upgraded store goes on: a new event follows the session's last.
	last := g.Sessions[len(g.Sessions)-1]
	if last.Status == store.SessionActive {
		c, ev := newCall("call_after_upgrade", last.ID, last.TenantID)
		if err := db.CreateCall(ctx, c, ev); err != nil {
			t.Fatal(err)
		}
		if want := int64(len(g.Events[last.ID]) + 1); ev.ID != want {
			t.Errorf("first event after the upgrade has id %d, want %d", ev.ID, want)
		}
	}
}

// jsonEqual compares two JSON documents by value: golden.json is indented.
func jsonEqual(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	return cmp.Equal(x, y)
}

// dump returns every row of every table of the database at path, and its
// schema, as text.
func dump(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []string
	rows, err := db.Query(`SELECT type, name, COALESCE(sql, '') FROM sqlite_schema ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var typ, name, def string
		if err := rows.Scan(&typ, &name, &def); err != nil {
			t.Fatal(err)
		}
		out = append(out, typ+" "+name+": "+def)
		if typ == "table" {
			tables = append(tables, name)
		}
	}
	rows.Close()
	for _, table := range tables {
		rows, err := db.Query(`SELECT * FROM "` + table + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(vals)
			out = append(out, table+": "+string(b))
		}
		rows.Close()
	}
	slices.Sort(out)
	return out
}
