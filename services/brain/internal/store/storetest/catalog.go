package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/store"
)

// The cases of store.Catalog (Run runs them with the others).

func customTool(id, tenant, name, rev string) *store.CustomTool {
	return &store.CustomTool{ID: id, TenantID: tenant, Name: name, CreatedAt: T0, UpdatedAt: T0,
		Revision: &store.ToolRevision{ID: rev, ToolID: id, TenantID: tenant, Definition: json.RawMessage(`{"name":"` + name + `","v":1}`), CreatedAt: T0}}
}

func wantErr[E error](t *testing.T, what string, err error) E {
	t.Helper()
	var e E
	if !errors.As(err, &e) {
		t.Fatalf("%s: %v, want %T", what, err, e)
	}
	return e
}

func testCustomTools(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	s := open(nil)
	must(t, s.CreateCustomTool(ctx, customTool("ctool_1", "t1", "crm", "rev_1"), 2))
	if err := s.CreateCustomTool(ctx, customTool("ctool_2", "t1", "crm", "rev_2"), 2); !errors.Is(err, store.ErrNameTaken) {
		t.Fatalf("same name again: %v, want ErrNameTaken", err)
	}
	// Another tenant's name space is its own.
	must(t, s.CreateCustomTool(ctx, customTool("ctool_3", "t2", "crm", "rev_3"), 2))
	must(t, s.CreateCustomTool(ctx, customTool("ctool_4", "t1", "other", "rev_4"), 2))
	le := wantErr[*store.LimitError](t, "third tool of t1 under a limit of 2", s.CreateCustomTool(ctx, customTool("ctool_5", "t1", "third", "rev_5"), 2))
	if le.Limit != 2 {
		t.Errorf("limit error %+v", le)
	}
	got, err := s.CustomTool(ctx, "t1", "ctool_1")
	must(t, err)
	if got.Name != "crm" || got.Revision.ID != "rev_1" || string(got.Revision.Definition) != `{"name":"crm","v":1}` || !got.CreatedAt.Equal(T0) {
		t.Errorf("read %+v %+v", got, got.Revision)
	}
	if _, err := s.CustomTool(ctx, "t2", "ctool_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("t1's tool read as t2: %v", err)
	}
	byName, err := s.CustomToolByName(ctx, "t2", "crm")
	must(t, err)
	if byName.ID != "ctool_3" {
		t.Errorf("t2's crm is %s", byName.ID)
	}
	list, err := s.CustomTools(ctx, "t1")
	must(t, err)
	if len(list) != 2 || list[0].ID != "ctool_1" || list[1].ID != "ctool_4" {
		t.Errorf("list of t1: %d tools", len(list))
	}
	// Updates: from the current revision only.
	rev2 := &store.ToolRevision{ID: "rev_1b", ToolID: "ctool_1", TenantID: "t1", Definition: json.RawMessage(`{"v":2}`), CreatedAt: T0.Add(time.Second)}
	up, err := s.UpdateCustomTool(ctx, "t1", "ctool_1", "rev_1", rev2, 0)
	must(t, err)
	if up.Revision.ID != "rev_1b" || !up.UpdatedAt.Equal(rev2.CreatedAt) || !up.CreatedAt.Equal(T0) {
		t.Errorf("updated %+v", up)
	}
	stale := &store.ToolRevision{ID: "rev_1c", ToolID: "ctool_1", TenantID: "t1", Definition: json.RawMessage(`{"v":3}`), CreatedAt: T0}
	re := wantErr[*store.RevisionError](t, "update from a stale revision", func() error { _, err := s.UpdateCustomTool(ctx, "t1", "ctool_1", "rev_1", stale, 0); return err }())
	if re.Current != "rev_1b" {
		t.Errorf("stale update names %q, want rev_1b", re.Current)
	}
	if _, err := s.ToolRevision(ctx, "t1", "rev_1c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused update left its revision: %v", err)
	}
	if _, err := s.UpdateCustomTool(ctx, "t2", "ctool_1", "rev_1b", stale, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("t1's tool updated as t2: %v", err)
	}
	// Delete: the tool goes, its revisions stay, its name is free.
	if err := s.DeleteCustomTool(ctx, "t2", "ctool_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("t1's tool deleted as t2: %v", err)
	}
	must(t, s.DeleteCustomTool(ctx, "t1", "ctool_1"))
	if err := s.DeleteCustomTool(ctx, "t1", "ctool_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted twice: %v", err)
	}
	for _, id := range []string{"rev_1", "rev_1b"} {
		r, err := s.ToolRevision(ctx, "t1", id)
		must(t, err)
		if r.ToolID != "ctool_1" {
			t.Errorf("revision %s: %+v", id, r)
		}
		if _, err := s.ToolRevision(ctx, "t2", id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("t1's revision read as t2: %v", err)
		}
	}
	must(t, s.CreateCustomTool(ctx, customTool("ctool_6", "t1", "crm", "rev_6"), 2))

	// At most limit revisions of one tool, its first one counted: the
	// update that would make limit+1 is refused and leaves nothing.
	from := "rev_6"
	for i := 2; i <= 3; i++ {
		id := fmt.Sprintf("rev_6_%d", i)
		up, err := s.UpdateCustomTool(ctx, "t1", "ctool_6", from, &store.ToolRevision{ID: id, ToolID: "ctool_6", TenantID: "t1", Definition: json.RawMessage(`{}`), CreatedAt: T0}, 3)
		must(t, err)
		if up.Revision.ID != id {
			t.Fatalf("revision %d of 3: current %s", i, up.Revision.ID)
		}
		from = id
	}
	over := &store.ToolRevision{ID: "rev_6_4", ToolID: "ctool_6", TenantID: "t1", Definition: json.RawMessage(`{}`), CreatedAt: T0}
	le = wantErr[*store.LimitError](t, "a fourth revision under a limit of 3", func() error { _, err := s.UpdateCustomTool(ctx, "t1", "ctool_6", from, over, 3); return err }())
	if le.Limit != 3 || le.What != "revisions" {
		t.Errorf("limit error %+v", le)
	}
	if _, err := s.ToolRevision(ctx, "t1", "rev_6_4"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused update left its revision: %v", err)
	}
	// Another tool's revisions do not count.
	if _, err := s.UpdateCustomTool(ctx, "t1", "ctool_4", "rev_4", &store.ToolRevision{ID: "rev_4b", ToolID: "ctool_4", TenantID: "t1", Definition: json.RawMessage(`{}`), CreatedAt: T0}, 2); err != nil {
		t.Errorf("second revision of another tool under a limit of 2: %v", err)
	}
}

