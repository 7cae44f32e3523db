package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/store"
)

// brainMetrics are served at GET /metrics (Prometheus text format, no auth,
// like /healthz: they carry tool names and counts, no tenant data): the
// suite's metrics (pkg/metrics: HTTP per route, tool calls per tool,
// transport, status and error code, build_info), the event streams open
// on this replica, the rows retention removed, the host config's reloads,
// and the saturation gauges computed at each scrape from the calls in
// flight and the store.
type brainMetrics struct {
	*metrics.Set
	streams prometheus.Gauge
	removed *prometheus.CounterVec
	reloads *prometheus.CounterVec
}

func newMetrics() *brainMetrics {
	m := &brainMetrics{Set: metrics.New("brain")}
	m.streams = m.Gauge(metrics.EventStreams)
	m.removed = m.CounterVec(metrics.RetentionRemoved)
	for _, k := range []string{"session", "tool_call", "event"} {
		m.removed.WithLabelValues(k)
	}
	m.reloads = m.CounterVec(metrics.ConfigReloads)
	for _, r := range []string{"applied", "refused"} {
		m.reloads.WithLabelValues(r)
	}
	return m
}

// registerGauges adds the gauges read from s at scrape time. Each binding
// that can have such calls shows 0 rather than nothing when it has none:
// tool_calls_queued for those with max_concurrency, tool_calls_waiting
// kind approval for gated ones and kind function for function tools.
func (s *Server) registerGauges() {
	s.metrics.Gauges(metrics.ToolsQueued, func(emit func(float64, ...string)) {
		n := s.countCalls(func(c store.Call) (string, bool) { return "", c.Status == store.CallQueued })
		for _, t := range s.config().Tools {
			if t.MaxConcurrency > 0 {
				emit(float64(n[toolKind{t.Name, ""}]), t.Name)
			}
		}
	})
	s.metrics.Gauges(metrics.ToolsWaiting, func(emit func(float64, ...string)) {
		n := s.countCalls(func(c store.Call) (string, bool) { return c.InputKind, c.Status == store.CallRequiresInput })
		for _, t := range s.config().Tools {
			if t.Gated() {
				emit(float64(n[toolKind{t.Name, store.InputApproval}]), t.Name, store.InputApproval)
			}
			if t.Function() {
				emit(float64(n[toolKind{t.Name, store.InputFunction}]), t.Name, store.InputFunction)
			}
		}
	})
	s.metrics.GaugeFunc(metrics.Sessions, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
		defer cancel()
		n, err := s.store.ActiveSessions(ctx)
		if err != nil {
			return -1 // a store that does not answer is not an empty one
		}
		return float64(n)
	})
}

// scrapeTimeout bounds what one scrape of /metrics reads from the store.
const scrapeTimeout = 2 * time.Second

type toolKind struct{ tool, kind string }

// countCalls counts the calls in flight that match, by tool and the kind
// match returns.
func (s *Server) countCalls(match func(store.Call) (kind string, ok bool)) map[toolKind]int {
	s.mu.Lock()
	calls := make([]*running, 0, len(s.inflight))
	for _, rc := range s.inflight {
		calls = append(calls, rc)
	}
	s.mu.Unlock()
	out := map[toolKind]int{}
	for _, rc := range calls {
		c := rc.snapshot()
		if kind, ok := match(c); ok {
			out[toolKind{c.Tool, kind}]++
		}
	}
	return out
}

// transportOf is the transport label of t's calls: mcp for a binding with
// mcp_tool, function for a function tool, http for the rest.
func transportOf(t *config.Tool) string {
	switch {
	case t == nil:
		return metrics.TransportHTTP
	case t.Function():
		return metrics.TransportFunction
	case t.MCPTool != "":
		return metrics.TransportMCP
	}
	return metrics.TransportHTTP
}
