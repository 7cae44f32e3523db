package local

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/backendtest"
	"github.com/brain-tools/suite/services/sandbox/internal/reaper"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// fixture is a workspace manager and a local backend for one test.
type fixture struct {
	m *workspace.Manager
	b *Backend
}

func TestMain(m *testing.M) {
	// Reap sandbox inits as the service does (the outer bwrap leaves its
	// init to a reaper): without, their zombies fill the session's pids
	// cgroup. Only those: the tests wait for children of their own.
	if err := reaper.Become(); err == nil {
		go reaper.Run(context.Background(), nil, reaper.Sandbox)
	}
	os.Exit(m.Run())
}

// uidBase picks a block of 1000 host uids nobody else uses in this run, so
// parallel test packages do not share RLIMIT_NPROC counts.
func uidBase(t *testing.T) int {
	if os.Geteuid() != 0 {
		return 0
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(3000))
	return 1_000_000 + int(n.Int64())*1000
}

// testTag names the sandboxes of one fixture, so that its start-up
// cleanup touches no other test's.
func testTag() string { return "test-" + backendtest.RandomName() }

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatalf("bwrap is not installed: run services/sandbox/deps.sh (%v)", err)
	}
	// Not t.TempDir: its directories are 0700, and the sandbox uids must
	// pass through the root to their workspaces.
	root, err := os.MkdirTemp("", "sandbox-local-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o711)
	t.Cleanup(func() { os.RemoveAll(root) })
	base := uidBase(t)
	m, err := workspace.New(workspace.Options{Root: root, Quota: 64 << 20, Idle: time.Hour, UIDBase: base})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Quota == 0 {
		cfg.Quota = m.Quota()
	}
	cfg.ProbeUID = -1
	if base > 0 {
		cfg.ProbeUID = base + 999
		cfg.UIDs = [2]int{base, base + 999}
	}
	if cfg.Tag == "" {
		cfg.Tag = testTag()
	}
	b, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &fixture{m: m, b: b}
}

func (f *fixture) workspace(t *testing.T) *workspace.Workspace {
	t.Helper()
	ws, release, err := f.m.Acquire("tenant", "session-"+backendtest.RandomName())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return ws
}

func TestBehaviourSuite(t *testing.T) {
	f := newFixture(t, Config{})
	backendtest.Run(t, backendtest.Env{Backend: f.b, Workspace: f.workspace})
}

func TestNoNetwork(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	ws := f.workspace(t)
	cmd := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo connected", port)
	res, stdout, stderr := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: cmd})
	if strings.Contains(stdout, "connected") || res.ExitCode == 0 {
		t.Errorf("connected to the host's 127.0.0.1:%d from the sandbox: exit %d stdout %q", port, res.ExitCode, stdout)
	}
	if !strings.Contains(stderr, "Connection refused") {
		t.Errorf("stderr %q, want Connection refused", stderr)
	}
	select {
	case <-accepted:
		t.Error("the test's listener accepted a connection from the sandbox")
	case <-time.After(200 * time.Millisecond):
	}
	// The only interface is the sandbox's own loopback.
	_, stdout, _ = backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"})
	if stdout != "lo\n" {
		t.Errorf("interfaces %q, want only lo", stdout)
	}
}

func TestNoWriteOutsideWorkspaceAndTmp(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{TmpSize: 1 << 20})
	ws := f.workspace(t)
	for _, p := range []string{"/x", "/usr/x", "/etc/x", "/dev/x", "/dev/shm/x", "/bin/x", "/proc/x", "/root/x", "/home/x"} {
		res, _, _ := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "echo pwned > " + p})
		if res.ExitCode == 0 {
			t.Errorf("writing %s succeeded", p)
		}
	}
	res, stdout, stderr := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "echo a > /workspace/ok && echo b > /tmp/ok && cat /workspace/ok /tmp/ok"})
	if res.ExitCode != 0 || stdout != "a\nb\n" {
		t.Errorf("writing the workspace and /tmp: exit %d %q %q", res.ExitCode, stdout, stderr)
	}
	// /tmp is capped at TmpSize.
	res, _, stderr = backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "head -c 2000000 /dev/zero > /tmp/big"})
	if res.ExitCode == 0 || !strings.Contains(stderr, "No space left") {
		t.Errorf("2 MB into a 1 MiB /tmp: exit %d stderr %q", res.ExitCode, stderr)
	}
	// /tmp does not outlive the call; the workspace does.
	_, stdout, _ = backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "ls /tmp; cat ok"})
	if stdout != "a\n" {
		t.Errorf("next call sees %q, want only the workspace file", stdout)
	}
	// Nothing reached the host.
	for _, p := range []string{"/x", "/usr/x", "/etc/x"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists on the host", p)
		}
	}
	// The environment is cleared: nothing of the service's own leaks in.
	os.Setenv("SANDBOX_TEST_SECRET", "leak")
	defer os.Unsetenv("SANDBOX_TEST_SECRET")
	_, stdout, _ = backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "env | cut -d= -f1 | sort | tr '\\n' ' '", Env: map[string]string{"MINE": "1"}})
	if stdout != "HOME LANG MINE OLDPWD PATH PWD SHLVL _ " && stdout != "HOME LANG MINE PATH PWD SHLVL _ " {
		t.Errorf("environment names %q", stdout)
	}
}

