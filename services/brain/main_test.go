package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/pgtest"
	"github.com/google/go-cmp/cmp"
)

const (
	apiKey   = "test-api-key-0123"
	toolsKey = "test-tools-key-0123"
)

// toolService is a real tool service: echo answers at once, slow holds the
// request until the test ends and counts arrivals, held answers once the
// test sends on release. It counts the requests of each call ID.
type toolService struct {
	*httptest.Server
	arrived chan string
	stop    chan struct{}
	release chan struct{}

	mu   sync.Mutex
	sent map[string]int
}

func (ts *toolService) count(callID string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.sent[callID]
}

func newToolService(t *testing.T) *toolService {
	ts := &toolService{arrived: make(chan string, 100), stop: make(chan struct{}), release: make(chan struct{}, 100), sent: map[string]int{}}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+toolsKey {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var req struct {
			CallID    string          `json:"call_id"`
			Arguments json.RawMessage `json:"arguments"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		ts.mu.Lock()
		ts.sent[req.CallID]++
		ts.mu.Unlock()
		switch r.URL.Path {
		case "/tools/slow":
			ts.arrived <- req.CallID
			select {
			case <-ts.stop:
			case <-r.Context().Done():
			}
			return
		case "/tools/held":
			ts.arrived <- req.CallID
			select {
			case <-ts.release:
			case <-ts.stop:
				return
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"content":[{"type":"text","text":%q}]}`, string(req.Arguments))
	}))
	t.Cleanup(func() { close(ts.stop); ts.Close() })
	return ts
}

