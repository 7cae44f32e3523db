package mcpcall

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
)

// finish maps a CallToolResult to the contract's result and applies the
// host's checks: the result's size against max_output_bytes, the
// contract's result rules, then invoke.Finish's (output_schema for a result
// that is not an error, a text block for a structured-only result), as for
// an HTTP tool.
func finish(t *config.Tool, res *mcp.CallToolResult, tr *trace) invoke.Outcome {
	if res == nil {
		return invoke.Failed(invoke.CodeInvalidResult, true, fmt.Sprintf("tool %s: invalid result: empty", t.Name))
	}
	if res.NeedsInput() {
		// The server asked for input brain cannot give (elicitation or
		// sampling); the call did not complete.
		return invoke.Failed(invoke.CodeInvalidResult, true, fmt.Sprintf("tool %s: the MCP server asked for client input, which brain does not provide", t.Name))
	}
	r, err := toResult(res)
	if err != nil {
		return invoke.Failed(invoke.CodeInvalidResult, true, fmt.Sprintf("tool %s: invalid result: %v", t.Name, err))
	}
	size, err := json.Marshal(r)
	if err != nil {
		return invoke.Failed(invoke.CodeInvalidResult, true, fmt.Sprintf("tool %s: invalid result: %v", t.Name, err))
	}
	if int64(len(size)) > t.MaxOutputBytes() || tr.tripped.Load() {
		return invoke.Failed(invoke.CodeOutputTooLarge, true, fmt.Sprintf("tool %s: result of %d bytes is larger than max_output_bytes %d", t.Name, len(size), t.MaxOutputBytes()))
	}
	if err := r.Validate(); err != nil {
		return invoke.Failed(invoke.CodeInvalidResult, true, fmt.Sprintf("tool %s: invalid result: %v", t.Name, err))
	}
	// The server's own unknown_outcome of an error result stands.
	return invoke.Finish(t, r)
}

// toResult maps MCP content to the contract's two block types. Text and
// image blocks map one to one; an embedded text resource becomes its text,
// an embedded image blob an image; audio, other blobs and resource links
// become a text block that says what was left out, so the model knows.
func toResult(res *mcp.CallToolResult) (*tool.Result, error) {
	r := &tool.Result{IsError: res.IsError}
	for i, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			r.Content = append(r.Content, tool.Text(c.Text))
		case *mcp.ImageContent:
			if !strings.HasPrefix(c.MIMEType, "image/") {
				return nil, fmt.Errorf("content[%d]: image mimeType must be image/*, got %q", i, c.MIMEType)
			}
			r.Content = append(r.Content, tool.Content{Type: tool.TypeImage, Data: base64.StdEncoding.EncodeToString(c.Data), MIMEType: c.MIMEType})
		case *mcp.AudioContent:
			r.Content = append(r.Content, tool.Text(fmt.Sprintf("[audio content of type %s, %d bytes, not shown]", c.MIMEType, len(c.Data))))
		case *mcp.ResourceLink:
			r.Content = append(r.Content, tool.Text(describeLink(c)))
		case *mcp.EmbeddedResource:
			rc := c.Resource
			switch {
			case rc == nil:
				return nil, fmt.Errorf("content[%d]: embedded resource without contents", i)
			case rc.Blob == nil:
				r.Content = append(r.Content, tool.Text(rc.Text))
			case strings.HasPrefix(rc.MIMEType, "image/"):
				r.Content = append(r.Content, tool.Content{Type: tool.TypeImage, Data: base64.StdEncoding.EncodeToString(rc.Blob), MIMEType: rc.MIMEType})
			default:
				r.Content = append(r.Content, tool.Text(fmt.Sprintf("[resource %s of type %s, %d bytes, not shown]", rc.URI, rc.MIMEType, len(rc.Blob))))
			}
		default:
			return nil, fmt.Errorf("content[%d]: unsupported content type %T", i, c)
		}
	}
	if res.StructuredContent != nil {
		data, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("structuredContent: %w", err)
		}
		if string(data) != "null" {
			r.StructuredContent = data
		}
	}
	if v, ok := res.Meta[service.MCPMetaUnknownOutcome].(bool); ok && v {
		r.UnknownOutcome = true
	}
	return r, nil
}

func describeLink(l *mcp.ResourceLink) string {
	var b strings.Builder
	b.WriteString("[resource link: ")
	b.WriteString(l.URI)
	if l.Name != "" {
		b.WriteString(" (" + l.Name + ")")
	}
	if l.MIMEType != "" {
		b.WriteString(", " + l.MIMEType)
	}
	if l.Description != "" {
		b.WriteString(": " + l.Description)
	}
	b.WriteString("]")
	return b.String()
}
