package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"golang.org/x/time/rate"

	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/pkg/tracing"
)

// observed is a router behind Observe, the way every server of the suite
// mounts one, with the access log in buf.
func observed(t *testing.T) (*httptest.Server, *Observer, *metrics.Set, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	set := metrics.New("test")
	o := &Observer{Metrics: set, Logger: slog.New(tracing.LogHandler(slog.NewJSONHandler(buf, nil)))}
	r := httprouter.New()
	r.GET("/things/:id", RouteHandle("/things/:id", func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		SetTenant(r.Context(), "acme")
		Annotate(r.Context(), slog.String("mcp_revision", "2025-11-25"))
		WriteJSON(w, http.StatusOK, map[string]string{"id": p.ByName("id")})
	}))
	r.GET("/locked", RouteHandle("/locked", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		WriteError(w, Errorf(http.StatusUnauthorized, CodeUnauthorized, "authorization: missing bearer token"))
	}))
	r.GET("/silent", RouteHandle("/silent", func(http.ResponseWriter, *http.Request, httprouter.Params) {}))
	r.GET("/boom", RouteHandle("/boom", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		Responder{}.Error(w, r, errors.New("boom"))
	}))
	r.Handler(http.MethodGet, "/stream", Route("/stream", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			_, _ = io.WriteString(w, ": beat\n\n")
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("flush %d through Observe: %v", i, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})))
	ts := httptest.NewServer(o.Observe(WithRequestID(r)))
	t.Cleanup(ts.Close)
	return ts, o, set, buf
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the access-log records written so far.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if rec["msg"] == "request" {
			out = append(out, rec)
		}
	}
	return out
}

func get(t *testing.T, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestObserveAccessLog(t *testing.T) {
	ts, _, set, buf := observed(t)
	resp := get(t, ts.URL+"/things/42?token=secret-in-query", map[string]string{"Authorization": "Bearer secret-token", "X-Request-Id": "caller-id-1"})
	get(t, ts.URL+"/nowhere", nil)
	get(t, ts.URL+"/silent", nil)
	get(t, ts.URL+"/boom", nil)
	get(t, ts.URL+"/stream", nil)

	lines := buf.lines(t)
	if len(lines) != 5 {
		t.Fatalf("%d access-log lines, want 5:\n%s", len(lines), buf.buf.String())
	}
	first := lines[0]
	for k, v := range map[string]any{
		"level": "INFO", "request_id": "caller-id-1", "method": "GET", "route": "/things/:id", "path": "/things/42",
		"status": float64(200), "tenant": "acme", "mcp_revision": "2025-11-25",
	} {
		if first[k] != v {
			t.Errorf("%s = %v, want %v", k, first[k], v)
		}
	}
	if resp.Header.Get(HeaderRequestID) != "caller-id-1" {
		t.Errorf("X-Request-Id = %q", resp.Header.Get(HeaderRequestID))
	}
	if _, ok := first["duration_ms"].(float64); !ok {
		t.Errorf("duration_ms = %v", first["duration_ms"])
	}
	if first["bytes"] != float64(len(`{"id":"42"}`)+1) {
		t.Errorf("bytes = %v", first["bytes"])
	}
	if strings.Contains(buf.buf.String(), "secret") {
		t.Errorf("a secret reached the log:\n%s", buf.buf.String())
	}
	for i, want := range []struct {
		route  string
		status float64
		level  string
	}{{RouteUnmatched, 404, "INFO"}, {"/silent", 200, "INFO"}, {"/boom", 500, "WARN"}, {"/stream", 200, "INFO"}} {
		l := lines[i+1]
		if l["route"] != want.route || l["status"] != want.status || l["level"] != want.level {
			t.Errorf("line %d: route %v status %v level %v, want %+v", i+1, l["route"], l["status"], l["level"], want)
		}
		if id, _ := l["request_id"].(string); !strings.HasPrefix(id, "req_") {
			t.Errorf("line %d: request_id %q", i+1, id)
		}
	}
	if d := lines[4]["duration_ms"].(float64); d < 25 {
		t.Errorf("the stream's line says %v ms: logged before the stream ended", d)
	}

	for _, tc := range []struct {
		route, code string
		want        float64
	}{{"/things/:id", "200", 1}, {RouteUnmatched, "404", 1}, {"/boom", "500", 1}, {"/stream", "200", 1}} {
		if got := testutil.ToFloat64(set.HTTPRequests.WithLabelValues(tc.route, "GET", tc.code)); got != tc.want {
			t.Errorf("http_requests_total{route=%q,code=%q} = %v, want %v", tc.route, tc.code, got, tc.want)
		}
	}
	if got := testutil.ToFloat64(set.HTTPInFlight); got != 0 {
		t.Errorf("http_requests_in_flight = %v after every request ended", got)
	}
}

func TestObserveUnauthorizedRateLimited(t *testing.T) {
	ts, o, set, buf := observed(t)
	o.unauthorized = rate.NewLimiter(rate.Every(time.Hour), 2)
	for range 5 {
		get(t, ts.URL+"/locked", nil)
	}
	if n := len(buf.lines(t)); n != 2 {
		t.Fatalf("%d lines for 5 refusals with a burst of 2", n)
	}
	o.unauthorized = rate.NewLimiter(rate.Every(time.Hour), 1)
	get(t, ts.URL+"/locked", nil)
	lines := buf.lines(t)
	if len(lines) != 3 || lines[2]["suppressed_401"] != float64(3) || lines[2]["status"] != float64(401) {
		t.Fatalf("after the limit: %v", lines)
	}
	if got := testutil.ToFloat64(set.AuthFailures.WithLabelValues("/locked")); got != 6 {
		t.Errorf("auth_failures_total = %v, want 6 (every refusal counted)", got)
	}
}

func TestObserveSpan(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	t.Cleanup(tracing.Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))))
	ts, _, _, buf := observed(t)
	get(t, ts.URL+"/things/7", map[string]string{"Traceparent": "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01"})
	get(t, ts.URL+"/nowhere", nil)
	spans := sr.Ended()
	if len(spans) != 2 || spans[0].Name() != "GET /things/:id" || spans[1].Name() != "GET "+RouteUnmatched {
		t.Fatalf("spans %v", spans)
	}
	l := buf.lines(t)[0]
	if l["trace_id"] != "0102030405060708090a0b0c0d0e0f10" || l["span_id"] != spans[0].SpanContext().SpanID().String() {
		t.Errorf("access log trace_id %v span_id %v, want the server span's", l["trace_id"], l["span_id"])
	}
}

func TestObserveOutside(t *testing.T) {
	// Outside Observe the setters do nothing (and do not panic).
	ctx := context.Background()
	SetRoute(ctx, "/x")
	SetTenant(ctx, "t")
	Annotate(ctx, slog.String("k", "v"))
}
