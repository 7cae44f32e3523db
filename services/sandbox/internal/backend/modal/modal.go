// Package modal runs sandbox commands on Modal (modal.com) through
// Modal's official Go SDK, github.com/modal-labs/modal-client/go (Modal
// has no public REST API for sandboxes, only gRPC). The backend talks to
// the SDK through the small Client and Sandbox interfaces below; sdk.go
// adapts the SDK to them, and tests use a fake of them, since Modal cannot
// be reached from here.
//
// One Modal sandbox serves one session, created on its first call from the
// configured image with networking blocked, reused by its later calls and
// terminated when the session's workspace expires (Modal also ends it
// after its lifetime, idle + a margin, if this service is gone). Each
// command runs as `bash -c` with the run's tag in its environment; a
// timeout or cancel runs backend.KillTaggedScript in the sandbox, since a
// Modal exec has no kill of its own.
package modal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"sync"
	"time"

	"github.com/brain-tools/suite/pkg/bounded"
	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// Client creates sandboxes: the part of the Modal SDK the backend needs.
type Client interface {
	// CreateSandbox starts a sandbox with tags (tenant, session) whose
	// working directory is workdir, living at most lifetime.
	CreateSandbox(ctx context.Context, workdir string, lifetime time.Duration, tags map[string]string) (Sandbox, error)
}

// Sandbox is one running Modal sandbox.
type Sandbox interface {
	ID() string
	// Exec starts argv in dir with env; Modal kills it after timeout.
	Exec(ctx context.Context, argv []string, dir string, env map[string]string, timeout time.Duration) (Process, error)
	// Stat, ReadFile, WriteFile and ListDir work on absolute paths. Their
	// errors wrap backend.ErrNotFound, ErrNotDir or ErrIsDir when the
	// path is missing, not a directory, or a directory.
	Stat(ctx context.Context, p string) (File, error)
	ReadFile(ctx context.Context, p string) ([]byte, error)
	WriteFile(ctx context.Context, p string, data []byte) error
	ListDir(ctx context.Context, p string) ([]File, error)
	Terminate(ctx context.Context) error
}

// Process is one command started in a sandbox.
type Process interface {
	Stdin() io.WriteCloser
	Stdout() io.Reader
	Stderr() io.Reader
	// Wait returns the exit code (128+n for signal n).
	Wait(ctx context.Context) (int, error)
}

// File is one entry of the sandbox's filesystem.
type File struct {
	Name    string
	Dir     bool
	Symlink bool
	Size    int64
	Mode    uint32
	ModTime time.Time
}

// Config configures the Modal backend (env vars in README.md).
type Config struct {
	// TokenID is the Modal token ID (both or neither with TokenSecret);
	// empty uses the Modal profile.
	TokenID string `env:"MODAL_TOKEN_ID"`
	// TokenSecret is the Modal token secret (both or neither with TokenID).
	TokenSecret string `env:"MODAL_TOKEN_SECRET"`
	// Environment is the Modal environment; empty is the profile's.
	Environment string `env:"MODAL_ENVIRONMENT"`
	// App groups the sandboxes; created if missing.
	App string `env:"MODAL_APP" envDefault:"brain-sandbox"`
	// Image is the registry image sandboxes start from; it needs bash,
	// grep and base64.
	Image string `env:"MODAL_IMAGE" envDefault:"debian:bookworm-slim"`
	// Workdir is the workspace inside the sandbox.
	Workdir string `env:"MODAL_WORKDIR" envDefault:"/workspace"`
	// AllowInternet gives sandboxes network access (BlockNetwork off).
	AllowInternet bool `env:"MODAL_ALLOW_INTERNET" envDefault:"false"`
}

// Backend runs commands on Modal through a Client.
type Backend struct {
	client   Client
	workdir  string
	lifetime time.Duration
	log      *slog.Logger

	mu        sync.Mutex
	sandboxes map[string]*entry // by workspace ID
}

type entry struct {
	mu sync.Mutex
	sb Sandbox
}

var _ backend.Backend = (*Backend)(nil)

