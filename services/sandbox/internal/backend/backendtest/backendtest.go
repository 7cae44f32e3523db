// Package backendtest is the behaviour suite every sandbox backend passes:
// exact exit codes, both output streams, stdin given and absent, the
// environment, the working directory, heredocs, raw bytes (split UTF-8,
// invalid bytes, ANSI escapes), a workspace that persists across calls,
// timeouts and cancels that kill background children and return on time,
// and the file operations with their errors. The local backend runs it on
// bubblewrap; the E2B and Daytona clients run it against local servers that
// speak their wire protocols and run the commands on this host.
package backendtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// Env is what the suite needs from a backend under test.
type Env struct {
	Backend backend.Backend
	// Workspace returns a workspace of a new session.
	Workspace func(t *testing.T) *workspace.Workspace
	// MergedOutput is set for providers that return stdout and stderr as
	// one stream (Daytona's session logs).
	MergedOutput bool
	// KillBound is how long a killed command may take to return past its
	// deadline. Default 3 s.
	KillBound time.Duration
}

// Output collects what a command wrote.
type Output struct {
	mu             sync.Mutex
	Stdout, Stderr bytes.Buffer
	Chunks         int
}

// Func returns the OutputFunc that fills o.
func (o *Output) Func() backend.OutputFunc {
	return func(s backend.Stream, p []byte) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.Chunks++
		if s == backend.Stderr {
			o.Stderr.Write(p)
		} else {
			o.Stdout.Write(p)
		}
	}
}

// Strings returns what was collected.
func (o *Output) Strings() (string, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.Stdout.String(), o.Stderr.String()
}

// Exec runs command in ws with a 30 s limit and returns its result and
// output, failing the test on an error.
func Exec(t *testing.T, b backend.Backend, ws *workspace.Workspace, req backend.ExecRequest) (backend.ExecResult, string, string) {
	t.Helper()
	if req.Timeout == 0 {
		req.Timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), req.Timeout)
	defer cancel()
	var o Output
	res, err := b.Exec(ctx, ws, req, o.Func())
	if err != nil {
		t.Fatalf("Exec(%q): %v", req.Command, err)
	}
	stdout, stderr := o.Strings()
	return res, stdout, stderr
}

// Marker returns a unique sleep argument ("1000.<digits>") whose processes
// Leftovers can find.
func Marker() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	n := 0
	for _, c := range b {
		n = n*256 + int(c)
	}
	return fmt.Sprintf("1000.%d", n%1_000_000_000+1)
}

// Leftovers returns the host processes whose command line contains marker.
// Backends under test run their commands on this host, so a process that
// survived a kill shows up here.
func Leftovers(marker string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range dirs {
		data, err := os.ReadFile(p)
		if err != nil || len(data) == 0 {
			continue
		}
		cmdline := string(bytes.ReplaceAll(data, []byte{0}, []byte{' '}))
		if strings.Contains(cmdline, marker) {
			// Zombies have an empty cmdline, so this one is alive.
			found = append(found, filepath.Base(filepath.Dir(p))+": "+cmdline)
		}
	}
	return found
}