func writeConfig(t *testing.T, toolURL string, mutate func(map[string]any)) string {
	t.Helper()
	binding := func(name string) map[string]any {
		return map[string]any{
			"name": name, "description": name, "url": toolURL + "/tools/" + name, "token_env": "BRAIN_TOOLS_KEY",
			"tenants": []string{"local"}, "input_schema": map[string]any{"type": "object"},
		}
	}
	doc := map[string]any{
		"tools":    []any{binding("echo"), binding("slow")},
		"api_keys": []any{map[string]string{"env": "BRAIN_API_KEY", "tenant": "local"}},
	}
	if mutate != nil {
		mutate(doc)
	}
	data, _ := json.Marshal(doc)
	path := filepath.Join(t.TempDir(), "brain.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func baseEnv(dataDir string) map[string]string {
	return map[string]string{"BRAIN_API_KEY": apiKey, "BRAIN_TOOLS_KEY": toolsKey, "BRAIN_ADDR": "127.0.0.1:0", "BRAIN_DATA_DIR": dataDir}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	ts := newToolService(t)
	good := writeConfig(t, ts.URL, nil)
	badTimeout := writeConfig(t, ts.URL, func(d map[string]any) {
		d["tools"].([]any)[1].(map[string]any)["timeout_seconds"] = 0
	})
	slow := func(d map[string]any) map[string]any { return d["tools"].([]any)[1].(map[string]any) }
	stringSchema := writeConfig(t, ts.URL, func(d map[string]any) { slow(d)["input_schema"] = map[string]any{"type": "string"} })
	tenantTwice := writeConfig(t, ts.URL, func(d map[string]any) { slow(d)["tenants"] = []string{"local", "local"} })
	tenantNoKey := writeConfig(t, ts.URL, func(d map[string]any) { slow(d)["tenants"] = []string{"local", "acme"} })
	noKeys := writeConfig(t, ts.URL, func(d map[string]any) { d["api_keys"] = []any{} })
	rawSchema := func(field, doc string) string {
		return writeConfig(t, ts.URL, func(d map[string]any) { slow(d)[field] = json.RawMessage(doc) })
	}
	selfRef := rawSchema("input_schema", `{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`)
	twoStep := rawSchema("input_schema", `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`)
	outputCycle := rawSchema("output_schema", `{"type":"object","$ref":"#"}`)
	tree := rawSchema("input_schema", `{"$defs":{"n":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/n"}}}}},"$ref":"#/$defs/n"}`)
	// encoding/json would keep the second url without a word.
	dupKey := filepath.Join(t.TempDir(), "dup.json")
	data, _ := os.ReadFile(good)
	dup := strings.Replace(string(data), `"name":"slow"`, `"name":"slow","url":"http://127.0.0.1:1/elsewhere"`, 1)
	if dup == string(data) {
		t.Fatal("test config has no slow binding to duplicate a key in")
	}
	if err := os.WriteFile(dupKey, []byte(dup), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr []string
		wantOut string
	}{
		{"valid config", []string{"-config", good, "-check"}, nil, nil, "ok (2 tools, 1 API keys)"},
		{"invalid binding", []string{"-config", badTimeout, "-check"}, nil, []string{"tools[1]", "slow", "timeout_seconds"}, ""},
		{"duplicate key", []string{"-config", dupKey, "-check"}, nil, []string{`tools[1] "slow": url: duplicate key`}, ""},
		{"input_schema not an object", []string{"-config", stringSchema, "-check"}, nil, []string{`tools[1] "slow": input_schema: type: must be "object"`}, ""},
		{"input_schema refers to itself", []string{"-config", selfRef, "-check"}, nil, []string{`tools[1] "slow": input_schema: reference cycle: #/$defs/a → #/$defs/a`}, ""},
		{"input_schema cycle a→b→a", []string{"-config", twoStep, "-check"}, nil, []string{`tools[1] "slow": input_schema: reference cycle: #/$defs/a → #/$defs/b → #/$defs/a`}, ""},
		{"input_schema cycle, at start-up", []string{"-config", twoStep}, nil, []string{`tools[1] "slow": input_schema: reference cycle`}, ""},
		{"output_schema cycle", []string{"-config", outputCycle, "-check"}, nil, []string{`tools[1] "slow": output_schema: reference cycle: # → #`}, ""},
		{"input_schema a recursive tree", []string{"-config", tree, "-check"}, nil, nil, "ok (2 tools"},
		{"tenant twice", []string{"-config", tenantTwice, "-check"}, nil, []string{`tools[1] "slow": tenants[1]: "local" is listed twice`}, ""},
		{"tenant without an API key", []string{"-config", tenantNoKey, "-check"}, nil, []string{`tools[1] "slow": tenants[1]: tenant "acme" has no api_keys entry`}, ""},
		{"no API keys", []string{"-config", noKeys, "-check"}, nil, []string{"api_keys: required"}, ""},
		{"token env unset", []string{"-config", good, "-check"}, map[string]string{"BRAIN_TOOLS_KEY": ""}, []string{"BRAIN_TOOLS_KEY"}, ""},
		{"api key env unset", []string{"-config", good, "-check"}, map[string]string{"BRAIN_API_KEY": ""}, []string{"BRAIN_API_KEY"}, ""},
		{"missing file", []string{"-config", filepath.Join(t.TempDir(), "none.json"), "-check"}, nil, []string{"none.json"}, ""},
		{"no -config", []string{"-check"}, nil, []string{"-config", "required"}, ""},
		{"bad log level", []string{"-config", good, "-check"}, map[string]string{"LOG_LEVEL": "loud"}, []string{"LOG_LEVEL"}, ""},
		{"bad BRAIN_SQLITE_SYNC, with -check", []string{"-config", good, "-check"}, map[string]string{"BRAIN_SQLITE_SYNC": "bogus"}, []string{`env config: BRAIN_SQLITE_SYNC: want NORMAL or FULL, got "bogus"`}, ""},
		{"bad BRAIN_SQLITE_SYNC, before the server is built", []string{"-config", good}, map[string]string{"BRAIN_SQLITE_SYNC": "bogus"}, []string{`env config: BRAIN_SQLITE_SYNC: want NORMAL or FULL, got "bogus"`}, ""},
		{"BRAIN_SQLITE_SYNC in lower case", []string{"-config", good, "-check"}, map[string]string{"BRAIN_SQLITE_SYNC": "full"}, nil, "ok (2 tools"},
		{"BRAIN_PUBLIC_URL not a URL", []string{"-config", good, "-check"}, map[string]string{"BRAIN_PUBLIC_URL": "not a url"}, []string{`env config: BRAIN_PUBLIC_URL "not a url": must be an absolute http:// or https:// URL`}, ""},
		{"BRAIN_PUBLIC_URL without host", []string{"-config", good, "-check"}, map[string]string{"BRAIN_PUBLIC_URL": "http:///x"}, []string{`BRAIN_PUBLIC_URL "http:///x": has no host`}, ""},
		{"BRAIN_PUBLIC_URL with a query", []string{"-config", good, "-check"}, map[string]string{"BRAIN_PUBLIC_URL": "https://brain.example/?a=1"}, []string{`BRAIN_PUBLIC_URL "https://brain.example/?a=1": must not contain a query`}, ""},
		{"BRAIN_ADDR without a port", []string{"-config", good, "-check"}, map[string]string{"BRAIN_ADDR": "127.0.0.1"}, []string{`env config: BRAIN_ADDR "127.0.0.1": want host:port`}, ""},
		{"BRAIN_ADDR port out of range", []string{"-config", good, "-check"}, map[string]string{"BRAIN_ADDR": "127.0.0.1:70000"}, []string{`BRAIN_ADDR "127.0.0.1:70000": port "70000" is not a number from 0 to 65535`}, ""},
		{"BRAIN_MAX_REQUEST_BYTES zero", []string{"-config", good, "-check"}, map[string]string{"BRAIN_MAX_REQUEST_BYTES": "0"}, []string{`BRAIN_MAX_REQUEST_BYTES: want 1..67108864, got 0`}, ""},
		{"BRAIN_MAX_REQUEST_BYTES over 64 MiB", []string{"-config", good, "-check"}, map[string]string{"BRAIN_MAX_REQUEST_BYTES": "67108865"}, []string{`BRAIN_MAX_REQUEST_BYTES: want 1..67108864, got 67108865`}, ""},
		{"BRAIN_MAX_REQUEST_BYTES not a number", []string{"-config", good, "-check"}, map[string]string{"BRAIN_MAX_REQUEST_BYTES": "2MiB"}, []string{`BRAIN_MAX_REQUEST_BYTES`}, ""},
		{"BRAIN_MAX_REQUEST_BYTES at 64 MiB", []string{"-config", good, "-check"}, map[string]string{"BRAIN_MAX_REQUEST_BYTES": "67108864"}, nil, "ok (2 tools"},
		{"BRAIN_PUBLIC_URL good", []string{"-config", good, "-check"}, map[string]string{"BRAIN_PUBLIC_URL": "https://brain.example:8443/"}, nil, "ok (2 tools"},
		{"BRAIN_DATABASE_TIMEOUT under 100ms", []string{"-config", good, "-check"}, map[string]string{"BRAIN_DATABASE_TIMEOUT": "99ms"}, []string{`env config: BRAIN_DATABASE_TIMEOUT: want 0 (10s) or 100ms..10m, got 99ms`}, ""},
		{"BRAIN_DATABASE_TIMEOUT negative", []string{"-config", good, "-check"}, map[string]string{"BRAIN_DATABASE_TIMEOUT": "-1s"}, []string{`BRAIN_DATABASE_TIMEOUT: want 0 (10s) or 100ms..10m, got -1s`}, ""},
		{"BRAIN_DATABASE_TIMEOUT not a duration", []string{"-config", good, "-check"}, map[string]string{"BRAIN_DATABASE_TIMEOUT": "10"}, []string{`BRAIN_DATABASE_TIMEOUT`}, ""},
		{"BRAIN_DATABASE_TIMEOUT over 10m", []string{"-config", good, "-check"}, map[string]string{"BRAIN_DATABASE_TIMEOUT": "10m1ms"}, []string{`BRAIN_DATABASE_TIMEOUT: want 0 (10s) or 100ms..10m, got 10m0.001s`}, ""},
		{"BRAIN_DATABASE_TIMEOUT at 10m", []string{"-config", good, "-check"}, map[string]string{"BRAIN_DATABASE_TIMEOUT": "10m"}, nil, "ok (2 tools"},
		{"BRAIN_DATABASE_TIMEOUT at 100ms", []string{"-config", good, "-check"}, map[string]string{"BRAIN_DATABASE_TIMEOUT": "100ms"}, nil, "ok (2 tools"},
		{"BRAIN_DATABASE_TIMEOUT 0", []string{"-config", good, "-check"}, map[string]string{"BRAIN_DATABASE_TIMEOUT": "0"}, nil, "ok (2 tools"},
		{"BRAIN_LEASE under 3s", []string{"-config", good, "-check"}, map[string]string{"BRAIN_LEASE": "2999ms"}, []string{`BRAIN_LEASE: want 3s..10m, got 2.999s`}, ""},
		{"BRAIN_LEASE over 10m", []string{"-config", good, "-check"}, map[string]string{"BRAIN_LEASE": "10m1s"}, []string{`BRAIN_LEASE: want 3s..10m, got 10m1s`}, ""},
		{"BRAIN_LEASE at 3s", []string{"-config", good, "-check"}, map[string]string{"BRAIN_LEASE": "3s"}, nil, "ok (2 tools"},
		{"BRAIN_RETENTION under 1m", []string{"-config", good, "-check"}, map[string]string{"BRAIN_RETENTION": "59s"}, []string{`BRAIN_RETENTION: want 0 (keep everything) or at least 1m, got 59s`}, ""},
		{"BRAIN_RETENTION at 1m", []string{"-config", good, "-check"}, map[string]string{"BRAIN_RETENTION": "1m"}, nil, "ok (2 tools"},
		{"API key with surrounding space", []string{"-config", good, "-check"}, map[string]string{"BRAIN_API_KEY": " 0123456789abcdef"}, []string{"api_keys[0]: env: BRAIN_API_KEY has surrounding whitespace"}, ""},
		{"API key only a space", []string{"-config", good, "-check"}, map[string]string{"BRAIN_API_KEY": " "}, []string{"BRAIN_API_KEY has surrounding whitespace"}, ""},
		{"tool token with a control character", []string{"-config", good, "-check"}, map[string]string{"BRAIN_TOOLS_KEY": "0123456789abcdef\x01"}, []string{`"slow": token_env: BRAIN_TOOLS_KEY contains a control character (byte 16)`}, ""},
		{"tool token with a trailing newline", []string{"-config", good, "-check"}, map[string]string{"BRAIN_TOOLS_KEY": "0123456789abcdef\n"}, []string{"token_env: BRAIN_TOOLS_KEY has surrounding whitespace"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := baseEnv(t.TempDir())
			for k, v := range tt.env {
				env[k] = v
			}
			var stdout, stderr bytes.Buffer
			// A case without -check that wrongly starts serving fails,
			// rather than hangs, when this ends it.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := run(ctx, tt.args, env, &stdout, &stderr)
			if tt.wantErr == nil {
				if err != nil || !strings.Contains(stdout.String(), tt.wantOut) {
					t.Errorf("err %v, stdout %q; want nil and %q", err, stdout.String(), tt.wantOut)
				}
				return
			}
			if err == nil {
				t.Fatalf("run succeeded, want error naming %q", tt.wantErr)
			}
			msg := err.Error() + stderr.String()
			for _, w := range tt.wantErr {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not name %q", msg, w)
				}
			}
		})
	}
}

