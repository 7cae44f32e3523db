// Package storetest is the one test suite every store.Store passes: the
// SQLite store and the PostgreSQL store run the same cases, so that brain
// behaves the same on either.
//
// A backend's test calls Run with an Opener; each case opens its own new,
// empty database through it.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/google/go-cmp/cmp"
)

// Opener makes a new, empty database for t and returns a function that
// opens a store on it — the same database each time it is called, so that
// a case can close a store and open it again, as a restarted brain does.
// Stores it opens are closed when t ends (Close twice must be harmless).
// onCommit is the store's commit hook (nil: none).
type Opener func(t *testing.T) func(onCommit func(store.Event)) store.Store

// Run runs every case of the suite against the backend of open.
func Run(t *testing.T, open Opener) {
	cases := []struct {
		name string
		fn   func(*testing.T, func(func(store.Event)) store.Store)
	}{
		{"Lifecycle", testLifecycle},
		{"ConcurrentWriters", testConcurrentWriters},
		{"EventIDsPerSession", testEventIDsPerSession},
		{"StateAfterReopen", testStateAfterReopen},
		{"ListCalls", testListCalls},
		{"DeleteEnded", testDeleteEnded},
		{"Refusals", testRefusals},
		{"WaitingCall", testWaitingCall},
		{"PendingWithdrawal", testPendingWithdrawal},
		{"CustomTools", testCustomTools},
		{"CustomToolRace", testCustomToolRace},
		{"Secrets", testSecrets},
		{"Toolsets", testToolsets},
		{"SessionTools", testSessionTools},
		{"CatalogAfterReopen", testCatalogAfterReopen},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, open(t))
		})
	}
}

// T0 is the time of the sessions, calls and events the suite writes.
var T0 = time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)

// NewSession returns an active session of tenant with its session.created
// event.
func NewSession(id, tenant string) (*store.Session, *store.Event) {
	return &store.Session{ID: id, TenantID: tenant, Status: store.SessionActive, Tools: []string{"echo"},
			Config: json.RawMessage(`{"tools":["echo"]}`), CreatedAt: T0, UpdatedAt: T0},
		&store.Event{Type: store.EventSessionCreated, SessionID: id, Time: T0, Data: json.RawMessage(`{}`)}
}

// NewCall returns a running echo call with its tool.call event.
func NewCall(id, session, tenant string) (*store.Call, *store.Event) {
	return &store.Call{ID: id, SessionID: session, TenantID: tenant, Tool: "echo", Status: store.CallRunning,
			Arguments: json.RawMessage(`{"text":"hi"}`), CreatedAt: T0, StartedAt: T0},
		&store.Event{Type: store.EventToolCall, SessionID: session, CallID: id, Time: T0, Data: json.RawMessage(`{"tool":"echo"}`)}
}

// Finish returns c finished with status at time at, and its tool.result event.
func Finish(c *store.Call, status string, at time.Time) (*store.Call, *store.Event) {
	f := *c
	f.Status, f.FinishedAt, f.Result = status, at, json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)
	return &f, &store.Event{Type: store.EventToolResult, SessionID: c.SessionID, CallID: c.ID, Time: at, Data: json.RawMessage(`{}`)}
}