// WaitNoLeftovers waits up to 3 s for processes with marker to be gone and
// fails the test if some remain.
func WaitNoLeftovers(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := Leftovers(marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes survived the kill: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Run runs the suite.
func Run(t *testing.T, env Env) {
	if env.KillBound == 0 {
		env.KillBound = 3 * time.Second
	}
	b := env.Backend
	both := func(stdout, stderr string) string {
		if env.MergedOutput {
			return stdout + stderr
		}
		return stdout
	}

	t.Run("exit codes are exact", func(t *testing.T) {
		t.Parallel()
		ws := env.Workspace(t)
		for cmd, want := range map[string]int{"true": 0, "false": 1, "exit 3": 3, "exit 255": 255, "sh -c 'exit 42'": 42, "nonexistent-command-xyz": 127} {
			res, _, _ := Exec(t, b, ws, backend.ExecRequest{Command: cmd})
			if res.ExitCode != want || res.Killed {
				t.Errorf("%q: exit %d killed %v, want %d", cmd, res.ExitCode, res.Killed, want)
			}
		}
	})

	t.Run("stdout and stderr", func(t *testing.T) {
		t.Parallel()
		ws := env.Workspace(t)
		_, stdout, stderr := Exec(t, b, ws, backend.ExecRequest{Command: "echo out; echo err >&2"})
		if env.MergedOutput {
			if got := stdout + stderr; !strings.Contains(got, "out\n") || !strings.Contains(got, "err\n") {
				t.Errorf("output %q, want out and err", got)
			}
			return
		}
		if stdout != "out\n" || stderr != "err\n" {
			t.Errorf("stdout %q stderr %q, want \"out\\n\" \"err\\n\"", stdout, stderr)
		}
	})

	t.Run("stdin", func(t *testing.T) {
		t.Parallel()
		ws := env.Workspace(t)
		in := []byte("line one\nline two\n\x00\xff end")
		_, stdout, _ := Exec(t, b, ws, backend.ExecRequest{Command: "cat", Stdin: in})
		if stdout != string(in) {
			t.Errorf("cat of stdin = %q, want %q", stdout, in)
		}
		_, stdout, _ = Exec(t, b, ws, backend.ExecRequest{Command: "wc -c", Stdin: []byte{}})
		if strings.TrimSpace(stdout) != "0" {
			t.Errorf("wc -c of empty stdin = %q, want 0", stdout)
		}
	})

	t.Run("cat without stdin returns at once", func(t *testing.T) {
		t.Parallel()
		ws := env.Workspace(t)
		start := time.Now()
		res, stdout, _ := Exec(t, b, ws, backend.ExecRequest{Command: "cat; echo done", Timeout: 20 * time.Second})
		if res.Killed || res.ExitCode != 0 || both(stdout, "") != "done\n" {
			t.Errorf("cat with no stdin: exit %d killed %v output %q", res.ExitCode, res.Killed, stdout)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("cat with no stdin took %s", d)
		}
	})

	t.Run("environment", func(t *testing.T) {
		t.Parallel()
		ws := env.Workspace(t)
		_, stdout, _ := Exec(t, b, ws, backend.ExecRequest{
			Command: `printf '%s|%s|%s' "$FOO" "$MULTI" "$EMPTY_ONE"`,
			Env:     map[string]string{"FOO": "bar baz", "MULTI": "a\nb 'q' \"d\" $x", "EMPTY_ONE": ""},
		})
		if want := "bar baz|a\nb 'q' \"d\" $x|"; stdout != want {
			t.Errorf("env = %q, want %q", stdout, want)
		}
	})

	t.Run("working directory and persistence", func(t *testing.T) {
		t.Parallel()
		ws := env.Workspace(t)
		res, _, stderr := Exec(t, b, ws, backend.ExecRequest{Command: "mkdir -p sub/deeper && echo kept > sub/f"})
		if res.ExitCode != 0 {
			t.Fatalf("mkdir: exit %d: %s", res.ExitCode, stderr)
		}
		_, stdout, _ := Exec(t, b, ws, backend.ExecRequest{Command: "pwd; cat f", Dir: "sub"})
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if len(lines) != 2 || !strings.HasSuffix(lines[0], "/sub") || lines[1] != "kept" {
			t.Errorf("in sub: %q, want a path ending /sub and kept", stdout)
		}
		var o Output
		_, err := b.Exec(context.Background(), ws, backend.ExecRequest{Command: "true", Dir: "missing", Timeout: 10 * time.Second}, o.Func())
		if !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("missing cwd: err = %v, want ErrNotFound", err)
		}
	})

	t.Run("heredoc script", func(t *testing.T) {
		t.Parallel()
		ws := env.Workspace(t)
		script := "cat > script.sh <<'EOF'\n#!/bin/sh\nfor i in 1 2 3; do echo \"n=$i\"; done\nEOF\nchmod +x script.sh\n./script.sh\n"
		res, stdout, stderr := Exec(t, b, ws, backend.ExecRequest{Command: script})
		if res.ExitCode != 0 || stdout != "n=1\nn=2\nn=3\n" {
			t.Errorf("heredoc: exit %d stdout %q stderr %q", res.ExitCode, stdout, stderr)
		}
	})

	t.Run("bytes pass through raw", func(t *testing.T) {
		t.Parallel()
		ws := env.Workspace(t)
		// é split across two writes with a pause between them, an invalid
		// byte, and an ANSI color sequence.
		_, stdout, _ := Exec(t, b, ws, backend.ExecRequest{Command: `printf '\303'; sleep 0.3; printf '\251|\377|\033[31mred\033[0m\n'`})
		if want := "\xc3\xa9|\xff|\x1b[31mred\x1b[0m\n"; stdout != want {
			t.Errorf("bytes = %q, want %q", stdout, want)
		}
	})

	t.Run("large output arrives whole", func(t *testing.T) {
		t.Parallel()
		ws := env.Workspace(t)
		var o Output
		total := 0
		var mu sync.Mutex
		out := func(s backend.Stream, p []byte) {
			mu.Lock()
			total += len(p)
			mu.Unlock()
			o.Func()(s, p[:0])
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := b.Exec(ctx, ws, backend.ExecRequest{Command: "head -c 3000000 /dev/zero; echo done >&2", Timeout: 60 * time.Second}, out)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exit %d err %v", res.ExitCode, err)
		}
		if want := 3_000_000 + len("done\n"); total != want {
			t.Errorf("received %d bytes, want %d", total, want)
		}
	})

	t.Run("timeout kills background children and returns on time", func(t *testing.T) {
		t.Parallel()
		ws := env.Workspace(t)
		marker := Marker()
		cmd := fmt.Sprintf("sleep %[1]s & (sleep %[1]s &) ; nohup sleep %[1]s >/dev/null 2>&1 & echo started; sleep %[1]s", marker)
		limit := 2 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		var o Output
		start := time.Now()
		res, err := b.Exec(ctx, ws, backend.ExecRequest{Command: cmd, Timeout: limit}, o.Func())
		elapsed := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Killed || res.ExitCode != -1 {
			t.Errorf("result %+v, want killed with exit -1", res)
		}
		if elapsed > limit+env.KillBound {
			t.Errorf("returned after %s, limit %s", elapsed, limit)
		}
		if stdout, stderr := o.Strings(); !strings.Contains(stdout+stderr, "started") {
			t.Errorf("output before the kill lost: %q %q", stdout, stderr)
		}
		WaitNoLeftovers(t, marker)
	})

	t.Run("cancel kills background children", func(t *testing.T) {
		t.Parallel()
		ws := env.Workspace(t)
		marker := Marker()
		cmd := fmt.Sprintf("setsid sleep %[1]s & (sleep %[1]s &) ; nohup sleep %[1]s >/dev/null 2>&1 & sleep %[1]s", marker)
		ctx, cancel := context.WithCancel(context.Background())
		var o Output
		done := make(chan backend.ExecResult, 1)
		go func() {
			res, err := b.Exec(ctx, ws, backend.ExecRequest{Command: cmd, Timeout: time.Minute}, o.Func())
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		// Wait until the children exist, then cancel.
		deadline := time.Now().Add(10 * time.Second)
		for len(Leftovers(marker)) < 4 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if n := len(Leftovers(marker)); n < 4 {
			t.Fatalf("only %d of 4 sleeps started", n)
		}
		cancel()
		select {
		case res := <-done:
			if !res.Killed {
				t.Errorf("result %+v, want killed", res)
			}
		case <-time.After(env.KillBound + 2*time.Second):
			t.Fatal("cancel did not return")
		}
		WaitNoLeftovers(t, marker)
	})

	t.Run("files", func(t *testing.T) {
		t.Parallel()
		ws := env.Workspace(t)
		ctx := context.Background()
		content := []byte("héllo\nworld\n")
		if err := b.WriteFile(ctx, ws, "dir/sub/a.txt", content); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		if err := b.WriteFile(ctx, ws, "b.bin", []byte{0, 1, 2, 0xff}); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		data, size, err := b.ReadFile(ctx, ws, "dir/sub/a.txt", 0, 1<<20)
		if err != nil || !bytes.Equal(data, content) || (size != int64(len(content)) && size != -1) {
			t.Errorf("ReadFile = %q, %d, %v", data, size, err)
		}
		data, _, err = b.ReadFile(ctx, ws, "dir/sub/a.txt", 7, 5)
		if err != nil || string(data) != "world" {
			t.Errorf("ReadFile(offset 7, limit 5) = %q, %v; want world", data, err)
		}
		// The sandbox sees what the file tools wrote, and may change it.
		res, stdout, stderr := Exec(t, b, ws, backend.ExecRequest{Command: "cat dir/sub/a.txt && echo more >> dir/sub/a.txt && touch dir/sub/new && od -An -tx1 b.bin"})
		if res.ExitCode != 0 || !strings.HasPrefix(stdout, string(content)) || !strings.Contains(stdout, "00 01 02 ff") {
			t.Errorf("sandbox view: exit %d stdout %q stderr %q", res.ExitCode, stdout, stderr)
		}
		data, _, _ = b.ReadFile(ctx, ws, "dir/sub/a.txt", 0, 1<<20)
		if string(data) != string(content)+"more\n" {
			t.Errorf("after the sandbox appended: %q", data)
		}

		entries, truncated, err := b.ListFiles(ctx, ws, "", 1, 100)
		if err != nil || truncated {
			t.Fatalf("ListFiles: %v truncated %v", err, truncated)
		}
		if got := names(entries); got != "b.bin:file:4 dir:dir:0" {
			t.Errorf("ListFiles depth 1 = %s", got)
		}
		entries, _, err = b.ListFiles(ctx, ws, "dir", 5, 100)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(entries); got != fmt.Sprintf("sub:dir:0 sub/a.txt:file:%d sub/new:file:0", len(content)+5) {
			t.Errorf("ListFiles dir depth 5 = %s", got)
		}
		entries, truncated, err = b.ListFiles(ctx, ws, "dir", 5, 2)
		if err != nil || !truncated || len(entries) != 2 {
			t.Errorf("ListFiles limit 2 = %s, truncated %v, %v", names(entries), truncated, err)
		}

		if _, _, err := b.ReadFile(ctx, ws, "missing", 0, 10); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("ReadFile missing: %v, want ErrNotFound", err)
		}
		if _, _, err := b.ReadFile(ctx, ws, "dir", 0, 10); !errors.Is(err, backend.ErrIsDir) {
			t.Errorf("ReadFile dir: %v, want ErrIsDir", err)
		}
		if _, _, err := b.ListFiles(ctx, ws, "b.bin", 1, 10); !errors.Is(err, backend.ErrNotDir) {
			t.Errorf("ListFiles file: %v, want ErrNotDir", err)
		}
		if _, _, err := b.ListFiles(ctx, ws, "nope", 1, 10); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("ListFiles missing: %v, want ErrNotFound", err)
		}
	})
}

func names(entries []backend.FileInfo) string {
	var parts []string
	for _, e := range entries {
		parts = append(parts, fmt.Sprintf("%s:%s:%d", e.Path, e.Type, e.Size))
	}
	return strings.Join(parts, " ")
}

// RandomName returns a short random hex string for session IDs.
func RandomName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
