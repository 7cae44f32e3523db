package service

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/tool"
)

// TestWaitsHostHangsUpAfterTakeover: a call of a tool that Waits, whose
// stream has been taken over from net/http, is cancelled when the host
// closes the connection, as net/http's own reader would have done.
func TestWaitsHostHangsUpAfterTakeover(t *testing.T) {
	ctxs := make(chan context.Context, 1)
	srv := &Server{Name: "x", Config: Config{NoAuth: true, MaxRequestBytes: 1 << 20, Heartbeat: time.Hour, StreamAfter: time.Hour, ShutdownTimeout: time.Second},
		Tools: []Tool{{Binding: tool.Binding{Name: "w"}, Waits: true, Handler: func(ctx context.Context, c *Call) *tool.Result {
			c.Stream()
			ctxs <- ctx
			<-ctx.Done()
			return tool.Errorf("cancelled")
		}}}}
	ts := newListener(t, srv)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ts+"/tools/w", strings.NewReader(goodBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || !resp.Close {
		t.Fatalf("Content-Type %q, close %v: want a stream on a connection closed after", ct, resp.Close)
	}
	handlerCtx := <-ctxs
	cancel() // the host hangs up
	resp.Body.Close()
	select {
	case <-handlerCtx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the call was not cancelled when the host closed a taken-over stream")
	}
}

// TestWaitsHTTP10: an HTTP/1.0 host gets the stream unchunked, ended by
// the close; the result arrives whole.
func TestWaitsHTTP10(t *testing.T) {
	srv := &Server{Name: "x", Config: Config{NoAuth: true, MaxRequestBytes: 1 << 20, Heartbeat: time.Hour, StreamAfter: time.Hour, ShutdownTimeout: time.Second},
		Tools: []Tool{{Binding: tool.Binding{Name: "w"}, Waits: true, Handler: func(ctx context.Context, c *Call) *tool.Result {
			c.Stream()
			_ = c.Progress(map[string]int{"step": 1})
			return tool.TextResult("over")
		}}}}
	addr := newListener(t, srv)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(conn, "POST /tools/w HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: "+
		strconv.Itoa(len(goodBody))+"\r\n\r\n"+goodBody)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.TransferEncoding) != 0 {
		t.Errorf("Transfer-Encoding %v to an HTTP/1.0 host", resp.TransferEncoding)
	}
	events, _ := readEvents(t, resp.Body)
	if len(events) != 2 || events[0].Name != "progress" || events[1].Name != "result" || !strings.Contains(events[1].Data, "over") {
		t.Fatalf("events %+v", events)
	}
}

// TestWaitsShutdownWaitsForStreams: a shutdown lets a taken-over stream,
// which net/http's Shutdown no longer sees, finish its call.
func TestWaitsShutdownWaitsForStreams(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	srv := &Server{Name: "x", Config: Config{NoAuth: true, MaxRequestBytes: 1 << 20, Heartbeat: time.Hour, StreamAfter: time.Hour, ShutdownTimeout: 5 * time.Second},
		Tools: []Tool{{Binding: tool.Binding{Name: "w"}, Waits: true, Handler: func(ctx context.Context, c *Call) *tool.Result {
			c.Stream()
			close(started)
			time.Sleep(300 * time.Millisecond)
			return tool.TextResult("finished")
		}}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, srv) }()
	got := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/tools/w", strings.NewReader(goodBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-started
	cancel()
	if body := <-got; !strings.Contains(body, "finished") {
		t.Fatalf("a taken-over stream was cut off by the shutdown: %q", body)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// newListener serves srv on 127.0.0.1:0 until the test ends and returns
// its address.
func newListener(t *testing.T, srv *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, srv) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Addr().String()
}

// TestWaitsShutdownPastTimeout: streams whose calls outlive the shutdown's
// time are cancelled, and still end with the result their calls end with
// (a whole body, not a cut-off one); Serve returns within the timeout and
// the grace.
func TestWaitsShutdownPastTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	started := make(chan struct{}, n)
	srv := &Server{Name: "x", Config: Config{NoAuth: true, MaxRequestBytes: 1 << 20, Heartbeat: time.Hour, StreamAfter: time.Hour, ShutdownTimeout: 300 * time.Millisecond},
		Tools: []Tool{{Binding: tool.Binding{Name: "w"}, Waits: true, Handler: func(ctx context.Context, c *Call) *tool.Result {
			c.Stream()
			started <- struct{}{}
			<-ctx.Done()
			return tool.Errorf("stopped by the shutdown")
		}}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, srv) }()
	bodies := make(chan string, n)
	for range n {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/tools/w", strings.NewReader(goodBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				bodies <- "error: " + err.Error()
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				bodies <- "cut off: " + err.Error()
				return
			}
			bodies <- string(b)
		}()
	}
	for range n {
		<-started
	}
	begin := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if took := time.Since(begin); took > 300*time.Millisecond+lingerAfterEnd+time.Second {
		t.Errorf("Serve returned after %s", took)
	}
	for range n {
		if body := <-bodies; !strings.Contains(body, "event: result") || !strings.Contains(body, "stopped by the shutdown") {
			t.Errorf("a stream cancelled by the shutdown did not end with its result: %q", body)
		}
	}
}