// spanID is c's SpanID, "" for no call.
func spanID(c *store.Call) string {
	if c == nil {
		return ""
	}
	return c.SpanID
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ids(evs []store.Event) []int64 {
	out := []int64{}
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// hook records what a store's commit hook receives.
type hook struct {
	mu  sync.Mutex
	evs []store.Event
}

func (h *hook) add(ev store.Event) {
	h.mu.Lock()
	h.evs = append(h.evs, ev)
	h.mu.Unlock()
}

func (h *hook) ids() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return ids(h.evs)
}

func testLifecycle(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	h := &hook{}
	db := open(h.add)
	s, ev := NewSession("ses_a", "t1")
	s.Harness = "pi"
	must(t, db.CreateSession(ctx, s, ev))
	if ev.ID != 1 {
		t.Fatalf("session.created id = %d, want 1", ev.ID)
	}
	got, err := db.Session(ctx, "t1", "ses_a")
	must(t, err)
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("session (-want +got):\n%s", diff)
	}
	c, cev := NewCall("call_1", "ses_a", "t1")
	must(t, db.CreateCall(ctx, c, cev))
	if cev.ID != 2 {
		t.Errorf("tool.call id = %d, want 2", cev.ID)
	}
	gotCall, err := db.Call(ctx, "t1", "call_1")
	must(t, err)
	if diff := cmp.Diff(c, gotCall); diff != "" {
		t.Errorf("running call (-want +got):\n%s", diff)
	}
	// A session is not ended while a call of it is unfinished.
	if err := db.SetSessionStatus(ctx, "t1", "ses_a", []string{store.SessionActive}, store.SessionInterrupted, T0,
		&store.Event{Type: store.EventSessionInterrupted, SessionID: "ses_a", Time: T0, Data: json.RawMessage(`{}`)}); !errors.Is(err, store.ErrCallsInFlight) {
		t.Errorf("interrupt with a call running = %v, want ErrCallsInFlight", err)
	}
	f, rev := Finish(c, store.CallSucceeded, T0.Add(time.Second))
	f.ErrorCode, f.ErrorMessage, f.UnknownOutcome = "x_code", "x message", true
	must(t, db.FinishCall(ctx, f, rev))
	gotCall, err = db.Call(ctx, "t1", "call_1")
	must(t, err)
	if diff := cmp.Diff(f, gotCall); diff != "" {
		t.Errorf("finished call (-want +got):\n%s", diff)
	}
	var se *store.StateError
	again, aev := Finish(c, store.CallFailed, T0)
	if err := db.FinishCall(ctx, again, aev); !errors.As(err, &se) || se.Status != store.CallSucceeded || se.What != "tool call" {
		t.Errorf("second FinishCall = %v, want StateError tool call succeeded", err)
	}
	must(t, db.SetSessionStatus(ctx, "t1", "ses_a", []string{store.SessionActive}, store.SessionInterrupted, T0.Add(2*time.Second),
		&store.Event{Type: store.EventSessionInterrupted, SessionID: "ses_a", Time: T0, Data: json.RawMessage(`{}`)}))
	got, err = db.Session(ctx, "t1", "ses_a")
	must(t, err)
	if got.Status != store.SessionInterrupted || !got.UpdatedAt.Equal(T0.Add(2*time.Second)) {
		t.Errorf("after interrupt: status %s, updated_at %v", got.Status, got.UpdatedAt)
	}
	c2, c2ev := NewCall("call_2", "ses_a", "t1")
	if err := db.CreateCall(ctx, c2, c2ev); !errors.As(err, &se) || se.Status != store.SessionInterrupted || se.What != "session" {
		t.Errorf("CreateCall in interrupted session = %v, want StateError session interrupted", err)
	}
	evs, err := db.Events(ctx, "ses_a", 0, 100)
	must(t, err)
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
		if e.SessionID != "ses_a" || !e.Time.Equal(T0) && e.Type != store.EventToolResult {
			t.Errorf("event %d: session %q time %v", e.ID, e.SessionID, e.Time)
		}
	}
	if diff := cmp.Diff([]string{"session.created", "tool.call", "tool.result", "session.interrupted"}, types); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(store.Event{ID: 2, Type: store.EventToolCall, SessionID: "ses_a", CallID: "call_1", Time: T0,
		Data: json.RawMessage(`{"tool":"echo"}`)}, evs[1]); diff != "" {
		t.Errorf("tool.call event (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ids(evs), h.ids()); diff != "" {
		t.Errorf("commit hook ids differ from stored (-stored +hook):\n%s", diff)
	}
	after, err := db.Events(ctx, "ses_a", 2, 1)
	if err != nil || len(after) != 1 || after[0].ID != 3 {
		t.Errorf("Events(after=2, limit=1) = %v, %v; want event 3 alone", after, err)
	}
	closed := store.SessionClosed
	must(t, db.SetSessionStatus(ctx, "t1", "ses_a", []string{store.SessionActive, store.SessionInterrupted}, closed, T0,
		&store.Event{Type: store.EventSessionClosed, SessionID: "ses_a", Time: T0, Data: json.RawMessage(`{}`)}))
	if err := db.SetSessionStatus(ctx, "t1", "ses_a", []string{store.SessionActive}, store.SessionInterrupted, T0,
		&store.Event{Type: store.EventSessionInterrupted, SessionID: "ses_a", Time: T0, Data: json.RawMessage(`{}`)}); !errors.As(err, &se) || se.Status != closed {
		t.Errorf("interrupt of closed session = %v, want StateError closed", err)
	}
}

