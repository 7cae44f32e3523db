// Package s3test starts a real S3 server, versitygw with its posix backend,
// for the storage service's tests, benchmarks and demo.
//
// Start one Server per test binary (from TestMain): versitygw takes about a
// second to come up. A missing versitygw binary is an error that says how
// to install it (services/storage/deps.sh); tests must fail on it, never
// skip.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/servicetest"
)

// Credentials and bucket every Server is started with.
const (
	AccessKey = "test-access-key"
	SecretKey = "test-secret-key-0123456789"
	Bucket    = "brain-tools"
	Region    = "us-east-1"
)

// Server is a running versitygw process.
type Server struct {
	// Endpoint is the server's base URL, http://127.0.0.1:PORT.
	Endpoint string
	// Root is the posix backend's root directory; each of its top-level
	// directories is a bucket.
	Root string

	cmd  *exec.Cmd
	done chan error
	out  *servicetest.Output
}

// Binary returns the path of the versitygw executable: $VERSITYGW, then
// versitygw on $PATH, then $(go env GOPATH)/bin/versitygw, where deps.sh
// installs it.
func Binary() (string, error) {
	if p := os.Getenv("VERSITYGW"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	for _, dir := range filepath.SplitList(build.Default.GOPATH) {
		p := filepath.Join(dir, "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("versitygw not found ($VERSITYGW, $PATH, $(go env GOPATH)/bin): run services/storage/deps.sh " +
		"(go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)")
}

// Start runs versitygw on a free 127.0.0.1 port with its posix backend in
// dir (root and sidecar metadata in subdirectories), creates Bucket, and
// waits until the server answers. Stop it with Close.
func Start(dir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, "root")
	meta := filepath.Join(dir, "meta")
	for _, d := range []string{filepath.Join(root, Bucket), meta} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("start versitygw: %w", err)
		}
	}
	var lastErr error
	// The port is picked by listening and closing; another process can take
	// it in between, so try a few times.
	for range 3 {
		s, err := start(bin, root, meta)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(bin, root, meta string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start versitygw: pick a port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()

	out := &servicetest.Output{Max: 64 << 10}
	cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--port", addr,
		"posix", "--sidecar", meta, root)
	cmd.Stdout = out
	cmd.Stderr = out
	// Own process group, killed with the test binary's parent if it dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw %s: %w", bin, err)
	}
	s := &Server{Endpoint: "http://" + addr, Root: root, cmd: cmd, done: make(chan error, 1), out: out}
	go func() { s.done <- cmd.Wait() }()

	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-s.done:
			s.done <- err
			return nil, fmt.Errorf("start versitygw on %s: exited (%v): %s", addr, err, s.Log())
		default:
		}
		if ready(s.Endpoint) {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("start versitygw on %s: not answering after 20s: %s", addr, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func ready(endpoint string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	// Unsigned requests are refused with 403: the server is up.
	return resp.Header.Get("Server") != "" || resp.StatusCode == http.StatusForbidden
}

// Log returns what versitygw printed so far.
func (s *Server) Log() string { return s.out.String() }

// Close stops the server and waits for it to exit.
func (s *Server) Close() error {
	if s.cmd.Process == nil {
		return nil
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	return nil
}

// Main is a test package's TestMain around one shared versitygw (starting
// one per test would cost a second each): it starts it in a temporary
// directory, sets *gw, runs m, stops it, removes the directory and exits
// with m's code. A missing versitygw exits 1 naming what needs it.
func Main(m *testing.M, pkg string, gw **Server) {
	dir, err := os.MkdirTemp("", pkg+"-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*gw, err = Start(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s tests need versitygw: %v\n", pkg, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	(*gw).Close()
	os.RemoveAll(dir)
	os.Exit(code)
}
