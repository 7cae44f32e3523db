package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
)

// BenchmarkBrainPGO drives brain's tool-call path alone (brain on SQLite
// calling the pkg/service echo tool, as BenchmarkToolCall's "brain" path
// does) at concurrency 32, for the CPU profile brain is built with
// (services/brain/default.pgo, which `go build -pgo=auto` picks up for the
// brain binary and scripts/bench.sh passes to the benchmark's test binary).
// Regenerate it after large changes to brain's call path:
//
//	go test -run '^$' -bench '^BenchmarkBrainPGO$' -benchtime 40000x \
//	  -cpuprofile /tmp/brain.pprof ./services/brain/internal/server &&
//	  go tool pprof -proto /tmp/brain.pprof >services/brain/default.pgo
func BenchmarkBrainPGO(b *testing.B) {
	echo := echoService(b)
	cfg := hostConfig(&testing.T{}, echo.URL)
	srv, err := New(context.Background(), Options{Config: cfg, DataDir: b.TempDir()})
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
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxIdleConns: 128}}

	req, _ := http.NewRequest("POST", base+"/sessions", bytes.NewReader([]byte(`{"config":{"tools":["echo"]}}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKeys["t1"])
	res, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var sess SessionJSON
	err = json.NewDecoder(res.Body).Decode(&sess)
	res.Body.Close()
	if err != nil || sess.ID == "" {
		b.Fatalf("new session: %d %v", res.StatusCode, err)
	}
	url := base + "/sessions/" + sess.ID + "/tool_calls"
	body := []byte(`{"tool":"echo","arguments":{"text":"hello"},"wait_seconds":10}`)
	do := func() error { return post(client, url, apiKeys["t1"], body, http.StatusOK) }
	const conc = 32
	measure(b, 2*conc, conc, do) // warm connections
	b.ResetTimer()
	if b.N >= conc {
		measure(b, b.N, conc, do)
	}
}
