package app

import (
	"testing"

	"github.com/brain-tools/suite/services/sandbox/internal/backend/daytona/daytonatest"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/e2b/e2btest"
)

// The remote backends, chosen and configured by the environment alone,
// behind the same tools.
func TestRemoteBackendsThroughTheTools(t *testing.T) {
	e2bSrv := e2btest.New("e2b_key")
	defer e2bSrv.Close()
	dtSrv := daytonatest.New("dt_key")
	defer dtSrv.Close()
	for name, env := range map[string]map[string]string{
		"e2b":     {"SANDBOX_BACKEND": "e2b", "E2B_API_KEY": "e2b_key", "E2B_API_URL": e2bSrv.URL, "E2B_ENVD_URL": e2bSrv.EnvdURL()},
		"daytona": {"SANDBOX_BACKEND": "daytona", "DAYTONA_API_KEY": "dt_key", "DAYTONA_API_URL": dtSrv.URL + "/api"},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			env["ADDR"] = "127.0.0.1:0"
			env["BRAIN_TOOLS_KEY"] = testToken
			env["SANDBOX_ROOT"] = root
			env["TOOL_TENANTS"] = "tenant-a"
			h := startHarness(t, env)
			if h.svc.Backend.Name() != name {
				t.Fatalf("backend %s", h.svc.Backend.Name())
			}
			_, m := h.exec("remote", map[string]any{"command": "echo \"$X\" > f; cat f; exit 7", "env": map[string]string{"X": "from " + name}})
			if num(m["exit_code"]) != 7 || m["stdout"] != "from "+name+"\n" {
				t.Errorf("exec: %v", m)
			}
			w := h.call("remote", "sandbox_write_file", map[string]any{"path": "dir/g.txt", "content": "héllo"})
			if w.Result.IsError {
				t.Fatalf("write: %s", w.Text())
			}
			r := h.call("remote", "sandbox_read_file", map[string]any{"path": "/workspace/dir/g.txt"}).Structured(t)
			if r["content"] != "héllo" {
				t.Errorf("read: %v", r)
			}
			a, m := h.exec("remote", map[string]any{"command": "sleep 30", "timeout_seconds": 1})
			if m["timed_out"] != true || !a.Result.IsError {
				t.Errorf("timeout: %v", m)
			}
			// The workspace expiring removes the remote sandbox.
			ws, release, _ := h.svc.Workspaces.Acquire("tenant-a", "remote")
			release()
			if err := h.svc.Backend.Release(t.Context(), ws); err != nil {
				t.Errorf("release: %v", err)
			}
		})
	}
	if n := len(e2bSrv.Sandboxes()) + len(dtSrv.Sandboxes()); n != 0 {
		t.Errorf("%d remote sandboxes left after release", n)
	}
}
