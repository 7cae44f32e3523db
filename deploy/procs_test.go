package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// buildSuite builds the suite's programs pkgs ("./services/brain", …) with
// the workspace's go.work into a temporary directory and returns it.
func buildSuite(t *testing.T, ldflags string, pkgs ...string) string {
	t.Helper()
	root := repoRoot(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the binaries: %v", err)
	}
	dir := t.TempDir()
	cmd := exec.Command(goBin, append([]string{"build", "-ldflags", ldflags, "-o", dir + "/"}, pkgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(root, "go.work"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// proc is a program of the suite started by a test.
type proc struct {
	// URL is its base URL, from the address it reports (brain prints
	// "brain listening on ADDR"; the services log "listening" with addr).
	URL  string
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs strings.Builder // stderr: the JSON log lines
	done chan struct{}   // closed when stderr ends
}

// Logs returns the log lines written so far.
func (p *proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// Stop sends SIGINT and waits for the program to end (it flushes its spans
// and logs its shutdown first).
func (p *proc) Stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Errorf("%s did not stop within 20 s of SIGINT", p.cmd.Path)
	}
	_ = p.cmd.Wait()
}

// startBinary starts bin with args and exactly env (plus PATH) and waits
// until it reports its listening address. It is stopped when the test ends.
func startBinary(t *testing.T, bin string, args, env []string) *proc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	addr := make(chan string, 2)
	go func() { // brain: "brain listening on 127.0.0.1:PORT"
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "brain listening on "); ok {
				addr <- a
			}
		}
	}()
	go func() { // services: {"msg":"listening","addr":"127.0.0.1:PORT",...}
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
				addr <- rec.Addr
			}
		}
	}()
	select {
	case a := <-addr:
		p.URL = "http://" + a
		return p
	case <-p.done:
		t.Fatalf("%s exited before listening:\n%s", bin, p.Logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: no listening address within 60 s:\n%s", bin, p.Logs())
	}
	return nil
}

// freePorts returns n loopback ports that were free a moment ago, for a
// program that takes its ports from a file (Jaeger) rather than :0.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}
