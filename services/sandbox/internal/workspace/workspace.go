// Package workspace gives each tenant + session its own directory that
// persists across that session's sandbox calls, measures it against a disk
// quota, and removes it after it has been idle for a while.
//
// A workspace belongs to a jobs.Owner: a tenant and a session, or a tenant
// and a handle (OpenHandle) for clients without sessions. Workspaces come
// from two pools with quotas of their own (Options.MaxWorkspaces and
// MaxMCPWorkspaces), so MCP clients can never take the workspaces brain's
// sessions need; a workspace acquired with Use.Once (a stateless request's
// one call) is removed as soon as that call lets it go.
//
// Layout under Root:
//
//	<key>/meta.json   owner, pool, slot, creation time; its mtime is the last use
//	<key>/files/      the workspace itself: what a sandbox sees as /workspace
//	.trash-*          workspaces being removed
//
// key is a hash of an injective encoding of the owner (see Key), so no ID
// can reach outside Root and no two owners share a workspace, whatever
// bytes their IDs hold. The sandbox can change anything in files/ but
// never meta.json, which lives beside it.
//
// Each workspace gets a slot; with UIDBase set, its files belong to host
// uid UIDBase+slot, under which the local backend runs that session's
// commands. Distinct uids keep sessions apart even if a mount were shared,
// and give each session its own RLIMIT_NPROC count (the kernel counts
// processes per real uid, and not at all for root). Slots of the sessions
// pool come first, then those of the MCP pool (see UIDs).
package workspace

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/brain-tools/suite/pkg/jobs"
)

// Workspace is one session's directory. Fields are read-only.
type Workspace struct {
	// Owner is the workspace's tenant and session (the request body's
	// tenant_id and session_id), or tenant and handle.
	Owner jobs.Owner
	// Pool is the pool whose quota the workspace counts against.
	Pool Pool
	// Key names the workspace on disk: see Key.
	Key string
	// ID is unique to this life of the workspace: a workspace removed and
	// created again for the same session gets a new ID. Backends key remote
	// sandboxes by it.
	ID string
	// Dir is the host path of the workspace's files.
	Dir string
	// UID and GID own Dir; -1 when the manager does not assign owners.
	UID, GID int
	// Created is when this life of the workspace began.
	Created time.Time

	meta     string
	busy     int
	once     bool // remove when busy drops to 0 (Use.Once, CloseHandle)
	lastUsed time.Time
}

// SessionName is the session the workspace belongs to, for logs and a
// provider's labels: its session_id, or "handle" for a handle's workspace
// (the handle is a secret and never leaves the service).
func (ws *Workspace) SessionName() string {
	if ws.Owner.Handle != "" {
		return "handle"
	}
	return ws.Owner.Session
}

// Pool names a pool of workspaces with a quota of its own.
type Pool int

// The pools.
const (
	// Sessions holds the workspaces of the host's sessions (brain's, over
	// HTTP or over MCP with the host's _meta identity):
	// Options.MaxWorkspaces.
	Sessions Pool = iota
	// MCP holds those of MCP clients that have no host session: an MCP
	// session's, a handle's, a stateless request's: Options.MaxMCPWorkspaces.
	MCP
)

func (p Pool) String() string {
	if p == MCP {
		return "mcp"
	}
	return "sessions"
}

// Use says how a call uses a workspace.
type Use struct {
	// Pool is the pool a workspace created for this use counts against.
	Pool Pool
	// Once removes the workspace when this use ends, unless another use
	// still holds it: the workspace of a call that has no session to
	// come back in (a stateless MCP request).
	Once bool
}