func TestSessionsCannotSeeEachOther(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	a, b := f.workspace(t), f.workspace(t)
	ctx := context.Background()
	if err := f.b.WriteFile(ctx, a, "secret.txt", []byte("a's secret")); err != nil {
		t.Fatal(err)
	}
	// From b's sandbox: only b's files, and a's host path does not exist.
	cmd := fmt.Sprintf("ls -A /workspace; cat %s/secret.txt; ls %s; find / -name secret.txt 2>/dev/null", a.Dir, filepath.Dir(filepath.Dir(a.Dir)))
	_, stdout, _ := backendtest.Exec(t, f.b, b, backend.ExecRequest{Command: cmd})
	if strings.Contains(stdout, "secret") {
		t.Errorf("b sees a's files: %q", stdout)
	}
	// From the file tools of b: paths cannot leave b's workspace.
	for _, p := range []string{"../" + filepath.Base(filepath.Dir(a.Dir)) + "/files/secret.txt", a.Dir + "/secret.txt"} {
		rel, err := backend.CleanPath(p)
		if err == nil {
			_, _, err = f.b.ReadFile(ctx, b, rel, 0, 100)
		}
		if err == nil {
			t.Errorf("b read %s", p)
		}
	}
	// A symbolic link planted by b's sandbox does not lead the service
	// (root) out of b's workspace, for reading or writing.
	backendtest.Exec(t, f.b, b, backend.ExecRequest{Command: fmt.Sprintf("ln -s %s/secret.txt link; ln -s /etc/shadow shadow; ln -s %s dirlink", a.Dir, a.Dir)})
	for _, p := range []string{"link", "shadow", "dirlink/secret.txt"} {
		if data, _, err := f.b.ReadFile(ctx, b, p, 0, 100); err == nil {
			t.Errorf("read through %s: %q", p, data)
		}
	}
	if err := f.b.WriteFile(ctx, b, "dirlink/evil", []byte("x")); err == nil {
		t.Error("wrote through a symlink out of the workspace")
	}
	if err := f.b.WriteFile(ctx, b, "link", []byte("x")); err == nil {
		t.Error("wrote through a symlink to a's file")
	}
	if data, _ := os.ReadFile(filepath.Join(a.Dir, "secret.txt")); string(data) != "a's secret" {
		t.Errorf("a's file changed: %q", data)
	}
	if _, err := os.Stat(filepath.Join(a.Dir, "evil")); err == nil {
		t.Error("a's workspace got a file from b")
	}
}

func TestForkBombIsContained(t *testing.T) {
	t.Parallel()
	// Tight limits: this machine is shared.
	f := newFixture(t, Config{Limits: Limits{Processes: 32}})
	if !f.b.asRoot {
		t.Skip("RLIMIT_NPROC only binds a non-root uid; needs root to switch uids")
	}
	ws := f.workspace(t)
	marker := backendtest.Marker()
	limit := 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var o backendtest.Output
	start := time.Now()
	res, err := f.b.Exec(ctx, ws, backend.ExecRequest{Command: "bomb(){ bomb | bomb & }; bomb; sleep " + marker, Timeout: limit}, o.Func())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Killed || time.Since(start) > limit+3*time.Second {
		t.Errorf("fork bomb: %+v after %s", res, time.Since(start))
	}
	_, stderr := o.Strings()
	if !strings.Contains(stderr, "fork") {
		t.Errorf("stderr %q, want fork failures (RLIMIT_NPROC)", stderr[:min(len(stderr), 300)])
	}
	backendtest.WaitNoLeftovers(t, marker)
	// The session and the service stay usable at once.
	res2, stdout, _ := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "echo alive"})
	if res2.ExitCode != 0 || stdout != "alive\n" {
		t.Errorf("after the fork bomb: exit %d %q", res2.ExitCode, stdout)
	}
	if err := f.b.Probe(context.Background()); err != nil {
		t.Errorf("probe after the fork bomb: %v", err)
	}
}

