package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/backendtest"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// usage measures ws as the backend does.
func usage(t *testing.T, ws *workspace.Workspace) int64 {
	t.Helper()
	u, err := workspace.Usage(ws.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// fill writes a file of n bytes into ws from the host, owned by the
// session's uid as if its sandbox had written it.
func fill(t *testing.T, ws *workspace.Workspace, name string, n int) {
	t.Helper()
	p := filepath.Join(ws.Dir, name)
	if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
	if ws.UID >= 0 {
		if err := os.Chown(p, ws.UID, ws.GID); err != nil {
			t.Fatal(err)
		}
	}
}

// The tester's repro: five calls of one session, each writing 30 files of
// 1 MB in well under one measurement interval, against a 10 MiB quota.
// Before the fix every call succeeded and the workspace grew by 29 MB a
// call. Now the first call ends over the quota with the quota named, and
// the calls after it run without the right to write, so the workspace
// does not grow past what the first call wrote.
func TestQuotaFastWriterDoesNotAccumulate(t *testing.T) {
	t.Parallel()
	const quota = 10 << 20
	f := newFixture(t, Config{Quota: quota})
	ws := f.workspace(t)
	if got := f.b.Limits().FileSize; got != quota {
		t.Errorf("RLIMIT_FSIZE %d, want the quota %d (the configured 1 GiB is larger)", got, quota)
	}
	var first int64
	for call := range 5 {
		cmd := fmt.Sprintf("for i in $(seq 1 30); do head -c 1000000 /dev/zero > g%d_$i; done", call)
		res, _, stderr := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: cmd})
		d := res.Disk
		if d == nil {
			t.Fatalf("call %d: no disk use in %+v", call, res)
		}
		if !d.Over() || d.Quota != quota || d.After != usage(t, ws) {
			t.Errorf("call %d: disk %+v (workspace %d), want over the quota %d, After the workspace's use", call, *d, usage(t, ws), quota)
		}
		switch call {
		case 0:
			// Killed at a measurement, or ended before one and caught by
			// the one after: either way no more than the command wrote,
			// which is 30 files of 1 MB each in whole 4 KiB blocks.
			first = d.After
			const wrote = (1_000_000 + 4095) / 4096 * 4096 * 30
			if d.NoWrite || d.After > wrote+64<<10 {
				t.Errorf("call 0: disk %+v, want a normal run of at most 30 MB", *d)
			}
			if res.Killed && !strings.Contains(res.Reason, "disk quota") {
				t.Errorf("call 0: killed for %q", res.Reason)
			}
		default:
			// Not one byte of data more: each file is created empty and
			// its first write fails. Only the directory may grow a block
			// for the new names.
			if !d.NoWrite || d.Before < first || d.Before > first+8192 {
				t.Errorf("call %d: disk %+v, want a no-write run starting at %d", call, *d, first)
			}
			if d.After > first+8192 {
				t.Errorf("call %d: the workspace grew from %d to %d", call, first, d.After)
			}
			if !res.Killed && (res.ExitCode != 153 || !strings.Contains(stderr, "File size limit exceeded")) {
				t.Errorf("call %d: exit %d stderr %.200q, want 153 from SIGXFSZ", call, res.ExitCode, stderr)
			}
			matches, _ := filepath.Glob(filepath.Join(ws.Dir, fmt.Sprintf("g%d_*", call)))
			for _, m := range matches {
				if fi, err := os.Stat(m); err != nil || fi.Size() != 0 {
					t.Errorf("call %d: %s has data: %v", call, m, fi.Size())
				}
			}
		}
	}
	if u := usage(t, ws); u > first+8192 {
		t.Errorf("after 5 calls the workspace uses %d, want at most the first call's %d + a directory block", u, first)
	}
	t.Logf("quota %d; the first call left %d (%.1f MiB over); five calls left %d", quota, first, float64(first-quota)/(1<<20), usage(t, ws))
}

