package deploy

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/pkg/servicetest"
)

const metricsToolsKey = "metrics-test-tools-key-012"

// toolServices are the tool services the metrics test starts, each with
// one tool called well and badly (arguments of the wrong type: error code
// invalid_arguments) over HTTP and over MCP.
var toolServices = []struct {
	name      string
	env       func(dir string) []string
	tool      string
	good, bad map[string]any
}{
	{"local", func(dir string) []string {
		return []string{"APPROVAL_DATA_DIR=" + dir, "APPROVAL_OPERATOR_TOKEN=metrics-test-operator-012"}
	}, "echo", map[string]any{"text": "hi"}, map[string]any{"text": 7}},
	{"sandbox", func(dir string) []string { return []string{"SANDBOX_ROOT=" + dir, "SANDBOX_UID_BASE=0"} },
		"sandbox_exec", map[string]any{"command": "echo hi"}, map[string]any{"command": 7}},
	// No S3 server: the calls fail as the tool's own errors (tool_error).
	{"storage", func(string) []string {
		return []string{"STORAGE_PROVIDER=s3-compatible", "STORAGE_ENDPOINT=http://127.0.0.1:1", "STORAGE_BUCKET=metrics-test",
			"STORAGE_ACCESS_KEY_ID=metrics-test", "STORAGE_SECRET_ACCESS_KEY=metrics-test"}
	}, "storage_list", map[string]any{}, map[string]any{"limit": "ten"}},
	// No provider key: web_search answers is_error.
	{"search", func(string) []string { return nil }, "web_search", map[string]any{"query": "go"}, map[string]any{"query": 7}},
	// A loopback URL: the SSRF guard refuses it (webfetch_fetches_total{outcome="refused"}).
	{"webfetch", func(string) []string { return nil }, "web_fetch", map[string]any{"url": "http://127.0.0.1:9/"}, map[string]any{"url": 7}},
	// browser_pages lists a session's pages: none, and no Chromium started.
	{"browser", func(string) []string { return nil }, "browser_pages", map[string]any{}, map[string]any{"action": 7}},
	{"customtool", func(string) []string { return nil }, "word_count", map[string]any{"text": "a b"}, map[string]any{"text": 7}},
}

// scrape reads url's /metrics into families by name.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s/metrics: %v", base, err)
	}
	return fams
}

// sample returns the value of the sample of fam whose labels include want,
// summed over the others; found is false when none matches.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (sum float64, found bool) {
	fam := fams[name]
	if fam == nil {
		return 0, false
	}
next:
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum, found
}

// checkCatalogue checks that the server called name serves exactly the
// metrics pkg/metrics lists for it (beside go_* and process_*), each with
// its type, help and labels (service first among them).
func checkCatalogue(t *testing.T, name string, toolService bool, fams map[string]*dto.MetricFamily) {
	t.Helper()
	var want, got []string
	for _, d := range metrics.All {
		if d.Served(name, toolService) {
			want = append(want, d.Name)
		}
	}
	for n, fam := range fams {
		if strings.HasPrefix(n, "go_") || strings.HasPrefix(n, "process_") {
			continue
		}
		got = append(got, n)
		d, ok := metrics.Lookup(n)
		if !ok {
			continue // reported by the set comparison below
		}
		if typ := strings.ToLower(fam.GetType().String()); typ != d.Type {
			t.Errorf("%s: %s is a %s, the catalogue says %s", name, n, typ, d.Type)
		}
		if fam.GetHelp() != d.Help {
			t.Errorf("%s: %s's help is %q, the catalogue's %q", name, n, fam.GetHelp(), d.Help)
		}
		wantLabels := append([]string{"service"}, d.Labels...)
		sort.Strings(wantLabels)
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
				if l.GetName() == "service" && l.GetValue() != name {
					t.Errorf("%s: %s has service=%q", name, n, l.GetValue())
				}
			}
			sort.Strings(labels)
			if !slices.Equal(labels, wantLabels) {
				t.Errorf("%s: %s has labels %v, the catalogue %v", name, n, labels, wantLabels)
				break
			}
		}
	}
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s serves %v\nthe catalogue (pkg/metrics, deploy/README.md) lists %v", name, got, want)
	}
}

