package webfetch

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	browserOnce sync.Once
	browserBin  string
	browserErr  error
)

// startBrowser builds the browser service (services/browser, a module of
// this workspace) and runs it on loopback, allowed to reach srv only. It
// needs chromium (make deps).
func startBrowser(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	browserOnce.Do(func() {
		dir, err := os.MkdirTemp("", "webfetch-browser-")
		if err != nil {
			browserErr = err
			return
		}
		browserBin = filepath.Join(dir, "browser")
		out, err := exec.Command("go", "build", "-o", browserBin, "github.com/brain-tools/suite/services/browser").CombinedOutput()
		if err != nil {
			browserErr = err
			t.Logf("%s", out)
		}
	})
	if browserErr != nil {
		t.Fatalf("build the browser service (services/browser in go.work): %v", browserErr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	u, _ := url.Parse(srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, browserBin)
	cmd.Env = append(os.Environ(), "ADDR="+addr, "BRAIN_TOOLS_KEY="+testToken, "BROWSER_ALLOW=127.0.0.1", "BROWSER_PORTS="+u.Port(), "LOG_LEVEL=warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	base := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); ; {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the browser service did not start: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRenderThroughTheBrowser: with a browser service configured, a page
// whose text scripts build is read rendered (render=auto finds the static
// read near empty; render=always renders anyway), render=never reads it
// static, a page with text of its own is not rendered, and without a
// browser render=always is refused naming the variable.
func TestRenderThroughTheBrowser(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/robots.txt":
			http.NotFound(w, r)
		case "/app":
			_, _ = w.Write([]byte(`<!doctype html><title>App</title><div id="root"></div><script>document.getElementById("root").innerHTML = "<h1>Built by script</h1><p>" + "This text exists only after the script ran. ".repeat(8) + "</p>"</script>`))
		case "/static":
			_, _ = w.Write([]byte(`<!doctype html><title>Static</title><article><h1>Static</h1><p>` + strings.Repeat("Plenty of text without any script at all. ", 12) + `</p></article><script>document.title = "changed"</script>`))
		}
	}))
	defer srv.Close()
	browser := startBrowser(t, srv)
	h := newHarness(t, map[string]string{"WEBFETCH_BROWSER_URL": browser}, srv)
	tests := []struct {
		name, path, render string
		rendered           bool
		want               string
	}{
		{"auto renders a script page", "/app", "", true, "# Built by script"},
		{"always renders", "/app", "always", true, "This text exists only after the script ran."},
		{"never reads static", "/app", "never", false, "its text is probably built by JavaScript"},
		{"auto leaves a page with text", "/static", "auto", false, "Plenty of text without any script"},
		{"always renders a page with text", "/static", "always", true, "Plenty of text without any script"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{"url": srv.URL + tc.path}
			if tc.render != "" {
				args["render"] = tc.render
			}
			r := h.call(args)
			if r.IsError {
				t.Fatalf("is_error: %s", text(r))
			}
			o := structured(t, r)
			if o.Rendered != tc.rendered || !strings.Contains(text(r), tc.want) {
				t.Fatalf("rendered=%v, text:\n%s", o.Rendered, text(r))
			}
		})
	}
	plain := newHarness(t, nil, srv)
	if r := plain.call(map[string]any{"url": srv.URL + "/app", "render": "always"}); !r.IsError || !strings.Contains(text(r), "WEBFETCH_BROWSER_URL") {
		t.Errorf("render=always without a browser: %s", text(r))
	}
	if r := plain.call(map[string]any{"url": srv.URL + "/app", "render": "sometimes"}); !r.IsError || !strings.Contains(text(r), `at "/render": value must be one of 'auto', 'always', 'never'`) {
		t.Errorf("render=sometimes: %s", text(r))
	}
}
