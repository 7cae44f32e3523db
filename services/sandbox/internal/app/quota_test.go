package app

import (
	"fmt"
	"strings"
	"testing"

	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// workspaceUse measures the session's workspace from the host.
func (h *harness) workspaceUse(session string) int64 {
	h.t.Helper()
	ws, release, err := h.svc.Workspaces.Acquire("tenant-a", session)
	if err != nil {
		h.t.Fatal(err)
	}
	defer release()
	u, err := workspace.Usage(ws.Dir)
	if err != nil {
		h.t.Fatal(err)
	}
	return u
}

// run runs command with sandbox_exec, or with sandbox_start and waits for
// the job, and returns the command's result.
func (h *harness) run(tool, session, command string) (isError bool, text string, m map[string]any) {
	h.t.Helper()
	if tool == "sandbox_exec" {
		a, m := h.exec(session, map[string]any{"command": command})
		return a.Result.IsError, a.Text(), m
	}
	a := h.call(session, "sandbox_start", map[string]any{"command": command})
	if a.Result.IsError {
		h.t.Fatalf("sandbox_start: %s", a.Text())
	}
	id, _ := a.Structured(h.t)["job_id"].(string)
	st := h.call(session, "sandbox_status", map[string]any{"job_id": id, "wait_seconds": 20}).Structured(h.t)
	res, _ := st["result"].(map[string]any)
	sc, _ := res["structured_content"].(map[string]any)
	if sc == nil {
		h.t.Fatalf("job %s: no result: %v", id, st)
	}
	isError, _ = res["is_error"].(bool)
	if want := map[bool]string{true: "failed", false: "succeeded"}[isError]; st["state"] != want {
		h.t.Errorf("job state %v with is_error %v, want %s", st["state"], isError, want)
	}
	content, _ := res["content"].([]any)
	for _, c := range content {
		cm, _ := c.(map[string]any)
		s, _ := cm["text"].(string)
		text += s
	}
	return isError, text, sc
}

// The tester's repro through the tools, for sandbox_exec and for
// sandbox_start jobs: SANDBOX_QUOTA_BYTES=10485760 and five calls of one
// session writing 30 files of 1 MB each. The first call that crosses the
// quota ends is_error naming the quota, the use and what to do, with the
// exit code and output still there; the calls after it run without the
// right to write, so the workspace stops growing; sandbox_write_file is
// refused; deleting files brings the session back.
func TestDiskQuotaThroughTheTools(t *testing.T) {
	t.Parallel()
	const quota = 10485760
	h := newHarness(t, map[string]string{"SANDBOX_QUOTA_BYTES": fmt.Sprint(quota)})
	for _, tool := range []string{"sandbox_exec", "sandbox_start"} {
		t.Run(tool, func(t *testing.T) {
			session := "quota-" + tool
			var first int64
			for call := range 5 {
				cmd := fmt.Sprintf("for i in $(seq 1 30); do head -c 1000000 /dev/zero > g%d_$i; done; echo wrote", call)
				isError, text, m := h.run(tool, session, cmd)
				used := h.workspaceUse(session)
				if call == 0 {
					first = used
				}
				t.Logf("call %d: is_error %v, workspace %d", call, isError, used)
				if !isError {
					t.Errorf("call %d: not is_error with the workspace at %d of %d: %s", call, used, quota, text)
				}
				for _, want := range []string{"disk quota exceeded", "the workspace uses " + fmt.Sprintf("%d bytes", used), "over its quota of 10485760 bytes (10.0 MiB)", "Delete at least"} {
					if !strings.Contains(text, want) {
						t.Errorf("call %d: text %q does not say %q", call, text, want)
					}
				}
				if num(m["quota_bytes"]) != quota || num(m["workspace_bytes"]) != used {
					t.Errorf("call %d: quota_bytes %v workspace_bytes %v, want %d %d", call, m["quota_bytes"], m["workspace_bytes"], quota, used)
				}
				if _, ok := m["exit_code"]; !ok {
					t.Errorf("call %d: no exit_code in %v", call, m)
				}
				if call == 0 {
					// Killed at a measurement, or ended before one and
					// caught by the one after it.
					killed := num(m["exit_code"]) == -1 && strings.Contains(text, "killed: the workspace grew to")
					ended := num(m["exit_code"]) == 0 && m["stdout"] == "wrote\n"
					if !killed && !ended {
						t.Errorf("call 0: exit %v stdout %q text %.300q, want killed for the quota or ended", m["exit_code"], m["stdout"], text)
					}
				}
				if call > 0 {
					// A no-write run: every head dies of SIGXFSZ on its
					// first write; the final echo writes to the output
					// pipe, which is no file, so the command ends 0.
					if !strings.Contains(text, "already over its quota when this command started") || num(m["exit_code"]) != 0 || m["stdout"] != "wrote\n" || !strings.Contains(m["stderr"].(string), "File size limit exceeded") {
						t.Errorf("call %d: exit %v stdout %q stderr %.100q text %.300q, want a no-write run", call, m["exit_code"], m["stdout"], m["stderr"], text)
					}
					if used > first+8192 {
						t.Errorf("call %d: the workspace grew from %d to %d", call, first, used)
					}
				}
			}
			a := h.call(session, "sandbox_write_file", map[string]any{"path": "notes.txt", "content": "x"})
			if !a.Result.IsError || !strings.Contains(a.Text(), "disk quota exceeded") || !strings.Contains(a.Text(), "10485760 bytes (10.0 MiB)") || !strings.Contains(a.Text(), "delete at least") {
				t.Errorf("sandbox_write_file over the quota: %s", a.Text())
			}
			isError, text, _ := h.run(tool, session, "rm g*")
			if isError || !strings.Contains(text, "commands can write again") {
				t.Errorf("rm: is_error %v %s", isError, text)
			}
			isError, text, m := h.run(tool, session, "echo fine > f && cat f")
			if isError || m["stdout"] != "fine\n" || strings.Contains(text, "quota") {
				t.Errorf("after rm: is_error %v %s", isError, text)
			}
		})
	}
}