// testCustomToolRace: writers racing for one name, and for the last place
// under a limit, are told apart by the store: one wins each.
func testCustomToolRace(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	s := open(nil)
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = s.CreateCustomTool(ctx, customTool(fmt.Sprintf("ctool_%02d", i), "t1", "same", fmt.Sprintf("rev_%02d", i)), 100)
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrNameTaken):
			t.Fatalf("racing create: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers created the same name", won)
	}
	for i := range n {
		wg.Go(func() {
			errs[i] = s.CreateCustomTool(ctx, customTool(fmt.Sprintf("ctool_x%02d", i), "t2", fmt.Sprintf("n%d", i), fmt.Sprintf("rev_x%02d", i)), 5)
		})
	}
	wg.Wait()
	list, err := s.CustomTools(ctx, "t2")
	must(t, err)
	if len(list) != 5 {
		t.Fatalf("%d tools under a limit of 5 after a race", len(list))
	}
	// Two updates from the same revision: one wins, one is stale.
	for i := range 2 {
		wg.Go(func() {
			_, errs[i] = s.UpdateCustomTool(ctx, "t2", list[0].ID, list[0].Revision.ID,
				&store.ToolRevision{ID: fmt.Sprintf("rev_u%d", i), ToolID: list[0].ID, TenantID: "t2", Definition: json.RawMessage(`{}`), CreatedAt: T0}, 0)
		})
	}
	wg.Wait()
	var re *store.RevisionError
	if (errs[0] == nil) == (errs[1] == nil) || !(errors.As(errs[0], &re) || errors.As(errs[1], &re)) {
		t.Fatalf("two updates from one revision: %v, %v; want one to win and one to be stale", errs[0], errs[1])
	}
}

func testSecrets(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	s := open(nil)
	put := func(tenant, name, sealed string, at time.Time, limit int) (bool, error) {
		return s.PutSecret(ctx, &store.Secret{TenantID: tenant, Name: name, Sealed: []byte(sealed), CreatedAt: at, UpdatedAt: at}, limit)
	}
	created, err := put("t1", "b", "sealed-1", T0, 2)
	must(t, err)
	if !created {
		t.Error("first put: not created")
	}
	created, err = put("t1", "b", "sealed-2", T0.Add(time.Minute), 2)
	must(t, err)
	if created {
		t.Error("second put of a name: created, want replaced")
	}
	sec, err := s.Secret(ctx, "t1", "b")
	must(t, err)
	if string(sec.Sealed) != "sealed-2" || !sec.CreatedAt.Equal(T0) || !sec.UpdatedAt.Equal(T0.Add(time.Minute)) {
		t.Errorf("rotated secret %+v", sec)
	}
	_, err = put("t1", "a", "x", T0, 2)
	must(t, err)
	wantErr[*store.LimitError](t, "third secret under a limit of 2", func() error { _, err := put("t1", "c", "x", T0, 2); return err }())
	if _, err := put("t1", "a", "rotated at the limit", T0, 2); err != nil {
		t.Errorf("rotation at the limit: %v", err)
	}
	if _, err := s.Secret(ctx, "t2", "b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("t1's secret read as t2: %v", err)
	}
	list, err := s.Secrets(ctx, "t1")
	must(t, err)
	if len(list) != 2 || list[0].Name != "a" || list[1].Name != "b" || list[0].Sealed != nil {
		t.Errorf("list %+v", list)
	}
	if err := s.DeleteSecret(ctx, "t2", "b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("t1's secret deleted as t2: %v", err)
	}
	must(t, s.DeleteSecret(ctx, "t1", "b"))
	if _, err := s.Secret(ctx, "t1", "b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted secret: %v", err)
	}
}

