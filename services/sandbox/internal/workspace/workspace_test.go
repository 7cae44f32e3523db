package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/jobs"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newManager(t *testing.T, opts Options) (*Manager, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if opts.Root == "" {
		opts.Root = t.TempDir()
	}
	if opts.Quota == 0 {
		opts.Quota = 1 << 20
	}
	if opts.Idle == 0 {
		opts.Idle = time.Minute
	}
	opts.Now = c.now
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}

func TestAcquireKeepsOneWorkspacePerSession(t *testing.T) {
	m, _ := newManager(t, Options{})
	a1, rel1, err := m.Acquire("t1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	rel1()
	if err := os.WriteFile(filepath.Join(a1.Dir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	a2, rel2, err := m.Acquire("t1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer rel2()
	if a1 != a2 || a1.Dir != a2.Dir {
		t.Fatalf("same session got two workspaces: %s and %s", a1.Dir, a2.Dir)
	}
	if _, err := os.Stat(filepath.Join(a2.Dir, "f")); err != nil {
		t.Fatalf("file did not persist: %v", err)
	}
	others := []struct{ tenant, session string }{{"t1", "s2"}, {"t2", "s1"}, {"t1\x00s", "1"}, {"t1", "s1\x00"}}
	for _, o := range others {
		b, rel, err := m.Acquire(o.tenant, o.session)
		if err != nil {
			t.Fatal(err)
		}
		rel()
		if b.Dir == a1.Dir || b.Key == a1.Key {
			t.Errorf("%q/%q shares the workspace of t1/s1", o.tenant, o.session)
		}
	}
	if got := m.Count(); got != 5 {
		t.Errorf("Count() = %d, want 5", got)
	}
	if _, _, err := m.Acquire("", "s"); err == nil {
		t.Error("Acquire with empty tenant succeeded")
	}
}

func TestOwnersAreDistinctUIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown (the sandbox service runs as root)")
	}
	// Not t.TempDir: its parent is 0700, which the sandbox uids cannot
	// pass, and New refuses such a root.
	m, _ := newManager(t, Options{UIDBase: 300000, Root: filepath.Join(passableDir(t), "root")})
	a, rel, err := m.Acquire("t", "a")
	if err != nil {
		t.Fatal(err)
	}
	rel()
	b, rel, err := m.Acquire("t", "b")
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if a.UID != 300000 || b.UID != 300001 {
		t.Fatalf("uids %d, %d; want 300000, 300001", a.UID, b.UID)
	}
	for _, ws := range []*Workspace{a, b} {
		st, err := os.Stat(ws.Dir)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if int(sys.Uid) != ws.UID || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: owner %d mode %v, want %d 0700", ws.Dir, sys.Uid, st.Mode().Perm(), ws.UID)
		}
	}
}

func TestSweepRemovesIdleWorkspaces(t *testing.T) {
	var removed []string
	var mu sync.Mutex
	m, c := newManager(t, Options{Idle: time.Minute, OnRemove: func(_ context.Context, ws *Workspace) error {
		mu.Lock()
		removed = append(removed, ws.Owner.Session)
		mu.Unlock()
		return nil
	}})
	idle, rel, _ := m.Acquire("t", "idle")
	rel()
	busy, relBusy, _ := m.Acquire("t", "busy")
	c.add(59 * time.Second)
	if n := m.Sweep(context.Background()); n != 0 {
		t.Fatalf("Sweep at 59s removed %d", n)
	}
	c.add(time.Second)
	if n := m.Sweep(context.Background()); n != 1 {
		t.Fatalf("Sweep at 60s removed %d, want 1", n)
	}
	if _, err := os.Stat(idle.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("idle workspace still on disk: %v", err)
	}
	if _, err := os.Stat(busy.Dir); err != nil {
		t.Errorf("busy workspace removed: %v", err)
	}
	if len(removed) != 1 || removed[0] != "idle" {
		t.Errorf("OnRemove saw %v", removed)
	}
	relBusy()
	c.add(time.Minute)
	if n := m.Sweep(context.Background()); n != 1 {
		t.Fatalf("Sweep after release removed %d, want 1", n)
	}
	// A new call for a removed session starts from an empty workspace.
	again, rel, err := m.Acquire("t", "idle")
	if err != nil {
		t.Fatal(err)
	}
	defer rel()
	if again.ID == idle.ID {
		t.Error("recreated workspace kept the old ID")
	}
	entries, _ := os.ReadDir(again.Dir)
	if len(entries) != 0 {
		t.Errorf("recreated workspace has %d entries", len(entries))
	}
	trash, _ := filepath.Glob(filepath.Join(m.Root(), ".trash-*"))
	if len(trash) != 0 {
		t.Errorf("trash left behind: %v", trash)
	}
}

func TestNewReloadsWorkspaces(t *testing.T) {
	root := t.TempDir()
	m1, c := newManager(t, Options{Root: root})
	ws, rel, _ := m1.Acquire("t", "s")
	rel()
	os.WriteFile(filepath.Join(ws.Dir, "keep"), []byte("1"), 0o600)
	os.MkdirAll(filepath.Join(root, ".trash-x"), 0o700)
	m1.Close()
	if _, _, err := m1.Acquire("t", "s"); err == nil {
		t.Error("Acquire after Close succeeded")
	}

	m2, err := New(Options{Root: root, Quota: 1 << 20, Idle: time.Minute, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	again, rel, err := m2.Acquire("t", "s")
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if again.ID != ws.ID || again.Dir != ws.Dir {
		t.Errorf("reloaded workspace %+v, want %+v", again, ws)
	}
	if _, err := os.Stat(filepath.Join(again.Dir, "keep")); err != nil {
		t.Errorf("file lost across restart: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, ".trash-x")); !errors.Is(err, os.ErrNotExist) {
		t.Error("old trash not removed at start")
	}
}

func TestMaxWorkspaces(t *testing.T) {
	m, c := newManager(t, Options{MaxWorkspaces: 2, Idle: time.Minute})
	for _, s := range []string{"a", "b"} {
		_, rel, err := m.Acquire("t", s)
		if err != nil {
			t.Fatal(err)
		}
		rel()
	}
	if _, _, err := m.Acquire("t", "c"); !errors.Is(err, ErrFull) {
		t.Fatalf("third workspace: err = %v, want ErrFull", err)
	}
	c.add(time.Minute)
	m.Sweep(context.Background())
	if _, _, err := m.Acquire("t", "c"); err != nil {
		t.Fatalf("after sweep: %v", err)
	}
}

// TestCollidingIdentitiesGetTwoWorkspaces is the tester's report: tenant
// "tenantA" with session "s\x001" and tenant "tenantA\x00s" with session
// "1" shared one workspace, as the old key hashed tenant NUL session. The
// key of a handle cannot be a session's either.
func TestCollidingIdentitiesGetTwoWorkspaces(t *testing.T) {
	m, _ := newManager(t, Options{})
	pairs := [][2]jobs.Owner{
		{{Tenant: "tenantA", Session: "s\x001"}, {Tenant: "tenantA\x00s", Session: "1"}},
		{{Tenant: "t", Session: "x"}, jobs.HandleOwner("t", "x")},
		{{Tenant: "a", Session: "bc"}, {Tenant: "ab", Session: "c"}},
	}
	for _, p := range pairs {
		if Key(p[0]) == Key(p[1]) {
			t.Fatalf("%+v and %+v have one key", p[0], p[1])
		}
		a, rel, err := m.AcquireFor(p[0], Use{})
		if err != nil {
			t.Fatal(err)
		}
		rel()
		if p[1].Handle != "" {
			// Only OpenHandle makes a handle's workspace.
			if _, _, err := m.AcquireFor(p[1], Use{}); !errors.Is(err, ErrNoHandle) {
				t.Fatalf("an unissued handle: err = %v, want ErrNoHandle", err)
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(a.Dir, "mine"), []byte("a"), 0o600); err != nil {
			t.Fatal(err)
		}
		b, rel, err := m.AcquireFor(p[1], Use{})
		if err != nil {
			t.Fatal(err)
		}
		rel()
		if a.Dir == b.Dir {
			t.Fatalf("%+v and %+v share %s", p[0], p[1], a.Dir)
		}
		if _, err := os.Stat(filepath.Join(b.Dir, "mine")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%+v sees the file of %+v", p[1], p[0])
		}
	}
}

// TestLegacyKeyIsMoved: a workspace a run before injective keys left is
// found again under its new key, with its files.
func TestLegacyKeyIsMoved(t *testing.T) {
	root := t.TempDir()
	old := filepath.Join(root, legacyKey("t", "s"))
	if err := os.MkdirAll(filepath.Join(old, "files"), 0o711); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(old, "files", "keep"), []byte("1"), 0o600)
	os.WriteFile(filepath.Join(old, "meta.json"), []byte(`{"tenant_id":"t","session_id":"s","id":"abc","slot":0,"created":"2026-01-01T00:00:00Z"}`), 0o600)
	m, _ := newManager(t, Options{Root: root})
	ws, rel, err := m.Acquire("t", "s")
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if ws.ID != "abc" || ws.Key != Key(jobs.Owner{Tenant: "t", Session: "s"}) {
		t.Fatalf("workspace %+v: want the old one (id abc) under the new key", ws)
	}
	if _, err := os.Stat(filepath.Join(ws.Dir, "keep")); err != nil {
		t.Fatalf("file lost: %v", err)
	}
}

// TestPoolsAndOnce: the MCP pool has its own quota, so full MCP traffic
// leaves the sessions pool alone; a Once workspace is gone when its call
// ends, unless another use holds it or a use that keeps it came.
func TestPoolsAndOnce(t *testing.T) {
	m, _ := newManager(t, Options{MaxWorkspaces: 1, MaxMCPWorkspaces: 2})
	mcp := Use{Pool: MCP}
	for _, s := range []string{"m1", "m2"} {
		_, rel, err := m.AcquireFor(jobs.Owner{Tenant: "t", Session: s}, mcp)
		if err != nil {
			t.Fatal(err)
		}
		defer rel()
	}
	if _, _, err := m.AcquireFor(jobs.Owner{Tenant: "t", Session: "m3"}, mcp); !errors.Is(err, ErrFull) {
		t.Fatalf("third MCP workspace: err = %v, want ErrFull", err)
	}
	if _, _, err := m.OpenHandle("t"); !errors.Is(err, ErrFull) {
		t.Fatalf("handle with the MCP pool full: err = %v, want ErrFull", err)
	}
	brain, rel, err := m.Acquire("t", "brain")
	if err != nil {
		t.Fatalf("a session with the MCP pool full: %v", err)
	}
	rel()
	if brain.Pool != Sessions {
		t.Fatalf("pool %v", brain.Pool)
	}

	m2, _ := newManager(t, Options{MaxMCPWorkspaces: 1})
	once := Use{Pool: MCP, Once: true}
	o := jobs.Owner{Tenant: "t", Session: "req-1"}
	a, relA, err := m2.AcquireFor(o, once)
	if err != nil {
		t.Fatal(err)
	}
	_, relB, err := m2.AcquireFor(o, once)
	if err != nil {
		t.Fatal(err)
	}
	relA()
	if _, err := os.Stat(a.Dir); err != nil {
		t.Fatalf("removed while another use holds it: %v", err)
	}
	relB()
	if _, err := os.Stat(a.Dir); !errors.Is(err, os.ErrNotExist) || m2.Count() != 0 {
		t.Fatalf("a Once workspace outlived its call: %v, count %d", err, m2.Count())
	}
	// Its slot is free again at once.
	if _, rel, err := m2.AcquireFor(jobs.Owner{Tenant: "t", Session: "req-2"}, once); err != nil {
		t.Fatalf("next one-shot: %v", err)
	} else {
		rel()
	}
}

// TestHandles: a handle is unguessable, tied to its tenant, and gone after
// CloseHandle (at once, or when its last use ends).
func TestHandles(t *testing.T) {
	m, _ := newManager(t, Options{})
	h, ws, err := m.OpenHandle("t")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(HandlePattern).MatchString(h) || ws.Pool != MCP {
		t.Fatalf("handle %q pool %v", h, ws.Pool)
	}
	if _, _, err := m.AcquireFor(jobs.HandleOwner("u", h), Use{}); !errors.Is(err, ErrNoHandle) {
		t.Fatalf("another tenant's handle: err = %v, want ErrNoHandle", err)
	}
	got, rel, err := m.AcquireFor(jobs.HandleOwner("t", h), Use{Once: true})
	if err != nil || got != ws {
		t.Fatalf("AcquireFor(handle) = %v, %v", got, err)
	}
	if err := m.CloseHandle(context.Background(), "t", h); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.AcquireFor(jobs.HandleOwner("t", h), Use{}); !errors.Is(err, ErrNoHandle) {
		t.Fatalf("closed handle: err = %v", err)
	}
	if _, err := os.Stat(ws.Dir); err != nil {
		t.Fatalf("removed while in use: %v", err)
	}
	rel()
	if _, err := os.Stat(ws.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("closed handle's workspace outlived its last use: %v", err)
	}
	if err := m.CloseHandle(context.Background(), "t", h); !errors.Is(err, ErrNoHandle) {
		t.Fatalf("second close: %v", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []Options{
		{Quota: 1, Idle: time.Second},
		{Root: dir, Idle: time.Second},
		{Root: dir, Quota: 1},
		{Root: dir, Quota: 1, Idle: time.Second, UIDBase: -1},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

func TestUsageCountsAllocatedBlocks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), make([]byte, 100_000), 0o600); err != nil {
		t.Fatal(err)
	}
	// A sparse file of 1 GiB that allocates nothing must not count as 1 GiB.
	f, _ := os.Create(filepath.Join(dir, "sparse"))
	f.Truncate(1 << 30)
	f.Close()
	os.Symlink("/usr", filepath.Join(dir, "link"))
	got, err := Usage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got < 100_000 || got > 200_000 {
		t.Errorf("Usage = %d, want about 100 kB", got)
	}
}

// passableDir returns a new directory that others may pass through (0711),
// with every parent passable too (under the system's temporary directory).
func passableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "workspace-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCheckTraversable(t *testing.T) {
	base := passableDir(t)
	mk := func(rel string, mode os.FileMode) string {
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("open/root", 0o711)
	mk("open", 0o701) // x for others is all it takes
	lockedRoot := mk("locked/root", 0o711)
	locked := mk("locked", 0o700)
	mk("readable-only", 0o744)
	if err := os.Symlink(locked, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir  string
		want string // "" means passable
	}{
		{base, ""},
		{filepath.Join(base, "open/root"), ""},
		{lockedRoot, "directory " + locked + " has mode 0700"},
		{lockedRoot, "fix: chmod o+x " + locked},
		{locked, "chmod o+x " + locked}, // dir itself counts
		{filepath.Join(base, "readable-only"), "has mode 0744"},
		// Through a link, the target is named.
		{filepath.Join(base, "link/root"), "chmod o+x " + locked},
		{filepath.Join(base, "missing"), "no such file"},
	}
	for _, tt := range tests {
		err := CheckTraversable(tt.dir)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckTraversable(%s) = %v, want nil", tt.dir, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckTraversable(%s) = %v, want an error containing %q", tt.dir, err, tt.want)
		}
	}
}

// A root the sandbox uids cannot reach is refused at start-up, naming the
// directory and the fix, instead of failing every sandbox later. Without
// sandbox uids the service's own uid runs the sandboxes, and it can.
func TestNewRefusesAnUnreachableRoot(t *testing.T) {
	base := passableDir(t)
	locked := filepath.Join(base, "private")
	if err := os.Mkdir(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(locked, "data", "sandbox")
	_, err := New(Options{Root: root, Quota: 1 << 20, Idle: time.Minute, UIDBase: 300000})
	if err == nil || !strings.Contains(err.Error(), "workspace root "+root) || !strings.Contains(err.Error(), "chmod o+x "+locked) {
		t.Fatalf("New under a 0700 directory = %v, want an error naming %s and the chmod", err, locked)
	}
	if _, err := New(Options{Root: root, Quota: 1 << 20, Idle: time.Minute}); err != nil {
		t.Errorf("New without sandbox uids under a 0700 directory: %v", err)
	}
	if err := os.Chmod(locked, 0o711); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Root: root, Quota: 1 << 20, Idle: time.Minute, UIDBase: 300000}); err != nil {
		t.Errorf("New after chmod o+x: %v", err)
	}
}
