// Package echo is the echo tool: the contract's example binding, answering
// with the text it was given.
package echo

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

// MaxTextLength is the schema's maxLength for text, in characters (JSON
// Schema counts code points).
const MaxTextLength = 4096

// Binding is the contract's example binding for echo, with the default
// timeout and output limit written out. URL, token_env and tenants are
// filled in by the service when it publishes GET /tools.
var Binding = tool.Binding{
	Name:           "echo",
	Description:    "Echo text through an external tool service.",
	InputSchema:    json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":4096}},"required":["text"],"additionalProperties":false}`),
	TimeoutSeconds: 300,
	MaxOutputBytes: 1048576,
}

// Args are echo's arguments.
type Args struct {
	// Text is required and at most MaxTextLength characters.
	Text *string `json:"text"`
}

// Validate applies the schema's rules, so the service holds them even for
// a caller that skipped the host's validation.
func (a *Args) Validate() error {
	if a.Text == nil {
		return fmt.Errorf("text: required")
	}
	if n := utf8.RuneCountInString(*a.Text); n > MaxTextLength {
		return fmt.Errorf("text: %d characters, more than the limit of %d", n, MaxTextLength)
	}
	return nil
}

// Tool returns the echo tool.
func Tool() service.Tool {
	return service.Tool{Binding: Binding, Handler: service.Typed(func(_ context.Context, _ *service.Call, a Args) *tool.Result {
		return &tool.Result{Content: []tool.Content{tool.Text(*a.Text)}}
	})}
}
