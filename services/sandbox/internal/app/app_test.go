package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/sse"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/backendtest"
)

const testToken = "test-token"

// harness is the sandbox service on a real HTTP server on 127.0.0.1.
type harness struct {
	t   testing.TB
	url string
	svc *Service
}

// testEnviron is a sandbox service's environment for a test: a fresh root
// (removed after the test; not under t.TempDir, whose 0700 parent the
// sandbox uids cannot pass) and a uid range of its own.
func testEnviron(t *testing.T) map[string]string {
	t.Helper()
	root, err := os.MkdirTemp("", "sandbox-app-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	n, _ := rand.Int(rand.Reader, big.NewInt(3000))
	return map[string]string{
		"ADDR":                "127.0.0.1:0",
		"BRAIN_TOOLS_KEY":     testToken,
		"SANDBOX_ROOT":        root,
		"SANDBOX_UID_BASE":    strconv.Itoa(4_000_000 + int(n.Int64())*1000),
		"SANDBOX_IDLE":        "1h",
		"SANDBOX_QUOTA_BYTES": strconv.Itoa(256 << 20),
		"TOOL_TENANTS":        "tenant-a,tenant-b",
	}
}

func newHarness(t *testing.T, env map[string]string) *harness {
	t.Helper()
	environ := testEnviron(t)
	for k, v := range env {
		environ[k] = v
	}
	return startHarness(t, environ)
}

func startHarness(t testing.TB, environ map[string]string) *harness {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatalf("bwrap is not installed: run services/sandbox/deps.sh (%v)", err)
	}
	cfg, err := ParseConfig(environ)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := Build(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Server.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			t.Errorf("close the service: %v", err)
		}
	})
	return &harness{t: t, url: srv.URL, svc: svc}
}

// answer is one tool call's response.
type answer struct {
	Result   *tool.Result
	Progress []map[string]any
	Streamed bool
	Elapsed  time.Duration
}

// Structured decodes the result's structured_content.
func (a answer) Structured(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(a.Result.StructuredContent, &m); err != nil {
		t.Fatalf("structured_content %s: %v", a.Result.StructuredContent, err)
	}
	return m
}