func TestResourceLimits(t *testing.T) {
	t.Parallel()
	// The memory hog must hit the address-space limit well inside the CPU
	// limit the "cpu time" row needs: at 256 MiB it took 0.8 s of CPU on
	// a quiet machine (page zeroing) and, under load, past 1 s, dying by
	// SIGKILL instead; at 64 MiB it takes 0.2 s.
	f := newFixture(t, Config{Limits: Limits{CPUSeconds: 1, AddressSpace: 64 << 20, FileSize: 1 << 20, OpenFiles: 64}})
	ws := f.workspace(t)
	tests := []struct {
		name, cmd  string
		exit       int
		stderrPart string
	}{
		{"memory hog", `awk 'BEGIN { s = "x"; while (1) s = s s }'`, 2, "out of memory"},
		{"cpu time", `while :; do :; done`, 137, ""},
		{"file size", `head -c 2000000 /dev/zero > big`, 153, "File size limit exceeded"},
		{"open files", `ulimit -n`, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, stdout, stderr := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: tt.cmd, Timeout: 20 * time.Second})
			if res.ExitCode != tt.exit || res.Killed {
				t.Errorf("exit %d killed %v, want %d; stderr %q", res.ExitCode, res.Killed, tt.exit, stderr)
			}
			if !strings.Contains(stderr, tt.stderrPart) {
				t.Errorf("stderr %q, want %q", stderr, tt.stderrPart)
			}
			if tt.name == "open files" && stdout != "64\n" {
				t.Errorf("ulimit -n = %q, want 64", stdout)
			}
		})
	}
	res, _, _ := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "echo fine"})
	if res.ExitCode != 0 {
		t.Errorf("after the limits: exit %d", res.ExitCode)
	}
}

func TestConcurrentCommandsOfOneSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	ws := f.workspace(t)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, stdout, stderr := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: fmt.Sprintf("echo %d > f%d; cat f%d", i, i, i)})
			if res.ExitCode != 0 || stdout != fmt.Sprintf("%d\n", i) {
				t.Errorf("command %d: exit %d %q %q", i, res.ExitCode, stdout, stderr)
			}
		}()
	}
	wg.Wait()
}

func TestProbeExplainsWhatIsMissing(t *testing.T) {
	if _, err := newBackend(Config{Bwrap: "", Prlimit: "/usr/bin/prlimit", Tag: testTag()}); err != nil && !strings.Contains(err.Error(), "bubblewrap") {
		t.Errorf("error %q does not name bubblewrap", err)
	}
	t.Setenv("PATH", "/nonexistent")
	_, err := newBackend(Config{Tag: testTag()})
	if err == nil || !strings.Contains(err.Error(), "bwrap not found") || !strings.Contains(err.Error(), "apt-get install bubblewrap") {
		t.Errorf("without bwrap: %v", err)
	}
	_, err = newBackend(Config{Bwrap: "/usr/bin/bwrap", Tag: testTag()})
	if err == nil || !strings.Contains(err.Error(), "prlimit not found") {
		t.Errorf("without prlimit: %v", err)
	}
	// A bwrap that fails the way a host without user namespaces does.
	fake := filepath.Join(t.TempDir(), "bwrap")
	os.WriteFile(fake, []byte("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"), 0o755)
	b, err := newBackend(Config{Bwrap: fake, Prlimit: "/usr/bin/prlimit", ProbeUID: -1, Tag: testTag()})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Probe(context.Background())
	if err == nil || !strings.Contains(err.Error(), "user namespaces are blocked") || !strings.Contains(err.Error(), "max_user_namespaces") {
		t.Errorf("probe with blocked user namespaces: %v", err)
	}
	if b.Check(context.Background()) == nil {
		t.Error("Check after a failed probe is nil")
	}
	for msg, want := range map[string]string{
		"bwrap: Can't mount proc on /newroot/proc: Operation not permitted": "user namespaces",
		"bwrap: Failed to mount tmpfs: Permission denied":                   "refuses the mounts",
		"bwrap: Can't find source path /x/files: Permission denied":         "cannot reach its workspace",
		"": "(no message)",
	} {
		if err := explain(1, msg, "/x/files"); !strings.Contains(err.Error(), want) {
			t.Errorf("explain(%q) = %v, want %q", msg, err, want)
		}
	}
	if _, err := systemMounts([]string{"relative"}); err == nil {
		t.Error("relative read-only path accepted")
	}
	if _, err := systemMounts([]string{"/tmp"}); err == nil {
		t.Error("/tmp as a read-only path accepted")
	}
}