func testToolsets(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	s := open(nil)
	ts := &store.Toolset{ID: "tset_1", TenantID: "t1", Name: "checkout", Description: "d", Tools: []string{"echo", "crm"}, CreatedAt: T0, UpdatedAt: T0}
	must(t, s.CreateToolset(ctx, ts, 1))
	wantErr[*store.LimitError](t, "second toolset under a limit of 1", s.CreateToolset(ctx, &store.Toolset{ID: "tset_2", TenantID: "t1", Name: "x", CreatedAt: T0, UpdatedAt: T0}, 1))
	must(t, s.CreateToolset(ctx, &store.Toolset{ID: "tset_3", TenantID: "t2", Name: "x", CreatedAt: T0, UpdatedAt: T0}, 1))
	got, err := s.Toolset(ctx, "t1", "tset_1")
	must(t, err)
	if got.Name != "checkout" || got.Description != "d" || !slices.Equal(got.Tools, ts.Tools) {
		t.Errorf("read %+v", got)
	}
	if _, err := s.Toolset(ctx, "t2", "tset_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("t1's toolset read as t2: %v", err)
	}
	up := &store.Toolset{ID: "tset_1", TenantID: "t1", Name: "new", Tools: []string{}, CreatedAt: T0, UpdatedAt: T0.Add(time.Hour)}
	must(t, s.UpdateToolset(ctx, up))
	got, err = s.Toolset(ctx, "t1", "tset_1")
	must(t, err)
	if got.Name != "new" || got.Description != "" || len(got.Tools) != 0 || !got.UpdatedAt.Equal(up.UpdatedAt) || !got.CreatedAt.Equal(T0) {
		t.Errorf("updated %+v", got)
	}
	if err := s.UpdateToolset(ctx, &store.Toolset{ID: "tset_1", TenantID: "t2", Name: "hijack"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("t1's toolset updated as t2: %v", err)
	}
	list, err := s.Toolsets(ctx, "t1")
	must(t, err)
	if len(list) != 1 {
		t.Errorf("list %d", len(list))
	}
	if err := s.DeleteToolset(ctx, "t2", "tset_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("t1's toolset deleted as t2: %v", err)
	}
	must(t, s.DeleteToolset(ctx, "t1", "tset_1"))
	if err := s.DeleteToolset(ctx, "t1", "tset_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted twice: %v", err)
	}
}