// Text returns the result's text blocks.
func (a answer) Text() string {
	var parts []string
	for _, c := range a.Result.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

func (h *harness) call(session, name string, args any) answer {
	h.t.Helper()
	return h.callAs("tenant-a", session, name, args)
}

func (h *harness) callAs(tenant, session, name string, args any) answer {
	h.t.Helper()
	a, err := h.do(tenant, session, name, args)
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

// try is call for a goroutine, or for a service that may die mid-call:
// an error instead of failing the test.
func (h *harness) try(session, name string, args any) (answer, error) {
	return h.do("tenant-a", session, name, args)
}

// tryCall is try that returns the structured content, nil on any error.
func (h *harness) tryCall(session, name string, args any) map[string]any {
	a, err := h.try(session, name, args)
	if err != nil || a.Result == nil || !a.Result.HasStructured() {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(a.Result.StructuredContent, &m) != nil {
		return nil
	}
	return m
}

// do makes one tool call over HTTP as the host does.
func (h *harness) do(tenant, session, name string, args any) (answer, error) {
	rawArgs, err := json.Marshal(args)
	if err != nil {
		return answer{}, err
	}
	body, _ := json.Marshal(tool.Request{TenantID: tenant, SessionID: session, CallID: "call-" + backendtest.RandomName(), Arguments: rawArgs})
	req, _ := http.NewRequest(http.MethodPost, h.url+"/tools/"+name, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+testToken)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("POST %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		return answer{}, fmt.Errorf("POST %s: status %d: %s", name, resp.StatusCode, data)
	}
	var a answer
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		data, _ := io.ReadAll(resp.Body)
		a.Result, err = tool.DecodeResult(data)
		if err != nil {
			return a, fmt.Errorf("%s: %w", name, err)
		}
	case "text/event-stream":
		a.Streamed = true
		for ev, err := range sse.Read(resp.Body, 4<<20) {
			if err != nil {
				return a, fmt.Errorf("%s: read SSE: %w", name, err)
			}
			switch ev.Name {
			case sse.EventProgress:
				var p map[string]any
				if err := json.Unmarshal([]byte(ev.Data), &p); err != nil {
					return a, fmt.Errorf("progress %q: %w", ev.Data, err)
				}
				a.Progress = append(a.Progress, p)
			case sse.EventResult:
				if a.Result, err = tool.DecodeResult([]byte(ev.Data)); err != nil {
					return a, fmt.Errorf("%s: result event: %w", name, err)
				}
			default:
				return a, fmt.Errorf("%s: unexpected event %q", name, ev.Name)
			}
		}
		if a.Result == nil {
			return a, fmt.Errorf("%s: stream ended without a result", name)
		}
	default:
		return a, fmt.Errorf("%s: content type %q", name, mt)
	}
	a.Elapsed = time.Since(start)
	return a, nil
}

func (h *harness) exec(session string, args map[string]any) (answer, map[string]any) {
	h.t.Helper()
	a := h.call(session, "sandbox_exec", args)
	if !a.Result.HasStructured() {
		h.t.Fatalf("sandbox_exec %v: no structured content: %s", args["command"], a.Text())
	}
	return a, a.Structured(h.t)
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

func TestExecResult(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	tests := []struct {
		name, command string
		args          map[string]any
		exit          int64
		stdout        string
		stderr        string
	}{
		{"exit 0", "echo hi", nil, 0, "hi\n", ""},
		{"exit codes are exact", "echo out; echo err >&2; exit 42", nil, 42, "out\n", "err\n"},
		{"exit 255", "exit 255", nil, 255, "", ""},
		{"not found", "no-such-program-xyz", nil, 127, "", "/bin/bash: line 1: no-such-program-xyz: command not found\n"},
		{"cat without stdin returns at once", "cat; echo eof", nil, 0, "eof\n", ""},
		{"stdin", "tr a-z A-Z", map[string]any{"stdin": "shout\n"}, 0, "SHOUT\n", ""},
		{"heredoc", "cat <<'EOF' > s.sh\necho \"$((6*7))\"\nEOF\nbash s.sh", nil, 0, "42\n", ""},
		{"env and cwd", "mkdir -p d && cd d && pwd && echo \"$GREETING\"", map[string]any{"env": map[string]string{"GREETING": "hello world"}}, 0, "/workspace/d\nhello world\n", ""},
		{"utf-8 split across reads", `printf 'caf\303'; sleep 0.3; printf '\251\n'`, nil, 0, "café\n", ""},
		{"invalid bytes become U+FFFD", `printf 'a\377\376b'`, nil, 0, "a\uFFFD\uFFFDb", ""},
		{"ANSI escapes pass through", `printf '\033[1;31mred\033[0m'`, nil, 0, "\x1b[1;31mred\x1b[0m", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]any{"command": tt.command}
			for k, v := range tt.args {
				args[k] = v
			}
			a, m := h.exec("s-"+backendtest.RandomName(), args)
			if num(m["exit_code"]) != tt.exit || m["stdout"] != tt.stdout || m["stderr"] != tt.stderr {
				t.Errorf("got exit %v stdout %q stderr %q; want %d %q %q", m["exit_code"], m["stdout"], m["stderr"], tt.exit, tt.stdout, tt.stderr)
			}
			if a.Result.IsError || m["timed_out"] != false || m["cancelled"] != false {
				t.Errorf("is_error %v timed_out %v cancelled %v", a.Result.IsError, m["timed_out"], m["cancelled"])
			}
			if !strings.Contains(a.Text(), fmt.Sprintf("exit code %d", tt.exit)) {
				t.Errorf("text %q does not name the exit code", a.Text())
			}
		})
	}
	t.Run("cat without stdin is quick", func(t *testing.T) {
		a, _ := h.exec("quick", map[string]any{"command": "cat", "timeout_seconds": 30})
		if a.Elapsed > 5*time.Second {
			t.Errorf("cat with no stdin took %s", a.Elapsed)
		}
	})
}

func TestWorkspacePersistsPerSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	h.exec("one", map[string]any{"command": "echo kept > note"})
	_, m := h.exec("one", map[string]any{"command": "cat note"})
	if m["stdout"] != "kept\n" {
		t.Errorf("same session, next call: %q", m["stdout"])
	}
	// Another session, and the same session ID of another tenant, see
	// nothing of it: the body's tenant_id and session_id pick the workspace.
	for _, who := range [][2]string{{"tenant-a", "two"}, {"tenant-b", "one"}} {
		a := h.callAs(who[0], who[1], "sandbox_exec", map[string]any{"command": "ls -A; cat note"})
		m := a.Structured(t)
		if m["stdout"] != "" || num(m["exit_code"]) != 1 {
			t.Errorf("%s/%s sees %q (exit %v)", who[0], who[1], m["stdout"], m["exit_code"])
		}
	}
	// Arguments cannot name another session.
	a := h.call("two", "sandbox_exec", map[string]any{"command": "true", "session_id": "one"})
	if !a.Result.IsError || !strings.Contains(a.Text(), "session_id") {
		t.Errorf("session_id in arguments: %s", a.Text())
	}
}