func testRefusals(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	db := open(nil)
	s, ev := NewSession("ses_a", "t1")
	must(t, db.CreateSession(ctx, s, ev))
	c, cev := NewCall("call_1", "ses_a", "t1")
	must(t, db.CreateCall(ctx, c, cev))
	tests := []struct {
		name string
		err  error
	}{
		{"other tenant's session", func() error { _, err := db.Session(ctx, "t2", "ses_a"); return err }()},
		{"other tenant's call", func() error { _, err := db.Call(ctx, "t2", "call_1"); return err }()},
		{"unknown session", func() error { _, err := db.Session(ctx, "t1", "nope"); return err }()},
		{"unknown call", func() error { _, err := db.Call(ctx, "t1", "nope"); return err }()},
		{"status of other tenant's session", db.SetSessionStatus(ctx, "t2", "ses_a", []string{store.SessionActive}, store.SessionClosed, T0,
			&store.Event{Type: store.EventSessionClosed, SessionID: "ses_a", Data: json.RawMessage(`{}`)})},
		{"call in other tenant's session", func() error { c, ev := NewCall("call_x", "ses_a", "t2"); return db.CreateCall(ctx, c, ev) }()},
		{"call in unknown session", func() error { c, ev := NewCall("call_y", "nope", "t1"); return db.CreateCall(ctx, c, ev) }()},
		{"finish unknown call", func() error {
			f, ev := Finish(&store.Call{ID: "nope", SessionID: "ses_a"}, store.CallFailed, T0)
			return db.FinishCall(ctx, f, ev)
		}()},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, store.ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", tt.name, tt.err)
		}
	}
	// Refused writes appended nothing.
	evs, err := db.Events(ctx, "ses_a", 0, 100)
	must(t, err)
	if diff := cmp.Diff([]int64{1, 2}, ids(evs)); diff != "" {
		t.Errorf("events after refused writes (-want +got):\n%s", diff)
	}
	if _, err := db.DeleteEnded(ctx, T0, 0); err == nil {
		t.Error("DeleteEnded with limit 0: no error")
	}
}