// A workspace over its quota: every command runs without the right to
// write to files, reads and deletes work, and once deleting brings it
// under the quota commands write again.
func TestQuotaOverFullWorkspaceRunsCommandsWithoutWrites(t *testing.T) {
	t.Parallel()
	const quota = 4 << 20
	f := newFixture(t, Config{Quota: quota})
	ws := f.workspace(t)
	fill(t, ws, "big", 5<<20)
	fill(t, ws, "small", 1000)
	over := usage(t, ws)
	if over <= quota {
		t.Fatalf("workspace uses %d, not over %d", over, quota)
	}
	tests := []struct {
		name, cmd string
		exit      int
		stdout    string
		stderr    string // part of stderr
	}{
		// The first write to a file past RLIMIT_FSIZE 0 ends the writer
		// with SIGXFSZ: the shell itself (bwrap's init is the sandbox's
		// PID 1, so no process there is spared the signal), or the
		// program it runs.
		{"shell redirection", "echo data > f", 153, "", ""},
		{"a program's write", "head -c 10 /dev/zero > g; echo $?", 0, "153\n", ""},
		{"append", "echo more >> small", 153, "", ""},
		{"copy", "cp small copy", 153, "", ""},
		{"fallocate", "fallocate -l 4096 h", 153, "", ""},
		{"fallocate keeping the size", "fallocate -n -l 1M small", 1, "", "keep size mode is unsupported"},
		{"tmp is a file system too", "echo x > /tmp/x", 153, "", ""},
		{"reading and listing", "wc -c < small; ls big", 0, "1000\nbig\n", ""},
		{"pipes and output", "seq 3 | tr '\\n' ,", 0, "1,2,3,", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, stdout, stderr := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: tt.cmd})
			if res.ExitCode != tt.exit || stdout != tt.stdout || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d stdout %q stderr %q; want %d %q %q", res.ExitCode, stdout, stderr, tt.exit, tt.stdout, tt.stderr)
			}
			d := res.Disk
			if d == nil || !d.NoWrite || !d.Over() || d.Before != over || d.After != over {
				t.Errorf("disk %+v, want a no-write run, over the quota, at %d before and after", d, over)
			}
		})
	}
	// WriteFile is refused, naming the use, the quota and what to do.
	err := f.b.WriteFile(context.Background(), ws, "notes.txt", []byte("x"))
	if !errors.Is(err, backend.ErrQuota) {
		t.Fatalf("WriteFile in an over-full workspace: %v, want ErrQuota", err)
	}
	for _, want := range []string{backend.Bytes(over), backend.Bytes(quota), "already uses", "delete at least " + backend.Bytes(over-quota)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("WriteFile error %q does not say %q", err, want)
		}
	}
	if got := usage(t, ws); got != over {
		t.Fatalf("the refused commands changed the workspace: %d, was %d", got, over)
	}

	// Deleting brings it under; the command that deleted still ran
	// without writes, and says it is back under.
	res, _, stderr := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "rm big f g h copy 2>/dev/null; ls"})
	if d := res.Disk; res.ExitCode != 0 || d == nil || !d.NoWrite || d.Over() || d.After >= quota {
		t.Fatalf("rm: exit %d disk %+v stderr %q, want a no-write run that ends under the quota", res.ExitCode, d, stderr)
	}
	// And commands write again.
	res, stdout, stderr := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "echo data > f && head -c 1000000 /dev/zero > g && cat f && wc -c < g"})
	if d := res.Disk; res.ExitCode != 0 || stdout != "data\n1000000\n" || d == nil || d.NoWrite || d.Over() {
		t.Errorf("after the cleanup: exit %d %q %q disk %+v", res.ExitCode, stdout, stderr, d)
	}
	if err := f.b.WriteFile(context.Background(), ws, "notes.txt", []byte("x")); err != nil {
		t.Errorf("WriteFile after the cleanup: %v", err)
	}
}