// Options configure a Manager.
type Options struct {
	// Root holds every workspace. Created if missing (mode 0711). With
	// UIDBase set, it and every directory above it must let others pass
	// (o+x), or New refuses it (see CheckTraversable).
	Root string
	// Quota is the most bytes of disk (allocated blocks) one workspace may
	// use. Required, > 0.
	Quota int64
	// Idle is how long a workspace may go unused before it is removed.
	// Required, > 0.
	Idle time.Duration
	// UIDBase, when > 0, gives the workspace in slot n the host uid and gid
	// UIDBase+n. Needs root (chown). 0 leaves files to the service's uid.
	UIDBase int
	// MaxWorkspaces caps how many workspaces of the Sessions pool exist at
	// once. Default 1000.
	MaxWorkspaces int
	// MaxMCPWorkspaces caps those of the MCP pool. Default 100.
	MaxMCPWorkspaces int
	// OnRemove, when set, runs after a workspace is taken out of service
	// and before its files are deleted (a remote backend deletes its
	// sandbox there). Its error is logged.
	OnRemove func(ctx context.Context, ws *Workspace) error
	// Logger may be nil (discard).
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// ErrFull is returned by Acquire when the pool's quota of workspaces
// exist.
var ErrFull = errors.New("too many workspaces")

// ErrNoHandle is returned for a handle that this manager did not issue to
// the tenant, or that was closed or expired.
var ErrNoHandle = errors.New("no such workspace handle")

// HandlePrefix starts every handle OpenHandle issues; HandlePattern is the
// JSON Schema pattern of a handle.
const (
	HandlePrefix  = "ws_"
	HandlePattern = "^ws_[a-z2-7]{26}$"
)

// Manager owns the workspaces under one root.
type Manager struct {
	opts   Options
	now    func() time.Time
	log    *slog.Logger
	mu     sync.Mutex
	byKey  map[string]*Workspace
	slots  map[int]*Workspace
	closed bool
}

type meta struct {
	Tenant  string    `json:"tenant_id"`
	Session string    `json:"session_id,omitempty"`
	Handle  string    `json:"handle,omitempty"`
	Pool    Pool      `json:"pool"`
	ID      string    `json:"id"`
	Slot    int       `json:"slot"`
	Created time.Time `json:"created"`
}

func (md meta) owner() jobs.Owner {
	return jobs.Owner{Tenant: md.Tenant, Session: md.Session, Handle: md.Handle}
}

// New opens the workspaces under opts.Root, keeping those a previous run
// left (their last use is meta.json's mtime) and deleting unfinished
// removals.
func New(opts Options) (*Manager, error) {
	switch {
	case opts.Root == "":
		return nil, errors.New("workspace: root is empty")
	case opts.Quota <= 0:
		return nil, fmt.Errorf("workspace: quota must be positive, got %d", opts.Quota)
	case opts.Idle <= 0:
		return nil, fmt.Errorf("workspace: idle time must be positive, got %s", opts.Idle)
	case opts.UIDBase < 0:
		return nil, fmt.Errorf("workspace: uid base must not be negative, got %d", opts.UIDBase)
	}
	if opts.MaxWorkspaces <= 0 {
		opts.MaxWorkspaces = 1000
	}
	if opts.MaxMCPWorkspaces <= 0 {
		opts.MaxMCPWorkspaces = 100
	}
	m := &Manager{opts: opts, now: opts.Now, log: opts.Logger, byKey: map[string]*Workspace{}, slots: map[int]*Workspace{}}
	if m.now == nil {
		m.now = time.Now
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("workspace root %s: %w", opts.Root, err)
	}
	m.opts.Root = root
	if err := os.MkdirAll(root, 0o711); err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	// The sandbox uids must be able to pass through Root to their files.
	if err := os.Chmod(root, 0o711); err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	if opts.UIDBase > 0 {
		if err := CheckTraversable(root); err != nil {
			return nil, fmt.Errorf("workspace root %s: the sandbox uids (%d and up) cannot reach it: %w", root, opts.UIDBase, err)
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if strings.HasPrefix(e.Name(), ".trash-") {
			if err := os.RemoveAll(p); err != nil {
				m.log.Warn("remove old trash", "path", p, "err", err)
			}
			continue
		}
		if !e.IsDir() {
			continue
		}
		ws, err := m.load(e.Name())
		if err != nil {
			m.log.Warn("skip unreadable workspace", "path", p, "err", err)
			continue
		}
		m.byKey[ws.Key] = ws
	}
	return m, nil
}

func (m *Manager) load(key string) (*Workspace, error) {
	dir := filepath.Join(m.opts.Root, key)
	metaPath := filepath.Join(dir, "meta.json")
	data, err := os.ReadFile(metaPath)
	if err != nil {
		return nil, err
	}
	var md meta
	if err := json.Unmarshal(data, &md); err != nil {
		return nil, fmt.Errorf("meta.json: %w", err)
	}
	if want := Key(md.owner()); want != key {
		if md.Handle != "" || legacyKey(md.Tenant, md.Session) != key {
			return nil, fmt.Errorf("meta.json names another workspace")
		}
		// A workspace of a run before keys were injective: move it to its
		// key now, unless the new key is taken.
		if _, err := os.Lstat(filepath.Join(m.opts.Root, want)); err == nil {
			return nil, fmt.Errorf("meta.json names workspace %s, which exists too", want)
		}
		if err := os.Rename(dir, filepath.Join(m.opts.Root, want)); err != nil {
			return nil, fmt.Errorf("move to key %s: %w", want, err)
		}
		key, dir = want, filepath.Join(m.opts.Root, want)
		metaPath = filepath.Join(dir, "meta.json")
	}
	st, err := os.Stat(metaPath)
	if err != nil {
		return nil, err
	}
	lo, hi := m.slotRange(md.Pool)
	if _, taken := m.slots[md.Slot]; taken || md.Slot < lo || md.Slot >= hi {
		return nil, fmt.Errorf("slot %d is out of range of pool %s or taken", md.Slot, md.Pool)
	}
	ws := m.newWorkspace(md, key)
	ws.lastUsed = st.ModTime()
	m.slots[md.Slot] = ws
	return ws, nil
}

func (m *Manager) newWorkspace(md meta, key string) *Workspace {
	dir := filepath.Join(m.opts.Root, key)
	ws := &Workspace{
		Owner: md.owner(), Pool: md.Pool, Key: key, ID: md.ID,
		Dir: filepath.Join(dir, "files"), meta: filepath.Join(dir, "meta.json"),
		UID: -1, GID: -1, Created: md.Created,
	}
	if m.opts.UIDBase > 0 {
		ws.UID = m.opts.UIDBase + md.Slot
		ws.GID = ws.UID
	}
	return ws
}

// CheckTraversable checks that others (o+x) may pass through every
// directory from / down to dir, symbolic links on the way followed and
// their targets' parents checked too. The sandbox uids need it: they own
// their workspaces but none of the directories above them, so the
// kernel, and bwrap binding a workspace into a sandbox, judge them by the
// "other" bits (ACLs are not consulted here). The error names the first
// directory that fails and the chmod that fixes it.
func CheckTraversable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("check %s: %w", dir, err)
	}
	// The real path first, so that a link's target is what gets named.
	var paths []string
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		paths = ancestors(real)
	}
	paths = append(paths, ancestors(abs)...)
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("check %s: %w", p, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("check %s: not a directory", p)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("directory %s has mode %04o, which does not let others pass through it; fix: chmod o+x %s", p, fi.Mode().Perm(), p)
		}
	}
	return nil
}