// TestCheckWarnsOfShortKeys: a short API key or tool token is taken (a
// warning, not a refusal, as services do with BRAIN_TOOLS_KEY), and -check
// says so.
func TestCheckWarnsOfShortKeys(t *testing.T) {
	good := writeConfig(t, newToolService(t).URL, nil)
	for _, tc := range []struct {
		env, value, warning string
	}{
		{"BRAIN_API_KEY", "a", "warning: api_keys: BRAIN_API_KEY is shorter than 16 bytes"},
		{"BRAIN_API_KEY", "0123456789abcde", "warning: api_keys: BRAIN_API_KEY is shorter than 16 bytes"},
		{"BRAIN_API_KEY", "0123456789abcdef", ""},
		{"BRAIN_TOOLS_KEY", "short", "warning: token_env: BRAIN_TOOLS_KEY is shorter than 16 bytes"},
		{"BRAIN_TOOLS_KEY", "0123456789abcdef", ""},
	} {
		env := baseEnv(t.TempDir())
		env[tc.env] = tc.value
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), []string{"-config", good, "-check"}, env, &stdout, &stderr); err != nil {
			t.Fatalf("%s of %d bytes: %v", tc.env, len(tc.value), err)
		}
		if tc.warning == "" && stderr.Len() > 0 || tc.warning != "" && strings.Count(stderr.String(), tc.warning) != 1 {
			t.Errorf("%s of %d bytes: stderr %q, want %q once", tc.env, len(tc.value), stderr.String(), tc.warning)
		}
	}
}