func TestHugeOutputKeepsMemoryBounded(t *testing.T) {
	// Not parallel: it measures this process's allocations.
	h := newHarness(t, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	a, m := h.exec("huge", map[string]any{"command": "seq 1 100000000", "timeout_seconds": 600})
	runtime.ReadMemStats(&after)
	const total = 888_888_898 // bytes `seq 1 100000000` writes
	head, tail := 16<<10, 16<<10
	if num(m["exit_code"]) != 0 || num(m["stdout_bytes"]) != total {
		t.Fatalf("exit %v, stdout_bytes %v, want 0 and %d", m["exit_code"], m["stdout_bytes"], total)
	}
	if got, want := num(m["stdout_dropped_bytes"]), int64(total-head-tail); got != want {
		t.Errorf("stdout_dropped_bytes = %d, want %d", got, want)
	}
	stdout := m["stdout"].(string)
	marker := fmt.Sprintf("\n[... %d bytes dropped ...]\n", total-head-tail)
	gotHead, gotTail, ok := strings.Cut(stdout, marker)
	if !ok {
		t.Fatalf("no drop marker in stdout (%d bytes)", len(stdout))
	}
	if len(gotHead) != head || !strings.HasPrefix(gotHead, "1\n2\n3\n") || len(gotTail) != tail || !strings.HasSuffix(gotTail, "99999999\n100000000\n") {
		t.Errorf("head %d bytes %q..., tail %d bytes ...%q", len(gotHead), gotHead[:12], len(gotTail), gotTail[len(gotTail)-20:])
	}
	// 889 MB went through; the service allocated a small fraction of it.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("allocated %d MB while streaming 889 MB of output", alloc>>20)
	}
	if len(a.Progress) == 0 {
		t.Error("no progress events during a long output")
	}
	for _, p := range a.Progress {
		if s, _ := p["stdout"].(string); len(s) > 4<<10 {
			t.Errorf("progress event with %d bytes of stdout, cap 4096", len(s))
		}
	}
}

func TestProgressIsThrottled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	a, m := h.exec("progress", map[string]any{"command": "for i in $(seq 1 15); do echo line$i; echo err$i >&2; sleep 0.1; done"})
	if num(m["exit_code"]) != 0 {
		t.Fatalf("exit %v", m["exit_code"])
	}
	if !a.Streamed || len(a.Progress) < 3 {
		t.Fatalf("streamed %v with %d progress events, want SSE with several", a.Streamed, len(a.Progress))
	}
	// At most about 10 a second.
	if max := int(a.Elapsed/(100*time.Millisecond)) + 1; len(a.Progress) > max {
		t.Errorf("%d progress events in %s, want at most %d", len(a.Progress), a.Elapsed, max)
	}
	var out, errOut strings.Builder
	for _, p := range a.Progress {
		s, _ := p["stdout"].(string)
		e, _ := p["stderr"].(string)
		out.WriteString(s)
		errOut.WriteString(e)
		if _, ok := p["elapsed_ms"]; !ok {
			t.Errorf("progress without elapsed_ms: %v", p)
		}
	}
	// Progress carries the output as it came, up to the last event.
	if !strings.HasPrefix(m["stdout"].(string), out.String()) || !strings.HasPrefix(m["stderr"].(string), errOut.String()) || out.Len() == 0 {
		t.Errorf("progress stdout %q is not a prefix of %q", out.String(), m["stdout"])
	}
	// A quick command answers plain JSON.
	a, _ = h.exec("progress", map[string]any{"command": "true"})
	if a.Streamed {
		t.Error("`true` was answered with SSE")
	}
}