// ancestors returns /, then each directory down to the clean absolute
// path p, p included.
func ancestors(p string) []string {
	var out []string
	for {
		out = append(out, p)
		parent := filepath.Dir(p)
		if parent == p {
			break
		}
		p = parent
	}
	slices.Reverse(out)
	return out
}

// Key returns the on-disk name of owner's workspace: 40 hex digits (160
// bits) of SHA-256 over an injective encoding of the owner — a version
// byte, then the kind (session or handle), the tenant and the session or
// handle, each ID preceded by its length — so two distinct owners never
// share a workspace, whatever bytes their IDs hold (tenant "a" with
// session "b\x00c" and tenant "a\x00b" with session "c" are two).
func Key(owner jobs.Owner) string {
	kind, name := byte('s'), owner.Session
	if owner.Handle != "" {
		kind, name = 'h', owner.Handle
	}
	h := sha256.New()
	h.Write([]byte{2, kind})
	for _, v := range []string{owner.Tenant, name} {
		h.Write(binary.AppendUvarint(nil, uint64(len(v))))
		h.Write([]byte(v))
	}
	return hex.EncodeToString(h.Sum(nil))[:40]
}

// legacyKey is the key of runs before Key: tenant, NUL, session, which
// two owners could share. New moves such a workspace to its Key.
func legacyKey(tenant, session string) string {
	h := sha256.New()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(session))
	return hex.EncodeToString(h.Sum(nil))[:40]
}

