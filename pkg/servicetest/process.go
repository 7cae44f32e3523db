package servicetest

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// StopTimeout is how long Process.Stop waits after SIGTERM before it
// kills the process: more than a service's default SHUTDOWN_TIMEOUT (10 s).
const StopTimeout = 15 * time.Second

// Build compiles the main package in dir into outDir and returns the
// binary's path (outDir/<base name of dir>). It runs go build in dir itself,
// so the same command works in the workspace and, from a module's own
// directory, with GOWORK=off. It is for TestMain, which builds once for the
// whole package and has no testing.TB; BuildT is the one-test form.
func Build(dir, outDir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("build %s: %w", dir, err)
	}
	bin := filepath.Join(outDir, filepath.Base(abs))
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build in %s: %w\n%s", dir, err, out)
	}
	return bin, nil
}

// BuildT is Build into the test's own temporary directory; a failure
// fails the test.
func BuildT(t testing.TB, dir string) string {
	t.Helper()
	bin, err := Build(dir, t.TempDir())
	if err != nil {
		t.Fatalf("servicetest: %v", err)
	}
	return bin
}

// Process is a program a test started, such as a service's binary: its
// stdout and stderr are collected together, it is stopped when the test
// ends, and its output is logged when the test failed.
type Process struct {
	// Cmd is the running command; its ProcessState is set once Done is
	// closed.
	Cmd  *exec.Cmd
	name string
	out  Output
	done chan struct{}
}

// StartProcess starts bin with args and an environment of exactly env plus
// PATH and HOME (nothing else of the test's leaks in). name names it in
// failures.
func StartProcess(t testing.TB, name, bin string, env map[string]string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &Process{Cmd: cmd, name: name, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("servicetest: start %s: %v", name, err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.Output())
		}
	})
	return p
}

// Output returns what the process has written so far.
func (p *Process) Output() string { return p.out.String() }

// Done is closed once the process has exited and been waited for.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM and waits for the process to exit, killing it after
// StopTimeout. A process already gone is left alone.
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(StopTimeout):
		p.Kill()
	}
}

// Kill sends SIGKILL (a crash, as far as the process knows) and waits for
// it to be gone.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Await waits until the output matches re and returns the match and its
// submatches (brain's "brain listening on (\S+)" gives the address). It
// fails the test when the process exits first or within passes.
func (p *Process) Await(t testing.TB, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.After(within)
	for {
		if m := re.FindStringSubmatch(p.Output()); m != nil {
			return m
		}
		select {
		case <-p.done:
			t.Fatalf("servicetest: %s exited before its output matched %s:\n%s", p.name, re, p.Output())
		case <-deadline:
			t.Fatalf("servicetest: %s: no output matching %s within %s:\n%s", p.name, re, within, p.Output())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// AwaitHealthy waits until GET url answers 200 (a service's /healthz). It
// fails the test when the process exits first or within passes.
func (p *Process) AwaitHealthy(t testing.TB, url string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("servicetest: %s exited during start-up:\n%s", p.name, p.Output())
		case <-deadline:
			t.Fatalf("servicetest: %s not healthy at %s within %s:\n%s", p.name, url, within, p.Output())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Output collects what a child process writes (os/exec copies its output
// from goroutines of its own) for a test to read while it runs. Max > 0
// keeps only the first Max bytes, enough to explain a failure of a chatty
// server; the zero value keeps everything.
type Output struct {
	Max int

	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer; it never fails.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.Max > 0 {
		if room := o.Max - o.b.Len(); room < len(p) {
			o.b.Write(p[:max(room, 0)])
			return len(p), nil
		}
	}
	return o.b.Write(p)
}

// String returns what was written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
