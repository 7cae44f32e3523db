// Package tracing is the suite's OpenTelemetry setup, shared by brain and
// every tool service (pkg/service): one Setup that reads the standard
// OTEL_* variables, the spans the suite starts itself, the HTTP client
// transport that makes a span per outgoing request and sends traceparent,
// and a slog handler that puts the trace and span IDs in every log record
// of a traced request, and the request ID in every one of a request.
//
// Traces are exported with OTLP only when the environment says so
// (Exporting):
//
//   - OTEL_SDK_DISABLED=true: off, whatever else is set;
//   - OTEL_TRACES_EXPORTER=none: off; =otlp: on (the only exporter built
//     in; any other value fails the start, naming the variable);
//   - OTEL_TRACES_EXPORTER unset: on when OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, off otherwise (unlike the
//     specification's default of otlp, so that a service started with no
//     collector does not retry exports to localhost:4318 for ever).
//
// The protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (the default) or grpc. The
// exporters, the sampler and the batch processor read the rest of their
// settings from the process environment themselves, as the OpenTelemetry
// Go SDK documents them (endpoint, headers, timeout, compression,
// certificates, OTEL_TRACES_SAMPLER, OTEL_BSP_*); the resource takes
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, with the binary's name
// and version (pkg/version) as defaults.
//
// With tracing off nothing is exported and next to nothing is done: no
// span is started, an incoming traceparent is still handed on to the
// requests a handler makes (the W3C Trace Context pass-through brain has
// always done), and the log handler adds IDs only to the records of such
// a request.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/brain-tools/suite/pkg/version"
)

// InstrumentationName names the suite's tracer (the instrumentation scope
// of the spans it starts itself).
const InstrumentationName = "github.com/brain-tools/suite"

// Propagator is the one propagation format of the suite: W3C Trace
// Context (the traceparent header the tool contract names), with W3C
// Baggage beside it.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// state is the provider spans are started on; nil while tracing is off.
type state struct {
	tp     trace.TracerProvider
	tracer trace.Tracer
}

var current atomic.Pointer[state]

// Enabled reports whether spans are being made: Setup found an exporter
// configured, or a test called Install.
func Enabled() bool { return current.Load() != nil }

// Export is what the environment says about exporting traces.
type Export struct {
	// On says whether traces are exported.
	On bool
	// Protocol is "http/protobuf" or "grpc" when On.
	Protocol string
}

// Protocols of Export.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Exporting reads the variables that decide whether and how traces are
// exported (see the package doc) through getenv. The error names the
// variable at fault.
func Exporting(getenv func(string) string) (Export, error) {
	if v := strings.TrimSpace(getenv("OTEL_SDK_DISABLED")); strings.EqualFold(v, "true") {
		return Export{}, nil
	}
	on := false
	if v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); v != "" {
		for _, e := range strings.Split(v, ",") {
			switch strings.ToLower(strings.TrimSpace(e)) {
			case "otlp":
				on = true
			case "none":
			default:
				return Export{}, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported: want otlp or none", strings.TrimSpace(e))
			}
		}
		if strings.Contains(strings.ToLower(v), "none") && on {
			return Export{}, fmt.Errorf("OTEL_TRACES_EXPORTER: %q names none beside an exporter: want otlp or none", v)
		}
	} else {
		on = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != "" || strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != ""
	}
	if !on {
		return Export{}, nil
	}
	name, p := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if p == "" {
		name, p = "OTEL_EXPORTER_OTLP_PROTOCOL", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch p {
	case "", ProtocolHTTP:
		p = ProtocolHTTP
	case ProtocolGRPC:
	default:
		return Export{}, fmt.Errorf("%s: %q is not supported: want http/protobuf or grpc", name, p)
	}
	return Export{On: true, Protocol: p}, nil
}

// Setup makes the process trace as the environment says (Exporting, read
// through getenv; the exporter itself reads the process environment): with
// an exporter it installs an SDK TracerProvider with a batch span
// processor as OpenTelemetry's global provider, and returns a shutdown that
// flushes the spans still queued (call it once serving has stopped, with a
// deadline). Without one it installs nothing and shutdown does nothing.
// service is the default service.name (OTEL_SERVICE_NAME overrides it).
// Export errors are logged through logger (nil: discarded), at most one per
// batch the SDK fails to send.
//
// Either way the global propagator becomes Propagator, so instrumentation
// that uses OpenTelemetry's globals (aws-sdk-go-v2's) propagates the same
// way the suite does.
func Setup(ctx context.Context, service string, getenv func(string) string, logger *slog.Logger) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(Propagator)
	ex, err := Exporting(getenv)
	if err != nil || !ex.On {
		return func(context.Context) error { return nil }, err
	}
	var exp sdktrace.SpanExporter
	if ex.Protocol == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp %s exporter: %w", ex.Protocol, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service), semconv.ServiceVersion(version.Get().Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	if logger != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			logger.Warn("tracing: export failed", "err", err)
		}))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	Install(tp)
	return func(ctx context.Context) error {
		current.Store(nil)
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("tracing: shutdown: %w", err)
		}
		return nil
	}, nil
}

