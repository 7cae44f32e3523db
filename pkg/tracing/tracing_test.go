package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestExporting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    Export
		wantErr string
	}{
		{"nothing set", nil, Export{}, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, Export{On: true, Protocol: ProtocolHTTP}, ""},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, Export{On: true, Protocol: ProtocolHTTP}, ""},
		{"exporter otlp, no endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, Export{On: true, Protocol: ProtocolHTTP}, ""},
		{"exporter none beats the endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, Export{}, ""},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, Export{}, ""},
		{"sdk disabled false", map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, Export{On: true, Protocol: ProtocolHTTP}, ""},
		{"grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, Export{On: true, Protocol: ProtocolGRPC}, ""},
		{"traces protocol wins", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, Export{On: true, Protocol: ProtocolHTTP}, ""},
		{"protocol ignored when off", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}, Export{}, ""},
		{"http/json", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, Export{}, `OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" is not supported`},
		{"bad traces protocol", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}, Export{}, `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "udp" is not supported`},
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, Export{}, `OTEL_TRACES_EXPORTER: "zipkin" is not supported`},
		{"otlp and none", map[string]string{"OTEL_TRACES_EXPORTER": "otlp,none"}, Export{}, `names none beside an exporter`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Exporting(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Exporting = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// recorder installs a tracer provider that records spans, for one test.
func recorder(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	restore := Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr)))
	t.Cleanup(restore)
	return sr
}

func TestOffStartsNothing(t *testing.T) {
	if Enabled() {
		t.Fatal("tracing on before any Setup")
	}
	ctx := context.Background()
	if allocs := testing.AllocsPerRun(100, func() {
		c, sp := Start(ctx, "x")
		sp.End()
		if c != ctx {
			t.Fatal("Start changed the context with tracing off")
		}
	}); allocs != 0 {
		t.Errorf("Start with tracing off: %v allocations, want 0", allocs)
	}
	if id := SpanID(ctx); id != "" {
		t.Errorf("SpanID = %q with tracing off", id)
	}
}

func TestSetupOffInstallsNothing(t *testing.T) {
	shutdown, err := Setup(context.Background(), "test", func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if Enabled() {
		t.Fatal("Setup with nothing set turned tracing on")
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := Setup(context.Background(), "test", func(k string) string {
		return map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}[k]
	}, nil); err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
		t.Fatalf("Setup with a bad exporter: %v, want an error naming OTEL_TRACES_EXPORTER", err)
	}
}

// TestSetupExportsOTLPHTTP starts a receiver of OTLP over HTTP on
// 127.0.0.1 and checks that a span reaches it, the exporter taking its
// endpoint from the process environment as the SDK documents.
func TestSetupExportsOTLPHTTP(t *testing.T) {
	var (
		mu    sync.Mutex
		posts []string
		body  []byte
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		body = append(body, data...)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "otel-named")
	shutdown, err := Setup(context.Background(), "test", func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL}[k]
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !Enabled() {
		t.Fatal("Setup with an endpoint left tracing off")
	}
	_, sp := Start(context.Background(), "exported-span")
	sp.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if Enabled() {
		t.Error("tracing still on after shutdown")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posts) == 0 || posts[0] != "POST /v1/traces application/x-protobuf" {
		t.Fatalf("receiver got %q, want POST /v1/traces application/x-protobuf", posts)
	}
	for _, want := range []string{"exported-span", "otel-named"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("exported spans lack %q", want)
		}
	}
}

func TestHandlerAndTransportOff(t *testing.T) {
	var got []string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Traceparent"))
	}))
	defer backend.Close()
	client := &http.Client{Transport: Transport(nil, "peer")}
	front := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, backend.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	}), func(*http.Request) string { return "unused" }))
	defer front.Close()
	const tp = "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01"
	for _, in := range []string{tp, "", "00-garbage"} {
		req, _ := http.NewRequest(http.MethodGet, front.URL, nil)
		if in != "" {
			req.Header.Set("Traceparent", in)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// Off, the trace passes through unchanged; nothing is made up.
	if want := []string{tp, "", ""}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("backend saw traceparent %q, want %q", got, want)
	}
}

