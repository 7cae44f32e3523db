package mcpconformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/servicetest"
	"github.com/brain-tools/suite/services/local/internal/echo"
)

const token = "conformance-token"

// nodeDir is where scripts/mcp-deps.sh installs Node 22, the conformance
// suite and the Inspector.
func nodeDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MCP_NODE_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("find the Node tools: %v", err)
		}
		dir = filepath.Join(home, ".cache", "brain-tools", "mcp-node")
	}
	for _, p := range []string{
		"node_modules/.bin/node",
		"node_modules/@modelcontextprotocol/conformance/dist/index.js",
		"node_modules/.bin/mcp-inspector",
	} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Fatalf("MCP checks need Node 22, @modelcontextprotocol/conformance and @modelcontextprotocol/inspector in %s (%v): run `bash scripts/mcp-deps.sh` (make deps)", dir, err)
		}
	}
	return dir
}

// startLocal serves the local service's tools, with /mcp behind its
// bearer check as every service serves it, on loopback. It returns the
// service's base URL.
func startLocal(t *testing.T) string {
	t.Helper()
	cfg, err := service.ParseEnv[service.Config](map[string]string{"ADDR": "127.0.0.1:0", "BRAIN_TOOLS_KEY": token})
	if err != nil {
		t.Fatal(err)
	}
	return servicetest.StartServer(t, &service.Server{Name: "local", Config: cfg, Tools: []service.Tool{echo.Tool()}}).URL
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

// authProxy forwards to target adding the bearer token, for a client that
// cannot send headers (the conformance suite). The Host header is passed
// through, so the service's DNS-rebinding guard sees what the client sent.
func authProxy(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1,
	}
	return serve(t, p)
}

func nodeCmd(ctx context.Context, t *testing.T, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules/.bin/node"), args...)
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Join(dir, "node_modules/.bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"NO_COLOR=1",
		// The Inspector keeps a catalog of servers; keep it out of $HOME.
		"MCP_CATALOG_PATH="+filepath.Join(t.TempDir(), "mcp.json"),
	)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// TestConformance runs the MCP conformance suite's server scenarios against
// the local service's /mcp. Scenarios that need the suite's own fixture
// tools (which a tool service does not have) are listed in
// expected-failures.yml, those for prompts, resources and completion (which
// it does not offer) in not-applicable.yml; any other failure, a listed
// scenario that passes, or one that fails for another reason fails the test.
func TestConformance(t *testing.T) {
	dir := nodeDir(t)
	base := authProxy(t, startLocal(t))
	// The suite takes one baseline: both committed lists, joined.
	expected, err := os.ReadFile("expected-failures.yml")
	if err != nil {
		t.Fatal(err)
	}
	notApplicable, err := os.ReadFile("not-applicable.yml")
	if err != nil {
		t.Fatal(err)
	}
	baseline := filepath.Join(t.TempDir(), "baseline.yml")
	joined := string(expected) + "\n" + strings.SplitN(string(notApplicable), "server:\n", 2)[1]
	if err := os.WriteFile(baseline, []byte(joined), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each scenario's checks.json goes to a temporary directory, or to
	// MCP_CONFORMANCE_RESULTS when set, to read them after the run.
	results := os.Getenv("MCP_CONFORMANCE_RESULTS")
	if results == "" {
		results = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := nodeCmd(ctx, t, dir, filepath.Join(dir, "node_modules/@modelcontextprotocol/conformance/dist/index.js"),
		"server", "--url", base+service.MCPPath, "--expected-failures", baseline, "-o", results)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("conformance output:\n%s", out.String())
	if err != nil {
		t.Fatalf("conformance suite: %v (see the output above)", err)
	}
	checkBaseline(t, "expected-failures.yml", results, fixtureTool)
	checkBaseline(t, "not-applicable.yml", results, notOffered)
}

// fixtureTool matches the error of a check that failed only because the
// suite's fixture tool is missing from the service; notOffered, one that
// failed because the service offers no prompts, resources or completion.
var (
	fixtureTool = regexp.MustCompile(`unknown tool "test_`)
	notOffered  = regexp.MustCompile(`unknown prompt "test_|Resource not found|method not found: "(completion/complete|resources/subscribe|resources/unsubscribe)"`)
)

// checkBaseline makes sure every scenario listed in baseline ran and failed
// only for the reason why matches, not for a fault of the service.
func checkBaseline(t *testing.T, baseline, results string, why *regexp.Regexp) {
	t.Helper()
	data, err := os.ReadFile(baseline)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok {
			listed = append(listed, name)
		}
	}
	if len(listed) == 0 {
		t.Fatalf("%s lists no scenario", baseline)
	}
	for _, name := range listed {
		dirs, _ := filepath.Glob(filepath.Join(results, "server-"+name+"-2*", "checks.json"))
		if len(dirs) != 1 {
			t.Errorf("expected failure %s: found %d result files, want 1 (did the scenario run?)", name, len(dirs))
			continue
		}
		raw, err := os.ReadFile(dirs[0])
		if err != nil {
			t.Fatal(err)
		}
		var checks []struct {
			ID           string `json:"id"`
			Status       string `json:"status"`
			ErrorMessage string `json:"errorMessage"`
		}
		if err := json.Unmarshal(raw, &checks); err != nil {
			t.Fatalf("%s: %v", dirs[0], err)
		}
		for _, c := range checks {
			if c.Status != "SUCCESS" && !why.MatchString(c.ErrorMessage) {
				t.Errorf("%s: %s: check %s failed for a reason other than %s: %s %s", baseline, name, c.ID, why, c.Status, c.ErrorMessage)
			}
		}
	}
}

// TestInspectorCLI lists the local service's tools and calls echo with the
// MCP Inspector's CLI, with the bearer token, both as a person would.
func TestInspectorCLI(t *testing.T) {
	dir := nodeDir(t)
	mcpURL := startLocal(t) + service.MCPPath
	run := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		all := append([]string{filepath.Join(dir, "node_modules/.bin/mcp-inspector"), "--cli", mcpURL, "--transport", "http", "--header", "Authorization: Bearer " + token}, args...)
		cmd := nodeCmd(ctx, t, dir, all...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		if err != nil {
			t.Fatalf("inspector %v: %v\nstdout: %s\nstderr: %s", args, err, stdout, stderr.String())
		}
		return stdout
	}

	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	out := run("--method", "tools/list")
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("tools/list output %q: %v", out, err)
	}
	if len(list.Tools) != 1 || list.Tools[0].Name != "echo" || list.Tools[0].Description != echo.Tool().Binding.Description {
		t.Fatalf("tools/list = %s, want the echo tool", out)
	}

	var call struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	out = run("--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hello from the inspector")
	if err := json.Unmarshal(out, &call); err != nil {
		t.Fatalf("tools/call output %q: %v", out, err)
	}
	if call.IsError || len(call.Content) != 1 || call.Content[0].Text != "hello from the inspector" {
		t.Fatalf("tools/call echo = %s", out)
	}

	// Without the token the Inspector is turned away.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := nodeCmd(ctx, t, dir, filepath.Join(dir, "node_modules/.bin/mcp-inspector"), "--cli", mcpURL, "--transport", "http", "--stored-auth-only", "--method", "tools/list")
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	t.Logf("inspector without a token: %s", b)
	if !errors.As(err, &ee) || !strings.Contains(string(b), "unauthorized") || strings.Contains(string(b), `"tools"`) {
		t.Errorf("inspector without a token: err %v, output %s; want an auth failure", err, b)
	}
}
