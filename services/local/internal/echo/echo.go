// Package echo is the echo tool: the contract's example binding, answering
// with the text it was given.
package echo

import (
	"context"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

// MaxTextLength is the input schema's maxLength for text, in characters
// (JSON Schema counts code points).
const MaxTextLength = 4096

// Args are echo's arguments; its input_schema is inferred from them and is
// the contract's example schema.
type Args struct {
	Text string `json:"text" schema:"maxLength=4096"`
}

// Tool returns the echo tool: the contract's example binding, with the
// default timeout and output limit written out, plus a title and
// annotations (it changes nothing, anywhere). URL, token_env and tenants
// are filled in by the service when it publishes GET /tools.
func Tool() service.Tool {
	return service.NewTool(tool.Binding{
		Name:           "echo",
		Title:          "Echo",
		Description:    "Echo text through an external tool service.",
		Annotations:    tool.ReadOnly(),
		TimeoutSeconds: 300,
		MaxOutputBytes: 1048576,
	}, func(_ context.Context, _ *service.Call, a Args) (*tool.Result, error) {
		return &tool.Result{Content: []tool.Content{tool.Text(a.Text)}}, nil
	})
}