// A sandbox bwrap cannot set up is an error wrapping ErrNotStarted with
// bwrap's message, never a result with bwrap's exit status; a command that
// exits 1, even with a message that looks like bwrap's, is a result.
func TestSandboxThatDoesNotStartIsNotAnExitCode(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})

	ws := f.workspace(t)
	fake := "echo \"bwrap: Can't find source path /x: Permission denied\" >&2; exit 1"
	res, _, stderr := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: fake})
	if res.ExitCode != 1 || res.Killed || !strings.Contains(stderr, "Can't find source path") {
		t.Errorf("command exiting 1: %+v stderr %q, want exit code 1", res, stderr)
	}

	type unstartable struct {
		name  string
		spoil func(ws *workspace.Workspace) // makes ws's sandbox fail to start
		want  string                        // in the error
		root  bool                          // needs root (a session uid to lock out)
	}
	for _, tt := range []unstartable{
		{"workspace unreachable for the session's uid", func(ws *workspace.Workspace) {
			os.Chmod(filepath.Dir(ws.Dir), 0o700)
		}, "Permission denied", true},
		{"workspace gone", func(ws *workspace.Workspace) { os.RemoveAll(ws.Dir) }, "No such file", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && !f.b.asRoot {
				t.Skip("needs root: without it every sandbox runs as the service's uid, which owns the workspace")
			}
			ws := f.workspace(t)
			tt.spoil(ws)
			f.b.Check(context.Background()) // a fresh verdict, to see it forgotten below
			var o backendtest.Output
			res, err := f.b.Exec(context.Background(), ws, backend.ExecRequest{Command: "echo ran; exit 0"}, o.Func())
			if !errors.Is(err, backend.ErrNotStarted) {
				t.Fatalf("Exec = %+v, %v; want an error wrapping ErrNotStarted", res, err)
			}
			for _, want := range []string{"could not start", "did not run", "bwrap: Can't find source path " + ws.Dir, tt.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if stdout, _ := o.Strings(); stdout != "" {
				t.Errorf("the command ran: stdout %q", stdout)
			}
			f.b.probeMu.Lock()
			forgotten := f.b.probeAt.IsZero()
			f.b.probeMu.Unlock()
			if !forgotten {
				t.Error("a sandbox that did not start left the last probe's verdict standing")
			}
		})
	}
}

// The probe makes its workspace where the real ones are and reaches it as
// a session's uid does, so a root the sandbox uids cannot pass fails at
// start-up with the directory to fix.
func TestProbeFindsAnUnreachableRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: without it the probe runs as the service's uid, which can pass")
	}
	base, err := os.MkdirTemp("", "sandbox-probe-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	locked := filepath.Join(base, "private")
	root := filepath.Join(locked, "root")
	if err := os.MkdirAll(root, 0o711); err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o711)
	os.Chmod(locked, 0o700)
	b, err := newBackend(Config{ProbeUID: uidBase(t) + 999, ProbeDir: root, Tag: testTag()})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Probe(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot reach its workspace") || !strings.Contains(err.Error(), "chmod o+x "+locked) {
		t.Fatalf("probe under a 0700 directory: %v", err)
	}
	os.Chmod(locked, 0o711)
	if err := b.Probe(context.Background()); err != nil {
		t.Errorf("probe after chmod o+x: %v", err)
	}
	// The scratch workspace is gone either way.
	if left, _ := os.ReadDir(root); len(left) != 0 {
		t.Errorf("probe left %v in the root", left)
	}
}

// TestHealthWhenCommandsCannotStart: when the last commands of any
// sessions all failed to start, Check says so with bwrap's message; one
// command that starts clears it.
func TestHealthWhenCommandsCannotStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	gone := f.workspace(t)
	os.RemoveAll(gone.Dir)
	for i := range startFailLimit {
		if err := f.b.Check(context.Background()); err != nil && i == 0 {
			t.Fatalf("healthy at first: %v", err)
		}
		if _, err := f.b.Exec(context.Background(), gone, backend.ExecRequest{Command: "true"}, func(backend.Stream, []byte) {}); !errors.Is(err, backend.ErrNotStarted) {
			t.Fatalf("Exec in a removed workspace: %v", err)
		}
	}
	err := f.b.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "commands cannot start: the last 3 sandboxes failed to start") || !strings.Contains(err.Error(), "Can't find source path") {
		t.Fatalf("Check after %d failed starts = %v", startFailLimit, err)
	}
	if res, _, _ := backendtest.Exec(t, f.b, f.workspace(t), backend.ExecRequest{Command: "true"}); res.ExitCode != 0 {
		t.Fatalf("a good command: %+v", res)
	}
	if err := f.b.Check(context.Background()); err != nil {
		t.Fatalf("Check after a command started: %v", err)
	}
}
