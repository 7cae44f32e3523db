package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tracing"
)

// RouteUnmatched is the route of a request no route took (a 404 or 405
// of the router), in metrics and the access log.
const RouteUnmatched = "unmatched"

// Observer watches every request of one server the same way, whichever
// server it is (brain's API, a tool service's routes, its /mcp endpoint,
// the operator page): one access-log line, the HTTP metrics of its Set,
// and, when tracing is on (pkg/tracing), a server span.
type Observer struct {
	// Metrics receives http_requests_total, http_request_duration_seconds,
	// http_requests_in_flight and auth_failures_total; nil records none.
	Metrics *metrics.Set
	// Logger receives the access log (see Observe); nil logs nothing.
	Logger *slog.Logger

	// unauthorized limits the access-log lines of 401 answers: a client
	// hammering with a wrong token is counted in full
	// (auth_failures_total) but logged at most about once a second.
	unauthorized *rate.Limiter
	suppressed   atomic.Int64

	mu       sync.RWMutex
	children map[httpKey]*httpMeters
}

// Unauthorized401PerSecond and Unauthorized401Burst bound the access-log
// lines of 401 answers (the rest are counted in the next line's
// suppressed_401 field and in auth_failures_total).
const (
	Unauthorized401PerSecond = 1
	Unauthorized401Burst     = 10
)

// Observe wraps next, the whole server (put it outside WithRequestID and
// every other middleware, so it sees the final status and the request
// ID). For each request it writes one access-log line when the answer is
// complete (for an SSE stream, when it ends):
//
//	{"level":"INFO","msg":"request","request_id":"req_…","method":"POST","route":"/tools/:name",
//	 "path":"/tools/echo","status":200,"duration_ms":1.25,"bytes":52,"tenant":"local",
//	 "remote_addr":"127.0.0.1:40312","trace_id":"…","span_id":"…"}
//
// route is the pattern Route tagged the request with (RouteUnmatched
// when none did); path is the URL path without the query, clipped to
// MaxEcho bytes; tenant is what the handler named with SetTenant; fields
// added with Annotate follow (mcp_revision on /mcp). No header, query or
// body is logged, so no token is. trace_id and span_id are there when the
// request is traced (the logger's handler is a tracing.LogHandler). A 5xx
// answer is logged at WARN, the rest at INFO; 401 answers at most
// Unauthorized401PerSecond a second (Unauthorized401Burst at once), the
// next one logged saying how many were left out (suppressed_401).
func (o *Observer) Observe(next http.Handler) http.Handler {
	if o.unauthorized == nil {
		o.unauthorized = rate.NewLimiter(Unauthorized401PerSecond, Unauthorized401Burst)
	}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rec, ok := r.Context().Value(recordKey{}).(*record); ok {
			rec.span = trace.SpanContextFromContext(r.Context())
		}
		next.ServeHTTP(w, r)
	})
	traced := tracing.Handler(inner, func(r *http.Request) string {
		if rec, ok := r.Context().Value(recordKey{}).(*record); ok && rec.route != "" {
			return r.Method + " " + rec.route
		}
		return r.Method + " " + RouteUnmatched
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// One allocation holds what Observe keeps of the request: its
		// record, the writer that sees its status, and the context that
		// carries the record to the handlers.
		ob := &observation{sw: statusWriter{ResponseWriter: w}, rec: record{start: time.Now()}}
		ob.ctx = recordContext{Context: r.Context(), rec: &ob.rec}
		if o.Metrics != nil {
			o.Metrics.HTTPInFlight.Inc()
		}
		defer func() {
			if o.Metrics != nil {
				o.Metrics.HTTPInFlight.Dec()
			}
			o.done(&ob.sw, r, &ob.rec)
			// A call that outlives its handler (a stream on a taken-over
			// connection) keeps the request's context, and with it ob:
			// not the writer, which net/http recycles.
			ob.sw.ResponseWriter = nil
		}()
		traced.ServeHTTP(&ob.sw, r.WithContext(&ob.ctx))
	})
}

// observation is one request's state in Observe, allocated once.
type observation struct {
	sw  statusWriter
	rec record
	ctx recordContext
}

// recordContext is the request's context with its record as the value of
// recordKey: context.WithValue's job, in the observation's allocation.
// Done, Err and the values of the parent (cancellation included, which
// context.WithCancel finds through Value) come from the embedded context.
type recordContext struct {
	context.Context
	rec *record
}

func (c *recordContext) Value(key any) any {
	if _, ok := key.(recordKey); ok {
		return c.rec
	}
	return c.Context.Value(key)
}

