package service

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/brain-tools/suite/pkg/version"
)

// TestMainCommandLine runs Main's command-line handling (mainCode) with
// each kind of argument: only no arguments start the service, the health
// check honours --healthcheck and the service's default address, -version
// prints the build and exits 0 without running, help exits 0 and anything
// else exits 2 with the usage on stderr.
func TestMainCommandLine(t *testing.T) {
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer healthy.Close()
	up := healthy.Listener.Addr().String()
	failing := errors.New("boom")

	tests := []struct {
		name       string
		args       []string
		environ    map[string]string
		opts       []MainOption
		runErr     error
		wantCode   int
		wantRun    bool
		wantStdout []string
		wantStderr []string
		wantAddr   string // the ADDR run gets
	}{
		{name: "the default address reaches run as ADDR", opts: []MainOption{DefaultAddr("127.0.0.1:8099")}, wantRun: true, wantAddr: "127.0.0.1:8099"},
		{name: "ADDR set wins over the default in run", environ: map[string]string{"ADDR": "127.0.0.1:7"}, opts: []MainOption{DefaultAddr("127.0.0.1:8099")}, wantRun: true, wantAddr: "127.0.0.1:7"},
		{name: "LOG_LEVEL unreadable exits 1 before run", environ: map[string]string{"LOG_LEVEL": "loud"}, wantCode: 1, wantStderr: []string{"LOG_LEVEL", "want debug, info, warn or error"}},
		{name: "LOG_LEVEL debug", environ: map[string]string{"LOG_LEVEL": "debug"}, wantRun: true},
		{name: "no arguments run the service", wantCode: 0, wantRun: true},
		{name: "run error exits 1", runErr: failing, wantCode: 1, wantRun: true, wantStderr: []string{`"err":"boom"`}},
		{name: "-healthcheck", args: []string{"-healthcheck"}, environ: map[string]string{"ADDR": up}, wantStdout: []string{"healthy\n"}},
		{name: "--healthcheck", args: []string{"--healthcheck"}, environ: map[string]string{"ADDR": up}, wantStdout: []string{"healthy\n"}},
		{name: "-healthcheck without ADDR asks the default address", args: []string{"-healthcheck"}, opts: []MainOption{DefaultAddr(up)}, wantStdout: []string{"healthy\n"}},
		{name: "ADDR wins over the default", args: []string{"-healthcheck"}, environ: map[string]string{"ADDR": up}, opts: []MainOption{DefaultAddr("127.0.0.1:1")}, wantStdout: []string{"healthy\n"}},
		{name: "-healthcheck without ADDR or default", args: []string{"-healthcheck"}, wantCode: 1, wantStdout: []string{"ADDR is empty"}},
		{name: "-help", args: []string{"-help"}, opts: []MainOption{DefaultAddr("127.0.0.1:8085")},
			wantStdout: []string{"Usage: svc [-healthcheck | -version]", "-healthcheck", "-version", "environment variables", "default 127.0.0.1:8085", "services/svc/README.md", "deploy/README.md", "-h, -help"}},
		{name: "-version", args: []string{"-version"}, wantStdout: []string{"svc " + version.Get().String() + "\n"}},
		{name: "--version", args: []string{"--version"}, environ: map[string]string{"ADDR": "127.0.0.1:1"}, wantStdout: []string{"svc " + version.Get().String() + "\n"}},
		{name: "-version with a stray argument", args: []string{"-version", "now"}, wantCode: 2, wantStderr: []string{`unexpected argument "now"`}},
		{name: "-h", args: []string{"-h"}, wantStdout: []string{"Usage: svc", "-healthcheck"}},
		{name: "--help", args: []string{"--help"}, wantStdout: []string{"Usage: svc"}},
		{name: "unknown flag", args: []string{"-bogus"}, wantCode: 2, wantStderr: []string{"flag provided but not defined: -bogus", "Usage: svc", "-healthcheck"}},
		{name: "unknown flag after -healthcheck", args: []string{"-healthcheck", "-bogus"}, environ: map[string]string{"ADDR": up}, wantCode: 2, wantStderr: []string{"-bogus", "Usage: svc"}},
		{name: "positional argument", args: []string{"serve"}, wantCode: 2, wantStderr: []string{`unexpected argument "serve"`, "Usage: svc"}},
		{name: "positional argument after -healthcheck", args: []string{"-healthcheck", "now"}, environ: map[string]string{"ADDR": up}, wantCode: 2, wantStderr: []string{`unexpected argument "now"`}},
		{name: "flag value given to a bool", args: []string{"-healthcheck=maybe"}, wantCode: 2, wantStderr: []string{"invalid boolean value", "Usage: svc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran, addr := false, ""
			run := func(ctx context.Context, environ map[string]string, logger *slog.Logger) error {
				ran, addr = true, environ["ADDR"]
				return tt.runErr
			}
			environ := tt.environ
			if environ == nil {
				environ = map[string]string{}
			}
			var stdout, stderr bytes.Buffer
			code := mainCode(context.Background(), "svc", tt.args, environ, &stdout, &stderr, run, tt.opts...)
			if code != tt.wantCode || ran != tt.wantRun {
				t.Errorf("exit %d, ran %v; want %d, %v\nstdout: %s\nstderr: %s", code, ran, tt.wantCode, tt.wantRun, &stdout, &stderr)
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
			if addr != tt.wantAddr {
				t.Errorf("run got ADDR %q, want %q", addr, tt.wantAddr)
			}
			if tt.wantStderr == nil && tt.runErr == nil && stderr.Len() > 0 {
				t.Errorf("unexpected stderr %q", stderr.String())
			}
		})
	}
}