// New returns a backend over client whose sandboxes have workdir as the
// workspace and live at most idle plus a margin.
func New(client Client, workdir string, idle time.Duration, logger *slog.Logger) (*Backend, error) {
	if client == nil {
		return nil, errors.New("modal backend: no client")
	}
	if workdir == "" {
		workdir = "/workspace"
	}
	if !path.IsAbs(workdir) {
		return nil, fmt.Errorf("modal backend: MODAL_WORKDIR must be an absolute path, got %q", workdir)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Backend{client: client, workdir: workdir, lifetime: idle + 5*time.Minute, log: logger, sandboxes: map[string]*entry{}}, nil
}

// Name returns "modal".
func (b *Backend) Name() string { return "modal" }

// Check reports nothing more than that the client was built: Modal has no
// cheap authenticated call that does not create something.
func (b *Backend) Check(context.Context) error { return nil }

func (b *Backend) sandboxFor(ctx context.Context, ws *workspace.Workspace) (Sandbox, error) {
	b.mu.Lock()
	e := b.sandboxes[ws.ID]
	if e == nil {
		e = &entry{}
		b.sandboxes[ws.ID] = e
	}
	b.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sb != nil {
		return e.sb, nil
	}
	sb, err := b.client.CreateSandbox(ctx, b.workdir, b.lifetime, map[string]string{"tenant_id": ws.Owner.Tenant, "session_id": ws.SessionName(), "workspace": ws.Key})
	if err != nil {
		return nil, fmt.Errorf("modal: create sandbox: %w", err)
	}
	e.sb = sb
	b.log.Info("modal sandbox created", "sandbox_id", sb.ID(), "tenant_id", ws.Owner.Tenant, "session_id", ws.SessionName())
	return sb, nil
}

// Release terminates the session's sandbox.
func (b *Backend) Release(ctx context.Context, ws *workspace.Workspace) error {
	b.mu.Lock()
	e := b.sandboxes[ws.ID]
	delete(b.sandboxes, ws.ID)
	b.mu.Unlock()
	if e == nil {
		return nil
	}
	e.mu.Lock()
	sb := e.sb
	e.sb = nil
	e.mu.Unlock()
	if sb == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := sb.Terminate(ctx); err != nil {
		return fmt.Errorf("modal: terminate sandbox %s: %w", sb.ID(), err)
	}
	return nil
}

func (b *Backend) abs(rel string) string { return path.Join(b.workdir, rel) }

// Exec runs req in the session's sandbox.
func (b *Backend) Exec(ctx context.Context, ws *workspace.Workspace, req backend.ExecRequest, out backend.OutputFunc) (backend.ExecResult, error) {
	sb, err := b.sandboxFor(ctx, ws)
	if err != nil {
		return backend.ExecResult{}, err
	}
	dir := b.abs(req.Dir)
	if req.Dir != "" {
		f, err := sb.Stat(ctx, dir)
		if err != nil {
			return backend.ExecResult{}, fmt.Errorf("cwd %q: %w", req.Dir, err)
		}
		if !f.Dir {
			return backend.ExecResult{}, fmt.Errorf("cwd %q: %w", req.Dir, backend.ErrNotDir)
		}
	}
	tag := "brain" + randomHex()
	env := make(map[string]string, len(req.Env)+1)
	for k, v := range req.Env {
		env[k] = v
	}
	env[backend.RunTagVar] = tag
	p, err := sb.Exec(ctx, []string{"bash", "-c", req.Command}, dir, env, req.Timeout)
	if err != nil {
		if ctx.Err() != nil {
			b.kill(ctx, sb, tag)
			return backend.ExecResult{ExitCode: -1, Killed: true}, nil
		}
		return backend.ExecResult{}, fmt.Errorf("modal: start command: %w", err)
	}
	go func() {
		// No stdin given means an empty one: close it at once, so a
		// command reading it ends.
		if req.Stdin != nil {
			_, _ = p.Stdin().Write(req.Stdin)
		}
		p.Stdin().Close()
	}()
	var readers sync.WaitGroup
	drain := func(r io.Reader, s backend.Stream) {
		defer readers.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				out(s, buf[:n])
			}
			if err != nil {
				return
			}
		}
	}
	readers.Add(2)
	go drain(p.Stdout(), backend.Stdout)
	go drain(p.Stderr(), backend.Stderr)

	code, err := p.Wait(ctx)
	if ctx.Err() != nil {
		b.kill(ctx, sb, tag)
		bounded.Wait(2*time.Second, readers.Wait)
		return backend.ExecResult{ExitCode: -1, Killed: true}, nil
	}
	bounded.Wait(5*time.Second, readers.Wait)
	go b.kill(context.Background(), sb, tag) // nothing outlives the command
	if err != nil {
		return backend.ExecResult{}, fmt.Errorf("modal: wait for command: %w", err)
	}
	return backend.ExecResult{ExitCode: code}, nil
}