// slotRange returns the slots of pool: [lo, hi).
func (m *Manager) slotRange(p Pool) (lo, hi int) {
	if p == MCP {
		return m.opts.MaxWorkspaces, m.opts.MaxWorkspaces + m.opts.MaxMCPWorkspaces
	}
	return 0, m.opts.MaxWorkspaces
}

// Slots is the number of slots of both pools together: with UIDBase set,
// workspace uids are UIDBase to UIDBase+Slots-1 (UIDs).
func (m *Manager) Slots() int { return m.opts.MaxWorkspaces + m.opts.MaxMCPWorkspaces }

// Quota returns the disk quota of every workspace in bytes.
func (m *Manager) Quota() int64 { return m.opts.Quota }

// Idle returns how long a workspace may go unused before it is removed.
func (m *Manager) Idle() time.Duration { return m.opts.Idle }

// Root returns the absolute directory holding the workspaces.
func (m *Manager) Root() string { return m.opts.Root }

// Acquire returns the workspace of tenant and session in the Sessions
// pool, creating it if needed: AcquireFor with jobs.Owner{tenant, session}
// and Use{}.
func (m *Manager) Acquire(tenant, session string) (ws *Workspace, release func(), err error) {
	return m.AcquireFor(jobs.Owner{Tenant: tenant, Session: session}, Use{})
}

// AcquireFor returns owner's workspace, creating a session's if needed (a
// handle's only OpenHandle creates: ErrNoHandle otherwise), and marks it
// in use until release is called: a workspace in use is never removed.
// Each use counts for the idle timer. A workspace created here counts
// against use.Pool; with use.Once it is removed when release is called and
// no other use holds it. ErrFull when the pool is full.
func (m *Manager) AcquireFor(owner jobs.Owner, use Use) (ws *Workspace, release func(), err error) {
	switch {
	case owner.Tenant == "":
		return nil, nil, errors.New("workspace: tenant is required")
	case owner.Session == "" && owner.Handle == "":
		return nil, nil, errors.New("workspace: session is required")
	case owner.Session != "" && owner.Handle != "":
		return nil, nil, errors.New("workspace: give a session or a handle, not both")
	}
	key := Key(owner)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, nil, errors.New("workspace: manager is closed")
	}
	ws = m.byKey[key]
	switch {
	case ws != nil && ws.once && owner.Handle != "":
		// A closed handle: gone for every new use.
		return nil, nil, ErrNoHandle
	case ws == nil && owner.Handle != "":
		return nil, nil, ErrNoHandle
	case ws == nil:
		ws, err = m.createLocked(meta{Tenant: owner.Tenant, Session: owner.Session, Pool: use.Pool}, key)
		if err != nil {
			return nil, nil, err
		}
		ws.once = use.Once
	case !use.Once:
		// A session that came back in a call that keeps it.
		ws.once = false
	}
	ws.busy++
	ws.lastUsed = m.now()
	var done sync.Once
	return ws, func() { done.Do(func() { m.release(ws) }) }, nil
}