// commandLineCase is one command line of TestCommandLine.
type commandLineCase struct {
	name       string
	args       []string
	wantCode   int
	wantStdout []string // each must appear; nil: stdout must be empty
	wantStderr []string // each must appear; nil: stderr must be empty
}

// TestCommandLine: brain's command line answers as the tool services' does
// (pkg/service.Main): -h/-help print the usage on stdout and exit 0; an
// unknown flag or a stray argument prints the error and the usage on stderr
// and exits 2 without starting; other errors exit 1. Each case runs in
// process (run and exitCode) and as the real binary.
func TestCommandLine(t *testing.T) {
	t.Parallel()
	ts := newToolService(t)
	good := writeConfig(t, ts.URL, nil)
	usage := []string{"Usage:", "brain -config brain.json [-check]", "brain -healthcheck", "brain -version", "brain mcp discover", "-healthcheck\n", "-h, -help", "BRAIN_ADDR", "environment variables"}
	tests := []commandLineCase{
		{"-h", []string{"-h"}, 0, usage, nil},
		{"-help", []string{"-help"}, 0, usage, nil},
		{"--help", []string{"--help"}, 0, usage, nil},
		{"-help after -config", []string{"-config", good, "-help"}, 0, usage, nil},
		{"unknown flag", []string{"-bogus"}, 2, nil, append([]string{"flag provided but not defined: -bogus"}, usage...)},
		{"misspelt flag after -config", []string{"-config", good, "-chek"}, 2, nil, append([]string{"flag provided but not defined: -chek"}, usage...)},
		{"flag without its value", []string{"-config"}, 2, nil, append([]string{"flag needs an argument: -config"}, usage...)},
		{"stray argument", []string{"-config", good, "extra"}, 2, nil, append([]string{`brain: unexpected argument "extra"`}, usage...)},
		{"mcp without discover", []string{"mcp"}, 2, nil, append([]string{`brain: unexpected argument "mcp"`}, usage...)},
		{"-version", []string{"-version"}, 0, []string{"brain ", " (", runtime.Version() + ")\n"}, nil},
		{"-version with an argument", []string{"-version", "now"}, 2, nil, append([]string{`brain: unexpected argument "now"`}, usage...)},
		{"-healthcheck with an argument", []string{"-healthcheck", "now"}, 2, nil, append([]string{`brain: unexpected argument "now"`}, usage...)},
		{"no -config", []string{"-check"}, 1, nil, []string{"brain: -config: required"}},
		{"-check of a good config", []string{"-config", good, "-check"}, 0, []string{"ok (2 tools, 1 API keys)"}, nil},
		{"-healthcheck with nothing listening", []string{"-healthcheck"}, 1, nil, []string{"brain: ", "connection refused"}},
		{"mcp discover -h, as before", []string{"mcp", "discover", "-h"}, 0, nil, []string{"usage: brain mcp discover URL"}},
		{"mcp discover without URL, as before", []string{"mcp", "discover"}, 1, nil, []string{"brain: usage: brain mcp discover URL"}},
		{"migrate -h", []string{"migrate", "-h"}, 0, []string{"brain migrate ", "schema version"}, nil},
		{"backup --help", []string{"backup", "--help"}, 0, []string{"brain backup FILE ", "a new file; PostgreSQL: pg_dump"}, nil},
		{"migrate with an argument", []string{"migrate", "now"}, 2, nil, []string{`brain: migrate: unexpected argument "now"`, "Usage:\n  brain migrate "}},
		{"migrate with a flag", []string{"migrate", "-x"}, 2, nil, []string{`brain: migrate: unexpected argument "-x"`, "Usage:\n  brain migrate "}},
		{"backup without FILE", []string{"backup"}, 2, nil, []string{"backup: want one argument, the file to write", "Usage:\n  brain backup FILE "}},
		{"backup of an empty name", []string{"backup", ""}, 2, nil, []string{"backup: the file to write is empty", "Usage:\n  brain backup FILE "}},
		{"backup of no store", []string{"backup", "x.db"}, 1, nil, []string{"brain.db: no database there; is BRAIN_DATA_DIR right?"}},
	}
	check := func(t *testing.T, code int, stdout, stderr string, tt commandLineCase) {
		t.Helper()
		if code != tt.wantCode {
			t.Errorf("exit %d, want %d; stdout %q, stderr %q", code, tt.wantCode, stdout, stderr)
		}
		for _, out := range []struct {
			name, got string
			want      []string
		}{{"stdout", stdout, tt.wantStdout}, {"stderr", stderr, tt.wantStderr}} {
			if out.want == nil && out.got != "" {
				t.Errorf("%s = %q, want empty", out.name, out.got)
			}
			for _, w := range out.want {
				if !strings.Contains(out.got, w) {
					t.Errorf("%s %q does not contain %q", out.name, out.got, w)
				}
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := baseEnv(t.TempDir())
			env["BRAIN_ADDR"] = "127.0.0.1:1" // nothing listens there
			t.Run("in process", func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				code := exitCode(run(context.Background(), tt.args, env, &stdout, &stderr), &stderr)
				check(t, code, stdout.String(), stderr.String(), tt)
			})
			t.Run("binary", func(t *testing.T) {
				cmd := exec.Command(brainBinary(t), tt.args...)
				for k, v := range env {
					cmd.Env = append(cmd.Env, k+"="+v)
				}
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				code := cmd.ProcessState.ExitCode()
				if exited := errors.As(err, new(*exec.ExitError)); err != nil && !exited {
					t.Fatalf("run the binary: %v", err)
				}
				check(t, code, stdout.String(), stderr.String(), tt)
			})
		})
	}
}

// syncWriter collects output and reports the listening address.
type syncWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	addr chan string
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if a, ok := strings.CutPrefix(strings.TrimSpace(string(p)), "brain listening on "); ok {
		w.addr <- a
	}
	return len(p), nil
}