// TestMetricsEveryService starts brain and every tool service, calls a
// tool of each over HTTP and over MCP, well and with bad arguments, sends
// a request with a wrong token, and scrapes /metrics: the tool-call
// counters moved for both transports with the error code of the bad
// calls, the HTTP and auth-failure counters for their routes, and each
// server serves exactly the metrics the catalogue (and so the table in
// deploy/README.md) lists for it, with the catalogue's types, help and
// labels.
func TestMetricsEveryService(t *testing.T) {
	pkgs := []string{"./services/brain"}
	for _, s := range toolServices {
		if s.name == "customtool" {
			pkgs = append(pkgs, "./examples/customtool")
		} else {
			pkgs = append(pkgs, "./services/"+s.name)
		}
	}
	bin := buildSuite(t, "", pkgs...)
	urls := map[string]string{}
	for _, s := range toolServices {
		p := startBinary(t, filepath.Join(bin, s.name), nil,
			append([]string{"ADDR=127.0.0.1:0", "BRAIN_TOOLS_KEY=" + metricsToolsKey}, s.env(t.TempDir())...))
		urls[s.name] = p.URL
	}

	for _, s := range toolServices {
		t.Run(s.name, func(t *testing.T) {
			c := servicetest.Dial(urls[s.name], metricsToolsKey)
			for _, args := range []map[string]any{s.good, s.bad} {
				c.Call(t, s.tool, args)
				c.CallMCP(t, s.tool, args)
			}
			unauthorized(t, urls[s.name]+"/tools/"+s.tool)
			fams := scrape(t, urls[s.name])
			for _, transport := range []string{metrics.TransportHTTP, metrics.TransportMCP} {
				if n, _ := sample(fams, metrics.ToolCalls.Name, map[string]string{"tool": s.tool, "transport": transport}); n < 2 {
					t.Errorf("tool_calls_total{tool=%q,transport=%q} = %v after two calls", s.tool, transport, n)
				}
				bad := map[string]string{"tool": s.tool, "transport": transport, "status": metrics.StatusFailed, "error_code": metrics.CodeInvalidArguments}
				if n, _ := sample(fams, metrics.ToolCalls.Name, bad); n != 1 {
					t.Errorf("tool_calls_total%v = %v, want 1", bad, n)
				}
				if n, _ := sample(fams, metrics.ToolDuration.Name, map[string]string{"tool": s.tool, "transport": transport}); n < 2 {
					t.Errorf("tool_call_duration_seconds{tool=%q,transport=%q} has %v observations", s.tool, transport, n)
				}
			}
			for _, route := range []string{"/tools/:name", "/mcp"} {
				if n, _ := sample(fams, metrics.HTTPRequests.Name, map[string]string{"route": route, "method": "POST", "code": "200"}); n < 2 {
					t.Errorf("http_requests_total{route=%q,code=\"200\"} = %v", route, n)
				}
			}
			if n, _ := sample(fams, metrics.AuthFailures.Name, map[string]string{"route": "/tools/:name"}); n != 1 {
				t.Errorf("auth_failures_total{route=\"/tools/:name\"} = %v, want 1", n)
			}
			checkCatalogue(t, s.name, true, fams)
		})
	}

	t.Run("brain", func(t *testing.T) {
		// A closed port: the call fails connection_failed.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := ln.Addr().String()
		ln.Close()
		schema := `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`
		cfg := fmt.Sprintf(`{"api_keys":[{"env":"BRAIN_API_KEY","tenant":"local"}],"tools":[
			{"name":"echo","description":"Echo.","input_schema":%[1]s,"url":"%[2]s/tools/echo","tenants":["local"],"token_env":"BRAIN_TOOLS_KEY","max_concurrency":2},
			{"name":"echo_mcp","description":"Echo over MCP.","input_schema":%[1]s,"url":"%[2]s/mcp","mcp_tool":"echo","tenants":["local"],"token_env":"BRAIN_TOOLS_KEY"},
			{"name":"dead","description":"Nobody listens.","input_schema":%[1]s,"url":"http://%[3]s/tools/echo","tenants":["local"]},
			{"name":"lookup","description":"Answered by the application.","input_schema":%[1]s,"type":"function","tenants":["local"]}]}`,
			schema, urls["local"], dead)
		dir := t.TempDir()
		path := filepath.Join(dir, "brain.json")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		b := &pair{brain: startBinary(t, filepath.Join(bin, "brain"), []string{"-config", path}, []string{
			"BRAIN_ADDR=127.0.0.1:0", "BRAIN_DATA_DIR=" + filepath.Join(dir, "data"), "BRAIN_API_KEY=" + traceAPIKey, "BRAIN_TOOLS_KEY=" + metricsToolsKey,
		})}
		var sess struct{ ID string }
		b.api(t, http.MethodPost, "/sessions", `{"config":{"tools":["echo","echo_mcp","dead"]}}`, &sess)
		for _, c := range []struct{ tool, args, status string }{
			{"echo", `{"text":"hi"}`, "succeeded"},
			{"echo_mcp", `{"text":"hi"}`, "succeeded"},
			{"dead", `{"text":"hi"}`, "failed"},
			{"echo", `{"text":7}`, "failed"},
		} {
			var got callJSON
			b.api(t, http.MethodPost, "/sessions/"+sess.ID+"/tool_calls", `{"tool":"`+c.tool+`","arguments":`+c.args+`,"wait_seconds":30}`, &got)
			if got.Status != c.status {
				t.Fatalf("%s %s: %+v, want %s", c.tool, c.args, got, c.status)
			}
		}
		unauthorized(t, b.brain.URL+"/catalog")
		fams := scrape(t, b.brain.URL)
		for _, want := range []map[string]string{
			{"tool": "echo", "transport": metrics.TransportHTTP, "status": metrics.StatusSucceeded, "error_code": ""},
			{"tool": "echo_mcp", "transport": metrics.TransportMCP, "status": metrics.StatusSucceeded, "error_code": ""},
			{"tool": "dead", "transport": metrics.TransportHTTP, "status": metrics.StatusFailed, "error_code": "connection_failed"},
			{"tool": "echo", "transport": metrics.TransportHTTP, "status": metrics.StatusFailed, "error_code": metrics.CodeInvalidArguments},
		} {
			if n, _ := sample(fams, metrics.ToolCalls.Name, want); n != 1 {
				t.Errorf("brain: tool_calls_total%v = %v, want 1", want, n)
			}
		}
		if n, _ := sample(fams, metrics.HTTPRequests.Name, map[string]string{"route": "/sessions/:id/tool_calls", "method": "POST", "code": "200"}); n != 4 {
			t.Errorf("brain: http_requests_total{route=\"/sessions/:id/tool_calls\"} = %v, want 4", n)
		}
		if n, _ := sample(fams, metrics.AuthFailures.Name, map[string]string{"route": "/catalog"}); n != 1 {
			t.Errorf("brain: auth_failures_total{route=\"/catalog\"} = %v, want 1", n)
		}
		if n, _ := sample(fams, metrics.Sessions.Name, nil); n != 1 {
			t.Errorf("brain: sessions_active = %v, want 1", n)
		}
		checkCatalogue(t, "brain", false, fams)
		// The service behind brain counted brain's MCP call as one.
		local := scrape(t, urls["local"])
		if n, _ := sample(local, metrics.ToolCalls.Name, map[string]string{"tool": "echo", "transport": metrics.TransportMCP, "status": metrics.StatusSucceeded}); n < 2 {
			t.Errorf("local: brain's MCP call is not counted: tool_calls_total{transport=\"mcp\",status=\"succeeded\"} = %v", n)
		}
	})
}

// unauthorized sends a request with a wrong bearer token and wants 401.
func unauthorized(t *testing.T, url string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	if strings.HasSuffix(url, "/catalog") {
		req.Method = http.MethodGet
	}
	req.Header.Set("Authorization", "Bearer wrong-token-0123456789")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("%s with a wrong token: %d, want 401", url, resp.StatusCode)
	}
}