func TestHandlerAndTransportOn(t *testing.T) {
	sr := recorder(t)
	backend := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		func(r *http.Request) string { return "GET /backend" }))
	defer backend.Close()
	client := &http.Client{Transport: Transport(nil, "peer")}
	front := httptest.NewServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, sp := Start(r.Context(), "work")
		defer sp.End()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, backend.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
	}), func(r *http.Request) string { return "GET /front" }))
	defer front.Close()
	req, _ := http.NewRequest(http.MethodGet, front.URL, nil)
	req.Header.Set("Traceparent", "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range sr.Ended() {
		spans[s.Name()] = s
	}
	for _, tc := range []struct{ name, parent string }{
		{"GET /front", ""}, {"work", "GET /front"}, {"peer GET", "work"}, {"GET /backend", "peer GET"},
	} {
		s, ok := spans[tc.name]
		if !ok {
			t.Fatalf("no span %q among %v", tc.name, names(sr.Ended()))
		}
		if s.SpanContext().TraceID().String() != "0102030405060708090a0b0c0d0e0f10" {
			t.Errorf("%s: trace %s, want the caller's", tc.name, s.SpanContext().TraceID())
		}
		want := trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8} // the caller's span
		if tc.parent != "" {
			want = spans[tc.parent].SpanContext().SpanID()
		}
		if s.Parent().SpanID() != want {
			t.Errorf("%s: parent %s, want %s (%q)", tc.name, s.Parent().SpanID(), want, tc.parent)
		}
	}
	if k := spans["peer GET"].SpanKind(); k != trace.SpanKindClient {
		t.Errorf("client span kind %v", k)
	}
	if k := spans["GET /front"].SpanKind(); k != trace.SpanKindServer {
		t.Errorf("server span kind %v", k)
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil)))
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	other := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{3}, SpanID: trace.SpanID{4}})
	traced := trace.ContextWithSpanContext(context.Background(), sc)

	logger.Info("plain")
	logger.InfoContext(context.Background(), "no span")
	logger.InfoContext(traced, "traced", "k", "v")
	bound := WithIDs(logger.With("call_id", "c1"), ContextWithRequestID(trace.ContextWithSpanContext(context.Background(), other), "req-1"))
	bound.Info("bound")
	bound.InfoContext(ContextWithRequestID(traced, "req-2"), "context wins")
	logger.InfoContext(ContextWithRequestID(context.Background(), "req-3"), "request, no span")
	WithIDs(logger, ContextWithRequestID(context.Background(), "req-4")).Info("bound request, no span")
	if WithIDs(logger, context.Background()) != logger {
		t.Error("WithIDs without a span context or request ID made a new logger")
	}
	if ContextWithRequestID(traced, "") != traced {
		t.Error("ContextWithRequestID with no ID made a new context")
	}

	want := []map[string]string{
		{"msg": "plain"},
		{"msg": "no span"},
		{"msg": "traced", "trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()},
		{"msg": "bound", "call_id": "c1", "request_id": "req-1", "trace_id": other.TraceID().String(), "span_id": other.SpanID().String()},
		{"msg": "context wins", "call_id": "c1", "request_id": "req-2", "trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()},
		{"msg": "request, no span", "request_id": "req-3"},
		{"msg": "bound request, no span", "request_id": "req-4"},
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	for i, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		for k, v := range want[i] {
			if rec[k] != v {
				t.Errorf("line %d: %s = %v, want %q\n%s", i, k, rec[k], v, l)
			}
		}
		for _, k := range []string{LogKeyTraceID, LogKeyRequestID} {
			if _, ok := want[i][k]; !ok && rec[k] != nil {
				t.Errorf("line %d has a %s: %s", i, k, l)
			}
		}
	}
}