func (o *Observer) done(sw *statusWriter, r *http.Request, rec *record) {
	elapsed := time.Since(rec.start)
	status := sw.status
	if status == 0 {
		status = http.StatusOK // net/http's answer to a handler that wrote nothing
	}
	route := rec.route
	if route == "" {
		route = RouteUnmatched
	}
	if o.Metrics != nil {
		m := o.meters(route, r.Method, status)
		m.requests.Inc()
		m.duration.Observe(elapsed.Seconds())
		if status == http.StatusUnauthorized {
			m.authFailures.Inc()
		}
	}
	if o.Logger == nil {
		return
	}
	var suppressed int64
	if status == http.StatusUnauthorized {
		if !o.unauthorized.Allow() {
			o.suppressed.Add(1)
			return
		}
		suppressed = o.suppressed.Swap(0)
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	ctx := context.Background()
	if rec.span.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, rec.span)
	}
	if !o.Logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 11+len(rec.attrs))
	attrs = append(attrs,
		slog.String("request_id", RequestID(sw)),
		slog.String("method", r.Method),
		slog.String("route", route),
		slog.String("path", strictjson.Clip(r.URL.Path, MaxEcho)),
		slog.Int("status", status),
		slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
		slog.Int64("bytes", sw.bytes),
	)
	if rec.tenant != "" {
		attrs = append(attrs, slog.String("tenant", rec.tenant))
	}
	attrs = append(attrs, slog.String("remote_addr", r.RemoteAddr))
	attrs = append(attrs, rec.attrs...)
	if suppressed > 0 {
		attrs = append(attrs, slog.Int64("suppressed_401", suppressed))
	}
	o.Logger.LogAttrs(ctx, level, "request", attrs...)
}

// httpMeters are the metric children of one route, method and status,
// looked up in the vectors once (a lookup hashes the label values and
// allocates their slice on every call).
type httpMeters struct {
	requests     prometheus.Counter
	duration     prometheus.Observer
	authFailures prometheus.Counter // nil unless status is 401
}

type httpKey struct {
	route, method string
	status        int
}

// maxMeters bounds the children Observer keeps: past it (a client sending
// made-up methods), lookups go to the vectors every time.
const maxMeters = 4096

func (o *Observer) meters(route, method string, status int) *httpMeters {
	k := httpKey{route, method, status}
	o.mu.RLock()
	m, ok := o.children[k]
	o.mu.RUnlock()
	if ok {
		return m
	}
	code := strconv.Itoa(status)
	m = &httpMeters{
		requests: o.Metrics.HTTPRequests.WithLabelValues(route, method, code),
		duration: o.Metrics.HTTPDuration.WithLabelValues(route, method),
	}
	if status == http.StatusUnauthorized {
		m.authFailures = o.Metrics.AuthFailures.WithLabelValues(route)
	}
	o.mu.Lock()
	if o.children == nil {
		o.children = map[httpKey]*httpMeters{}
	}
	if len(o.children) < maxMeters {
		o.children[k] = m
	}
	o.mu.Unlock()
	return m
}

// record is what Observe learns of one request while it is served.
type record struct {
	start  time.Time
	route  string
	tenant string
	attrs  []slog.Attr
	span   trace.SpanContext
}

type recordKey struct{}

func recordOf(ctx context.Context) *record {
	rec, _ := ctx.Value(recordKey{}).(*record)
	return rec
}

// Route wraps h so that Observe counts and logs its requests under
// pattern, the route it is registered at ("/sessions/:id/events"): the
// route label of the HTTP metrics, the access log's route and the span's
// name. Register every route through it; a request no route took is
// RouteUnmatched.
func Route(pattern string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetRoute(r.Context(), pattern)
		h.ServeHTTP(w, r)
	})
}

// RouteHandle is Route for an httprouter.Handle.
func RouteHandle(pattern string, h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		SetRoute(r.Context(), pattern)
		h(w, r, p)
	}
}

// SetRoute names the route of the request ctx belongs to (Route does it
// for a whole handler). Outside Observe it does nothing.
func SetRoute(ctx context.Context, pattern string) {
	if rec := recordOf(ctx); rec != nil {
		rec.route = pattern
	}
}

// SetTenant names the tenant the request acts for (the API key's, or a
// tool call's tenant_id), for the access log. Outside Observe it does
// nothing.
func SetTenant(ctx context.Context, tenant string) {
	if rec := recordOf(ctx); rec != nil {
		rec.tenant = tenant
	}
}

// Annotate adds fields to the request's access-log line (never a
// secret). Outside Observe it does nothing.
func Annotate(ctx context.Context, attrs ...slog.Attr) {
	if rec := recordOf(ctx); rec != nil {
		rec.attrs = append(rec.attrs, attrs...)
	}
}

// statusWriter records the status and the body bytes of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// Flush and Unwrap keep streaming (http.Flusher, http.ResponseController)
// working through the wrapper.
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
