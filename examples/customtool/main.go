// Command customtool is a complete tool service on the SDK: one tool,
// word_count, that counts the words of a text. Run it, then bind it in
// brain.json with the binding it publishes at GET /tools.
//
//	ADDR=127.0.0.1:8099 BRAIN_TOOLS_KEY=secret go run ./examples/customtool
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

type args struct {
	Text string `json:"text"`
}

func countWords(_ context.Context, call *service.Call, a args) *tool.Result {
	n := len(strings.Fields(a.Text))
	r, err := tool.StructuredResult(map[string]int{"words": n}, fmt.Sprintf("%d words", n))
	if err != nil {
		return tool.Errorf("word_count: %v", err)
	}
	return r
}

func main() {
	service.Main(func(ctx context.Context, environ map[string]string, logger *slog.Logger) error {
		cfg, err := service.ParseEnv[service.Config](environ)
		if err != nil {
			return err
		}
		return service.Run(ctx, &service.Server{Name: "customtool", Config: cfg, Logger: logger,
			Tools: []service.Tool{{
				Binding: tool.Binding{
					Name:         "word_count",
					Description:  "Count the words of a text.",
					InputSchema:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`),
					OutputSchema: json.RawMessage(`{"type":"object","properties":{"words":{"type":"integer"}},"required":["words"]}`),
				},
				Handler: service.Typed(countWords),
			}}})
	})
}