// testConcurrentWriters drives many concurrent writers, some refused, and
// checks every accepted write landed, none refused did, and each session's
// events are numbered 1..N with the hook seeing them rising.
func testConcurrentWriters(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	var (
		mu   sync.Mutex
		last = map[string]int64{}
		bad  []string
	)
	db := open(func(ev store.Event) {
		mu.Lock()
		if ev.ID <= last[ev.SessionID] {
			bad = append(bad, fmt.Sprintf("%s: %d after %d", ev.SessionID, ev.ID, last[ev.SessionID]))
		}
		last[ev.SessionID] = ev.ID
		mu.Unlock()
	})
	for i := range 4 {
		s, ev := NewSession(fmt.Sprint("ses_", i), "t1")
		if i%2 == 1 {
			s.Status = store.SessionClosed
		}
		must(t, db.CreateSession(ctx, s, ev))
	}
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Go(func() {
			c, ev := NewCall(fmt.Sprintf("call_%03d", i), fmt.Sprint("ses_", i%4), "t1")
			if errs[i] = db.CreateCall(ctx, c, ev); errs[i] == nil && i%3 == 0 {
				f, fev := Finish(c, store.CallSucceeded, T0)
				errs[i] = db.FinishCall(ctx, f, fev)
			}
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
	mu.Lock()
	if len(bad) > 0 {
		t.Errorf("commit hook saw IDs fall within a session: %v", bad)
	}
	mu.Unlock()
	calls, err := db.Calls(ctx, store.CallFilter{TenantID: "t1"})
	must(t, err)
	if len(calls) != 100 {
		t.Errorf("stored %d calls, want 100", len(calls))
	}
	unfinished, err := db.UnfinishedCalls(ctx)
	must(t, err)
	finished := 0
	for i := 0; i < 200; i += 2 {
		if i%3 == 0 {
			finished++
		}
	}
	if len(unfinished) != 100-finished {
		t.Errorf("UnfinishedCalls = %d, want %d", len(unfinished), 100-finished)
	}
	for _, s := range []string{"ses_0", "ses_2"} {
		evs, err := db.Events(ctx, s, 0, 0)
		must(t, err)
		want := make([]int64, 0, len(evs))
		for i := range len(evs) {
			want = append(want, int64(i+1))
		}
		if diff := cmp.Diff(want, ids(evs)); diff != "" || len(evs) < 51 {
			t.Errorf("event ids of %s: %d events, want 1..N with N ≥ 51 (-want +got):\n%s", s, len(evs), diff)
		}
	}
}

// testEventIDsPerSession: each session numbers its events from 1, so an
// event ID tells a tenant nothing about other sessions' volume.
func testEventIDsPerSession(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	db := open(nil)
	for id, tenant := range map[string]string{"ses_a": "t1", "ses_b": "t2"} {
		s, ev := NewSession(id, tenant)
		must(t, db.CreateSession(ctx, s, ev))
	}
	for i := range 5 {
		c, ev := NewCall(fmt.Sprint("call_a", i), "ses_a", "t1")
		must(t, db.CreateCall(ctx, c, ev))
	}
	c, ev := NewCall("call_b", "ses_b", "t2")
	must(t, db.CreateCall(ctx, c, ev))
	for session, want := range map[string][]int64{"ses_a": {1, 2, 3, 4, 5, 6}, "ses_b": {1, 2}} {
		evs, err := db.Events(ctx, session, 0, 100)
		must(t, err)
		if diff := cmp.Diff(want, ids(evs)); diff != "" {
			t.Errorf("%s event IDs (-want +got):\n%s", session, diff)
		}
	}
}

// testStateAfterReopen: a store opened again (a restarted brain) takes
// status, tenant and the last event ID of each session from the database,
// and a call's span_id and the count of active sessions too.
func testStateAfterReopen(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	db := open(nil)
	for _, id := range []string{"ses_open", "ses_closed"} {
		s, ev := NewSession(id, "t1")
		must(t, db.CreateSession(ctx, s, ev))
	}
	must(t, db.SetSessionStatus(ctx, "t1", "ses_closed", []string{store.SessionActive}, store.SessionClosed, T0,
		&store.Event{Type: store.EventSessionClosed, SessionID: "ses_closed", Data: json.RawMessage(`{}`)}))
	c, ev := NewCall("call_left", "ses_open", "t1")
	c.SpanID = "00f067aa0ba902b7"
	must(t, db.CreateCall(ctx, c, ev))
	must(t, db.Close())

	db = open(nil)
	if got, err := db.Call(ctx, "t1", "call_left"); err != nil || got.SpanID != c.SpanID {
		t.Errorf("Call after reopen: span_id %q, %v; want %q", spanID(got), err, c.SpanID)
	}
	if n, err := db.ActiveSessions(ctx); err != nil || n != 1 {
		t.Errorf("ActiveSessions after reopen = %d, %v; want 1 (ses_open; ses_closed is closed)", n, err)
	}
	var se *store.StateError
	c, ev = NewCall("call_c", "ses_closed", "t1")
	if err := db.CreateCall(ctx, c, ev); !errors.As(err, &se) || se.Status != store.SessionClosed {
		t.Errorf("CreateCall in closed session after reopen = %v, want StateError closed", err)
	}
	c, ev = NewCall("call_t2", "ses_open", "t2")
	if err := db.CreateCall(ctx, c, ev); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CreateCall in other tenant's session after reopen = %v, want ErrNotFound", err)
	}
	if err := db.SetSessionStatus(ctx, "t1", "ses_closed", []string{store.SessionActive}, store.SessionInterrupted, T0,
		&store.Event{Type: store.EventSessionInterrupted, SessionID: "ses_closed", Data: json.RawMessage(`{}`)}); !errors.As(err, &se) {
		t.Errorf("interrupt of closed session = %v, want StateError", err)
	}
	c, ev = NewCall("call_ok", "ses_open", "t1")
	must(t, db.CreateCall(ctx, c, ev))
	if ev.ID != 3 {
		t.Errorf("tool.call event ID %d, want 3 (after session.created and the first call)", ev.ID)
	}
	unfinished, err := db.UnfinishedCalls(ctx)
	must(t, err)
	var got []string
	for _, c := range unfinished {
		got = append(got, c.ID)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"call_left", "call_ok"}, got); diff != "" {
		t.Errorf("unfinished calls after reopen (-want +got):\n%s", diff)
	}
}

