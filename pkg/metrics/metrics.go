// Package metrics is the one catalogue of the Prometheus metrics the suite
// serves at GET /metrics, and the collectors every server of it (brain and
// each tool service) registers: the same names and labels everywhere, so
// one dashboard and one set of alerts serve the whole stack.
//
// Each metric is a Def in All: its name, type, labels, which servers serve
// it and what it counts. The table in deploy/README.md is rendered from All
// (Markdown), and a test there scrapes every service and checks that what
// it serves is exactly its Defs. Every metric carries the const label
// service (brain, local, sandbox, …), beside the labels its Def lists.
//
// New returns a Set: the registry with the Go runtime and process
// collectors, build_info (pkg/version), the HTTP metrics pkg/httpapi's
// Observe middleware records for every request, and the tool-call metrics
// brain and the service runtime record for every call, whichever
// transport carried it.
package metrics

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/brain-tools/suite/pkg/version"
)

// Types of a Def.
const (
	Counter   = "counter"
	Gauge     = "gauge"
	Histogram = "histogram"
)

// Who serves a Def (Def.ServedBy): every server, the tool services (every
// server built on pkg/service), or one named server.
const (
	Everyone     = "every server"
	ToolServices = "every tool service"
)

// Def describes one metric of the suite.
type Def struct {
	Name string
	Type string // Counter, Gauge or Histogram
	// Labels are the variable labels, in order; every metric also has the
	// const label service.
	Labels []string
	// ServedBy is Everyone, ToolServices or the servers' names, comma
	// separated ("brain", "sandbox, customtool").
	ServedBy string
	Help     string
}

// Served reports whether the server called service, a tool service when
// toolService is set, serves d.
func (d Def) Served(service string, toolService bool) bool {
	switch d.ServedBy {
	case Everyone:
		return true
	case ToolServices:
		return toolService
	}
	for _, s := range strings.Split(d.ServedBy, ",") {
		if strings.TrimSpace(s) == service {
			return true
		}
	}
	return false
}

// The values of the status and transport labels, and the error codes a
// tool service records (brain records its ToolCall error_code, of which
// these are a part: pkg/invoke's Code* constants).
const (
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusTimedOut  = "timed_out"
	StatusCancelled = "cancelled"

	TransportHTTP     = "http"
	TransportMCP      = "mcp"
	TransportFunction = "function"

	CodeToolError            = "tool_error"             // the tool answered is_error
	CodeInvalidArguments     = "invalid_arguments"      // the arguments failed input_schema
	CodeInvalidRequest       = "invalid_request"        // the request body was refused (4xx)
	CodeRequestTooLarge      = "request_too_large"      // the body was over MAX_REQUEST_BYTES; the tool answered
	CodeInvalidResult        = "invalid_result"         // the handler returned no result or an invalid one
	CodeOutputSchemaMismatch = "output_schema_mismatch" // structured_content failed output_schema
	CodePanic                = "panic"                  // the handler panicked
	CodeCancelled            = "cancelled"              // the caller went away before the result
)

