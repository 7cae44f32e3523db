package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/brain-tools/suite/services/sandbox/internal/backend/local"
)

// needBounds skips a test of the per-session cgroup bounds where the
// service cannot set them, naming what is missing (root, and cgroup v1 or
// v2 memory, pids and cpu controllers: CI runs as root on hosts that have
// them).
func needBounds(t *testing.T, h *harness) {
	t.Helper()
	b := h.svc.Backend.(*local.Backend).Bounds()
	if _, ok := b["memory"].(int64); !ok {
		t.Skipf("needs root with a cgroup memory controller (v1 or v2): %v", b["memory"])
	}
}

// TestSignalsAndExitStatusAreReal: bwrap's init is the sandbox's PID 1, so
// the command is an ordinary process whose signals are delivered and
// reported (the tester's `kill -9 $$` was ignored and reported exit 0).
func TestSignalsAndExitStatusAreReal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, tt := range []struct {
		cmd  string
		exit int64
	}{
		{"kill -9 $$", 137},
		{"kill -TERM $$; sleep 5", 143},
		{"echo $$", 0},
	} {
		a, m := h.exec("signals", map[string]any{"command": tt.cmd})
		if num(m["exit_code"]) != tt.exit || a.Result.IsError {
			t.Errorf("%q: exit %v is_error %v, want %d", tt.cmd, m["exit_code"], a.Result.IsError, tt.exit)
		}
		if tt.exit == 0 && m["stdout"] == "1\n" {
			t.Errorf("the command is PID 1 of its sandbox; want bwrap's init there")
		}
	}
}

// TestNoUserNamespacesInside: no user namespace can be made in the
// sandbox, so no private mount (the tester's 12 GB tmpfs) can get around
// the /tmp cap and the disk quota.
func TestNoUserNamespacesInside(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, cmd := range []string{
		"unshare -Ur true",
		"unshare -U true",
		"mkdir -p /tmp/m && mount -t tmpfs -o size=12g none /tmp/m",
		"unshare -Urm sh -c 'mount -t tmpfs none /tmp'",
	} {
		_, m := h.exec("userns", map[string]any{"command": cmd})
		if num(m["exit_code"]) == 0 {
			t.Errorf("%q succeeded inside the sandbox: %v", cmd, m)
		}
	}
	_, m := h.exec("userns", map[string]any{"command": "cat /proc/self/mountinfo | grep -c ' /tmp/m ' ; true"})
	if strings.TrimSpace(m["stdout"].(string)) != "0" {
		t.Errorf("a mount at /tmp/m exists: %v", m)
	}
}

// TestSessionMemoryBound: a session of several processes that together
// allocate past the session's memory bound (each one alone is well under
// it and under RLIMIT_AS) ends with a result naming the bound, while
// another session runs its commands as if nothing happened.
func TestSessionMemoryBound(t *testing.T) {
	t.Parallel()
	const bound = 96 << 20
	h := newHarness(t, map[string]string{"SANDBOX_SESSION_MEMORY_BYTES": fmt.Sprint(bound)})
	needBounds(t, h)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var otherErr error
	var otherRuns int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			a := h.call("calm", "sandbox_exec", map[string]any{"command": "echo fine"})
			if a.Result.IsError || !strings.Contains(a.Text(), "fine") {
				otherErr = fmt.Errorf("the other session's command: %s", a.Text())
				return
			}
			otherRuns++
		}
	}()
	// Six processes of 32 MiB each: 192 MiB together, twice the bound.
	hog := `for i in 1 2 3 4 5 6; do perl -e '$x = "a" x (32<<20); sleep 3' & done; wait`
	a, m := h.exec("hog", map[string]any{"command": hog, "timeout_seconds": 60})
	close(stop)
	wg.Wait()
	note, _ := m["note"].(string)
	if !a.Result.IsError || !strings.Contains(note, "the session's memory bound") || !strings.Contains(note, "100663296 bytes (96.0 MiB)") || !strings.Contains(note, "SANDBOX_SESSION_MEMORY_BYTES") {
		t.Errorf("hog: is_error %v note %q; want the session's memory bound of 96 MiB named", a.Result.IsError, note)
	}
	if otherErr != nil || otherRuns == 0 {
		t.Errorf("other session: %d runs, %v", otherRuns, otherErr)
	}
	// The bound is the session's, not the service's: the hog's session
	// runs again.
	if _, m := h.exec("hog", map[string]any{"command": "echo again"}); m["stdout"] != "again\n" {
		t.Errorf("after the bound: %v", m)
	}
}

// TestHealthNamesTheBounds: /healthz tells which per-session bounds are in
// force, and the reaper's state.
func TestHealthNamesTheBounds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"SANDBOX_SESSION_PIDS": "99", "SANDBOX_SESSION_CPUS": "0.5"})
	resp, err := http.Get(h.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var hz struct {
		Bounds map[string]any `json:"session_bounds"`
	}
	_ = json.Unmarshal(body, &hz)
	bounds := hz.Bounds
	if resp.StatusCode != 200 || bounds == nil {
		t.Fatalf("healthz %d %s", resp.StatusCode, body)
	}
	if os.Geteuid() == 0 && bounds["cgroup"] != nil {
		if bounds["pids"] != float64(99) || bounds["cpu"] != 0.5 {
			t.Errorf("bounds %v, want pids 99 and cpu 0.5", bounds)
		}
	} else if s, _ := bounds["memory"].(string); !strings.HasPrefix(s, "not in force: ") {
		t.Errorf("without cgroups, bounds %v must say why", bounds)
	}
}
