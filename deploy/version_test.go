package deploy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// versionPkg is where the linker sets the version (pkg/version).
const versionPkg = "github.com/brain-tools/suite/pkg/version"

// binaries are the suite's programs. serve is the environment that starts
// one on 127.0.0.1:0 (a temporary directory is dir), nil for a program
// that serves nothing: -version is all there is to ask it. mcp: it serves
// its tools at /mcp too.
var binaries = []struct {
	pkg   string
	serve func(dir string) []string
	mcp   bool
}{
	{"./services/brain", func(dir string) []string {
		return []string{"BRAIN_ADDR=127.0.0.1:0", "BRAIN_DATA_DIR=" + dir, "BRAIN_API_KEY=version-test-api-key-0123", "BRAIN_TOOLS_KEY=version-test-tools-key-01"}
	}, false},
	{"./services/local", func(dir string) []string {
		return []string{"APPROVAL_DATA_DIR=" + dir, "APPROVAL_OPERATOR_TOKEN=version-test-operator-0123"}
	}, true},
	{"./services/sandbox", func(dir string) []string {
		return []string{"SANDBOX_ROOT=" + dir, "SANDBOX_UID_BASE=0"}
	}, true},
	{"./services/storage", func(dir string) []string {
		return []string{"STORAGE_PROVIDER=s3-compatible", "STORAGE_ENDPOINT=http://127.0.0.1:1", "STORAGE_BUCKET=version-test",
			"STORAGE_ACCESS_KEY_ID=version-test", "STORAGE_SECRET_ACCESS_KEY=version-test"}
	}, true},
	{"./services/search", func(string) []string { return nil }, true},
	{"./services/webfetch", func(string) []string { return nil }, true},
	{"./examples/customtool", func(string) []string { return nil }, false},
	{"./examples/session", nil, false},
	{"./examples/fileserver", nil, false},
	{"./examples/genconfig", nil, false},
}

// TestVersionEverywhere builds every binary of the suite twice, as the
// Makefile does (version and revision set with -ldflags -X) and as a plain
// go build does (the build information alone), runs -version on each, then
// starts each one that serves on 127.0.0.1:0 and checks that its /metrics
// reports in build_info exactly what -version printed, and that a tool
// service's /mcp answers initialize with the same serverInfo.version.
func TestVersionEverywhere(t *testing.T) {
	var pkgs []string
	for _, b := range binaries {
		pkgs = append(pkgs, b.pkg)
	}
	variants := []struct {
		name, ldflags string
		wantVersion   string // "" : whatever the build information says
		wantRevision  string
	}{
		{"make", fmt.Sprintf("-X %s.version=v9.8.7-test.1 -X %s.revision=0123456789abcdef0123456789abcdef01234567", versionPkg, versionPkg),
			"v9.8.7-test.1", "0123456789abcdef0123456789abcdef01234567"},
		{"go build", "", "", ""},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			dir := buildSuite(t, v.ldflags, pkgs...)
			for _, b := range binaries {
				name := filepath.Base(b.pkg)
				t.Run(name, func(t *testing.T) {
					bin := filepath.Join(dir, name)
					out, err := exec.Command(bin, "-version").Output()
					if err != nil {
						t.Fatalf("%s -version: %v", name, err)
					}
					line := string(out)
					version, revision, goVersion := parseVersionLine(t, name, line)
					if v.wantVersion != "" && (version != v.wantVersion || revision != v.wantRevision) {
						t.Errorf("-version = %q, want version %s revision %s (the -ldflags values)", line, v.wantVersion, v.wantRevision)
					}
					if b.serve == nil {
						return
					}
					base := serveBinary(t, bin, b.serve(t.TempDir()))
					want := fmt.Sprintf(`build_info{goversion=%q,revision=%q,service=%q,version=%q} 1`, goVersion, revision, name, version)
					if got := buildInfoLine(t, base+"/metrics"); got != want {
						t.Errorf("-version printed %q\n/metrics reports %q\nwant %q", line, got, want)
					}
					if b.mcp {
						if got := mcpServerVersion(t, base+"/mcp"); got != version {
							t.Errorf("MCP serverInfo.version = %q, want %q (what -version printed)", got, version)
						}
					}
				})
			}
		})
	}
}

var versionLine = regexp.MustCompile(`^(\S+) (\S+) \((?:revision (\S+), )?(go\S+)\)\n$`)

// parseVersionLine reads pkg/version's "name version (revision r, goV)".
func parseVersionLine(t *testing.T, name, line string) (version, revision, goVersion string) {
	t.Helper()
	m := versionLine.FindStringSubmatch(line)
	if m == nil || m[1] != name {
		t.Fatalf("-version printed %q, want %q", line, name+" VERSION (revision REV, goX.Y.Z)")
	}
	return m[2], m[3], m[4]
}

// serveBinary starts bin with env on 127.0.0.1:0 and returns its base URL
// (startBinary); brain gets examples/brain.json.
func serveBinary(t *testing.T, bin string, env []string) string {
	t.Helper()
	var args []string
	if filepath.Base(bin) == "brain" {
		args = []string{"-config", filepath.Join(repoRoot(t), "examples", "brain.json")}
	}
	return startBinary(t, bin, args, append([]string{"ADDR=127.0.0.1:0", "BRAIN_TOOLS_KEY=version-test-tools-key-01"}, env...)).URL
}

// buildInfoLine is the build_info sample of a /metrics page.
func buildInfoLine(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "build_info{") {
			return l
		}
	}
	t.Fatalf("GET %s: no build_info:\n%s", url, body)
	return ""
}

// mcpServerVersion sends MCP initialize to url and returns
// result.serverInfo.version.
func mcpServerVersion(t *testing.T, url string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"version-test","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer version-test-tools-key-01")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	// The answer is JSON or one SSE event whose data line holds it.
	text := string(data)
	if i := strings.Index(text, "data: "); i >= 0 {
		text = text[i+len("data: "):]
		text, _, _ = strings.Cut(text, "\n")
	}
	var rpc struct {
		Result struct {
			ServerInfo struct{ Version string } `json:"serverInfo"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(text), &rpc); err != nil {
		t.Fatalf("POST %s initialize: %d %s: %v", url, resp.StatusCode, data, err)
	}
	return rpc.Result.ServerInfo.Version
}