func TestRun(t *testing.T) {
	t.Parallel()
	ts := newToolService(t)
	cfg := writeConfig(t, ts.URL, nil)
	ctx, cancel := context.WithCancel(context.Background())
	stdout := &syncWriter{addr: make(chan string, 1)}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-config", cfg}, baseEnv(t.TempDir()), stdout, io.Discard) }()
	var base string
	select {
	case a := <-stdout.addr:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("run ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("brain did not listen within 10 s")
	}
	// The container health check asks the running brain.
	addr := strings.TrimPrefix(base, "http://")
	var hc bytes.Buffer
	if err := run(ctx, []string{"-healthcheck"}, map[string]string{"BRAIN_ADDR": addr}, &hc, io.Discard); err != nil || hc.String() != "healthy\n" {
		t.Errorf("brain -healthcheck = %v, %q; want nil, healthy", err, hc.String())
	}
	c := client{t: t, base: base}
	sess := c.do("POST", "/sessions", `{"config":{"tools":["echo"]}}`, 201)
	call := c.do("POST", "/sessions/"+sess["id"].(string)+"/tool_calls", `{"tool":"echo","arguments":{"a":1},"wait_seconds":5}`, 200)
	if call["status"] != "succeeded" {
		t.Errorf("call = %v", call)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after cancel: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return within 15 s of cancel")
	}
	if err := run(context.Background(), []string{"-healthcheck"}, map[string]string{"BRAIN_ADDR": addr}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("brain -healthcheck after shutdown = %v, want connection refused", err)
	}
}

type client struct {
	t    *testing.T
	base string
}

func (c client) do(method, path, body string, want int) map[string]any {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.HasSuffix(path, "/events") {
		req.Header.Set("Accept", "application/json")
		req.URL.RawQuery = "limit=1000"
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, data, want)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		c.t.Fatalf("%s %s: %s: %v", method, path, data, err)
	}
	return out
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// pg is the PostgreSQL server of the tests that run brain on one, started
// by the first of them and stopped by TestMain.
var (
	pgOnce sync.Once
	pg     *pgtest.Server
	pgErr  error
)

// testDatabase returns the URL of a new database for t.
func testDatabase(t *testing.T) string {
	t.Helper()
	pgOnce.Do(func() { pg, pgErr = pgtest.Start() })
	if pgErr != nil {
		t.Fatalf("brain on PostgreSQL: %v", pgErr)
	}
	return pg.NewDatabase(t)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	if pg != nil {
		pg.Close()
	}
	os.Exit(code)
}

// brainBinary builds the brain command once per test run.
func brainBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "brain-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "brain")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// startBinary runs the brain binary on cfg and dataDir and returns once it
// listens; the process is killed at cleanup if still running.
func startBinary(t *testing.T, cfg, dataDir string) (*exec.Cmd, client) {
	t.Helper()
	return startBinaryWith(t, cfg, dataDir, io.Discard, nil)
}

// startBinaryWith is startBinary with brain's log going to stderr and the
// variables of env added to its environment.
func startBinaryWith(t *testing.T, cfg, dataDir string, stderr io.Writer, env map[string]string) (*exec.Cmd, client) {
	t.Helper()
	cmd := exec.Command(brainBinary(t), "-config", cfg)
	for k, v := range baseEnv(dataDir) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "brain listening on "); ok {
				line <- a
			}
		}
	}()
	select {
	case a := <-line:
		return cmd, client{t: t, base: "http://" + a}
	case <-time.After(20 * time.Second):
		t.Fatal("brain binary did not listen within 20 s")
	}
	return nil, client{}
}

// TestSIGTERM runs the real brain binary and sends SIGTERM while a client
// waits on a slow call with wait_seconds: the client gets the call's final
// state (200, cancelled), brain exits 0, and after a restart the call reads
// the same (it was recorded at shutdown, not left for recovery).
func TestSIGTERM(t *testing.T) {
	t.Parallel()
	ts := newToolService(t)
	cfg := writeConfig(t, ts.URL, nil)
	dataDir := t.TempDir()
	cmd, c := startBinary(t, cfg, dataDir)
	sid := c.do("POST", "/sessions", `{"config":{"tools":["slow"]}}`, 201)["id"].(string)
	type answer struct {
		status int
		body   []byte
		err    error
	}
	waiter := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", c.base+"/sessions/"+sid+"/tool_calls", strings.NewReader(`{"tool":"slow","wait_seconds":30}`))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			waiter <- answer{err: err}
			return
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		waiter <- answer{res.StatusCode, body, err}
	}()
	select {
	case <-ts.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("slow call did not reach the tool")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var got answer
	select {
	case got = <-waiter:
	case <-time.After(15 * time.Second):
		t.Fatal("waiter got no answer within 15 s of SIGTERM")
	}
	if got.err != nil {
		t.Fatalf("waiter: %v", got.err)
	}
	var call map[string]any
	json.Unmarshal(got.body, &call)
	if got.status != http.StatusOK || call["status"] != "cancelled" || call["error_code"] != "cancelled" {
		t.Fatalf("waiter at SIGTERM: %d %s, want 200 and the call cancelled", got.status, got.body)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("brain after SIGTERM: %v, want exit 0", err)
	}
	_, c = startBinary(t, cfg, dataDir)
	again := c.do("GET", "/tool_calls/"+call["id"].(string), "", 200)
	if again["status"] != "cancelled" || again["error_code"] != "cancelled" {
		t.Errorf("call after restart = %v, want cancelled as recorded at shutdown", again)
	}
}

