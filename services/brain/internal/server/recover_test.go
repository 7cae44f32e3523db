package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/brain-tools/suite/services/brain/internal/store/sqlite"
	"github.com/google/go-cmp/cmp"
)

// TestRecoverUnfinished: a call a previous process left running ends failed
// with brain_restarted, is_error and unknown_outcome, with a tool.result
// event; one it left queued was never sent, and is sent now, once;
// finished calls are untouched.
func TestRecoverUnfinished(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "brain.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	sess := &store.Session{ID: "ses_1", TenantID: "t1", Status: store.SessionActive, Tools: []string{"slow"}, Config: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.CreateSession(ctx, sess, &store.Event{Type: store.EventSessionCreated, SessionID: "ses_1", Time: now, Data: json.RawMessage(`{}`)}))
	for _, c := range []struct{ id, status string }{{"call_q", store.CallQueued}, {"call_r", store.CallRunning}, {"call_done", store.CallRunning}} {
		must(db.CreateCall(ctx, &store.Call{ID: c.id, SessionID: "ses_1", TenantID: "t1", Tool: "slow", Status: c.status, Arguments: json.RawMessage(`{}`), CreatedAt: now},
			&store.Event{Type: store.EventToolCall, SessionID: "ses_1", CallID: c.id, Time: now, Data: json.RawMessage(`{}`)}))
	}
	must(db.FinishCall(ctx, &store.Call{ID: "call_done", Status: store.CallSucceeded, FinishedAt: now, Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)},
		&store.Event{Type: store.EventToolResult, SessionID: "ses_1", CallID: "call_done", Time: now, Data: json.RawMessage(`{}`)}))
	must(db.Close())

	ts := newToolServer(t)
	srv, err := New(ctx, Options{Config: hostConfig(t, ts.URL), DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	b := &brain{t: t, srv: srv, tools: ts, url: newHTTPTestServer(t, srv)}
	if req := waitStarted(t, ts); req.CallID != "call_q" {
		t.Fatalf("the tool got %s, want the call left queued", req.CallID)
	}
	ts.releaseAll()
	tests := []struct {
		id, status, code string
		unknown          bool
	}{
		{"call_q", "succeeded", "", false},
		{"call_r", "failed", "brain_restarted", true},
		{"call_done", "succeeded", "", false},
	}
	for _, tt := range tests {
		r := b.do("GET", "/tool_calls/"+tt.id+"?wait_seconds=5", "t1", nil)
		var c CallJSON
		r.json(t, &c)
		_, res := resultText(t, c.Result)
		if r.status != 200 || c.Status != tt.status || deref(c.ErrorCode) != tt.code || c.UnknownOutcome != tt.unknown ||
			res.UnknownOutcome != tt.unknown || res.IsError != tt.unknown || c.FinishedAt == nil {
			t.Errorf("%s: %d %s", tt.id, r.status, r.body)
		}
	}
	want := []string{"session.created", "tool.call", "tool.call", "tool.call", "tool.result", "tool.result", "tool.result"}
	if diff := cmp.Diff(want, eventTypes(b.events("t1", "ses_1"))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestDataDirLock(t *testing.T) {
	t.Parallel()
	ts := newToolServer(t)
	dir := t.TempDir()
	cfg := hostConfig(t, ts.URL)
	srv, err := New(context.Background(), Options{Config: cfg, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), Options{Config: cfg, DataDir: dir}); err == nil || !strings.Contains(err.Error(), "in use by another brain") {
		t.Errorf("second server on the same data dir: err = %v", err)
	}
	srv.Close()
	srv2, err := New(context.Background(), Options{Config: cfg, DataDir: dir})
	if err != nil {
		t.Fatalf("after Close: %v", err)
	}
	srv2.Close()
}

// errAfter is a context that is cancelled by the n-th call of its Err: a
// signal arriving part-way through start-up's recovery, at a point that
// does not depend on timing.
type errAfter struct {
	context.Context
	cancel context.CancelFunc
	n      atomic.Int64
}

func (c *errAfter) Err() error {
	if c.n.Add(-1) == 0 {
		c.cancel()
	}
	return c.Context.Err()
}

// TestRecoveryStopsWhenCancelled: a signal while start-up ends the calls a
// previous process left running stops that at once: New fails with the
// cancellation, and the calls it had not reached stay running, for the
// next start (before, each went on to the store, about half of them
// written).
func TestRecoveryStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	const calls, at = 300, 20
	dir := t.TempDir()
	db, err := sqlite.Open(filepath.Join(dir, "brain.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	now := time.Now().UTC()
	if err := db.CreateSession(bg, &store.Session{ID: "ses_1", TenantID: "t1", Status: store.SessionActive, Tools: []string{"slow"}, Config: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now},
		&store.Event{Type: store.EventSessionCreated, SessionID: "ses_1", Time: now, Data: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for i := range calls {
		id := fmt.Sprintf("call_%04d", i)
		if err := db.CreateCall(bg, &store.Call{ID: id, SessionID: "ses_1", TenantID: "t1", Tool: "slow", Status: store.CallRunning, Arguments: json.RawMessage(`{}`), CreatedAt: now},
			&store.Event{Type: store.EventToolCall, SessionID: "ses_1", CallID: id, Time: now, Data: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	inner, cancel := context.WithCancel(bg)
	defer cancel()
	ctx := &errAfter{Context: inner, cancel: cancel}
	ctx.n.Store(at)
	ts := newToolServer(t)
	srv, err := New(ctx, Options{Config: hostConfig(t, ts.URL), DataDir: dir})
	if err == nil {
		srv.Close()
		t.Fatal("New succeeded after its context was cancelled part-way through recovery")
	}
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "calls not taken up") {
		t.Fatalf("New = %v, want the calls not taken up and context.Canceled", err)
	}
	db, err = sqlite.Open(filepath.Join(dir, "brain.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	left, err := db.UnfinishedCalls(bg)
	if err != nil {
		t.Fatal(err)
	}
	// Ended: those before the cancellation (at most `at` Err calls) and
	// none after it.
	if ended := calls - len(left); ended > at || len(left) == calls {
		t.Errorf("%d of %d calls ended, want 1..%d (recovery went on after the cancellation)", ended, calls, at)
	}
}