// kill runs KillTaggedScript in the sandbox and waits for it.
func (b *Backend) kill(ctx context.Context, sb Sandbox, tag string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	p, err := sb.Exec(ctx, []string{"bash", "-c", backend.KillTaggedScript(tag)}, "/", nil, 15*time.Second)
	if err == nil {
		p.Stdin().Close()
		go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
		go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
		_, err = p.Wait(ctx)
	}
	if err != nil {
		b.log.Warn("modal: kill the command's processes", "sandbox_id", sb.ID(), "err", err)
	}
}

// WriteFile writes data to rel; the SDK makes parent directories.
func (b *Backend) WriteFile(ctx context.Context, ws *workspace.Workspace, rel string, data []byte) error {
	sb, err := b.sandboxFor(ctx, ws)
	if err != nil {
		return err
	}
	if f, err := sb.Stat(ctx, b.abs(rel)); err == nil && f.Dir {
		return fmt.Errorf("write %s: %w", rel, backend.ErrIsDir)
	}
	if err := sb.WriteFile(ctx, b.abs(rel), data); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}

// ReadFile reads rel and keeps limit bytes from offset.
func (b *Backend) ReadFile(ctx context.Context, ws *workspace.Workspace, rel string, offset, limit int64) ([]byte, int64, error) {
	sb, err := b.sandboxFor(ctx, ws)
	if err != nil {
		return nil, 0, err
	}
	f, err := sb.Stat(ctx, b.abs(rel))
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", rel, err)
	}
	if f.Dir {
		return nil, 0, fmt.Errorf("read %s: %w", rel, backend.ErrIsDir)
	}
	data, err := sb.ReadFile(ctx, b.abs(rel))
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", rel, err)
	}
	size := int64(len(data))
	if offset >= size {
		return []byte{}, size, nil
	}
	data = data[offset:]
	if int64(len(data)) > limit {
		data = data[:limit]
	}
	return data, size, nil
}

// ListFiles lists rel depth levels down.
func (b *Backend) ListFiles(ctx context.Context, ws *workspace.Workspace, rel string, depth, limit int) ([]backend.FileInfo, bool, error) {
	sb, err := b.sandboxFor(ctx, ws)
	if err != nil {
		return nil, false, err
	}
	root := b.abs(rel)
	f, err := sb.Stat(ctx, root)
	if err != nil {
		return nil, false, fmt.Errorf("list %s: %w", rel, err)
	}
	if !f.Dir {
		return nil, false, fmt.Errorf("list %s: %w", rel, backend.ErrNotDir)
	}
	var out []backend.FileInfo
	type item struct {
		dir   string
		level int
	}
	queue := []item{{"", 1}}
	for len(queue) > 0 && len(out) <= limit {
		it := queue[0]
		queue = queue[1:]
		files, err := sb.ListDir(ctx, path.Join(root, it.dir))
		if err != nil {
			if it.dir == "" {
				return nil, false, fmt.Errorf("list %s: %w", rel, err)
			}
			continue
		}
		for _, f := range files {
			p := path.Join(it.dir, f.Name)
			fi := backend.FileInfo{Path: p, Type: "file", Size: f.Size, ModTime: f.ModTime.UTC()}
			switch {
			case f.Dir:
				fi.Type, fi.Size = "dir", 0
				if it.level < depth {
					queue = append(queue, item{p, it.level + 1})
				}
			case f.Symlink:
				fi.Type, fi.Size = "symlink", 0
			}
			if f.Mode != 0 {
				fi.Mode = fmt.Sprintf("%04o", f.Mode&0o777)
			}
			out = append(out, fi)
		}
	}
	sorted, truncated := backend.SortAndCap(out, limit)
	return sorted, truncated, nil
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
