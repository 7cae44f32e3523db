package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// jaegerVersion is the Jaeger all-in-one scripts/jaeger-deps.sh builds.
const jaegerVersion = "v1.76.0"

// jaegerBinary is where scripts/jaeger-deps.sh (make deps) puts Jaeger.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("BRAIN_TOOLS_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				t.Fatal(err)
			}
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "brain-tools")
	}
	bin := filepath.Join(cache, "jaeger", "jaeger-"+jaegerVersion)
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("Jaeger %s is not installed at %s: run make deps (scripts/jaeger-deps.sh builds it)", jaegerVersion, bin)
	}
	return bin
}

// jaeger is a Jaeger all-in-one started by a test: in-memory storage, OTLP
// over gRPC and HTTP, the query API, each on a loopback port of its own.
type jaeger struct {
	grpc, http, query string // host:port
}

// jaegerConfig is the all-in-one pipeline with only what a test needs:
// OTLP in, memory storage, the query API; the collector's own metrics off
// (they would take port 8888).
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: %[3]s
    grpc:
      endpoint: %[4]s
  healthcheckv2:
    use_v2: true
    http:
      endpoint: %[5]s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %[1]s
      http:
        endpoint: %[2]s
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	bin := jaegerBinary(t)
	ports := freePorts(t, 5)
	j := &jaeger{grpc: ports[0], http: ports[1], query: ports[2]}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, ports[0], ports[1], ports[2], ports[3], ports[4]), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--config", "file:"+cfg)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + ports[4] + "/status")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jaeger not healthy within 60 s:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// jTrace is a trace as Jaeger's query API (/api/traces) returns it.
type jTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		ProcessID     string `json:"processID"`
		References    []struct {
			RefType string `json:"refType"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		Tags []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

func (j *jaeger) get(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + j.query + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, data)
	}
}

// services lists the services Jaeger has spans of.
func (j *jaeger) services(t *testing.T) []string {
	var out struct{ Data []string }
	j.get(t, "/api/services", &out)
	return out.Data
}

// traces returns the traces that hold spans of service.
func (j *jaeger) traces(t *testing.T, service string) []jTrace {
	var out struct{ Data []jTrace }
	j.get(t, "/api/traces?lookback=1h&limit=1000&service="+service, &out)
	return out.Data
}

// pair is brain and the local service, brain's bindings echo (HTTP) and
// echo_mcp (the same tool over MCP) pointing at the service.
type pair struct {
	brain, local *proc
}

const (
	traceAPIKey   = "tracing-test-api-key-0123"
	traceToolsKey = "tracing-test-tools-key-01"
)

func startPair(t *testing.T, bin string, brainEnv, localEnv []string) *pair {
	t.Helper()
	dir := t.TempDir()
	local := startBinary(t, filepath.Join(bin, "local"), nil, append([]string{
		"ADDR=127.0.0.1:0", "BRAIN_TOOLS_KEY=" + traceToolsKey, "APPROVAL_DATA_DIR=" + filepath.Join(dir, "approvals"),
		"APPROVAL_OPERATOR_TOKEN=tracing-test-operator-012",
	}, localEnv...))
	schema := `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`
	cfg := fmt.Sprintf(`{"api_keys":[{"env":"BRAIN_API_KEY","tenant":"local"}],"tools":[
		{"name":"echo","description":"Echo.","input_schema":%[1]s,"url":"%[2]s/tools/echo","tenants":["local"],"token_env":"BRAIN_TOOLS_KEY"},
		{"name":"echo_mcp","description":"Echo over MCP.","input_schema":%[1]s,"url":"%[2]s/mcp","mcp_tool":"echo","tenants":["local"],"token_env":"BRAIN_TOOLS_KEY"}]}`,
		schema, local.URL)
	cfgPath := filepath.Join(dir, "brain.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	brain := startBinary(t, filepath.Join(bin, "brain"), []string{"-config", cfgPath}, append([]string{
		"BRAIN_ADDR=127.0.0.1:0", "BRAIN_DATA_DIR=" + filepath.Join(dir, "brain"),
		"BRAIN_API_KEY=" + traceAPIKey, "BRAIN_TOOLS_KEY=" + traceToolsKey,
	}, brainEnv...))
	return &pair{brain: brain, local: local}
}

// callJSON is what the test reads of a ToolCall.
type callJSON struct {
	ID     string  `json:"id"`
	Status string  `json:"status"`
	SpanID *string `json:"span_id"`
}

// api sends a request to brain's API and decodes the answer.
func (p *pair) api(t *testing.T, method, path, body string, v any) {
	t.Helper()
	req, _ := http.NewRequest(method, p.brain.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+traceAPIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, data)
	}
}

// calls makes a session with both bindings and calls each once, waiting
// for the result.
func (p *pair) calls(t *testing.T) map[string]callJSON {
	t.Helper()
	var sess struct{ ID string }
	p.api(t, http.MethodPost, "/sessions", `{"config":{"tools":["echo","echo_mcp"]}}`, &sess)
	out := map[string]callJSON{}
	for _, name := range []string{"echo", "echo_mcp"} {
		var c callJSON
		p.api(t, http.MethodPost, "/sessions/"+sess.ID+"/tool_calls", `{"tool":"`+name+`","arguments":{"text":"traced"},"wait_seconds":30}`, &c)
		if c.Status != "succeeded" {
			t.Fatalf("%s: %+v", name, c)
		}
		out[name] = c
	}
	return out
}

var traceIDField = regexp.MustCompile(`"trace_id":"[0-9a-f]{32}"`)

// TestTracesInJaeger runs brain and the local service against a real
// Jaeger all-in-one (in-memory storage, loopback ports), first with no
// OTEL_* variable set and then exporting: brain over OTLP/HTTP, the
// service over OTLP/gRPC. Unset, the calls work, no ToolCall has a
// span_id, no log line a trace_id, and Jaeger receives nothing. Exporting,
// each tool call (over HTTP and over MCP) is one trace, read back through
// Jaeger's query API, with brain's API request span, its tool_call span
// (the ToolCall's span_id), its client span, then the service's server
// span and its tool span, each the parent of the next; and the log lines
// of both processes name that trace.
func TestTracesInJaeger(t *testing.T) {
	jg := startJaeger(t)
	bin := buildSuite(t, "", "./services/brain", "./services/local")
	fast := "OTEL_BSP_SCHEDULE_DELAY=50" // export each span batch within 50 ms

	t.Run("unset", func(t *testing.T) {
		// Would anything be exported, it would be under this name.
		env := []string{fast, "OTEL_SERVICE_NAME=must-not-appear"}
		p := startPair(t, bin, env, env)
		for name, c := range p.calls(t) {
			if c.SpanID != nil {
				t.Errorf("%s: span_id %q with tracing off, want null", name, *c.SpanID)
			}
		}
		p.brain.Stop(t)
		p.local.Stop(t)
		for _, pr := range []*proc{p.brain, p.local} {
			if traceIDField.MatchString(pr.Logs()) {
				t.Errorf("a log line has a trace_id with tracing off:\n%s", pr.Logs())
			}
		}
		time.Sleep(500 * time.Millisecond) // five of Jaeger's batch timeouts
		if s := jg.services(t); len(s) != 0 {
			t.Fatalf("Jaeger received spans of %v with no OTEL_* variable set", s)
		}
	})

	t.Run("exported", func(t *testing.T) {
		p := startPair(t, bin,
			[]string{fast, "OTEL_EXPORTER_OTLP_ENDPOINT=http://" + jg.http},
			[]string{fast, "OTEL_EXPORTER_OTLP_ENDPOINT=http://" + jg.grpc, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"})
		calls := p.calls(t)
		// Each chain: brain's spans, then the service's, each the parent of
		// the next; the first is the trace's root.
		chains := map[string][]string{
			"echo":     {"brain POST /sessions/:id/tool_calls", "brain tool_call echo", "brain tool POST", "local POST /tools/:name", "local tool echo"},
			"echo_mcp": {"brain POST /sessions/:id/tool_calls", "brain tool_call echo_mcp", "brain mcp POST", "local POST /mcp", "local tool echo"},
		}
		for name, c := range calls {
			t.Run(name, func(t *testing.T) {
				if c.SpanID == nil || !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(*c.SpanID) {
					t.Fatalf("span_id %v, want 16 hex digits", c.SpanID)
				}
				tr := jg.waitTrace(t, *c.SpanID, c.ID, len(chains[name]))
				checkChain(t, tr, *c.SpanID, c.ID, chains[name])
				// One call, one trace: the service's spans of this call are
				// all in it.
				for _, other := range jg.traces(t, "local") {
					if other.TraceID != tr.TraceID && other.hasTag("brain.call_id", c.ID) {
						t.Errorf("call %s has spans in a second trace %s", c.ID, other.TraceID)
					}
				}
				// Both processes' log lines of the call name the trace.
				for _, pr := range []*proc{p.brain, p.local} {
					if !strings.Contains(pr.Logs(), `"trace_id":"`+tr.TraceID+`"`) {
						t.Errorf("no log line of %s names trace %s:\n%s", pr.cmd.Path, tr.TraceID, pr.Logs())
					}
				}
			})
		}
	})
}

// hasTag reports whether a span of tr has the tag key=value.
func (tr *jTrace) hasTag(key, value string) bool {
	for _, s := range tr.Spans {
		for _, tag := range s.Tags {
			if tag.Key == key && tag.Value == value {
				return true
			}
		}
	}
	return false
}

// waitTrace polls Jaeger until the trace that holds span spanID of brain
// has at least n spans and the service's span of call callID, and returns
// it.
func (j *jaeger) waitTrace(t *testing.T, spanID, callID string, n int) *jTrace {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, tr := range j.traces(t, "brain") {
			for _, s := range tr.Spans {
				if s.SpanID != spanID {
					continue
				}
				var full struct{ Data []jTrace }
				j.get(t, "/api/traces/"+tr.TraceID, &full)
				if len(full.Data) == 1 && len(full.Data[0].Spans) >= n && full.Data[0].hasTag("brain.call_id", callID) {
					return &full.Data[0]
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no trace with span %s and %d spans in Jaeger within 30 s (services %v)", spanID, n, j.services(t))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkChain checks that tr holds the spans chain names ("service
// operation"), each the child of the one before: the last the service's
// span of call callID, the first the trace's root, the second the span
// spanID (the ToolCall's span_id).
func checkChain(t *testing.T, tr *jTrace, spanID, callID string, chain []string) {
	t.Helper()
	parentOf := map[string]string{}
	nameOf := map[string]string{}
	var all []string
	leaf := ""
	for _, s := range tr.Spans {
		nameOf[s.SpanID] = tr.Processes[s.ProcessID].ServiceName + " " + s.OperationName
		for _, r := range s.References {
			if r.RefType == "CHILD_OF" {
				parentOf[s.SpanID] = r.SpanID
			}
		}
		for _, tag := range s.Tags {
			if tag.Key == "brain.call_id" && tag.Value == callID && nameOf[s.SpanID] == chain[len(chain)-1] {
				leaf = s.SpanID
			}
		}
		all = append(all, nameOf[s.SpanID])
	}
	if leaf == "" {
		t.Fatalf("trace %s has no span %q of call %s; it has %v", tr.TraceID, chain[len(chain)-1], callID, all)
	}
	id := leaf
	for i := len(chain) - 1; i >= 0; i-- {
		if got := nameOf[id]; got != chain[i] {
			t.Fatalf("trace %s: link %d of the chain is %q, want %q (want %v; the trace has %v)", tr.TraceID, i, got, chain[i], chain, all)
		}
		if i == 1 && id != spanID {
			t.Errorf("the tool_call span is %s, the ToolCall says span_id %s", id, spanID)
		}
		if i > 0 {
			id = parentOf[id]
		}
	}
	if p, ok := parentOf[id]; ok {
		t.Errorf("trace %s: the root %q has a parent %s", tr.TraceID, nameOf[id], p)
	}
}