func testSessionTools(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	var mu sync.Mutex
	var published []store.Event
	s := open(func(ev store.Event) {
		mu.Lock()
		published = append(published, ev)
		mu.Unlock()
	})
	sess, ev := NewSession("ses_1", "t1")
	must(t, s.CreateSession(ctx, sess, ev))
	if _, err := s.SessionTools(ctx, "t1", "ses_1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("tool set of a session never given one: %v", err)
	}
	st := &store.SessionTools{SessionID: "ses_1", TenantID: "t1", Entries: json.RawMessage(`{"tools":[{"name":"echo"}]}`), Names: []string{"echo", "docs.search"}, UpdatedAt: T0.Add(time.Second)}
	evs := []*store.Event{{Type: store.EventSessionTools, SessionID: "ses_1", Time: T0, Data: json.RawMessage(`{}`)},
		{Type: store.EventMCPUnavailable, SessionID: "ses_1", Time: T0, Data: json.RawMessage(`{"server":"x"}`)}}
	must(t, s.PutSessionTools(ctx, st, evs...))
	if evs[0].ID != 2 || evs[1].ID != 3 {
		t.Errorf("event IDs %d, %d; want 2, 3 after session.created", evs[0].ID, evs[1].ID)
	}
	got, err := s.SessionTools(ctx, "t1", "ses_1")
	must(t, err)
	if string(got.Entries) != string(st.Entries) || !slices.Equal(got.Names, st.Names) || !got.UpdatedAt.Equal(st.UpdatedAt) {
		t.Errorf("read %+v", got)
	}
	read, err := s.Session(ctx, "t1", "ses_1")
	must(t, err)
	if !slices.Equal(read.Tools, st.Names) {
		t.Errorf("session tools after the put: %v", read.Tools)
	}
	// Replaced whole.
	st.Entries, st.Names = json.RawMessage(`{"tools":[]}`), []string{}
	must(t, s.PutSessionTools(ctx, st))
	got, err = s.SessionTools(ctx, "t1", "ses_1")
	must(t, err)
	if string(got.Entries) != `{"tools":[]}` || len(got.Names) != 0 {
		t.Errorf("replaced: %+v", got)
	}
	// Another tenant's session: not found, whatever it sends.
	other := *st
	other.TenantID = "t2"
	if err := s.PutSessionTools(ctx, &other); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("put on t1's session as t2: %v", err)
	}
	if _, err := s.SessionTools(ctx, "t2", "ses_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("t1's tool set read as t2: %v", err)
	}
	// An ended session takes no new set.
	must(t, s.SetSessionStatus(ctx, "t1", "ses_1", []string{store.SessionActive}, store.SessionClosed, T0,
		&store.Event{Type: store.EventSessionClosed, SessionID: "ses_1", Time: T0, Data: json.RawMessage(`{}`)}))
	se := wantErr[*store.StateError](t, "put on a closed session", s.PutSessionTools(ctx, st))
	if se.Status != store.SessionClosed {
		t.Errorf("state error %+v", se)
	}
	// Retention takes the tool set with its session.
	rm, err := s.DeleteEnded(ctx, T0.Add(time.Second), 100)
	must(t, err)
	if rm.Sessions != 1 {
		t.Errorf("retention removed %+v", rm)
	}
	if _, err := s.SessionTools(ctx, "t1", "ses_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("tool set of a session retention removed: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	var types []string
	for _, e := range published {
		types = append(types, e.Type)
	}
	if !slices.Contains(types, store.EventSessionTools) || !slices.Contains(types, store.EventMCPUnavailable) {
		t.Errorf("published %v", types)
	}
}

func testCatalogAfterReopen(t *testing.T, open func(func(store.Event)) store.Store) {
	ctx := context.Background()
	s := open(nil)
	must(t, s.CreateCustomTool(ctx, customTool("ctool_1", "t1", "crm", "rev_1"), 10))
	_, err := s.PutSecret(ctx, &store.Secret{TenantID: "t1", Name: "k", Sealed: []byte{0, 1, 2, 255}, CreatedAt: T0, UpdatedAt: T0}, 10)
	must(t, err)
	must(t, s.CreateToolset(ctx, &store.Toolset{ID: "tset_1", TenantID: "t1", Name: "n", Tools: []string{"crm"}, CreatedAt: T0, UpdatedAt: T0}, 10))
	sess, ev := NewSession("ses_1", "t1")
	must(t, s.CreateSession(ctx, sess, ev))
	must(t, s.PutSessionTools(ctx, &store.SessionTools{SessionID: "ses_1", TenantID: "t1", Entries: json.RawMessage(`{"tools":[]}`), Names: []string{}, UpdatedAt: T0}))
	c := &store.Call{ID: "call_1", SessionID: "ses_1", TenantID: "t1", Tool: "crm", Status: store.CallRunning, Arguments: json.RawMessage(`{}`),
		CreatedAt: T0, StartedAt: T0, RevisionID: "rev_1"}
	must(t, s.CreateCall(ctx, c, &store.Event{Type: store.EventToolCall, SessionID: "ses_1", CallID: "call_1", Time: T0, Data: json.RawMessage(`{}`)}))
	must(t, s.Close())

	s = open(nil)
	if ct, err := s.CustomToolByName(ctx, "t1", "crm"); err != nil || ct.Revision.ID != "rev_1" {
		t.Errorf("custom tool after reopen: %+v %v", ct, err)
	}
	if sec, err := s.Secret(ctx, "t1", "k"); err != nil || string(sec.Sealed) != string([]byte{0, 1, 2, 255}) {
		t.Errorf("secret after reopen: %+v %v", sec, err)
	}
	if ts, err := s.Toolset(ctx, "t1", "tset_1"); err != nil || !slices.Equal(ts.Tools, []string{"crm"}) {
		t.Errorf("toolset after reopen: %+v %v", ts, err)
	}
	if _, err := s.SessionTools(ctx, "t1", "ses_1"); err != nil {
		t.Errorf("session tools after reopen: %v", err)
	}
	if got, err := s.Call(ctx, "t1", "call_1"); err != nil || got.RevisionID != "rev_1" {
		t.Errorf("call's revision after reopen: %+v %v", got, err)
	}
}