// The metrics of the suite. All lists them in the order the docs show.
var (
	BuildInfo = Def{Name: version.MetricName, Type: Gauge, Labels: []string{"version", "revision", "goversion"}, ServedBy: Everyone,
		Help: "The running build: always 1, labelled with the module version, VCS revision and Go version (the same as -version prints)."}
	HTTPRequests = Def{Name: "http_requests_total", Type: Counter, Labels: []string{"route", "method", "code"}, ServedBy: Everyone,
		Help: "HTTP requests answered, by route pattern, method and status code (499: the client went away first)."}
	HTTPDuration = Def{Name: "http_request_duration_seconds", Type: Histogram, Labels: []string{"route", "method"}, ServedBy: Everyone,
		Help: "Time from a request's arrival to the end of its answer, by route pattern and method; an SSE stream counts until it ends."}
	HTTPInFlight = Def{Name: "http_requests_in_flight", Type: Gauge, ServedBy: Everyone,
		Help: "Requests being answered now, open SSE streams and MCP streams included."}
	AuthFailures = Def{Name: "auth_failures_total", Type: Counter, Labels: []string{"route"}, ServedBy: Everyone,
		Help: "Requests refused 401 (missing, malformed or unknown bearer token), by route pattern."}
	ToolCalls = Def{Name: "tool_calls_total", Type: Counter, Labels: []string{"tool", "transport", "status", "error_code"}, ServedBy: Everyone,
		Help: "Tool calls finished, by tool, transport, final status and error code (empty on success). brain counts the calls it makes, a tool service the calls it serves."}
	ToolDuration = Def{Name: "tool_call_duration_seconds", Type: Histogram, Labels: []string{"tool", "transport", "status"}, ServedBy: Everyone,
		Help: "Time from a tool call's start to its result, by tool, transport and final status."}
	ToolInFlight = Def{Name: "tool_calls_in_flight", Type: Gauge, Labels: []string{"tool", "transport"}, ServedBy: Everyone,
		Help: "Tool calls running now (sent and not yet answered), by tool and transport."}
	ToolsQueued = Def{Name: "tool_calls_queued", Type: Gauge, Labels: []string{"tool"}, ServedBy: "brain",
		Help: "Tool calls waiting for a slot of their binding's max_concurrency, by tool."}
	ToolsWaiting = Def{Name: "tool_calls_waiting", Type: Gauge, Labels: []string{"tool", "kind"}, ServedBy: "brain",
		Help: "Tool calls in requires_input, by tool and what they wait for: approval (an approval gate) or function (the application's answer)."}
	Sessions = Def{Name: "sessions_active", Type: Gauge, ServedBy: "brain",
		Help: "Sessions of every tenant that are active (neither interrupted nor closed), counted in brain's store at each scrape; -1 when the store does not answer in time."}
	EventStreams = Def{Name: "event_streams", Type: Gauge, ServedBy: "brain",
		Help: "Event streams (GET /sessions/{id}/events as SSE) open on this replica."}
	RetentionRemoved = Def{Name: "retention_removed_total", Type: Counter, Labels: []string{"kind"}, ServedBy: "brain, local",
		Help: "Rows removed by retention, by kind: session, tool_call, event (brain, BRAIN_RETENTION); approval, decision (local, APPROVAL_RETENTION)."}
	ConfigReloads = Def{Name: "config_reloads_total", Type: Counter, Labels: []string{"result"}, ServedBy: "brain",
		Help: "Host config reloads (SIGHUP or a change of the file), by result: applied, or refused (the running config stayed)."}
	MCPSessions = Def{Name: "mcp_sessions", Type: Gauge, ServedBy: ToolServices,
		Help: "Open MCP sessions at /mcp (revision 2025-11-25; stateless requests of 2026-07-28 hold none)."}
	ApprovalsPending = Def{Name: "approvals_pending", Type: Gauge, ServedBy: "local",
		Help: "Approval requests waiting for an operator's answer, counted in the approval store at each scrape; -1 when it does not answer in time."}
	Workspaces = Def{Name: "sandbox_workspaces", Type: Gauge, ServedBy: "sandbox",
		Help: "Sandbox workspaces open (one per session that ran a command and has not been cleaned up)."}
	Jobs = Def{Name: "jobs", Type: Gauge, Labels: []string{"state"}, ServedBy: "sandbox, customtool",
		Help: "Jobs of the job-ID + status + cancel pattern (pkg/jobs) by state: running, or finished and kept for status."}
	BrowserSessions = Def{Name: "browser_sessions", Type: Gauge, ServedBy: "browser",
		Help: "Browsing sessions alive (one browser context each)."}
	BrowserMemoryPeak = Def{Name: "browser_memory_peak_bytes", Type: Gauge, ServedBy: "browser",
		Help: "Most memory (PSS of every Chromium process) seen."}
	WebFetches = Def{Name: "webfetch_fetches_total", Type: Counter, Labels: []string{"outcome"}, ServedBy: "webfetch",
		Help: "web_fetch calls by outcome: ok, empty (fetched, no readable text), refused (SSRF guard), unreachable (no DNS answer, connection refused), robots, too_large, timeout, http_status, unsupported_type, error."}
)

// All is every metric of the suite but the Go runtime's (go_*) and the
// process's (process_*), which every server serves too.
var All = []Def{BuildInfo, HTTPRequests, HTTPDuration, HTTPInFlight, AuthFailures, ToolCalls, ToolDuration, ToolInFlight,
	ToolsQueued, ToolsWaiting, Sessions, EventStreams, RetentionRemoved, ConfigReloads, MCPSessions, ApprovalsPending, Workspaces, Jobs, BrowserSessions, BrowserMemoryPeak, WebFetches}

// Buckets are the upper bounds of every duration histogram, in seconds:
// half a millisecond to the 300 s default of timeout_seconds.
var Buckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// Set is the collectors one server registers on its Registry.
type Set struct {
	Service  string
	Registry *prometheus.Registry

	HTTPRequests *prometheus.CounterVec
	HTTPDuration *prometheus.HistogramVec
	HTTPInFlight prometheus.Gauge
	AuthFailures *prometheus.CounterVec

	ToolCalls    *prometheus.CounterVec
	ToolDuration *prometheus.HistogramVec
	ToolInFlight *prometheus.GaugeVec

	toolsMu sync.RWMutex
	tools   map[toolKey]*ToolMeters
}