func TestTimeoutKillsTheWholeTree(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	marker := backendtest.Marker()
	cmd := fmt.Sprintf("sleep %[1]s & (sleep %[1]s &); nohup sleep %[1]s >/dev/null 2>&1 & echo started; sleep %[1]s", marker)
	a, m := h.exec("timeout", map[string]any{"command": cmd, "timeout_seconds": 1})
	if !a.Result.IsError || m["timed_out"] != true || num(m["exit_code"]) != -1 || m["stdout"] != "started\n" {
		t.Errorf("is_error %v timed_out %v exit %v stdout %q", a.Result.IsError, m["timed_out"], m["exit_code"], m["stdout"])
	}
	if a.Elapsed > 4*time.Second {
		t.Errorf("returned after %s for a 1 s timeout", a.Elapsed)
	}
	if !strings.Contains(a.Text(), "timed out") {
		t.Errorf("text %q", a.Text())
	}
	backendtest.WaitNoLeftovers(t, marker)
}

func TestJobs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	marker := backendtest.Marker()
	cmd := fmt.Sprintf("echo begun; sleep %[1]s & (sleep %[1]s &); nohup sleep %[1]s >/dev/null 2>&1 & sleep %[1]s", marker)
	a := h.call("jobs", "sandbox_start", map[string]any{"command": cmd})
	if a.Result.IsError {
		t.Fatalf("start: %s", a.Text())
	}
	id, _ := a.Structured(t)["job_id"].(string)
	if a.Structured(t)["state"] != "running" || len(id) != 36 || !jobs.ValidID(id) {
		t.Fatalf("start answered %s", a.Result.StructuredContent)
	}
	if a.Elapsed > 2*time.Second {
		t.Errorf("start took %s; it must answer at once", a.Elapsed)
	}
	// Status shows the output so far.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := h.call("jobs", "sandbox_status", map[string]any{"job_id": id}).Structured(t)
		out, _ := st["output"].(map[string]any)
		if st["state"] == "running" && out["stdout"] == "begun\n" && len(backendtest.Leftovers(marker)) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed the running job's output: %v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Other sessions and tenants cannot see or cancel it.
	for _, who := range [][2]string{{"tenant-a", "other"}, {"tenant-b", "jobs"}} {
		for _, name := range []string{"sandbox_status", "sandbox_cancel"} {
			r := h.callAs(who[0], who[1], name, map[string]any{"job_id": id})
			if !r.Result.IsError || !strings.Contains(r.Text(), "no command") {
				t.Errorf("%s from %s/%s: %s", name, who[0], who[1], r.Text())
			}
		}
	}
	// Cancel kills the whole tree.
	c := h.call("jobs", "sandbox_cancel", map[string]any{"job_id": id})
	st := c.Structured(t)
	if st["state"] != "cancelled" {
		t.Errorf("after cancel: %v", st)
	}
	res, _ := st["result"].(map[string]any)
	sc, _ := res["structured_content"].(map[string]any)
	if sc["cancelled"] != true || num(sc["exit_code"]) != -1 {
		t.Errorf("cancelled job's result: %v", res)
	}
	backendtest.WaitNoLeftovers(t, marker)

	// A job that ends on its own: status with wait_seconds returns its result.
	a = h.call("jobs", "sandbox_start", map[string]any{"command": "sleep 0.5; echo finished; exit 3"})
	id = a.Structured(t)["job_id"].(string)
	st = h.call("jobs", "sandbox_status", map[string]any{"job_id": id, "wait_seconds": 10}).Structured(t)
	res, _ = st["result"].(map[string]any)
	sc, _ = res["structured_content"].(map[string]any)
	if st["state"] != "succeeded" || num(sc["exit_code"]) != 3 || sc["stdout"] != "finished\n" {
		t.Errorf("finished job: %v", st)
	}
	// A job's timeout kills it like sandbox_exec's.
	a = h.call("jobs", "sandbox_start", map[string]any{"command": "sleep " + marker, "timeout_seconds": 1})
	id = a.Structured(t)["job_id"].(string)
	st = h.call("jobs", "sandbox_status", map[string]any{"job_id": id, "wait_seconds": 10}).Structured(t)
	res, _ = st["result"].(map[string]any)
	sc, _ = res["structured_content"].(map[string]any)
	if st["state"] != "failed" || sc["timed_out"] != true {
		t.Errorf("timed-out job: %v", st)
	}
	backendtest.WaitNoLeftovers(t, marker)

	_, tag, _ := strings.Cut(id, "_")
	for args, want := range map[string]string{
		`{"job_id":"nope"}`: "job_id",
		`{"job_id":"aaaaaaaaaaaaaaaaaaaaaaaaaa","wait_seconds":21}`: "wait_seconds",
		// An ID of this run that names no job.
		`{"job_id":"aaaaaaaaaaaaaaaaaaaaaaaaaa_` + tag + `"}`: "no command",
		// An untagged ID, the shape before run tags: not of this run.
		`{"job_id":"aaaaaaaaaaaaaaaaaaaaaaaaaa"}`: "its outcome is unknown",
	} {
		r := h.call("jobs", "sandbox_status", json.RawMessage(args))
		if !r.Result.IsError || !strings.Contains(strings.ToLower(r.Text()), want) {
			t.Errorf("status %s: %s", args, r.Text())
		}
	}
}

