package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// The log keys of the IDs LogHandler adds: the names OpenTelemetry's log
// data model gives them, which log pipelines correlate with traces.
const (
	LogKeyTraceID = "trace_id"
	LogKeySpanID  = "span_id"
)

// LogHandler wraps h so that a record logged with a context that carries a
// valid span context (logger.InfoContext(ctx, …), LogAttrs) gets
// trace_id and span_id (32 and 16 hex digits). A record without one passes
// through untouched, at the cost of one context lookup.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(*logHandler); ok {
		return h
	}
	return &logHandler{next: h}
}

// WithSpan returns logger bound to ctx's span context: its records get that
// span's IDs when they are logged without a context of their own that
// carries one (logger.Info, or a context without a span), so a tool's
// call.Logger marks every line of its call. With no valid span context in
// ctx, or a logger whose handler is not a LogHandler, it returns logger.
func WithSpan(logger *slog.Logger, ctx context.Context) *slog.Logger {
	sc := trace.SpanContextFromContext(ctx)
	lh, ok := logger.Handler().(*logHandler)
	if !sc.IsValid() || !ok {
		return logger
	}
	return slog.New(&logHandler{next: lh.next, bound: sc})
}

type logHandler struct {
	next  slog.Handler
	bound trace.SpanContext // WithSpan's; the zero value when unbound
}

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		sc = h.bound
	}
	if sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String(LogKeyTraceID, sc.TraceID().String()), slog.String(LogKeySpanID, sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{next: h.next.WithAttrs(as), bound: h.bound}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{next: h.next.WithGroup(name), bound: h.bound}
}