// toolKey names the meters of one tool over one transport.
type toolKey struct{ tool, transport string }

// ToolMeters are the series of one tool over one transport that every
// call of it touches, looked up once rather than by label values per
// call: in flight, and the counter and histogram of a success.
type ToolMeters struct {
	// InFlight is tool_calls_in_flight{tool, transport}.
	InFlight  prometheus.Gauge
	succeeded prometheus.Counter
	duration  prometheus.Observer
	set       *Set
	key       toolKey
}

// Tool returns the meters of tool over transport, made on first use and
// kept: tool label values are a bounded set (binding names and a few
// placeholders), so the cache is too.
func (s *Set) Tool(tool, transport string) *ToolMeters {
	k := toolKey{tool, transport}
	s.toolsMu.RLock()
	m := s.tools[k]
	s.toolsMu.RUnlock()
	if m != nil {
		return m
	}
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	if m = s.tools[k]; m == nil {
		m = &ToolMeters{
			InFlight:  s.ToolInFlight.WithLabelValues(tool, transport),
			succeeded: s.ToolCalls.WithLabelValues(tool, transport, StatusSucceeded, ""),
			duration:  s.ToolDuration.WithLabelValues(tool, transport, StatusSucceeded),
			set:       s, key: k,
		}
		if s.tools == nil {
			s.tools = make(map[toolKey]*ToolMeters)
		}
		s.tools[k] = m
	}
	return m
}

// Done records one finished call of m's tool: tool_calls_total and
// tool_call_duration_seconds with its status and error code ("" on
// success).
func (m *ToolMeters) Done(status, code string, d time.Duration) {
	if status == StatusSucceeded && code == "" {
		m.succeeded.Inc()
		m.duration.Observe(d.Seconds())
		return
	}
	m.set.ToolCalls.WithLabelValues(m.key.tool, m.key.transport, status, code).Inc()
	m.set.ToolDuration.WithLabelValues(m.key.tool, m.key.transport, status).Observe(d.Seconds())
}

// New returns the Set of the server called service, registered on a new
// registry with the Go runtime and process collectors and build_info.
func New(service string) *Set {
	s := &Set{Service: service, Registry: prometheus.NewRegistry()}
	s.HTTPRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: HTTPRequests.Name, Help: HTTPRequests.Help, ConstLabels: s.labels()}, HTTPRequests.Labels)
	s.HTTPDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: HTTPDuration.Name, Help: HTTPDuration.Help, ConstLabels: s.labels(), Buckets: Buckets}, HTTPDuration.Labels)
	s.HTTPInFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: HTTPInFlight.Name, Help: HTTPInFlight.Help, ConstLabels: s.labels()})
	s.AuthFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: AuthFailures.Name, Help: AuthFailures.Help, ConstLabels: s.labels()}, AuthFailures.Labels)
	s.ToolCalls = s.CounterVec(ToolCalls)
	s.ToolDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: ToolDuration.Name, Help: ToolDuration.Help, ConstLabels: s.labels(), Buckets: Buckets}, ToolDuration.Labels)
	s.ToolInFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: ToolInFlight.Name, Help: ToolInFlight.Help, ConstLabels: s.labels()}, ToolInFlight.Labels)
	s.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		version.NewCollector(service), s.HTTPRequests, s.HTTPDuration, s.HTTPInFlight, s.AuthFailures,
		s.ToolDuration, s.ToolInFlight)
	return s
}

func (s *Set) labels() prometheus.Labels { return prometheus.Labels{"service": s.Service} }

// CounterVec registers and returns d, a Counter, with s's service label.
func (s *Set) CounterVec(d Def) *prometheus.CounterVec {
	mustType(d, Counter)
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Name, Help: d.Help, ConstLabels: s.labels()}, d.Labels)
	s.Registry.MustRegister(c)
	return c
}

// Gauge registers and returns d, a Gauge without labels, with s's
// service label.
func (s *Set) Gauge(d Def) prometheus.Gauge {
	mustType(d, Gauge)
	if len(d.Labels) > 0 {
		panic(fmt.Sprintf("metrics: %s has labels %v: use Gauges", d.Name, d.Labels))
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: d.Name, Help: d.Help, ConstLabels: s.labels()})
	s.Registry.MustRegister(g)
	return g
}

