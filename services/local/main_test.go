package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunRefusesBadConfig runs the service's run func with settings it
// must refuse before it listens, and checks the error names the variable
// the operator set.
// TestRunNamesTheDataDir: a data directory the store cannot use (here a
// regular file) fails the start with an error naming APPROVAL_DATA_DIR.
func TestRunNamesTheDataDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"ADDR":                    "127.0.0.1:0",
		"BRAIN_TOOLS_KEY":         "tools-key-0123456789",
		"APPROVAL_OPERATOR_TOKEN": "operator-token-0123456789",
		"APPROVAL_DATA_DIR":       file,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := run(ctx, env, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), `APPROVAL_DATA_DIR "`+file+`"`) {
		t.Fatalf("run with a file as data dir = %v, want an error naming APPROVAL_DATA_DIR", err)
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    []string
		mustNot string // the error must not contain this
	}{
		{"PUBLIC_URL not a URL", map[string]string{"PUBLIC_URL": "notaurl"},
			[]string{`PUBLIC_URL "notaurl": must be an absolute http:// or https:// URL`}, "APPROVAL_PAGE_URL"},
		{"PUBLIC_URL with a query", map[string]string{"PUBLIC_URL": "https://ops.example/?a=b"},
			[]string{`PUBLIC_URL "https://ops.example/?a=b": must not contain a query`}, "APPROVAL_PAGE_URL"},
		{"APPROVAL_PAGE_URL itself bad", map[string]string{"APPROVAL_PAGE_URL": "ops.example"},
			[]string{`APPROVAL_PAGE_URL "ops.example"`}, "PUBLIC_URL"},
		{"TOOL_TENANTS empty entry", map[string]string{"TOOL_TENANTS": "a,,b"},
			[]string{`TOOL_TENANTS "a,,b": entry 2 is empty`}, ""},
		{"TOOL_TENANTS only a comma", map[string]string{"TOOL_TENANTS": ","},
			[]string{`TOOL_TENANTS ",": entry 1 is empty`}, ""},
		{"APPROVAL_OPERATORS name twice", map[string]string{"APPROVAL_OPERATOR_TOKEN": "", "APPROVAL_OPERATORS": "alice:0123456789abcdef0123,alice:0123456789abcdef0124"},
			[]string{`APPROVAL_OPERATORS: "alice" is listed more than once`}, ""},
		{"SSE_STREAM_AFTER zero", map[string]string{"SSE_STREAM_AFTER": "0s"},
			[]string{"SSE_STREAM_AFTER must be more than 0 and less than 30s"}, ""},
		{"APPROVAL_OPERATOR_TOKEN short", map[string]string{"APPROVAL_OPERATOR_TOKEN": "short"},
			[]string{"APPROVAL_OPERATOR_TOKEN is 5 bytes"}, ""},
		{"APPROVAL_OPERATOR_SESSION_TTL negative", map[string]string{"APPROVAL_OPERATOR_SESSION_TTL": "-1s"},
			[]string{"APPROVAL_OPERATOR_SESSION_TTL must be positive"}, ""},
		{"INSPECT_BRAIN_URLS not a URL", map[string]string{"INSPECT_BRAIN_URLS": "brain"},
			[]string{"INSPECT_BRAIN_URLS"}, ""},
		{"ADDR without a port", map[string]string{"ADDR": "nonsense"},
			[]string{`ADDR "nonsense": want host:port`}, ""},
		{"ADDR port out of range", map[string]string{"ADDR": "127.0.0.1:99999"},
			[]string{`ADDR "127.0.0.1:99999": port "99999"`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{
				"ADDR":                    "127.0.0.1:0",
				"BRAIN_TOOLS_KEY":         "tools-key-0123456789",
				"APPROVAL_OPERATOR_TOKEN": "operator-token-0123456789",
				"APPROVAL_DATA_DIR":       t.TempDir(),
			}
			for k, v := range tt.env {
				env[k] = v
			}
			// Should run start, it serves until this timeout and the
			// test fails for want of an error.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := run(ctx, env, slog.New(slog.DiscardHandler))
			if err == nil {
				t.Fatalf("run started, want an error naming %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tt.mustNot != "" && strings.Contains(err.Error(), tt.mustNot) {
				t.Errorf("error %q blames %s", err, tt.mustNot)
			}
			// Refused before the approval store opens: no file made.
			if files, _ := os.ReadDir(env["APPROVAL_DATA_DIR"]); len(files) > 0 {
				t.Errorf("refused start left %d files in APPROVAL_DATA_DIR (%s)", len(files), files[0].Name())
			}
		})
	}
}

