package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// The log keys of the IDs LogHandler adds: trace_id and span_id are the
// names OpenTelemetry's log data model gives them, which log pipelines
// correlate with traces; request_id is the request's X-Request-Id
// (pkg/httpapi.WithRequestID puts it in the request's context).
const (
	LogKeyTraceID   = "trace_id"
	LogKeySpanID    = "span_id"
	LogKeyRequestID = "request_id"
)

type requestIDKey struct{}

// ContextWithRequestID returns ctx carrying the request ID id, which
// LogHandler adds to every record logged with it ("" leaves ctx as it is).
func ContextWithRequestID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request ID ctx carries (ContextWithRequestID), or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// LogHandler wraps h so that a record logged with a context that carries a
// valid span context (logger.InfoContext(ctx, …), LogAttrs) gets
// trace_id and span_id (32 and 16 hex digits), and one logged with a
// context that carries a request ID gets request_id. A record without
// either passes through untouched, at the cost of two context lookups.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(*logHandler); ok {
		return h
	}
	return &logHandler{next: h}
}

// WithIDs returns logger bound to ctx's span context and request ID: its
// records get them when they are logged without a context of their own
// that carries them (logger.Info, or a context without a span), so a
// tool's call.Logger marks every line of its call. With neither in ctx, or
// a logger whose handler is not a LogHandler, it returns logger.
func WithIDs(logger *slog.Logger, ctx context.Context) *slog.Logger {
	sc, id := trace.SpanContextFromContext(ctx), RequestID(ctx)
	lh, ok := logger.Handler().(*logHandler)
	if !sc.IsValid() && id == "" || !ok {
		return logger
	}
	return slog.New(&logHandler{next: lh.next, bound: sc, requestID: id})
}

type logHandler struct {
	next      slog.Handler
	bound     trace.SpanContext // WithIDs'; the zero value when unbound
	requestID string            // WithIDs'; "" when unbound
}

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		sc = h.bound
	}
	id := RequestID(ctx)
	if id == "" {
		id = h.requestID
	}
	if sc.IsValid() || id != "" {
		r = r.Clone()
	}
	if id != "" {
		r.AddAttrs(slog.String(LogKeyRequestID, id))
	}
	if sc.IsValid() {
		r.AddAttrs(slog.String(LogKeyTraceID, sc.TraceID().String()), slog.String(LogKeySpanID, sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{next: h.next.WithAttrs(as), bound: h.bound, requestID: h.requestID}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{next: h.next.WithGroup(name), bound: h.bound, requestID: h.requestID}
}