// A writer that keeps going is killed at a measurement while it runs, and
// is left at most what it writes in one interval (plus one measurement)
// over the quota. The bound asserted is loose, as the rate depends on the
// machine; the test logs the overshoot.
func TestQuotaKillsARunningWriter(t *testing.T) {
	t.Parallel()
	const quota = 4 << 20
	f := newFixture(t, Config{Quota: quota, QuotaInterval: 20 * time.Millisecond})
	ws := f.workspace(t)
	tests := []struct{ name, cmd string }{
		{"one growing file, then more", "head -c 8000000 /dev/zero > big; sleep 10"},
		{"many files", "i=0; while :; do head -c 1000000 /dev/zero > f$i; i=$((i+1)); done"},
		{"background writers", "for j in 1 2 3; do (i=0; while :; do head -c 500000 /dev/zero > b${j}_$i; i=$((i+1)); done) & done; wait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res, _, _ := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: tt.cmd, Timeout: 20 * time.Second})
			if !res.Killed || !strings.Contains(res.Reason, "past its disk quota of "+backend.Bytes(quota)) {
				t.Fatalf("result %+v, want killed for the disk quota", res)
			}
			if time.Since(start) > 5*time.Second {
				t.Errorf("killed after %s", time.Since(start))
			}
			d := res.Disk
			if d == nil || !d.Over() || d.NoWrite || d.After > quota+64<<20 {
				t.Errorf("disk %+v, want over the quota by less than 64 MiB", d)
			}
			t.Logf("killed after %s, %.1f MiB over the quota", time.Since(start).Round(time.Millisecond), float64(d.After-quota)/(1<<20))
			// Clean up for the next case; the cleanup runs without writes.
			res, _, _ = backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "rm -f -- *"})
			if d := res.Disk; d == nil || !d.NoWrite || d.Over() {
				t.Fatalf("cleanup: %+v", d)
			}
		})
	}
}

// WriteFile counts the blocks a file takes: a file that brings the
// workspace to exactly its quota fits, one block more does not, and
// replacing a file counts only the difference.
func TestQuotaWriteFileAtItsEdge(t *testing.T) {
	t.Parallel()
	const quota = 1 << 20
	f := newFixture(t, Config{Quota: quota})
	ws := f.workspace(t)
	ctx := context.Background()
	empty := usage(t, ws) // the workspace directory's own block
	room := quota - int(empty)
	tests := []struct {
		name string
		path string
		size int
		ok   bool
	}{
		{"one block over", "a", room + 1, false},
		{"exactly the quota", "a", room, true},
		{"one byte more in a new file", "b", 1, false},
		{"replacing a file with the same size", "a", room, true},
		{"replacing it one block larger", "a", room + fsBlock, false},
		{"replacing it smaller", "a", room - fsBlock, true},
		{"the freed block", "b", fsBlock, true},
	}
	for _, tt := range tests {
		err := f.b.WriteFile(ctx, ws, tt.path, make([]byte, tt.size))
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, backend.ErrQuota)) {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "of its quota of "+backend.Bytes(quota)) {
			t.Errorf("%s: error %q does not name the quota", tt.name, err)
		}
		if u := usage(t, ws); u > quota {
			t.Fatalf("%s: the workspace uses %d, over the quota %d", tt.name, u, quota)
		}
	}
}

// The measurement after a command stands for the next command's, as long
// as nothing ran or was written in between: a quick command costs one
// walk, not two.
func TestQuotaMeasurementIsReused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{Quota: 1 << 20, QuotaInterval: time.Minute})
	ws := f.workspace(t)
	ctx := context.Background()
	steps := []struct {
		name  string
		run   func() // one command or write
		walks int64  // walks it takes
	}{
		{"first command: before and after", func() { backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "true"}) }, 2},
		{"next command: after only", func() { backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "true"}) }, 1},
		{"a write: its own quota check", func() { f.b.WriteFile(ctx, ws, "x", []byte("x")) }, 0},
		{"command after a write: before and after", func() { backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "true"}) }, 2},
		{"after release: before and after", func() {
			f.b.Release(ctx, ws)
			backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "true"})
		}, 2},
	}
	for _, s := range steps {
		n := f.b.walks.Load()
		s.run()
		if got := f.b.walks.Load() - n; got != s.walks {
			t.Errorf("%s: %d walks, want %d", s.name, got, s.walks)
		}
	}
	// While one command runs, another's measurements are its own.
	done := make(chan struct{})
	go func() {
		defer close(done)
		backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "sleep 1"})
	}()
	for running := 0; running == 0; time.Sleep(10 * time.Millisecond) {
		f.b.usageMu.Lock()
		running = f.b.usageOf(ws).running
		f.b.usageMu.Unlock()
	}
	n := f.b.walks.Load()
	backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "head -c 100000 /dev/zero > y"})
	<-done
	if got := f.b.walks.Load() - n; got != 3 {
		t.Errorf("two commands at once: %d walks, want 3 (before and after the short one, after the long one)", got)
	}
	res, _, _ := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: "true"})
	if res.Disk == nil || res.Disk.Before != usage(t, ws) {
		t.Errorf("disk %+v, want Before = the workspace's %d", res.Disk, usage(t, ws))
	}
}
