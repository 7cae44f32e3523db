package service_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

type countIn struct {
	Text string `json:"text" jsonschema:"The text whose words to count." schema:"maxLength=64"`
}

type countOut struct {
	Words int `json:"words"`
}

// A tool is declared once: its schemas come from its Go types, and the
// runtime checks the arguments against them before the handler runs.
func ExampleNewTool() {
	wordCount := service.NewTool(tool.Binding{Name: "word_count", Description: "Count the words of a text."},
		func(_ context.Context, _ *service.Call, in countIn) (countOut, error) {
			return countOut{len(strings.Fields(in.Text))}, nil
		})
	fmt.Println(string(wordCount.Binding.InputSchema))

	srv := httptest.NewServer((&service.Server{Name: "example", Config: service.Config{NoAuth: true, MaxRequestBytes: 1 << 20, StreamAfter: 10e9, Heartbeat: 15e9},
		Tools: []service.Tool{wordCount}}).Handler())
	defer srv.Close()
	for _, args := range []string{`{"text":"one two three"}`, `{"text":3}`} {
		resp, err := http.Post(srv.URL+"/tools/word_count", "application/json",
			strings.NewReader(`{"tenant_id":"local","session_id":"s1","call_id":"c1","arguments":`+args+`}`))
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(string(body))
	}
	// Output:
	// {"type":"object","properties":{"text":{"type":"string","description":"The text whose words to count.","maxLength":64}},"required":["text"],"additionalProperties":false}
	// {"structured_content":{"words":3}}
	// {"content":[{"type":"text","text":"invalid arguments: at \"/text\": got number, want string"}],"is_error":true}
}
