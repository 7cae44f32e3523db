package webfetch

import (
	"encoding/json"

	"github.com/brain-tools/suite/pkg/tool"
)

// Name is the tool's name.
const Name = "web_fetch"

const description = `Fetch a public web page or document by URL and return its content as Markdown (default), plain text or cleaned HTML. ` +
	`By default only the main content is kept (navigation and clutter removed); set main_content to false for the whole page, or selector to a CSS selector for exactly those elements. ` +
	`PDF text is extracted, JSON is pretty-printed, plain text is returned as is; other binary types are refused. ` +
	`Long content is cut at max_length characters (default 5000): the result then says which start_index to pass to read the next part. ` +
	`Pages that build their text with JavaScript are rendered in a real browser when the service has one (render). ` +
	`Private, loopback and other internal addresses are refused, and robots.txt is honoured.`

var inputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "url": {"type": "string", "minLength": 1, "maxLength": 8192, "description": "The http:// or https:// URL to fetch."},
    "format": {"type": "string", "enum": ["markdown", "text", "html"], "default": "markdown", "description": "How to render HTML pages."},
    "max_length": {"type": "integer", "minimum": 1, "maximum": 100000, "default": 5000, "description": "Most characters to return in this call."},
    "start_index": {"type": "integer", "minimum": 0, "default": 0, "description": "Character to start at, to read the part after a cut."},
    "main_content": {"type": "boolean", "default": true, "description": "Keep only the main content (readability); false keeps the whole page."},
    "selector": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "CSS selector: return only the matching elements (main_content is then not applied)."},
    "render": {"type": "string", "enum": ["auto", "always", "never"], "default": "auto", "description": "Read the page as a real browser renders it, scripts run: always; auto does so when the page's text is nearly empty without its scripts; never. Only where the service has a browser configured."}
  },
  "required": ["url"],
  "additionalProperties": false
}`)

var outputSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "url": {"type": "string", "description": "The URL asked for, normalized."},
    "final_url": {"type": "string", "description": "The URL that answered, after redirects."},
    "status": {"type": "integer", "description": "HTTP status of the final response."},
    "content_type": {"type": "string", "description": "The real media type found from the bytes, with the charset used for text."},
    "title": {"type": "string", "description": "The page or document title, empty when there is none."},
    "total_length": {"type": "integer", "minimum": 0, "description": "Characters in the whole content."},
    "next_start_index": {"type": "integer", "minimum": 1, "description": "Present when the content was cut: the start_index of the next part."},
    "rendered": {"type": "boolean", "description": "The text is of the page as a browser rendered it, scripts run."}
  },
  "required": ["url", "final_url", "status", "content_type", "title", "total_length"],
  "additionalProperties": false
}`)

// Binding returns web_fetch's binding. url, tenants and token_env are
// filled in by the service from its configuration. The time limit covers
// the fetch limit (30 s by default), a render (45 s) and extraction.
func Binding() tool.Binding {
	return tool.Binding{
		Name:           Name,
		Title:          "Fetch a web page",
		Description:    description,
		InputSchema:    inputSchema,
		OutputSchema:   outputSchema,
		TimeoutSeconds: 90,
		Annotations:    &tool.Annotations{ReadOnlyHint: true},
	}
}