// OpenHandle creates a workspace in the MCP pool for tenant and returns
// its handle: HandlePrefix and 26 characters of base32, 128 bits from
// crypto/rand (jobs.NewID), so it cannot be guessed. The handle is tied to
// tenant: AcquireFor with the handle and another tenant is ErrNoHandle.
// It lives, like a session's workspace, until it has been idle for
// Options.Idle, or until CloseHandle.
func (m *Manager) OpenHandle(tenant string) (string, *Workspace, error) {
	if tenant == "" {
		return "", nil, errors.New("workspace: tenant is required")
	}
	handle := HandlePrefix + jobs.NewID()
	key := Key(jobs.HandleOwner(tenant, handle))
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return "", nil, errors.New("workspace: manager is closed")
	}
	ws, err := m.createLocked(meta{Tenant: tenant, Handle: handle, Pool: MCP}, key)
	if err != nil {
		return "", nil, err
	}
	return handle, ws, nil
}

// HasHandle reports whether tenant's handle names a workspace that is open.
func (m *Manager) HasHandle(tenant, handle string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	ws := m.byKey[Key(jobs.HandleOwner(tenant, handle))]
	return ws != nil && !ws.once
}

// CloseHandle removes the workspace of tenant's handle now, or when its
// last use ends; from now on the handle is ErrNoHandle.
func (m *Manager) CloseHandle(ctx context.Context, tenant, handle string) error {
	key := Key(jobs.HandleOwner(tenant, handle))
	m.mu.Lock()
	ws := m.byKey[key]
	if ws == nil || ws.once {
		m.mu.Unlock()
		return ErrNoHandle
	}
	ws.once = true
	var trash string
	remove := ws.busy == 0
	if remove {
		trash = m.takeOutLocked(ws)
	}
	m.mu.Unlock()
	if remove {
		m.remove(ctx, ws, trash)
	}
	return nil
}

func (m *Manager) createLocked(md meta, key string) (*Workspace, error) {
	lo, hi := m.slotRange(md.Pool)
	slot := -1
	for i := lo; i < hi; i++ {
		if _, taken := m.slots[i]; !taken {
			slot = i
			break
		}
	}
	if slot < 0 {
		return nil, fmt.Errorf("create workspace: %w (limit %d in pool %s)", ErrFull, hi-lo, md.Pool)
	}
	md.ID, md.Slot, md.Created = newID(), slot, m.now().UTC()
	ws := m.newWorkspace(md, key)
	dir := filepath.Dir(ws.Dir)
	// A directory without meta.json is debris of a failed create.
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	if err := os.Mkdir(dir, 0o711); err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	if err := os.Mkdir(ws.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	if ws.UID >= 0 {
		if err := os.Chown(ws.Dir, ws.UID, ws.GID); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("create workspace: give files to uid %d: %w", ws.UID, err)
		}
	}
	data, _ := json.Marshal(md)
	if err := os.WriteFile(ws.meta, data, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	ws.lastUsed = m.now()
	m.byKey[key] = ws
	m.slots[slot] = ws
	m.log.Info("workspace created", "tenant_id", md.Tenant, "session_id", md.Session, "handle", md.Handle != "", "pool", md.Pool.String(), "key", key, "uid", ws.UID)
	return ws, nil
}

func (m *Manager) release(ws *Workspace) {
	m.mu.Lock()
	ws.busy--
	ws.lastUsed = m.now()
	t := ws.lastUsed
	var trash string
	remove := ws.busy == 0 && ws.once && m.byKey[ws.Key] == ws
	if remove {
		trash = m.takeOutLocked(ws)
	}
	m.mu.Unlock()
	if remove {
		m.remove(context.Background(), ws, trash)
		return
	}
	// The mtime of meta.json carries the last use across restarts.
	if err := os.Chtimes(ws.meta, t, t); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("touch workspace", "key", ws.Key, "err", err)
	}
}