// GaugeFunc registers d, a Gauge without labels, whose value fn computes at
// each scrape (fn must be safe for concurrent use and quick).
func (s *Set) GaugeFunc(d Def, fn func() float64) {
	mustType(d, Gauge)
	if len(d.Labels) > 0 {
		panic(fmt.Sprintf("metrics: %s has labels %v: use Gauges", d.Name, d.Labels))
	}
	s.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: d.Name, Help: d.Help, ConstLabels: s.labels()}, fn))
}

// Gauges registers d, a Gauge with labels, whose samples fn gives at each
// scrape: one emit per label combination, with the values in d.Labels'
// order (fn must be safe for concurrent use and quick).
func (s *Set) Gauges(d Def, fn func(emit func(v float64, labelValues ...string))) {
	mustType(d, Gauge)
	s.Registry.MustRegister(&gaugeFuncs{desc: prometheus.NewDesc(d.Name, d.Help, d.Labels, s.labels()), fn: fn})
}

type gaugeFuncs struct {
	desc *prometheus.Desc
	fn   func(emit func(v float64, labelValues ...string))
}

func (g *gaugeFuncs) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *gaugeFuncs) Collect(ch chan<- prometheus.Metric) {
	g.fn(func(v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v, lv...)
	})
}

func mustType(d Def, typ string) {
	if d.Type != typ {
		panic(fmt.Sprintf("metrics: %s is a %s, not a %s", d.Name, d.Type, typ))
	}
}

// Markdown renders All as the table deploy/README.md shows, followed by the
// meaning of each label value.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | served by | meaning |\n| --- | --- | --- | --- | --- |\n")
	for _, d := range All {
		labels := append([]string{"service"}, d.Labels...)
		for i, l := range labels {
			labels[i] = "`" + l + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", d.Name, d.Type, strings.Join(labels, ", "), d.ServedBy, strings.ReplaceAll(d.Help, "|", `\|`))
	}
	b.WriteString("\nEvery server also serves the Go runtime's `go_*` and the process's `process_*` metrics. Label values:\n\n")
	b.WriteString("| label | values |\n| --- | --- |\n")
	for _, l := range labelDocs {
		fmt.Fprintf(&b, "| `%s` | %s |\n", l[0], l[1])
	}
	return b.String()
}

// labelDocs say what each label holds.
var labelDocs = [][2]string{
	{"service", "the server: `brain`, `local`, `sandbox`, `storage`, `search`, `webfetch` (a service on pkg/service: its name)"},
	{"version", "the module version (`v1.2.3`, a pseudo-version, or `(devel)`), as `-version` prints it"},
	{"revision", "the VCS commit of the build, empty when unknown"},
	{"goversion", "the Go toolchain that built the binary"},
	{"method", "the HTTP method"},
	{"route", "the route pattern (`/tools/:name`, `/sessions/:id/tool_calls`, `/mcp`), `unmatched` for a request no route took"},
	{"code", "the HTTP status code"},
	{"tool", "the tool's name (the binding's `name`)"},
	{"transport", "how the call travelled: `" + TransportHTTP + "` (`POST /tools/{name}`), `" + TransportMCP + "` (an MCP tools/call); brain also `" + TransportFunction + "` (a function tool, answered by the application)"},
	{"status", "the call's final state: `" + strings.Join([]string{StatusSucceeded, StatusFailed, StatusTimedOut, StatusCancelled}, "`, `") + "` (a tool service: succeeded, failed or cancelled)"},
	{"error_code", "empty on success; brain: the ToolCall's `error_code` (`connection_failed`, `timeout`, `header_timeout`, `http_status`, `tool_error`, `invalid_arguments`, …, see services/brain/README.md); a tool service: `" + strings.Join(serviceCodes, "`, `") + "`"},
	{"kind", "`approval` or `function` (tool_calls_waiting); `session`, `tool_call` or `event` (brain's retention_removed_total), `approval` or `decision` (local's)"},
	{"result", "`applied` or `refused` (config_reloads_total)"},
	{"state", "`running` or `finished`"},
	{"outcome", "as the metric's meaning lists"},
}

// serviceCodes are the error codes a tool service records.
var serviceCodes = []string{CodeToolError, CodeInvalidArguments, CodeInvalidRequest, CodeRequestTooLarge, CodeInvalidResult, CodeOutputSchemaMismatch, CodePanic, CodeCancelled}

// Lookup returns the Def named name.
func Lookup(name string) (Def, bool) {
	i := slices.IndexFunc(All, func(d Def) bool { return d.Name == name })
	if i < 0 {
		return Def{}, false
	}
	return All[i], true
}
