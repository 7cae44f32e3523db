package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

// echoService is the pkg/service echo tool the benchmark calls, directly
// and through brain.
func echoService(b *testing.B) *httptest.Server {
	type args struct {
		Text string `json:"text"`
	}
	s := &service.Server{
		Name: "bench-echo",
		Config: service.Config{Addr: "127.0.0.1:0", Token: toolsKey, Tenants: []string{"t1"}, MaxRequestBytes: 4 << 20,
			Heartbeat: 15 * time.Second, StreamAfter: 10 * time.Second},
		Tools: []service.Tool{{
			Binding: tool.Binding{Name: "echo", Description: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
			Handler: service.Typed(func(_ context.Context, _ *service.Call, a args) *tool.Result {
				return tool.TextResult("%s", a.Text)
			}),
		}},
	}
	hs := httptest.NewServer(s.Handler())
	b.Cleanup(hs.Close)
	return hs
}

// benchResult is one measured run.
type benchResult struct {
	calls    int
	elapsed  time.Duration
	p50, p99 time.Duration
}

func (r benchResult) rate() float64 { return float64(r.calls) / r.elapsed.Seconds() }

// measure runs n calls of do over conc goroutines and returns throughput and
// latency percentiles.
func measure(b *testing.B, n, conc int, do func() error) benchResult {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	b.ResetTimer()
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				t0 := time.Now()
				if err := do(); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if p := firstErr.Load(); p != nil {
		b.Fatal(*p)
	}
	slices.Sort(lat)
	return benchResult{calls: n, elapsed: elapsed, p50: lat[n/2], p99: lat[min(n-1, n*99/100)]}
}

func post(client *http.Client, url, token string, body []byte, want int) error {
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return err
	}
	if res.StatusCode != want {
		return fmt.Errorf("POST %s: %d %s", url, res.StatusCode, data)
	}
	return nil
}

// BenchmarkToolCall measures, side by side in one run, a direct POST to a
// pkg/service echo tool and the same call through brain (POST
// /sessions/{id}/tool_calls with wait_seconds, durable events in SQLite in a
// temp dir), at concurrency 1 and 32. Each sub-benchmark reports calls/s,
// p50 and p99; the parent logs what brain adds.
//
//	go test -run '^$' -bench BenchmarkToolCall -benchtime 3000x ./internal/server/
func BenchmarkToolCall(b *testing.B) {
	echo := echoService(b)
	cfg := hostConfig(&testing.T{}, echo.URL)
	dir := b.TempDir()
	srv, err := New(context.Background(), Options{Config: cfg, DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-served; srv.Close() }()
	brainURL := "http://" + ln.Addr().String()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxIdleConns: 128}}
	sessBody := []byte(`{"config":{"tools":["echo"]}}`)
	req, _ := http.NewRequest("POST", brainURL+"/sessions", bytes.NewReader(sessBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKeys["t1"])
	res, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var sess SessionJSON
	json.NewDecoder(res.Body).Decode(&sess)
	res.Body.Close()

	direct := func() error {
		body, _ := json.Marshal(tool.Request{TenantID: "t1", SessionID: sess.ID, CallID: newID("call"), Arguments: json.RawMessage(`{"text":"hello"}`)})
		return post(client, echo.URL+"/tools/echo", toolsKey, body, http.StatusOK)
	}
	callBody := []byte(`{"tool":"echo","arguments":{"text":"hello"},"wait_seconds":10}`)
	viaBrain := func() error {
		return post(client, brainURL+"/sessions/"+sess.ID+"/tool_calls", apiKeys["t1"], callBody, http.StatusOK)
	}
	results := map[string]benchResult{}
	for _, conc := range []int{1, 32} {
		for _, path := range []struct {
			name string
			do   func() error
		}{{"direct", direct}, {"brain", viaBrain}} {
			name := fmt.Sprintf("%s/c%d", path.name, conc)
			b.Run(name, func(b *testing.B) {
				// Warm connections and caches outside the measurement.
				measure(b, 2*conc, conc, path.do)
				r := measure(b, b.N, conc, path.do)
				results[name] = r
				b.ReportMetric(r.rate(), "calls/s")
				b.ReportMetric(float64(r.p50.Microseconds()), "p50-µs")
				b.ReportMetric(float64(r.p99.Microseconds()), "p99-µs")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
	d1, b1 := results["direct/c1"], results["brain/c1"]
	d32, b32 := results["direct/c32"], results["brain/c32"]
	if d1.calls > 0 && b1.calls > 0 && d32.calls > 0 && b32.calls > 0 {
		b.Logf("brain adds %v p50 at concurrency 1 (target ≤ 500µs); keeps %.0f%% of direct throughput at concurrency 32 (target ≥ 40%%)",
			b1.p50-d1.p50, 100*b32.rate()/d32.rate())
	}
}
