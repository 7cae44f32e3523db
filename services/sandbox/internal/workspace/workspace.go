// Package workspace gives each tenant + session its own directory that
// persists across that session's sandbox calls, measures it against a disk
// quota, and removes it after it has been idle for a while.
//
// Layout under Root:
//
//	<key>/meta.json   tenant, session, slot, creation time; its mtime is the last use
//	<key>/files/      the workspace itself: what a sandbox sees as /workspace
//	.trash-*          workspaces being removed
//
// key is a hash of tenant and session, so no ID can reach outside Root or
// collide with another. The sandbox can change anything in files/ but never
// meta.json, which lives beside it.
//
// Each workspace gets a slot; with UIDBase set, its files belong to host
// uid UIDBase+slot, under which the local backend runs that session's
// commands. Distinct uids keep sessions apart even if a mount were shared,
// and give each session its own RLIMIT_NPROC count (the kernel counts
// processes per real uid, and not at all for root).
package workspace

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
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
)

// Workspace is one session's directory. Fields are read-only.
type Workspace struct {
	// Tenant and Session are the request body's tenant_id and session_id.
	Tenant, Session string
	// Key names the workspace on disk: hex SHA-256 of tenant and session.
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
	lastUsed time.Time
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
	// MaxWorkspaces caps how many workspaces exist at once; also the number
	// of uids from UIDBase. Default 1000.
	MaxWorkspaces int
	// OnRemove, when set, runs after a workspace is taken out of service
	// and before its files are deleted (a remote backend deletes its
	// sandbox there). Its error is logged.
	OnRemove func(ctx context.Context, ws *Workspace) error
	// Logger may be nil (discard).
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// ErrFull is returned by Acquire when MaxWorkspaces workspaces exist.
var ErrFull = errors.New("too many workspaces")

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
	Session string    `json:"session_id"`
	ID      string    `json:"id"`
	Slot    int       `json:"slot"`
	Created time.Time `json:"created"`
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
	if Key(md.Tenant, md.Session) != key {
		return nil, fmt.Errorf("meta.json names another workspace")
	}
	st, err := os.Stat(metaPath)
	if err != nil {
		return nil, err
	}
	if _, taken := m.slots[md.Slot]; taken || md.Slot < 0 || md.Slot >= m.opts.MaxWorkspaces {
		return nil, fmt.Errorf("slot %d is out of range or taken", md.Slot)
	}
	ws := m.newWorkspace(md, key)
	ws.lastUsed = st.ModTime()
	m.slots[md.Slot] = ws
	return ws, nil
}

func (m *Manager) newWorkspace(md meta, key string) *Workspace {
	dir := filepath.Join(m.opts.Root, key)
	ws := &Workspace{
		Tenant: md.Tenant, Session: md.Session, Key: key, ID: md.ID,
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

// Key returns the on-disk name of the workspace of tenant and session.
func Key(tenant, session string) string {
	h := sha256.New()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(session))
	return hex.EncodeToString(h.Sum(nil))[:40]
}

// Quota returns the disk quota of every workspace in bytes.
func (m *Manager) Quota() int64 { return m.opts.Quota }

// Root returns the absolute directory holding the workspaces.
func (m *Manager) Root() string { return m.opts.Root }

// Acquire returns the workspace of tenant and session, creating it if
// needed, and marks it in use until release is called: a workspace in use
// is never removed. Each Acquire counts as a use for the idle timer.
func (m *Manager) Acquire(tenant, session string) (ws *Workspace, release func(), err error) {
	if tenant == "" || session == "" {
		return nil, nil, errors.New("workspace: tenant and session are required")
	}
	key := Key(tenant, session)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, nil, errors.New("workspace: manager is closed")
	}
	ws = m.byKey[key]
	if ws == nil {
		ws, err = m.createLocked(tenant, session, key)
		if err != nil {
			return nil, nil, err
		}
	}
	ws.busy++
	ws.lastUsed = m.now()
	var once sync.Once
	return ws, func() { once.Do(func() { m.release(ws) }) }, nil
}

func (m *Manager) createLocked(tenant, session, key string) (*Workspace, error) {
	slot := -1
	for i := range m.opts.MaxWorkspaces {
		if _, taken := m.slots[i]; !taken {
			slot = i
			break
		}
	}
	if slot < 0 {
		return nil, fmt.Errorf("create workspace: %w (limit %d)", ErrFull, m.opts.MaxWorkspaces)
	}
	md := meta{Tenant: tenant, Session: session, ID: newID(), Slot: slot, Created: m.now().UTC()}
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
	m.byKey[key] = ws
	m.slots[slot] = ws
	m.log.Info("workspace created", "tenant_id", tenant, "session_id", session, "key", key, "uid", ws.UID)
	return ws, nil
}

func (m *Manager) release(ws *Workspace) {
	m.mu.Lock()
	ws.busy--
	ws.lastUsed = m.now()
	t := ws.lastUsed
	m.mu.Unlock()
	// The mtime of meta.json carries the last use across restarts.
	if err := os.Chtimes(ws.meta, t, t); err != nil && !errors.Is(err, fs.ErrNotExist) {
		m.log.Warn("touch workspace", "key", ws.Key, "err", err)
	}
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
	m.log.Info("workspace removed", "tenant_id", ws.Tenant, "session_id", ws.Session, "key", ws.Key)
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
