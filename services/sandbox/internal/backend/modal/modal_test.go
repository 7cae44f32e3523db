package modal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	modalsdk "github.com/modal-labs/modal-client/go"

	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/backendtest"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// Modal cannot be reached from here: these tests run the backend against
// fakeClient, a fake of the Client and Sandbox interfaces whose sandboxes
// are directories on this host and whose commands really run (so the
// shared behaviour suite applies). The SDK adapter in sdk.go is not
// exercised against Modal itself.
type fakeClient struct {
	mu         sync.Mutex
	dir        string
	created    int
	failCreate error
}

type fakeSandbox struct {
	id, root string
}

func (c *fakeClient) CreateSandbox(_ context.Context, workdir string, lifetime time.Duration, tags map[string]string) (Sandbox, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failCreate != nil {
		return nil, c.failCreate
	}
	if lifetime <= 0 || tags["tenant_id"] == "" || tags["session_id"] == "" {
		return nil, fmt.Errorf("bad create: %s %v", lifetime, tags)
	}
	c.created++
	sb := &fakeSandbox{id: fmt.Sprintf("sb-%d", c.created), root: filepath.Join(c.dir, fmt.Sprint(c.created))}
	if err := os.MkdirAll(sb.host(workdir), 0o755); err != nil {
		return nil, err
	}
	return sb, nil
}

func (s *fakeSandbox) ID() string { return s.id }
func (s *fakeSandbox) host(p string) string {
	return filepath.Join(s.root, filepath.FromSlash(path.Clean(p)))
}
func (s *fakeSandbox) Terminate(context.Context) error { return os.RemoveAll(s.root) }

type fakeProcess struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr *os.File
	done           chan struct{}
	code           int
	err            error
}

func (s *fakeSandbox) Exec(ctx context.Context, argv []string, dir string, env map[string]string, timeout time.Duration) (Process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.host(dir)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		return nil, err
	}
	p := &fakeProcess{cmd: cmd, stdin: stdin, stdout: outR, stderr: errR, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		var ee *exec.ExitError
		if errors.As(p.err, &ee) {
			ws := ee.Sys().(syscall.WaitStatus)
			p.code, p.err = ws.ExitStatus(), nil
			if ws.Signaled() {
				p.code = 128 + int(ws.Signal())
			}
		}
		// As Modal does, the streams end with the process.
		time.AfterFunc(300*time.Millisecond, func() { outR.Close(); errR.Close() })
		close(p.done)
	}()
	if timeout > 0 {
		time.AfterFunc(timeout, func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	}
	return p, nil
}

func (p *fakeProcess) Stdin() io.WriteCloser { return p.stdin }
func (p *fakeProcess) Stdout() io.Reader     { return p.stdout }
func (p *fakeProcess) Stderr() io.Reader     { return p.stderr }
func (p *fakeProcess) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		return p.code, p.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func fsError(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w (%v)", backend.ErrNotFound, err)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w (%v)", backend.ErrNotDir, err)
	case errors.Is(err, syscall.EISDIR):
		return fmt.Errorf("%w (%v)", backend.ErrIsDir, err)
	}
	return err
}

func fileFrom(fi fs.FileInfo) File {
	return File{Name: fi.Name(), Dir: fi.IsDir(), Symlink: fi.Mode()&fs.ModeSymlink != 0, Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), ModTime: fi.ModTime()}
}

func (s *fakeSandbox) Stat(_ context.Context, p string) (File, error) {
	fi, err := os.Lstat(s.host(p))
	if err != nil {
		return File{}, fsError(err)
	}
	return fileFrom(fi), nil
}

func (s *fakeSandbox) ReadFile(_ context.Context, p string) ([]byte, error) {
	data, err := os.ReadFile(s.host(p))
	return data, fsError(err)
}

func (s *fakeSandbox) WriteFile(_ context.Context, p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(s.host(p)), 0o755); err != nil {
		return fsError(err)
	}
	return fsError(os.WriteFile(s.host(p), data, 0o644))
}

func (s *fakeSandbox) ListDir(_ context.Context, p string) ([]File, error) {
	entries, err := os.ReadDir(s.host(p))
	if err != nil {
		return nil, fsError(err)
	}
	var out []File
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			out = append(out, fileFrom(fi))
		}
	}
	return out, nil
}

func setup(t *testing.T) (*Backend, *fakeClient, func(t *testing.T) *workspace.Workspace) {
	t.Helper()
	fc := &fakeClient{dir: t.TempDir()}
	b, err := New(fc, "/workspace", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := workspace.New(workspace.Options{Root: t.TempDir(), Quota: 1 << 30, Idle: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return b, fc, func(t *testing.T) *workspace.Workspace {
		w, release, err := m.Acquire("tenant", "s-"+backendtest.RandomName())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
		return w
	}
}

func TestBehaviourSuiteAgainstFakeInterface(t *testing.T) {
	b, _, ws := setup(t)
	backendtest.Run(t, backendtest.Env{Backend: b, Workspace: ws})
}

func TestSandboxPerSessionAndRelease(t *testing.T) {
	b, fc, newWS := setup(t)
	a, c := newWS(t), newWS(t)
	for range 3 {
		backendtest.Exec(t, b, a, backend.ExecRequest{Command: "true"})
	}
	backendtest.Exec(t, b, c, backend.ExecRequest{Command: "true"})
	if fc.created != 2 {
		t.Errorf("%d sandboxes for 2 sessions", fc.created)
	}
	if err := b.Release(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(context.Background(), a); err != nil {
		t.Errorf("second release: %v", err)
	}
	fc.failCreate = errors.New("quota reached")
	_, err := b.Exec(context.Background(), a, backend.ExecRequest{Command: "true"}, func(backend.Stream, []byte) {})
	if err == nil || !strings.Contains(err.Error(), "quota reached") {
		t.Errorf("create failure: %v", err)
	}
}

func TestSDKErrorsMapToBackendErrors(t *testing.T) {
	for err, want := range map[error]error{
		modalsdk.SandboxFilesystemNotFoundError{Exception: "x"}:      backend.ErrNotFound,
		modalsdk.SandboxFilesystemNotADirectoryError{Exception: "x"}: backend.ErrNotDir,
		modalsdk.SandboxFilesystemIsADirectoryError{Exception: "x"}:  backend.ErrIsDir,
	} {
		if got := fsErr(fmt.Errorf("wrapped: %w", err)); !errors.Is(got, want) {
			t.Errorf("fsErr(%v) = %v, want %v", err, got, want)
		}
	}
	f := fileOf(modalsdk.FileInfo{Name: "a", Type: modalsdk.FileTypeDirectory, ModifiedTime: 1700000000.5})
	if !f.Dir || !f.ModTime.Equal(time.Unix(1700000000, 5e8)) {
		t.Errorf("fileOf = %+v", f)
	}
	if _, err := New(nil, "/w", time.Hour, nil); err == nil {
		t.Error("nil client accepted")
	}
	if _, err := New(&fakeClient{}, "rel", time.Hour, nil); err == nil {
		t.Error("relative workdir accepted")
	}
	if _, err := NewFromConfig(context.Background(), Config{TokenID: "only-id"}, time.Hour, nil); err == nil || !strings.Contains(err.Error(), "MODAL_TOKEN_SECRET") {
		t.Errorf("half a token: %v", err)
	}
}