// TestCommandLine runs the built binary with each kind of command line:
// anything but no arguments or -healthcheck must not start the service,
// and -healthcheck without ADDR asks the default address 127.0.0.1:8081.
func TestCommandLine(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "local")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer healthy.Close()

	tests := []struct {
		name       string
		args       []string
		addr       string // ADDR; "" unset
		wantCode   int
		wantStdout []string
		wantStderr []string
		check      func(t *testing.T, stdout string)
	}{
		{name: "--healthcheck", args: []string{"--healthcheck"}, addr: healthy.Listener.Addr().String(), wantStdout: []string{"healthy\n"}},
		{name: "-healthcheck without ADDR asks the default", args: []string{"-healthcheck"}, wantCode: -1, check: func(t *testing.T, stdout string) {
			// 1 with the default address in the error, or 0 if a local
			// service happens to run there.
			if stdout != "healthy\n" && !strings.Contains(stdout, "GET http://127.0.0.1:8081/healthz") {
				t.Errorf("stdout %q: want the check of 127.0.0.1:8081", stdout)
			}
		}},
		{name: "-help", args: []string{"-help"}, wantStdout: []string{"Usage: local [-healthcheck | -version]", "-healthcheck", "-version", "environment variables", "default 127.0.0.1:8081", "README.md"}},
		{name: "-h", args: []string{"-h"}, wantStdout: []string{"Usage: local"}},
		{name: "unknown flag", args: []string{"-bogus"}, wantCode: 2, wantStderr: []string{"flag provided but not defined: -bogus", "Usage: local"}},
		{name: "positional argument", args: []string{"serve"}, wantCode: 2, wantStderr: []string{`unexpected argument "serve"`, "Usage: local"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tt.args...)
			// A full config, so a binary that ignored its arguments would
			// start and run into the timeout.
			cmd.Env = []string{"BRAIN_TOOLS_KEY=tools-key-0123456789", "APPROVAL_OPERATOR_TOKEN=operator-token-0123456789", "APPROVAL_DATA_DIR=" + t.TempDir()}
			if tt.addr != "" {
				cmd.Env = append(cmd.Env, "ADDR="+tt.addr)
			} else if tt.args[0] != "-healthcheck" {
				cmd.Env = append(cmd.Env, "ADDR=127.0.0.1:0")
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("still running after 20s: it started the service\nstderr: %s", &stderr)
			}
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if tt.wantCode >= 0 && code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, &stdout, &stderr)
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout %q does not contain %q", stdout.String(), w)
				}
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q does not contain %q", stderr.String(), w)
				}
			}
			if tt.check != nil {
				tt.check(t, stdout.String())
			}
		})
	}
}

// TestBusyAddressLeavesNoStore: local listens before it opens the approval
// store, so an address it cannot take fails the start naming ADDR and
// leaves no approvals.db behind.
func TestBusyAddressLeavesNoStore(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := filepath.Join(t.TempDir(), "data")
	env := map[string]string{
		"ADDR":                    busy.Addr().String(),
		"BRAIN_TOOLS_KEY":         "tools-key-0123456789",
		"APPROVAL_OPERATOR_TOKEN": "operator-token-0123456789",
		"APPROVAL_DATA_DIR":       dir,
	}
	err = run(context.Background(), env, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), `listen on ADDR "`+busy.Addr().String()+`"`) {
		t.Fatalf("run on a busy address = %v, want an error naming ADDR", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("data dir made (%v)", err)
	}
}
