package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/brain-tools/suite/pkg/version"
)

// metrics are served at GET /metrics (Prometheus text format, no auth, like
// /healthz: they carry tool names and counts, no tenant data).
type metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	removed  *prometheus.CounterVec
	streams  prometheus.Gauge
	reloads  *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brain_tool_calls_total",
			Help: "Finished tool calls by tool and final status.",
		}, []string{"tool", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "brain_tool_call_duration_seconds",
			Help:    "Time from a tool call's start to its result, by tool and final status.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"tool", "status"}),
		removed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "brain_retention_removed_total",
			Help: "Rows removed by retention (BRAIN_RETENTION), by kind: session, tool_call, event.",
		}, []string{"kind"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "brain_event_streams",
			Help: "Event streams (GET /sessions/{id}/events as SSE) open on this replica.",
		}),
	}
	for _, k := range []string{"session", "tool_call", "event"} {
		m.removed.WithLabelValues(k)
	}
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "brain_config_reloads_total",
		Help: "Host config reloads (SIGHUP or a change of the file), by result: applied, or refused (the running config stayed).",
	}, []string{"result"})
	m.reg.MustRegister(m.calls, m.duration, m.removed, m.streams, m.reloads, version.NewCollector("brain"),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