// Install makes spans on tp from now on, and tp OpenTelemetry's global
// provider. Setup calls it; a test calls it with a provider of its own
// (sdktrace with a tracetest.SpanRecorder) and the returned restore, which
// turns tracing off again. Tests that Install must not run in parallel
// with others that trace.
func Install(tp trace.TracerProvider) (restore func()) {
	otel.SetTracerProvider(tp)
	current.Store(&state{tp: tp, tracer: tp.Tracer(InstrumentationName, trace.WithInstrumentationVersion(version.Get().Version))})
	return func() { current.Store(nil) }
}

// Start starts a span named name as a child of ctx's span and returns the
// context that carries it. With tracing off it starts nothing: it returns
// ctx itself and ctx's span (a no-op one, or the caller's remote span
// context, whose End does nothing), so a call path pays no allocation.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	st := current.Load()
	if st == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return st.tracer.Start(ctx, name, opts...)
}

// SpanID returns the ID of ctx's span as 16 hex digits, and "" when ctx has
// no valid span or it is not one this process records (tracing off).
func SpanID(ctx context.Context) string {
	sp := trace.SpanFromContext(ctx)
	if !sp.IsRecording() {
		return ""
	}
	return sp.SpanContext().SpanID().String()
}

// Handler wraps h with the server side of tracing. With tracing on each
// request gets a server span (otelhttp), a child of the caller's
// traceparent; name(r), called once the request has been served, names
// it (METHOD route). With tracing off a request that carries a valid
// traceparent gets its span context in the request's context, so the
// requests its handler makes (Transport) carry the trace on; nothing else
// is done. pkg/httpapi.Observe is its one user.
func Handler(h http.Handler, name func(r *http.Request) string) http.Handler {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if n := name(r); n != "" {
			trace.SpanFromContext(r.Context()).SetName(n)
		}
	})
	traced := otelhttp.NewHandler(inner, "http", otelhttp.WithPropagators(Propagator))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Enabled() {
			traced.ServeHTTP(w, r)
			return
		}
		if _, ok := r.Header["Traceparent"]; ok {
			ctx := Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			if trace.SpanContextFromContext(ctx).IsValid() {
				r = r.WithContext(ctx)
			}
		}
		h.ServeHTTP(w, r)
	})
}

// Transport wraps rt (nil: http.DefaultTransport) with the client side of
// tracing: with tracing on, each request gets a client span named "peer
// METHOD" (peer names what is called: "tool", "s3", "brave") and carries
// traceparent; with tracing off a request whose context holds a valid span
// context (an incoming traceparent, see Handler) still carries it on, and
// nothing else is done.
func Transport(rt http.RoundTripper, peer string) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &transport{base: rt, traced: otelhttp.NewTransport(rt, otelhttp.WithPropagators(Propagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return peer + " " + r.Method }))}
}

type transport struct {
	base   http.RoundTripper
	traced http.RoundTripper
}

// Unwrap returns the transport Transport wrapped.
func (t *transport) Unwrap() http.RoundTripper { return t.base }

// CloseIdleConnections closes the wrapped transport's idle connections,
// so http.Client.CloseIdleConnections still reaches it.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if Enabled() {
		return t.traced.RoundTrip(r)
	}
	if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
		// A RoundTripper must not change the caller's request.
		r = r.Clone(r.Context())
		Propagator.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	}
	return t.base.RoundTrip(r)
}

// Inject writes ctx's trace context (traceparent) into h: what Transport
// does for a request it sends, for a hop that is not an HTTP request of
// ours, such as handing the /mcp server span on to the MCP SDK, which
// gives a tool handler the request's headers but not its context.
func Inject(ctx context.Context, h http.Header) {
	Propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Extract returns ctx with the trace context h carries (Inject's inverse).
func Extract(ctx context.Context, h http.Header) context.Context {
	if _, ok := h["Traceparent"]; !ok {
		return ctx
	}
	return Propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// FlushTimeout bounds how long Run waits, once run has returned, for the
// spans still queued to be exported.
const FlushTimeout = 5 * time.Second

// Run is a process's life with tracing: Setup (an error fails the start
// before run is called), run, then the shutdown that flushes the spans
// still queued, within FlushTimeout (a flush that fails is logged, not
// returned: the process's own work has ended as run says).
func Run(ctx context.Context, service string, getenv func(string) string, logger *slog.Logger, run func() error) error {
	shutdown, err := Setup(ctx, service, getenv, logger)
	if err != nil {
		return err
	}
	err = run()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), FlushTimeout)
	defer cancel()
	if ferr := shutdown(sctx); ferr != nil && logger != nil {
		logger.Warn("tracing: spans not flushed", "err", ferr)
	}
	return err
}
