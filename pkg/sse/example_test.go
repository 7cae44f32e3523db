package sse_test

import (
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/brain-tools/suite/pkg/sse"
)

// A tool streams progress, then exactly one result; comments are
// heartbeats.
func ExampleWriter() {
	rec := httptest.NewRecorder()
	w := sse.NewWriter(rec)
	_ = w.Event(sse.EventProgress, map[string]any{"status": "waiting_for_operator"})
	_ = w.Comment("heartbeat")
	_ = w.Event(sse.EventResult, map[string]any{"content": []any{map[string]string{"type": "text", "text": "yes"}}})
	fmt.Println(rec.Header().Get("Content-Type"))
	fmt.Print(rec.Body.String())
	// Output:
	// text/event-stream
	// event: progress
	// data: {"status":"waiting_for_operator"}
	//
	// : heartbeat
	//
	// event: result
	// data: {"content":[{"text":"yes","type":"text"}]}
}

// Read yields a stream's events in order and skips comment lines.
func ExampleRead() {
	stream := "event: progress\ndata: {\"n\":1}\n\n: heartbeat\n\nevent: result\ndata: {\"content\":[]}\n\n"
	for ev, err := range sse.Read(strings.NewReader(stream), 0) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(ev.Name, ev.Data)
	}
	// Output:
	// progress {"n":1}
	// result {"content":[]}
}