// takeOutLocked takes ws out of service and moves its files aside, so
// that an Acquire for the same owner right after starts from nothing and
// never sees (or loses) a half-removed directory. It returns the trash
// directory for remove ("" when the move failed).
func (m *Manager) takeOutLocked(ws *Workspace) string {
	delete(m.byKey, ws.Key)
	trash := filepath.Join(m.opts.Root, ".trash-"+ws.Key+"-"+newID())
	if err := os.Rename(filepath.Dir(ws.Dir), trash); err != nil {
		m.log.Warn("remove workspace", "key", ws.Key, "err", err)
		return ""
	}
	return trash
}

// Sweep removes every workspace that is not in use and has been idle for
// at least the Idle option, and returns how many it removed.
func (m *Manager) Sweep(ctx context.Context) int {
	cutoff := m.now().Add(-m.opts.Idle)
	type victim struct {
		ws    *Workspace
		trash string
	}
	var victims []victim
	m.mu.Lock()
	for key, ws := range m.byKey {
		if ws.busy > 0 || ws.lastUsed.After(cutoff) {
			continue
		}
		delete(m.byKey, key)
		// Move the files aside while still holding the lock, so that an
		// Acquire for the same session right after starts from nothing
		// and never sees (or loses) a half-removed directory.
		trash := filepath.Join(m.opts.Root, ".trash-"+ws.Key+"-"+newID())
		if err := os.Rename(filepath.Dir(ws.Dir), trash); err != nil {
			m.log.Warn("remove workspace", "key", ws.Key, "err", err)
			trash = ""
		}
		victims = append(victims, victim{ws, trash})
	}
	m.mu.Unlock()
	for _, v := range victims {
		m.remove(ctx, v.ws, v.trash)
	}
	return len(victims)
}

// remove finishes removing a workspace that is already out of byKey. Its
// slot is freed only after its files are gone, so the next owner of the
// uid finds nothing of this one.
func (m *Manager) remove(ctx context.Context, ws *Workspace, trash string) {
	if m.opts.OnRemove != nil {
		if err := m.opts.OnRemove(ctx, ws); err != nil {
			m.log.Warn("release workspace backend", "key", ws.Key, "err", err)
		}
	}
	if trash != "" {
		if err := os.RemoveAll(trash); err != nil {
			m.log.Warn("remove workspace", "key", ws.Key, "err", err)
		}
	}
	m.mu.Lock()
	for slot, w := range m.slots {
		if w == ws {
			delete(m.slots, slot)
		}
	}
	m.mu.Unlock()
	m.log.Info("workspace removed", "tenant_id", ws.Owner.Tenant, "session_id", ws.Owner.Session, "handle", ws.Owner.Handle != "", "key", ws.Key)
}

// Run sweeps every interval (a quarter of Idle, between 1 s and 1 min)
// until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	every := min(max(m.opts.Idle/4, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.Sweep(ctx)
		}
	}
}

// Close makes Acquire fail from now on. Workspaces stay on disk for the
// next run.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
}

// Count returns the number of workspaces.
func (m *Manager) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byKey)
}

// CountIn returns the number of workspaces of pool, and how many of them
// are in use now.
func (m *Manager) CountIn(p Pool) (n, busy int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ws := range m.byKey {
		if ws.Pool == p {
			n++
			if ws.busy > 0 {
				busy++
			}
		}
	}
	return n, busy
}

// Usage returns the disk space the files under dir take, in bytes of
// allocated blocks (so a sparse file counts for what it really uses, and a
// directory for its own blocks). Symbolic links are not followed.
func Usage(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walked
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		} else {
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		return total, fmt.Errorf("measure workspace: %w", err)
	}
	return total, nil
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
