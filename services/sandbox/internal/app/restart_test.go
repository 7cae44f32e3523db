package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/servicetest"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/backendtest"
	"github.com/brain-tools/suite/services/sandbox/internal/reaper"
)

// serveEnv makes the test binary run the sandbox service as main.go does,
// so a test can start it as a process of its own and SIGKILL it.
const serveEnv = "SANDBOX_APP_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		service.Main(Run, service.DefaultAddr(DefaultAddr))
		return
	}
	// The services the tests run in this process reap like the real one,
	// but only the sandboxes' processes: the tests wait for children of their own
	// (and start bwrap through reaper.Start).
	if err := reaper.Become(); err == nil {
		go reaper.Run(context.Background(), nil, reapable)
	}
	os.Exit(m.Run())
}

// reapable is what TestMain's reaper reaps: the sandboxes' processes, and
// any process of the tests' sandbox uids (all from 1,000,000 up), which
// covers a service's child killed between its fork and its exec.
func reapable(pid int) bool {
	if reaper.Sandbox(pid) {
		return true
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			uid, _ := strconv.Atoi(f[1])
			return uid >= 1_000_000
		}
	}
	return false
}

// child is the service running as a process of its own.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{}       // closed once the process has been waited for
	logs   *servicetest.Output // its stderr, for failure messages
}

// startProcess runs the service as a child process with environ on a free
// loopback port and waits for /healthz. The process is this test binary
// running exactly what main.go runs (TestMain's serveEnv branch).
func startProcess(t *testing.T, environ map[string]string) (*child, *harness) {
	t.Helper()
	return startProcessWith(t, environ, processOptions{})
}

// processOptions change how startProcessWith starts the service.
type processOptions struct {
	// wrap runs the service under a command: {"unshare", "--pid", ...}.
	wrap []string
	// extra are open files the service inherits as fds 3, 4, ...
	extra []*os.File
}

func startProcessWith(t *testing.T, environ map[string]string, o processOptions) (*child, *harness) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	argv := append(append([]string(nil), o.wrap...), os.Args[0])
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = o.extra
	cmd.Env = append(os.Environ(), serveEnv+"=1", "LOG_LEVEL=warn")
	for k, v := range environ {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "ADDR="+addr) // the last value of a name wins
	c := &child{cmd: cmd, exited: make(chan struct{}), logs: &servicetest.Output{}}
	cmd.Stderr = c.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() {
		// SIGTERM, so that it removes its cgroups as it stops.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-c.exited
		}
	})
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-c.exited:
			t.Fatalf("the service exited at start: %s\n%s", cmd.ProcessState, c.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service did not become healthy at %s: %v\n%s", url, err, c.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c, &harness{t: t, url: url}
}

// TestStatusAfterKillAndRestart is the tester's report: sandbox_start a
// command, SIGKILL the service, start it again on the same SANDBOX_ROOT,
// then ask sandbox_status and sandbox_cancel about the command. The answer
// says the service restarted after the command started, that the command
// was killed with it and that its outcome is unknown (unknown_outcome), not
// that it ended over an hour ago; an unknown ID of the new run still gets
// "no command".
func TestStatusAfterKillAndRestart(t *testing.T) {
	t.Parallel()
	environ := testEnviron(t)
	first, h := startProcess(t, environ)
	logs := first.logs
	marker := backendtest.Marker()
	a := h.call("s1", "sandbox_start", map[string]any{"command": "echo started; sleep " + marker + "; echo done"})
	if a.Result.IsError {
		t.Fatalf("start: %s\n%s", a.Text(), logs)
	}
	id, _ := a.Structured(t)["job_id"].(string)
	issued, ok := jobs.IssuerStart(id)
	if !ok || len(id) != 36 {
		t.Fatalf("job_id %q: want 36 characters with a run tag", id)
	}
	// Wait for the command's own output, not for its processes: bwrap's
	// command line holds the command from the start, and a service killed
	// while bwrap still sets the sandbox up can leave the command running
	// (bwrap arms --die-with-parent in the child just before execve, and
	// does not check whether its parent is already gone).
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := h.call("s1", "sandbox_status", map[string]any{"job_id": id}).Structured(t)
		out, _ := st["output"].(map[string]any)
		if st["state"] == "running" && out["stdout"] == "started\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command never ran: %v\n%s", st, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	// The command died with the service (bwrap --die-with-parent).
	backendtest.WaitNoLeftovers(t, marker)

	second, h := startProcess(t, environ)
	logs = second.logs
	probe := h.call("s1", "sandbox_start", map[string]any{"command": "true"})
	probeID, _ := probe.Structured(t)["job_id"].(string)
	restartedAt, ok := jobs.IssuerStart(probeID)
	if !ok || !issued.Before(restartedAt) {
		t.Fatalf("run tags: first run %v, second %v (ok %v)", issued, restartedAt, ok)
	}
	_, tag, _ := strings.Cut(probeID, "_")
	unknown := jobs.NewID() + "_" + tag
	restarted := func(op string) string {
		return fmt.Sprintf("sandbox_%s: command %s was started by an earlier run of the sandbox service (started %s); "+
			"the service restarted at %s, after the command started, and keeps no commands across a restart. "+
			"If it was still running then, it was killed with the service, with every process it started. "+
			"Its outcome is unknown: whatever it did may have happened, and no result or output of it was kept.",
			op, id, issued.UTC().Format("2006-01-02T15:04:05.000Z"), restartedAt.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	tests := []struct {
		name, tool, session string
		args                map[string]any
		want                string
		unknownOutcome      bool
	}{
		{"status", "sandbox_status", "s1", map[string]any{"job_id": id}, restarted("status"), true},
		{"status with a wait answers at once", "sandbox_status", "s1", map[string]any{"job_id": id, "wait_seconds": 20}, restarted("status"), true},
		{"cancel", "sandbox_cancel", "s1", map[string]any{"job_id": id}, restarted("cancel"), true},
		{"unknown ID of this run", "sandbox_status", "s1", map[string]any{"job_id": unknown},
			"sandbox_status: no command " + unknown + " in this session: either it is not this session's, or it ended more than 1 hour ago and was forgotten (a command is kept until 1 hour after it ends)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.call(tt.session, tt.tool, tt.args)
			if !r.Result.IsError || r.Result.UnknownOutcome != tt.unknownOutcome || r.Text() != tt.want {
				t.Fatalf("got is_error %v unknown_outcome %v %q\nwant unknown_outcome %v %q\n%s", r.Result.IsError, r.Result.UnknownOutcome, r.Text(), tt.unknownOutcome, tt.want, logs)
			}
			if r.Elapsed > 5*time.Second {
				t.Fatalf("took %s", r.Elapsed)
			}
		})
	}
}