// TestSIGKILL runs the real brain binary, kills it with SIGKILL while calls
// are in flight, restarts it on the same data dir, and checks that every
// event recorded before the kill is still there with the same ID and content,
// and that the calls in flight ended failed with brain_restarted and an
// unknown outcome, each with its tool.result event.
func TestSIGKILL(t *testing.T) {
	t.Parallel()
	ts := newToolService(t)
	cfg := writeConfig(t, ts.URL, nil)
	dataDir := t.TempDir()
	start := func() (*exec.Cmd, client) { return startBinary(t, cfg, dataDir) }

	cmd, c := start()
	sess := c.do("POST", "/sessions", `{"config":{"tools":["echo","slow"]}}`, 201)
	sid := sess["id"].(string)
	for i := range 5 {
		c.do("POST", "/sessions/"+sid+"/tool_calls", fmt.Sprintf(`{"tool":"echo","arguments":{"i":%d},"wait_seconds":5}`, i), 200)
	}
	var inflight []string
	for range 3 {
		call := c.do("POST", "/sessions/"+sid+"/tool_calls", `{"tool":"slow","arguments":{}}`, 202)
		inflight = append(inflight, call["id"].(string))
	}
	for range inflight {
		select {
		case <-ts.arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("slow calls did not reach the tool")
		}
	}
	before := c.do("GET", "/sessions/"+sid+"/events", "", 200)["events"].([]any)
	if len(before) != 1+5*2+3 {
		t.Fatalf("%d events before the kill, want 14", len(before))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	_, c = start()
	after := c.do("GET", "/sessions/"+sid+"/events", "", 200)["events"].([]any)
	if len(after) != len(before)+len(inflight) {
		t.Fatalf("%d events after restart, want %d", len(after), len(before)+len(inflight))
	}
	if diff := cmp.Diff(before, after[:len(before)]); diff != "" {
		t.Errorf("events recorded before the kill changed (-before +after):\n%s", diff)
	}
	results := map[string]bool{}
	for _, e := range after[len(before):] {
		ev := e.(map[string]any)
		data := ev["data"].(map[string]any)
		if ev["type"] != "tool.result" || data["status"] != "failed" || data["error_code"] != "brain_restarted" {
			t.Errorf("event after restart = %v", ev)
		}
		results[ev["call_id"].(string)] = true
	}
	for _, id := range inflight {
		call := c.do("GET", "/tool_calls/"+id, "", 200)
		res, _ := call["result"].(map[string]any)
		if call["status"] != "failed" || call["error_code"] != "brain_restarted" || call["unknown_outcome"] != true ||
			res["is_error"] != true || res["unknown_outcome"] != true || !results[id] {
			t.Errorf("in-flight call after restart = %v", call)
		}
	}
	// The restarted brain serves new calls in the same session.
	call := c.do("POST", "/sessions/"+sid+"/tool_calls", `{"tool":"echo","arguments":{},"wait_seconds":5}`, 200)
	if call["status"] != "succeeded" {
		t.Errorf("call after restart = %v", call)
	}
}

// TestSIGKILLWaitingCalls runs the real brain binary, kills it with SIGKILL
// while a function tool's call and a gated call wait in requires_input and
// a capped tool's calls wait queued behind one running, and restarts it on
// the same data dir: the waiting calls are still answerable, the queued
// ones run in their order, the running one ends brain_restarted, and no
// call reaches its tool twice.
func TestSIGKILLWaitingCalls(t *testing.T) {
	t.Parallel()
	ts := newToolService(t)
	cfg := writeConfig(t, ts.URL, func(doc map[string]any) {
		tools := doc["tools"].([]any)
		gated := map[string]any{"name": "gated", "description": "echo, gated", "url": ts.URL + "/tools/echo", "token_env": "BRAIN_TOOLS_KEY",
			"tenants": []string{"local"}, "input_schema": map[string]any{"type": "object"}, "require_approval": "always"}
		held := map[string]any{"name": "held", "description": "held", "url": ts.URL + "/tools/held", "token_env": "BRAIN_TOOLS_KEY",
			"tenants": []string{"local"}, "input_schema": map[string]any{"type": "object"}, "max_concurrency": 1}
		fn := map[string]any{"name": "lookup", "description": "a function tool", "type": "function",
			"tenants": []string{"local"}, "input_schema": map[string]any{"type": "object"}}
		doc["tools"] = append(tools, gated, held, fn)
	})
	dataDir := t.TempDir()
	cmd, c := startBinary(t, cfg, dataDir)
	sid := c.do("POST", "/sessions", `{"config":{"tools":["gated","held","lookup"]}}`, 201)["id"].(string)
	call := func(tool string) map[string]any {
		return c.do("POST", "/sessions/"+sid+"/tool_calls", `{"tool":"`+tool+`","arguments":{}}`, 202)
	}
	fn, gated := call("lookup"), call("gated")
	running := call("held")
	select {
	case <-ts.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the first held call did not reach the tool")
	}
	queued := []map[string]any{call("held"), call("held")}
	for i, want := range []map[string]any{fn, gated, queued[0], queued[1]} {
		status := map[int]string{0: "requires_input", 1: "requires_input", 2: "queued", 3: "queued"}[i]
		if want["status"] != status {
			t.Fatalf("call %d before the kill: %v, want %s", i, want, status)
		}
	}
	before := c.do("GET", "/sessions/"+sid+"/events", "", 200)["events"].([]any)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	_, c = startBinary(t, cfg, dataDir)
	after := c.do("GET", "/sessions/"+sid+"/events", "", 200)["events"].([]any)
	if diff := cmp.Diff(before, after[:len(before)]); diff != "" {
		t.Errorf("events recorded before the kill changed (-before +after):\n%s", diff)
	}
	get := func(call map[string]any) map[string]any {
		return c.do("GET", "/tool_calls/"+call["id"].(string), "", 202)
	}
	if r := c.do("GET", "/tool_calls/"+running["id"].(string), "", 200); r["status"] != "failed" || r["error_code"] != "brain_restarted" || r["unknown_outcome"] != true {
		t.Errorf("the running call after the restart: %v", r)
	}
	for _, w := range []map[string]any{fn, gated} {
		if r := get(w); r["status"] != "requires_input" || r["prompt"] != w["prompt"] || r["response_expires_at"] != w["response_expires_at"] {
			t.Errorf("waiting call after the restart: %v, want it as before: %v", r, w)
		}
	}
	// The first queued call runs (the running one's slot is free); the
	// second waits for it, first in line.
	select {
	case id := <-ts.arrived:
		if id != queued[0]["id"] {
			t.Fatalf("the tool got %s after the restart, want the first queued call %s", id, queued[0]["id"])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first queued call did not run after the restart")
	}
	if r := get(queued[1]); r["status"] != "queued" || r["queue_position"] != float64(1) {
		t.Errorf("second queued call: %v", r)
	}
	ts.release <- struct{}{}
	select {
	case id := <-ts.arrived:
		if id != queued[1]["id"] {
			t.Fatalf("the tool got %s, want the second queued call", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second queued call did not run")
	}
	ts.release <- struct{}{}
	answered := c.do("POST", "/tool_calls/"+fn["id"].(string)+"/respond", `{"content":[{"type":"text","text":"from the application"}]}`, 200)
	if answered["status"] != "succeeded" {
		t.Errorf("function call answered after the restart: %v", answered)
	}
	c.do("POST", "/tool_calls/"+gated["id"].(string)+"/respond", `{"approved":true}`, 202)
	for _, w := range append([]map[string]any{gated}, queued...) {
		id := w["id"].(string)
		if r := c.do("GET", "/tool_calls/"+id+"?wait_seconds=10", "", 200); r["status"] != "succeeded" {
			t.Errorf("%s after the restart: %v", w["tool"], r)
		}
	}
	for _, w := range []map[string]any{running, gated, queued[0], queued[1]} {
		if n := ts.count(w["id"].(string)); n != 1 {
			t.Errorf("call %s (%s) reached its tool %d times, want once", w["id"], w["tool"], n)
		}
	}
	if n := ts.count(fn["id"].(string)); n != 0 {
		t.Errorf("the function tool's call reached a tool %d times", n)
	}
}

// TestMCPDiscoverCommand: `brain mcp discover URL` lists an MCP server's
// tools as bindings; the subcommand's own errors name what is wrong.
func TestMCPDiscoverCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"mcp", "discover"}, map[string]string{}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error()+stderr.String(), "URL") {
		t.Fatalf("discover without URL: err %v, stderr %q", err, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	err = run(context.Background(), []string{"mcp", "discover", "http://127.0.0.1:1/mcp", "--token-env", "NOPE"}, map[string]string{}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error()+stderr.String(), "NOPE") {
		t.Fatalf("discover with an unset token env: err %v, stderr %q", err, stderr.String())
	}
}

// TestBusyAddressLeavesNoData: brain listens before it opens its store, so
// an address it cannot take fails the start naming BRAIN_ADDR and leaves
// no data dir, database or lock behind.
func TestBusyAddressLeavesNoData(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	good := writeConfig(t, newToolService(t).URL, nil)
	dir := filepath.Join(t.TempDir(), "data")
	env := baseEnv(dir)
	env["BRAIN_ADDR"] = busy.Addr().String()
	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"-config", good}, env, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), `listen on BRAIN_ADDR "`+busy.Addr().String()+`"`) {
		t.Fatalf("run on a busy address = %v, want an error naming BRAIN_ADDR", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("data dir made (%v)", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's
// reads at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSIGHUP runs the real brain binary, on SQLite and on PostgreSQL:
// SIGHUP with a changed description is visible in /catalog at once while a
// call in flight finishes unharmed; SIGHUP with a broken config keeps the
// running one and logs the field at fault.
func TestSIGHUP(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { sighup(t, nil) })
	t.Run("postgres", func(t *testing.T) {
		sighup(t, map[string]string{"BRAIN_DATABASE_URL": testDatabase(t), "BRAIN_SECRETS_KEY": "sighup-test-secrets-key-0123456789abcdef"})
	})
}

// sighup is TestSIGHUP on the store env names (nil: SQLite in the data
// dir).
func sighup(t *testing.T, env map[string]string) {
	ts := newToolService(t)
	held := func(doc map[string]any) {
		doc["tools"] = append(doc["tools"].([]any), map[string]any{"name": "held", "description": "held", "url": ts.URL + "/tools/held",
			"token_env": "BRAIN_TOOLS_KEY", "tenants": []string{"local"}, "input_schema": map[string]any{"type": "object"}})
	}
	cfg := writeConfig(t, ts.URL, held)
	var stderr syncBuffer
	env = maps.Clone(env)
	if env == nil {
		env = map[string]string{}
	}
	env["BRAIN_CONFIG_POLL"] = "0"
	cmd, c := startBinaryWith(t, cfg, t.TempDir(), &stderr, env)
	sid := c.do("POST", "/sessions", `{"config":{"tools":["held","echo"]}}`, 201)["id"].(string)
	waiter := make(chan map[string]any, 1)
	go func() {
		req, _ := http.NewRequest("POST", c.base+"/sessions/"+sid+"/tool_calls", strings.NewReader(`{"tool":"held","wait_seconds":30}`))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			waiter <- map[string]any{"err": err.Error()}
			return
		}
		defer res.Body.Close()
		var out map[string]any
		json.NewDecoder(res.Body).Decode(&out)
		waiter <- out
	}()
	select {
	case <-ts.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("held call did not reach the tool")
	}
	rewrite := func(mutate func(map[string]any)) {
		t.Helper()
		data, _ := os.ReadFile(writeConfig(t, ts.URL, mutate))
		if err := os.WriteFile(cfg, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	description := func() string {
		for _, e := range c.do("GET", "/catalog", "", 200)["tools"].([]any) {
			if m := e.(map[string]any); m["name"] == "echo" {
				return m["description"].(string)
			}
		}
		return ""
	}
	// The new config drops held: the call in flight keeps its binding.
	start := time.Now()
	rewrite(func(doc map[string]any) {
		doc["tools"].([]any)[0].(map[string]any)["description"] = "echo, described anew"
	})
	for description() != "echo, described anew" {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("catalog description still %q 5 s after SIGHUP", description())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("SIGHUP to a changed catalog: %s", time.Since(start).Round(time.Millisecond))
	ts.release <- struct{}{}
	select {
	case got := <-waiter:
		if got["status"] != "succeeded" {
			t.Fatalf("call in flight across the reload: %v", got)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the call in flight never finished")
	}
	r := c.do("POST", "/sessions/"+sid+"/tool_calls", `{"tool":"held"}`, 400)
	if msg := r["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "held") {
		t.Errorf("a call of the binding the reload removed: %s", msg)
	}

	rewrite(func(doc map[string]any) {
		held(doc)
		doc["tools"].([]any)[0].(map[string]any)["timeout_seconds"] = 0
	})
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(stderr.String(), "host config reload refused") {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal logged within 5 s; log:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var refused string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "host config reload refused") {
			refused = line
		}
	}
	if !strings.Contains(refused, `tools[0] \"echo\": timeout_seconds: must be from 1 to 86400, got 0`) {
		t.Errorf("the refusal does not name the field at fault: %s", refused)
	}
	if d := description(); d != "echo, described anew" {
		t.Errorf("after a broken config the catalog says %q, want the running config's", d)
	}
	c.do("POST", "/sessions/"+sid+"/tool_calls", `{"tool":"echo","wait_seconds":5}`, 200)
}

// TestDatabaseTimeout: BRAIN_DATABASE_TIMEOUT is the bound brain waits for
// a database that takes connections and answers none: `brain migrate` and
// a start-up fail after it, naming the store and the bound, instead of
// after the 10 s default or never.
func TestDatabaseTimeout(t *testing.T) {
	t.Parallel()
	ts := newToolService(t)
	cfg := writeConfig(t, ts.URL, nil)
	tests := []struct {
		name string
		args []string
	}{
		{"migrate", []string{"migrate"}},
		{"start-up", []string{"-config", cfg}},
	}
	// migrate checks the environment as a start-up does.
	env := baseEnv(t.TempDir())
	env["BRAIN_DATABASE_TIMEOUT"] = "50ms"
	if err := run(context.Background(), []string{"migrate"}, env, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "BRAIN_DATABASE_TIMEOUT: want 0 (10s) or 100ms..10m, got 50ms") {
		t.Errorf("migrate with BRAIN_DATABASE_TIMEOUT=50ms: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gate, url := pg.Gate(t, testDatabase(t))
			gate.Shut()
			env := baseEnv(t.TempDir())
			env["BRAIN_DATABASE_URL"], env["BRAIN_SECRETS_KEY"] = url, "database-timeout-test-key-0123456789abcdef"
			env["BRAIN_DATABASE_TIMEOUT"] = "300ms"
			start := time.Now()
			err := run(context.Background(), tt.args, env, io.Discard, io.Discard)
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "postgres") || !strings.Contains(err.Error(), "within BRAIN_DATABASE_TIMEOUT, 300ms") {
				t.Errorf("%s on a silent database: %v, want an error naming the store and the bound", tt.name, err)
			}
			// The default bound is 10 s; 300 ms per step, a few steps.
			if took > 5*time.Second {
				t.Errorf("%s on a silent database took %s with BRAIN_DATABASE_TIMEOUT=300ms", tt.name, took)
			}
		})
	}
}

// TestSignalDuringStart: a signal that comes while brain is still opening
// its store (migrations, recovery) stops it as one that comes later does:
// exit 0, a line saying so, no "context canceled" error.
func TestSignalDuringStart(t *testing.T) {
	t.Parallel()
	ts := newToolService(t)
	cfg := writeConfig(t, ts.URL, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"-config", cfg}, baseEnv(t.TempDir()), &stdout, &stderr)
	if err != nil {
		t.Fatalf("run = %v, want nil; stderr:\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopped by a signal during start-up") {
		t.Errorf("stderr does not say it stopped during start-up:\n%s", stderr.String())
	}
	if strings.Contains(stdout.String(), "brain listening") {
		t.Errorf("brain listened after the signal: %q", stdout.String())
	}

	// A start-up that fails for a reason of its own (the data dir in use
	// by a running brain) fails, signal or not.
	dir := t.TempDir()
	live, stopLive := context.WithCancel(context.Background())
	first := &syncWriter{addr: make(chan string, 1)}
	done := make(chan error, 1)
	go func() { done <- run(live, []string{"-config", cfg}, baseEnv(dir), first, io.Discard) }()
	defer func() { stopLive(); <-done }()
	select {
	case <-first.addr:
	case err := <-done:
		t.Fatalf("first brain ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("first brain did not listen within 10 s")
	}
	stderr.Reset()
	if err := run(ctx, []string{"-config", cfg}, baseEnv(dir), io.Discard, &stderr); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second brain on a data dir in use, signalled = %v, want the data dir in use; stderr:\n%s", err, stderr.String())
	}
}
