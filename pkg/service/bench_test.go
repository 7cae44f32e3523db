package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/pkg/tracing"
)

// bareEcho is a plain net/http handler doing the same JSON work as the echo
// tool on Server: check the bearer token, decode the request body with
// unknown fields refused, decode the arguments, encode the result. It is
// the anchor the runtime's overhead is measured against.
func bareEcho(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer tok" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var req tool.Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var args echoArgs
	if err := json.Unmarshal(req.Arguments, &args); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	data, _ := json.Marshal(&tool.Result{Content: []tool.Content{tool.Text(args.Text)}})
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

// benchEcho is the echo tool as the local service declares it: its
// arguments checked against its input schema on every call.
func benchEcho() Tool {
	return NewTool(echoBinding, func(_ context.Context, _ *Call, a echoArgs) (*tool.Result, error) {
		return &tool.Result{Content: []tool.Content{tool.Text(a.Text)}}, nil
	})
}

// BenchmarkEchoVsBare measures the echo tool on the service runtime against
// bareEcho, side by side in one run (interleaved rounds so both see the same
// machine), at concurrency 1 and 32. It reports calls/s and p50 of each and
// keep-%, the runtime's share of the bare handler's throughput.
func BenchmarkEchoVsBare(b *testing.B) {
	svc := httptest.NewServer(benchServer(b, benchEcho()).Handler())
	defer svc.Close()
	bare := httptest.NewServer(http.HandlerFunc(bareEcho))
	defer bare.Close()
	sideBySide(b, "service", svc.URL+"/tools/echo", "bare", bare.URL)
}

// BenchmarkEchoDeclared measures the echo tool declared with NewTool with
// a typed output (its arguments checked against the input schema and its
// output against the output schema on every call) against the same work
// in a Tool literal without schemas (nothing checked), side by side:
// keep-% is the schema checks' price.
func BenchmarkEchoDeclared(b *testing.B) {
	type out struct {
		Text string `json:"text"`
	}
	declared := httptest.NewServer(benchServer(b, NewTool(echoBinding, func(_ context.Context, _ *Call, a echoArgs) (out, error) {
		return out(a), nil
	})).Handler())
	defer declared.Close()
	unchecked := httptest.NewServer(benchServer(b, Tool{Binding: tool.Binding{Name: "echo", Description: "Echo text."}, Handler: func(_ context.Context, c *Call) *tool.Result {
		var a echoArgs
		if err := json.Unmarshal(c.Arguments, &a); err != nil {
			return tool.Errorf("invalid arguments: %v", err)
		}
		data, _ := json.Marshal(out(a))
		return &tool.Result{StructuredContent: data}
	}}).Handler())
	defer unchecked.Close()
	sideBySide(b, "declared", declared.URL+"/tools/echo", "unchecked", unchecked.URL+"/tools/echo")
}

func benchServer(b *testing.B, t Tool) *Server {
	cfg, err := ParseEnv[Config](map[string]string{"ADDR": "127.0.0.1:0", "BRAIN_TOOLS_KEY": "tok"})
	if err != nil {
		b.Fatal(err)
	}
	return &Server{Name: "bench", Config: cfg, Tools: []Tool{t}}
}

// sideBySide sends echo calls to two URLs in interleaved rounds, at
// concurrency 1 and 32, and reports each one's calls/s and p50 and keep-%,
// a's share of b's throughput.
func sideBySide(b *testing.B, aName, aURL, bName, bURL string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	body := []byte(`{"tenant_id":"local","session_id":"s","call_id":"c","arguments":{"text":"hello from the benchmark"}}`)
	call := func(url string) error {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	// run sends n calls to url from conc goroutines; it returns calls/s and
	// the latencies.
	run := func(url string, n, conc int) (float64, []time.Duration) {
		lat := make([]time.Duration, n)
		var wg sync.WaitGroup
		next := make(chan int, n)
		for i := range n {
			next <- i
		}
		close(next)
		start := time.Now()
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					t := time.Now()
					if err := call(url); err != nil {
						b.Error(err)
						return
					}
					lat[i] = time.Since(t)
				}
			}()
		}
		wg.Wait()
		return float64(n) / time.Since(start).Seconds(), lat
	}
	p50 := func(l []time.Duration) time.Duration {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return l[len(l)/2]
	}
	for _, conc := range []int{1, 32} {
		b.Run(fmt.Sprintf("c%d", conc), func(b *testing.B) {
			const rounds = 4
			per := max(b.N/rounds, 50)
			var aRate, bRate float64
			var aLat, bLat []time.Duration
			for range rounds {
				r, l := run(bURL, per, conc)
				bRate += r / rounds
				bLat = append(bLat, l...)
				r, l = run(aURL, per, conc)
				aRate += r / rounds
				aLat = append(aLat, l...)
			}
			b.ReportMetric(aRate, aName+"-calls/s")
			b.ReportMetric(bRate, bName+"-calls/s")
			b.ReportMetric(100*aRate/bRate, "keep-%")
			b.ReportMetric(float64(p50(aLat).Microseconds()), aName+"-p50-µs")
			b.ReportMetric(float64(p50(bLat).Microseconds()), bName+"-p50-µs")
		})
	}
}

// BenchmarkEchoHandler is the runtime's own cost of one echo call, without
// the network: the handler served in process, allocations counted.
func BenchmarkEchoHandler(b *testing.B) {
	cfg, err := ParseEnv[Config](map[string]string{"ADDR": "127.0.0.1:0", "BRAIN_TOOLS_KEY": "tok"})
	if err != nil {
		b.Fatal(err)
	}
	h := (&Server{Name: "bench", Config: cfg, Tools: []Tool{benchEcho()}}).Handler()
	body := []byte(`{"tenant_id":"local","session_id":"s","call_id":"c","arguments":{"text":"hello from the benchmark"}}`)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/tools/echo", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code, rec.Body.String())
		}
	}
}

// BenchmarkEchoHandlerTracing is BenchmarkEchoHandler with tracing off (as
// a service runs without OTEL_* set) and on (every call a server span and
// a tool span, batched to an exporter that drops them): what a call pays
// for its spans, and that off pays nothing the spans would cost. Compare
// off with BenchmarkEchoHandler of a build from before tracing, both test
// binaries run in turn (go test -c of each, then benchstat).
func BenchmarkEchoHandlerTracing(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			if on {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				defer tp.Shutdown(context.Background())
				defer tracing.Install(tp)()
			}
			BenchmarkEchoHandler(b)
		})
	}
}
