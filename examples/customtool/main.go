// Command customtool is a complete tool service on the SDK: word_count
// (a JSON answer), countdown (progress every second, streamed as SSE or
// MCP progress) and the job trio timer_start / timer_status /
// timer_cancel, which runs the same countdown as a job whose progress
// timer_status shows. Each tool is declared once: its schemas come from
// the Go types, and the runtime checks them on every transport, POST
// /tools/<name> and MCP at /mcp. Run it, then bind it in brain.json with
// the bindings it publishes at GET /tools:
//
//	ADDR=127.0.0.1:8099 BRAIN_TOOLS_KEY=secret go run ./examples/customtool
package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

type text struct {
	Text string `json:"text" jsonschema:"The text whose words to count." schema:"maxLength=1048576"`
}

type words struct {
	Words int `json:"words" jsonschema:"How many words the text has."`
}

type seconds struct {
	Seconds int `json:"seconds" jsonschema:"How many seconds to count down." schema:"minimum=1,maximum=3600"`
}

func countWords(_ context.Context, _ *service.Call, in text) (words, error) {
	return words{len(strings.Fields(in.Text))}, nil
}

// countdown reports its progress every second, then answers.
func countdown(ctx context.Context, call *service.Call, in seconds) (*tool.Result, error) {
	for done := range in.Seconds {
		_ = call.Progress(service.Progress{Progress: float64(done), Total: float64(in.Seconds), Message: fmt.Sprintf("%d s left", in.Seconds-done)})
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return tool.TextResult("counted down %d s", in.Seconds), nil
}

// tools are the service's tools; the job trio runs countdown on a Manager.
var tools = append(jobs.Typed(jobs.NewManager(jobs.Options{}), jobs.Spec{Prefix: "timer"}, tool.Binding{Description: "Count down as a job."}, countdown),
	service.NewTool(tool.Binding{Name: "word_count", Title: "Word count", Description: "Count the words of a text.", Annotations: tool.ReadOnly()}, countWords),
	service.NewTool(tool.Binding{Name: "countdown", Description: "Count down, reporting progress every second.", Annotations: tool.ReadOnly()}, countdown))

func main() { service.Main(service.RunTools("customtool", tools...)) }
