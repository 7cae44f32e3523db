package service

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/brain-tools/suite/pkg/tool"
)

// TestOnWritten checks that a result whose text shares a buffer reaches
// the host whole, JSON and SSE alike, and that OnWritten's functions run
// after that: each one scribbles over the buffer, which would show in the
// body had it run before the write.
func TestOnWritten(t *testing.T) {
	cfg, err := ParseEnv[Config](map[string]string{"ADDR": "127.0.0.1:0", "BRAIN_TOOLS_KEY": "tok"})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("abcdefgh", 64<<10) // 512 KiB, many writes
	ran := make(chan int, 8)
	handler := func(stream bool) Handler {
		return func(ctx context.Context, c *Call) *tool.Result {
			if stream {
				_ = c.Progress(map[string]int{"step": 1})
			}
			buf := []byte(want)
			for i := range 2 {
				c.OnWritten(func() {
					for j := range buf {
						buf[j] = 'X'
					}
					ran <- i
				})
			}
			return &tool.Result{Content: []tool.Content{tool.Text(unsafe.String(unsafe.SliceData(buf), len(buf)))}}
		}
	}
	srv := &Server{Name: "test", Config: cfg, Tools: []Tool{
		{Binding: tool.Binding{Name: "json", Description: "a large result"}, Handler: handler(false)},
		{Binding: tool.Binding{Name: "sse", Description: "progress, then a large result"}, Handler: handler(true)},
	}}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	for _, name := range []string{"json", "sse"} {
		t.Run(name, func(t *testing.T) {
			resp := post(t, ts.URL+"/tools/"+name, goodBody, map[string]string{"Accept": "application/json, text/event-stream"})
			body := readAll(t, resp.Body)
			if strings.Contains(body, "X") || !strings.Contains(body, want) {
				t.Fatalf("%s: body of %d bytes is not the result as built", resp.Header.Get("Content-Type"), len(body))
			}
			if name == "json" && resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length %q, body %d bytes", resp.Header.Get("Content-Length"), len(body))
			}
			for i := range 2 {
				if got := <-ran; got != i {
					t.Errorf("OnWritten function %d ran as number %d", got, i)
				}
			}
		})
	}
}