func TestForkBombAndMemoryHogLeaveTheServiceHealthy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"SANDBOX_LIMIT_PROCS": "32", "SANDBOX_LIMIT_AS_BYTES": strconv.Itoa(256 << 20)})
	a, m := h.exec("bomb", map[string]any{"command": "bomb(){ bomb | bomb & }; bomb; sleep 100", "timeout_seconds": 3})
	if m["timed_out"] != true || !a.Result.IsError || !strings.Contains(m["stderr"].(string), "fork") {
		t.Errorf("fork bomb: timed_out %v stderr %.200q", m["timed_out"], m["stderr"])
	}
	a, m = h.exec("hog", map[string]any{"command": `awk 'BEGIN { s = "x"; while (1) s = s s }'`})
	if num(m["exit_code"]) != 2 || !strings.Contains(m["stderr"].(string), "out of memory") || a.Result.IsError {
		t.Errorf("memory hog: exit %v stderr %q", m["exit_code"], m["stderr"])
	}
	resp, err := http.Get(h.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"backend":"local"`) {
		t.Errorf("healthz after the bomb: %d %s", resp.StatusCode, body)
	}
	_, m = h.exec("bomb", map[string]any{"command": "echo still here"})
	if m["stdout"] != "still here\n" {
		t.Errorf("after the bomb: %v", m)
	}
}

func TestArgumentLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	long := strings.Repeat("x", 64<<10)
	tests := []struct {
		tool string
		args map[string]any
		want string // "" means accepted
	}{
		{"sandbox_exec", map[string]any{"command": ""}, "command"},
		{"sandbox_exec", map[string]any{"command": "   "}, "command"},
		{"sandbox_exec", map[string]any{"command": "true", "timeout_seconds": 0}, "timeout_seconds"},
		{"sandbox_exec", map[string]any{"command": "true", "timeout_seconds": 3601}, "timeout_seconds"},
		{"sandbox_exec", map[string]any{"command": "true", "timeout_seconds": 3600}, ""},
		{"sandbox_exec", map[string]any{"command": "true", "timeout_seconds": 1.5}, "timeout_seconds"},
		{"sandbox_exec", map[string]any{"command": "#" + long[:len(long)-1]}, ""},
		{"sandbox_exec", map[string]any{"command": "#" + long}, "command"},
		{"sandbox_exec", map[string]any{"command": "true", "env": map[string]string{"1BAD": "x"}}, "env"},
		{"sandbox_exec", map[string]any{"command": "true", "env": map[string]string{"A": "x\x00"}}, "env.A"},
		{"sandbox_exec", map[string]any{"command": "true", "cwd": "../elsewhere"}, "cwd"},
		{"sandbox_exec", map[string]any{"command": "true", "cwd": "/etc"}, "cwd"},
		{"sandbox_exec", map[string]any{"command": "true", "cwd": "missing"}, "no such file"},
		{"sandbox_exec", map[string]any{"command": "wc -c", "stdin": strings.Repeat("y", 1<<20)}, ""},
		{"sandbox_exec", map[string]any{"command": "true", "stdin": strings.Repeat("y", 1<<20+1)}, "stdin"},
		{"sandbox_exec", map[string]any{"command": "true", "bogus": 1}, "bogus"},
		{"sandbox_write_file", map[string]any{"path": "../x", "content": "x"}, "path"},
		{"sandbox_write_file", map[string]any{"path": "/workspace", "content": "x"}, "path"},
		{"sandbox_write_file", map[string]any{"path": "b", "content": "!!", "encoding": "base64"}, "base64"},
		{"sandbox_write_file", map[string]any{"path": "b", "content": "x", "encoding": "latin1"}, "encoding"},
		{"sandbox_write_file", map[string]any{"path": "big", "content": strings.Repeat("z", 2<<20)}, ""},
		{"sandbox_write_file", map[string]any{"path": "big", "content": strings.Repeat("z", 2<<20+1)}, "content"},
		{"sandbox_read_file", map[string]any{"path": "big", "max_bytes": 0}, "max_bytes"},
		{"sandbox_read_file", map[string]any{"path": "big", "max_bytes": 256 << 10}, ""},
		{"sandbox_read_file", map[string]any{"path": "big", "max_bytes": 256<<10 + 1}, "max_bytes"},
		{"sandbox_read_file", map[string]any{"path": "big", "offset": -1}, "offset"},
		{"sandbox_list_files", map[string]any{"depth": 0}, "depth"},
		{"sandbox_list_files", map[string]any{"depth": 11}, "depth"},
		{"sandbox_list_files", map[string]any{"max_entries": 1001}, "max_entries"},
		{"sandbox_list_files", map[string]any{"depth": 10, "max_entries": 1000}, ""},
	}
	for _, tt := range tests {
		a := h.call("limits", tt.tool, tt.args)
		switch {
		case tt.want == "" && a.Result.IsError:
			t.Errorf("%s %v: refused: %s", tt.tool, short(tt.args), a.Text())
		case tt.want != "" && (!a.Result.IsError || !strings.Contains(a.Text(), tt.want)):
			t.Errorf("%s %v: %s; want an error naming %q", tt.tool, short(tt.args), a.Text(), tt.want)
		}
	}
}

func short(args map[string]any) string {
	s := fmt.Sprint(args)
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func TestFileTools(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	w := h.call("files", "sandbox_write_file", map[string]any{"path": "/workspace/src/main.txt", "content": "héllo\n"})
	if w.Result.IsError || num(w.Structured(t)["bytes"]) != 7 {
		t.Fatalf("write: %s", w.Text())
	}
	h.call("files", "sandbox_write_file", map[string]any{"path": "bin.dat", "content": "AAEC/w==", "encoding": "base64"})
	_, m := h.exec("files", map[string]any{"command": "cat src/main.txt; od -An -tx1 bin.dat; echo more >> src/main.txt"})
	if m["stdout"] != "héllo\n 00 01 02 ff\n" {
		t.Errorf("the sandbox sees %q", m["stdout"])
	}
	r := h.call("files", "sandbox_read_file", map[string]any{"path": "src/main.txt"}).Structured(t)
	if r["content"] != "héllo\nmore\n" || r["encoding"] != "utf-8" || r["truncated"] != false || num(r["size"]) != 12 {
		t.Errorf("read: %v", r)
	}
	// A cut inside é moves back to the character's start.
	r = h.call("files", "sandbox_read_file", map[string]any{"path": "src/main.txt", "max_bytes": 2}).Structured(t)
	if r["content"] != "h" || num(r["bytes"]) != 1 || r["truncated"] != true {
		t.Errorf("read 2 bytes: %v", r)
	}
	r = h.call("files", "sandbox_read_file", map[string]any{"path": "src/main.txt", "offset": 1, "max_bytes": 2}).Structured(t)
	if r["content"] != "é" || r["truncated"] != true {
		t.Errorf("read from 1: %v", r)
	}
	r = h.call("files", "sandbox_read_file", map[string]any{"path": "bin.dat"}).Structured(t)
	if r["content"] != "AAEC/w==" || r["encoding"] != "base64" {
		t.Errorf("read binary: %v", r)
	}
	l := h.call("files", "sandbox_list_files", map[string]any{"depth": 2})
	entries, _ := l.Structured(t)["entries"].([]any)
	var names []string
	for _, e := range entries {
		em := e.(map[string]any)
		names = append(names, fmt.Sprintf("%s:%s", em["path"], em["type"]))
	}
	if got := strings.Join(names, " "); got != "bin.dat:file src:dir src/main.txt:file" {
		t.Errorf("list: %s", got)
	}
	for args, want := range map[string]string{
		`{"path":"nope"}`:        "no such file",
		`{"path":"src"}`:         "is a directory",
		`{"path":"/etc/passwd"}`: "leaves the workspace",
	} {
		a := h.call("files", "sandbox_read_file", json.RawMessage(args))
		if !a.Result.IsError || !strings.Contains(a.Text(), want) {
			t.Errorf("read %s: %s", args, a.Text())
		}
	}
	a := h.call("files", "sandbox_list_files", map[string]any{"path": "bin.dat"})
	if !a.Result.IsError || !strings.Contains(a.Text(), "not a directory") {
		t.Errorf("list a file: %s", a.Text())
	}
	// Another session's files are not there.
	a = h.call("other-files", "sandbox_read_file", map[string]any{"path": "src/main.txt"})
	if !a.Result.IsError {
		t.Errorf("another session read the file: %s", a.Text())
	}
}

func TestToolsAndAuth(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	req, _ := http.NewRequest(http.MethodGet, h.url+"/tools", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []tool.Binding `json:"tools"`
	}
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	var names []string
	for _, b := range list.Tools {
		names = append(names, b.Name)
		if err := b.Validate(); err != nil {
			t.Errorf("binding %s: %v", b.Name, err)
		}
		if b.Name == "sandbox_exec" && b.TimeoutSeconds <= 3600 {
			t.Errorf("sandbox_exec timeout_seconds %d leaves no time for a 3600 s command's answer", b.TimeoutSeconds)
		}
	}
	if got := strings.Join(names, ","); got != "sandbox_exec,sandbox_start,sandbox_status,sandbox_cancel,sandbox_write_file,sandbox_read_file,sandbox_list_files" {
		t.Errorf("tools %s", got)
	}
	body := `{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"command":"true"}}`
	resp, err = http.Post(h.url+"/tools/sandbox_exec", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %d", resp.StatusCode)
	}
}

func TestConfig(t *testing.T) {
	base := map[string]string{"BRAIN_TOOLS_KEY": "k", "ADDR": DefaultAddr}
	cfg, err := ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseConfig(map[string]string{"BRAIN_TOOLS_KEY": "k"}); err == nil || !strings.Contains(err.Error(), `ADDR "": is empty`) {
		t.Errorf("no ADDR (Main applies the default): %v", err)
	}
	if cfg.Backend != "local" || cfg.LimitFSize != cfg.Quota || cfg.Idle != 30*time.Minute || cfg.QuotaEvery != 50*time.Millisecond {
		t.Errorf("defaults: %+v", cfg)
	}
	for k, v := range map[string]string{
		"SANDBOX_BACKEND":           "docker",
		"SANDBOX_QUOTA_BYTES":       "0",
		"SANDBOX_IDLE":              "10s",
		"SANDBOX_OUTPUT_HEAD_BYTES": "40000",
		"SANDBOX_DEFAULT_TIMEOUT":   "2h",
		"SANDBOX_QUOTA_INTERVAL":    "9ms",
	} {
		env := map[string]string{"BRAIN_TOOLS_KEY": "k", "ADDR": DefaultAddr, k: v}
		if _, err := ParseConfig(env); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v", k, v, err)
		}
	}
	// SANDBOX_QUOTA_INTERVAL at its edges.
	for v, ok := range map[string]bool{"10ms": true, "10s": true, "9ms": false, "10001ms": false, "0s": false} {
		_, err := ParseConfig(map[string]string{"BRAIN_TOOLS_KEY": "k", "ADDR": DefaultAddr, "SANDBOX_QUOTA_INTERVAL": v})
		if (err == nil) != ok {
			t.Errorf("SANDBOX_QUOTA_INTERVAL=%s: %v, want accepted %v", v, err, ok)
		}
	}
}

// passableDir returns a new directory the sandbox uids may pass through
// (0711) under the system's temporary directory.
func passableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sandbox-app-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A sandbox that cannot start is an is_error answer that says so and
// quotes bwrap, for sandbox_exec and for a sandbox_start job alike; a
// command that exits 1 is a successful call with exit_code 1.
func TestSandboxThatCannotStartIsNotTheCommandsFailure(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: without it sandboxes run as the service's uid, which owns the workspace root and cannot be locked out")
	}
	parent := passableDir(t)
	h := newHarness(t, map[string]string{"SANDBOX_ROOT": filepath.Join(parent, "data", "sandbox")})

	a, m := h.exec("setup", map[string]any{"command": "echo out; echo err >&2; exit 1"})
	if a.Result.IsError || num(m["exit_code"]) != 1 || m["stdout"] != "out\n" || m["stderr"] != "err\n" {
		t.Fatalf("exit 1: is_error %v %v", a.Result.IsError, m)
	}

	// The workspace root becomes unreachable for the session's uid, as in
	// the demo that put it under a 0700 directory.
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	checkNotStarted := func(what string, r *tool.Result) {
		t.Helper()
		text := (answer{Result: r}).Text()
		if !r.IsError || r.UnknownOutcome || r.HasStructured() {
			t.Errorf("%s: is_error %v unknown_outcome %v structured %s; want is_error alone", what, r.IsError, r.UnknownOutcome, r.StructuredContent)
		}
		for _, want := range []string{"the sandbox could not start, so the command did not run", "bwrap: Can't find source path " + parent, "Permission denied"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: text %q does not contain %q", what, text, want)
			}
		}
		if strings.Contains(text, "exit code") {
			t.Errorf("%s: text %q reports an exit code", what, text)
		}
	}
	a = h.call("setup", "sandbox_exec", map[string]any{"command": "exit 0"})
	checkNotStarted("sandbox_exec", a.Result)

	a = h.call("setup", "sandbox_start", map[string]any{"command": "exit 0"})
	if a.Result.IsError {
		t.Fatalf("sandbox_start: %s", a.Text())
	}
	id, _ := a.Structured(t)["job_id"].(string)
	st := h.call("setup", "sandbox_status", map[string]any{"job_id": id, "wait_seconds": 10})
	var status struct {
		State  string       `json:"state"`
		Result *tool.Result `json:"result"`
	}
	if err := json.Unmarshal(st.Result.StructuredContent, &status); err != nil || status.State != "failed" || status.Result == nil {
		t.Fatalf("status of the job: %s (%v)", st.Result.StructuredContent, err)
	}
	checkNotStarted("sandbox_start job", status.Result)
	if !strings.Contains(st.Text(), "could not start") {
		t.Errorf("status text %q", st.Text())
	}

	// Fixed, the same session runs again.
	if err := os.Chmod(parent, 0o711); err != nil {
		t.Fatal(err)
	}
	if _, m := h.exec("setup", map[string]any{"command": "echo back"}); m["stdout"] != "back\n" {
		t.Errorf("after chmod o+x: %v", m)
	}
}

// The service refuses to start on a root the sandbox uids cannot reach,
// naming the directory and the fix, rather than failing its first call.
func TestStartRefusesAnUnreachableRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: without it sandboxes run as the service's uid, which can reach its own root")
	}
	locked := filepath.Join(passableDir(t), "x")
	if err := os.Mkdir(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(3000))
	cfg, err := ParseConfig(map[string]string{
		"ADDR":             "127.0.0.1:0",
		"BRAIN_TOOLS_KEY":  testToken,
		"SANDBOX_ROOT":     filepath.Join(locked, "data", "sandbox"),
		"SANDBOX_UID_BASE": strconv.Itoa(4_000_000 + int(n.Int64())*1000),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(context.Background(), cfg, nil)
	if err == nil {
		t.Fatal("Build succeeded with the root under a 0700 directory")
	}
	for _, want := range []string{"SANDBOX_ROOT", locked + " has mode 0700", "chmod o+x " + locked} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// TestWorkspaceIdentity is the tester's report through the service: tenant
// tenantA with session "s\x001" and tenant "tenantA\x00s" with session "1"
// shared a workspace, and tenants outside TOOL_TENANTS were served. Now the
// second is refused by name, and two sessions whose IDs differ only in
// where a NUL byte falls get workspaces of their own.
func TestWorkspaceIdentity(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"TOOL_TENANTS": "tenantA"})
	w := h.callAs("tenantA", "s\x001", "sandbox_write_file", map[string]any{"path": "mine", "content": "A"})
	if w.Result.IsError {
		t.Fatalf("write: %s", w.Text())
	}
	for _, tt := range []struct{ tenant, session, want string }{
		{"tenantA\x00s", "1", `sandbox_read_file: tenant "tenantA\x00s" is not served here (the service's TOOL_TENANTS does not list it)`},
		{"other", "s\x001", `sandbox_read_file: tenant "other" is not served here (the service's TOOL_TENANTS does not list it)`},
		{"tenantA", "s\x00", "sandbox_read_file: read mine: no such file or directory"},
		{"tenantA", "s", "sandbox_read_file: read mine: no such file or directory"},
		{"tenantA", "\x001", "sandbox_read_file: read mine: no such file or directory"},
	} {
		r := h.callAs(tt.tenant, tt.session, "sandbox_read_file", map[string]any{"path": "mine"})
		if !r.Result.IsError || r.Text() != tt.want {
			t.Errorf("%q/%q: is_error %v %q, want %q", tt.tenant, tt.session, r.Result.IsError, r.Text(), tt.want)
		}
	}
	if r := h.callAs("tenantA", "s\x001", "sandbox_read_file", map[string]any{"path": "mine"}); r.Structured(t)["content"] != "A" {
		t.Fatalf("the owner's own read: %s", r.Text())
	}
}
