package server

import (
	"context"
	"encoding/json"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/brain-tools/suite/services/brain/internal/store/sqlite"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func BenchmarkZZBrainOnly(b *testing.B) {
	echo := echoService(b)
	cfg := hostConfig(&testing.T{}, echo.URL)
	srv, err := New(context.Background(), Options{Config: cfg, DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() { cancel(); <-served; srv.Close() }()
	url := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxIdleConns: 128}}
	bb := &brain{t: &testing.T{}, url: url, srv: srv}
	_ = bb
	req, _ := http.NewRequest("POST", url+"/sessions", strings.NewReader(`{"config":{"tools":["echo"]}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKeys["t1"])
	res, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	var sess SessionJSON
	json.NewDecoder(res.Body).Decode(&sess)
	res.Body.Close()
	callBody := []byte(`{"tool":"echo","arguments":{"text":"hello"},"wait_seconds":10}`)
	do := func() error {
		return post(client, url+"/sessions/"+sess.ID+"/tool_calls", apiKeys["t1"], callBody, http.StatusOK)
	}
	measure(b, 2000, 32, do)
	b.ResetTimer()
	t0 := time.Now()
	r := measure(b, b.N, 32, do)
	b.ReportMetric(r.rate(), "calls/s")
	_ = t0
}

func BenchmarkZZRelayStoreOnly(b *testing.B) {
	echo := echoService(b)
	relayClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxIdleConns: 128}}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxIdleConns: 128}}
	sdb, err := sqlite.Open(filepath.Join(b.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer sdb.Close()
	t0 := time.Now().UTC()
	sid := newID("ses")
	if err := sdb.CreateSession(context.Background(), &store.Session{ID: sid, TenantID: "t1", Status: store.SessionActive, Tools: []string{"echo"},
		Config: json.RawMessage(`{}`), CreatedAt: t0, UpdatedAt: t0},
		&store.Event{Type: store.EventSessionCreated, SessionID: sid, Time: t0, Data: json.RawMessage(`{}`)}); err != nil {
		b.Fatal(err)
	}
	relayStore := httptest.NewServer(relayHandler(relayClient, echo.URL+"/tools/echo", func(ctx context.Context, forward forwardFunc) (*http.Response, []byte, error) {
		now := time.Now().UTC()
		c := &store.Call{ID: newID("call"), SessionID: sid, TenantID: "t1", Tool: "echo", Status: store.CallRunning,
			Arguments: json.RawMessage(`{"text":"hello"}`), CreatedAt: now, StartedAt: now}
		if err := sdb.CreateCall(ctx, c, &store.Event{Type: store.EventToolCall, SessionID: sid, CallID: c.ID, Time: now,
			Data: (&toolCallData{Tool: "echo", Arguments: c.Arguments, CallerType: store.CallerAPI}).appendJSON(nil)}); err != nil {
			return nil, nil, err
		}
		res, out, err := forward()
		if err != nil {
			return nil, nil, err
		}
		c.Status, c.FinishedAt, c.Result = store.CallSucceeded, time.Now().UTC(), out
		data := (&toolResultData{Tool: "echo", Status: c.Status, Result: out, DurationMS: c.FinishedAt.Sub(now).Milliseconds()}).appendJSON(nil)
		err = sdb.FinishCall(ctx, c, &store.Event{Type: store.EventToolResult, SessionID: sid, CallID: c.ID, Time: c.FinishedAt, Data: data})
		return res, out, err
	}))
	defer relayStore.Close()
	body, _ := json.Marshal(tool.Request{TenantID: "t1", SessionID: sid, CallID: newID("call"), Arguments: json.RawMessage(`{"text":"hello"}`)})
	do := func() error { return post(client, relayStore.URL+"/tools/echo", toolsKey, body, http.StatusOK) }
	measure(b, 2000, 32, do)
	b.ResetTimer()
	r := measure(b, b.N, 32, do)
	b.ReportMetric(r.rate(), "calls/s")
}