// testListCalls: filters, limit and paging with After.
func testListCalls(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	db := open(nil)
	for id, tenant := range map[string]string{"ses_a": "t1", "ses_b": "t1", "ses_c": "t2"} {
		s, ev := NewSession(id, tenant)
		must(t, db.CreateSession(ctx, s, ev))
	}
	// Calls in ses_a, then ses_b, so creation order and session order agree.
	var want []string
	for i := range 10 {
		sess := "ses_a"
		if i >= 6 {
			sess = "ses_b"
		}
		id := fmt.Sprintf("call_%02d", i)
		c, ev := NewCall(id, sess, "t1")
		if i%2 == 1 {
			c.Tool = "other"
		}
		must(t, db.CreateCall(ctx, c, ev))
		if i%3 == 0 {
			f, fev := Finish(c, store.CallFailed, T0)
			must(t, db.FinishCall(ctx, f, fev))
		}
		want = append(want, id)
	}
	c, ev := NewCall("call_t2", "ses_c", "t2")
	must(t, db.CreateCall(ctx, c, ev))
	list := func(f store.CallFilter) []string {
		t.Helper()
		calls, err := db.Calls(ctx, f)
		must(t, err)
		out := []string{}
		for _, c := range calls {
			out = append(out, c.ID)
		}
		return out
	}
	tests := []struct {
		name string
		f    store.CallFilter
		want []string
	}{
		{"all of t1", store.CallFilter{TenantID: "t1"}, want},
		{"t2 sees its own", store.CallFilter{TenantID: "t2"}, []string{"call_t2"}},
		{"by session", store.CallFilter{TenantID: "t1", SessionID: "ses_b"}, want[6:]},
		{"other tenant's session", store.CallFilter{TenantID: "t2", SessionID: "ses_a"}, []string{}},
		{"by tool", store.CallFilter{TenantID: "t1", Tool: "other"}, []string{"call_01", "call_03", "call_05", "call_07", "call_09"}},
		{"by status", store.CallFilter{TenantID: "t1", Status: store.CallFailed}, []string{"call_00", "call_03", "call_06", "call_09"}},
		{"status and session", store.CallFilter{TenantID: "t1", SessionID: "ses_a", Status: store.CallRunning}, []string{"call_01", "call_02", "call_04", "call_05"}},
		{"limit", store.CallFilter{TenantID: "t1", Limit: 3}, want[:3]},
		{"after", store.CallFilter{TenantID: "t1", After: "call_02", Limit: 3}, want[3:6]},
		{"after, filtered", store.CallFilter{TenantID: "t1", After: "call_02", Tool: "other"}, []string{"call_03", "call_05", "call_07", "call_09"}},
		{"after the last", store.CallFilter{TenantID: "t1", After: "call_09"}, []string{}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, list(tt.f)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// testDeleteEnded: exactly the sessions that ended before the limit go,
// with their calls and events, in batches of at most limit rows; active
// sessions and later ones stay whole.
func testDeleteEnded(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	db := open(nil)
	type sess struct {
		id, status string
		ended      time.Time
		calls      int
	}
	cutoff := T0.Add(time.Hour)
	sessions := []sess{
		{"ses_old_closed", store.SessionClosed, T0, 7},
		{"ses_old_interrupted", store.SessionInterrupted, T0.Add(time.Minute), 3},
		{"ses_old_empty", store.SessionClosed, T0.Add(2 * time.Minute), 0},
		{"ses_new_closed", store.SessionClosed, cutoff.Add(time.Second), 2},
		{"ses_active", store.SessionActive, T0, 4},
		{"ses_at_cutoff", store.SessionClosed, cutoff, 1},
	}
	var wantGone store.Removed
	for _, s := range sessions {
		ss, ev := NewSession(s.id, "t1")
		must(t, db.CreateSession(ctx, ss, ev))
		for i := range s.calls {
			c, cev := NewCall(fmt.Sprintf("%s_call_%d", s.id, i), s.id, "t1")
			must(t, db.CreateCall(ctx, c, cev))
			f, fev := Finish(c, store.CallSucceeded, T0)
			must(t, db.FinishCall(ctx, f, fev))
		}
		events := int64(1 + 2*s.calls)
		if s.status != store.SessionActive {
			must(t, db.SetSessionStatus(ctx, "t1", s.id, []string{store.SessionActive}, s.status, s.ended,
				&store.Event{Type: "session." + s.status, SessionID: s.id, Time: s.ended, Data: json.RawMessage(`{}`)}))
			events++
		}
		if store.Ended(s.status) && s.ended.Before(cutoff) {
			wantGone.Sessions++
			wantGone.Calls += int64(s.calls)
			wantGone.Events += events
		}
	}
	var got store.Removed
	for batches := 0; ; batches++ {
		if batches > 100 {
			t.Fatal("DeleteEnded never reached zero")
		}
		rm, err := db.DeleteEnded(ctx, cutoff, 4)
		must(t, err)
		if rm.Total() > 4 {
			t.Errorf("one batch removed %d rows, limit 4", rm.Total())
		}
		if rm.Total() == 0 {
			break
		}
		got.Sessions += rm.Sessions
		got.Calls += rm.Calls
		got.Events += rm.Events
	}
	if got != wantGone {
		t.Errorf("removed %+v, want %+v", got, wantGone)
	}
	for _, s := range sessions {
		_, err := db.Session(ctx, "t1", s.id)
		evs, evErr := db.Events(ctx, s.id, 0, 1000)
		must(t, evErr)
		calls, callErr := db.Calls(ctx, store.CallFilter{TenantID: "t1", SessionID: s.id})
		must(t, callErr)
		gone := store.Ended(s.status) && s.ended.Before(cutoff)
		switch {
		case gone && (!errors.Is(err, store.ErrNotFound) || len(evs) > 0 || len(calls) > 0):
			t.Errorf("%s: still there after retention (session err %v, %d events, %d calls)", s.id, err, len(evs), len(calls))
		case !gone && (err != nil || len(calls) != s.calls || len(evs) == 0):
			t.Errorf("%s: lost by retention (session err %v, %d events, %d calls)", s.id, err, len(evs), len(calls))
		}
	}
}

// testWaitingCall: a call stored waiting (requires_input) with its prompt
// and response fields, a nested call, and UpdateCall moving a call on only
// from the statuses it names.
func testWaitingCall(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	db := open(nil)
	s, sev := NewSession("ses_a", "t1")
	if err := db.CreateSession(ctx, s, sev); err != nil {
		t.Fatal(err)
	}
	schema := json.RawMessage(`{"type":"object"}`)
	c, cev := NewCall("call_w", "ses_a", "t1")
	c.Status, c.StartedAt, c.InputKind = store.CallRequiresInput, time.Time{}, store.InputApproval
	c.Prompt, c.ResponseSchema, c.ResponseExpiresAt = "approve?", schema, T0.Add(time.Minute)
	c.ParentID, c.CallerType = "", store.CallerAPI
	rev := &store.Event{Type: store.EventToolRequiresInput, SessionID: "ses_a", CallID: "call_w", Time: T0, Data: json.RawMessage(`{}`)}
	if err := db.CreateCall(ctx, c, cev, rev); err != nil {
		t.Fatal(err)
	}
	if cev.ID != 2 || rev.ID != 3 {
		t.Errorf("event ids %d %d, want 2 3", cev.ID, rev.ID)
	}
	child, chev := NewCall("call_child", "ses_a", "t1")
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
	answered := &store.Event{Type: store.EventToolResponded, SessionID: "ses_a", CallID: "call_w", Time: T0, Data: json.RawMessage(`{}`)}
	if err := db.UpdateCall(ctx, &moved, []string{store.CallRequiresInput}, answered); err != nil || answered.ID != 5 {
		t.Fatalf("UpdateCall requires_input → queued: %v (event %d)", err, answered.ID)
	}
	moved.Status, moved.StartedAt = store.CallRunning, T0.Add(2*time.Second)
	if err := db.UpdateCall(ctx, &moved, []string{store.CallQueued}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Call(ctx, "t1", "call_w"); !cmp.Equal(got, &moved) {
		t.Errorf("running call (-want +got):\n%s", cmp.Diff(&moved, got))
	}
	no := false
	moved.Status, moved.FinishedAt, moved.Retryable, moved.ErrorCode = store.CallFailed, T0.Add(3*time.Second), &no, "approval_denied"
	moved.Result = json.RawMessage(`{"content":[{"type":"text","text":"denied"}],"is_error":true}`)
	res := &store.Event{Type: store.EventToolResult, SessionID: "ses_a", CallID: "call_w", Time: T0, Data: json.RawMessage(`{}`)}
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

// testPendingWithdrawal: an approval call finished with a pending
// withdrawal keeps it, past a reopen and past its session's end, is listed
// for recovery until it is cleared, and, in a shared store, stays leased
// to its owner: renewed with the owner's leases, claimed by another once
// they ran out.
func testPendingWithdrawal(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	db := open(nil)
	s, sev := NewSession("ses_a", "t1")
	must(t, db.CreateSession(ctx, s, sev))
	gate, gev := NewCall("call_g", "ses_a", "t1")
	gate.Status, gate.StartedAt, gate.InputKind, gate.ResponseExpiresAt = store.CallRequiresInput, time.Time{}, store.InputApproval, T0.Add(time.Minute)
	must(t, db.CreateCall(ctx, gate, gev))
	child, chev := NewCall("call_a", "ses_a", "t1")
	child.ParentID, child.CallerType = "call_g", store.CallerSystem
	must(t, db.CreateCall(ctx, child, chev))
	other, oev := NewCall("call_o", "ses_a", "t1")
	must(t, db.CreateCall(ctx, other, oev))

	until := T0.Add(time.Hour)
	f, fev := Finish(gate, store.CallCancelled, T0.Add(time.Second))
	must(t, db.FinishCall(ctx, f, fev))
	f, fev = Finish(other, store.CallSucceeded, T0.Add(time.Second))
	must(t, db.FinishCall(ctx, f, fev))
	f, fev = Finish(child, store.CallCancelled, T0.Add(time.Second))
	f.WithdrawUntil = until
	must(t, db.FinishCall(ctx, f, fev))
	if got, _ := db.Call(ctx, "t1", "call_a"); got == nil || !got.WithdrawUntil.Equal(until) {
		t.Fatalf("approval call finished with a pending withdrawal: %+v", got)
	}
	// A pending withdrawal is no call in flight: the session ends.
	ev := &store.Event{Type: store.EventSessionInterrupted, SessionID: "ses_a", Time: T0, Data: json.RawMessage(`{}`)}
	must(t, db.SetSessionStatus(ctx, "t1", "ses_a", []string{store.SessionActive}, store.SessionInterrupted, T0, ev))
	// Retention keeps the session while the withdrawal is pending: the
	// next brain needs the approval call's row to send it.
	if rm, err := db.DeleteEnded(ctx, T0.Add(time.Hour), 100); err != nil || rm != (store.Removed{}) {
		t.Errorf("DeleteEnded with a withdrawal pending = %+v, %v; want nothing removed", rm, err)
	}

	pending := func(db store.Store) []string {
		t.Helper()
		cs, err := db.PendingWithdrawals(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			if !c.WithdrawUntil.Equal(until) || c.Status != store.CallCancelled {
				t.Errorf("pending withdrawal %+v", c)
			}
			out = append(out, c.ID)
		}
		return out
	}
	must(t, db.Close())
	db = open(nil)
	if got := pending(db); !cmp.Equal(got, []string{"call_a"}) {
		t.Errorf("PendingWithdrawals after a reopen = %v, want [call_a]", got)
	}
	if cs, err := db.UnfinishedCalls(ctx); err != nil || len(cs) != 0 {
		t.Errorf("UnfinishedCalls = %d calls, %v; want none", len(cs), err)
	}

	// Claims are made by a replica of their own (another process: a
	// replica never claims its own calls); db renews.
	sh, shared := db.(store.Shared)
	claim := func(by store.Store, now time.Time) []string {
		t.Helper()
		cs, err := by.(store.Shared).ClaimExpired(ctx, now, now.Add(10*time.Minute), 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	if shared {
		now := time.Now()
		if got := claim(db, now); len(got) != 0 {
			t.Errorf("claimed %v while its owner's lease holds", got)
		}
		// db, the replica of the reopen, claims the first's call; another
		// claims it from db once db's renewed lease ran out, and carries on.
		if got := claim(db, now.Add(time.Hour)); !cmp.Equal(got, []string{"call_a"}) {
			t.Errorf("claimed %v once the lease ran out, want [call_a]", got)
		}
		_, err := sh.RenewLeases(ctx, now.Add(2*time.Hour), nil)
		must(t, err)
		next := open(nil)
		if got := claim(next, now.Add(time.Hour+30*time.Minute)); len(got) != 0 {
			t.Errorf("claimed %v before the renewed lease ran out", got)
		}
		if got := claim(next, now.Add(3*time.Hour)); !cmp.Equal(got, []string{"call_a"}) {
			t.Errorf("claimed %v once the renewed lease ran out, want [call_a]", got)
		}
		must(t, db.Close())
		db, sh = next, next.(store.Shared)
	}

	must(t, db.ClearWithdrawal(ctx, "call_a"))
	must(t, db.ClearWithdrawal(ctx, "call_a"))
	must(t, db.ClearWithdrawal(ctx, "nope"))
	if got, _ := db.Call(ctx, "t1", "call_a"); got == nil || !got.WithdrawUntil.IsZero() || got.Status != store.CallCancelled {
		t.Errorf("approval call after ClearWithdrawal: %+v", got)
	}
	if got := pending(db); len(got) != 0 {
		t.Errorf("PendingWithdrawals after ClearWithdrawal = %v, want none", got)
	}
	if shared {
		_, err := sh.RenewLeases(ctx, time.Now().Add(time.Hour), nil)
		must(t, err)
		if got := claim(open(nil), time.Now().Add(100*time.Hour)); len(got) != 0 {
			t.Errorf("claimed %v after ClearWithdrawal", got)
		}
	}
	if rm, err := db.DeleteEnded(ctx, T0.Add(time.Hour), 100); err != nil || rm.Sessions != 1 || rm.Calls != 3 {
		t.Errorf("DeleteEnded once the withdrawal is over = %+v, %v; want the session and its 3 calls", rm, err)
	}
}

// Load is write load on a store: writers, each with a session of its own
// (ses_w0, ses_w1…), create and finish calls one after another until Stop.
type Load struct {
	stop  atomic.Bool
	wrote atomic.Int64
	wg    sync.WaitGroup
}

// StartLoad starts writers on db; a failed write fails t.
func StartLoad(t *testing.T, db store.Store, writers int) *Load {
	ctx := context.Background()
	l := &Load{}
	for w := range writers {
		l.wg.Go(func() {
			sid := fmt.Sprintf("ses_w%d", w)
			s, ev := NewSession(sid, "t1")
			if err := db.CreateSession(ctx, s, ev); err != nil {
				t.Error(err)
				return
			}
			for i := 0; !l.stop.Load(); i++ {
				c, cev := NewCall(fmt.Sprintf("call_w%d_%06d", w, i), sid, "t1")
				if err := db.CreateCall(ctx, c, cev); err != nil {
					t.Error(err)
					return
				}
				f, fev := Finish(c, store.CallSucceeded, time.Now())
				if err := db.FinishCall(ctx, f, fev); err != nil {
					t.Error(err)
					return
				}
				l.wrote.Add(1)
			}
		})
	}
	return l
}

// WaitFor waits until the writers finished n calls.
func (l *Load) WaitFor(n int64) {
	for l.wrote.Load() < n {
		time.Sleep(5 * time.Millisecond)
	}
}

// Stop stops the writers and returns the calls they finished.
func (l *Load) Stop() int64 {
	l.stop.Store(true)
	l.wg.Wait()
	return l.wrote.Load()
}
