package app

import (
	"encoding/json"
	"strings"

	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/browser/internal/chrome"
)

// Tool names.
const (
	OpenName       = "browser_open"
	ActName        = "browser_act"
	ScreenshotName = "browser_screenshot"
	PagesName      = "browser_pages"
)

// Limits of the arguments.
const (
	// DefaultMaxLength is max_length when unset, in characters (as
	// web_fetch).
	DefaultMaxLength = 5000
	// MaxMaxLength is the largest max_length (as web_fetch: inside the
	// host's default 1 MiB output once JSON-escaped).
	MaxMaxLength = 100000
	// MaxURLLength caps a URL argument.
	MaxURLLength = 8192
	// MaxSelectorLength caps a CSS selector.
	MaxSelectorLength = 1024
	// MaxTextLength caps text typed or waited for.
	MaxTextLength = 10000
	// MaxActions is how many steps one browser_act call runs.
	MaxActions = 20
	// MaxScroll caps a scroll, in CSS pixels either way.
	MaxScroll = 100000
	// MaxShotHeight caps a full-page screenshot's height, in CSS pixels.
	MaxShotHeight = 16384
	// MaxShotBytes caps a screenshot's PNG: as base64 inside the JSON
	// result it stays under the 2 MiB max_output_bytes of the binding.
	MaxShotBytes = 1500000
	// screenshotOutputBytes is browser_screenshot's max_output_bytes: the
	// contract's largest, 2 MiB.
	screenshotOutputBytes = 2 << 20
)

const readProps = `
    "max_length": {"type": "integer", "minimum": 1, "maximum": 100000, "default": 5000, "description": "Most characters of page text to return in this call."},
    "format": {"type": "string", "enum": ["markdown", "text", "html"], "default": "markdown", "description": "How to render the page's text."},
    "main_content": {"type": "boolean", "default": false, "description": "Keep only the main content (readability), as web_fetch does; by default the whole rendered page is read."},
    "selector": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "CSS selector: read only the matching elements."}`

var openInput = json.RawMessage(`{
  "type": "object",
  "properties": {
    "url": {"type": "string", "minLength": 1, "maxLength": 8192, "description": "The http:// or https:// URL to open. Omit it with page_id to read that page again."},
    "page_id": {"type": "string", "minLength": 1, "maxLength": 32, "description": "A page of this session (from an earlier result): open url in it, or without url read it again."},
    "start_index": {"type": "integer", "minimum": 0, "default": 0, "description": "Character to start at, to read the part after a cut. With page_id and no url, reads on from the text of the last read (nothing is rendered again)."},
    "wait_for": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "CSS selector to wait for (up to the action timeout) before reading."},` + readProps + `
  },
  "additionalProperties": false
}`)

var pageOutput = json.RawMessage(`{
  "type": "object",
  "properties": {
    "page_id": {"type": "string", "description": "The page, for browser_act, browser_screenshot, browser_pages and later reads."},
    "url": {"type": "string", "description": "The page's address now, after redirects and actions."},
    "status": {"type": "integer", "description": "HTTP status of the page's document (0 when none came)."},
    "title": {"type": "string"},
    "total_length": {"type": "integer", "minimum": 0, "description": "Characters in the whole text read."},
    "next_start_index": {"type": "integer", "minimum": 1, "description": "Present when the text was cut: the start_index of the next part."},
    "loading": {"type": "boolean", "description": "The page was still loading when it was read."},
    "blocked": {"type": "array", "items": {"type": "string"}, "description": "Requests of the page the SSRF guard refused, with the reason."},
    "dialogs": {"type": "array", "items": {"type": "string"}, "description": "JavaScript dialogs the page opened (accepted)."},
    "weight_limited": {"type": "boolean", "description": "The page downloaded more than the page-weight limit and its connections were cut."}
  },
  "required": ["page_id", "url", "status", "title", "total_length"],
  "additionalProperties": false
}`)

var actInput = json.RawMessage(`{
  "type": "object",
  "properties": {
    "page_id": {"type": "string", "minLength": 1, "maxLength": 32, "description": "The page to act on."},
    "actions": {
      "type": "array", "minItems": 1, "maxItems": 20,
      "description": "Steps run in order; the first that fails stops the rest.",
      "items": {
        "type": "object",
        "properties": {
          "action": {"type": "string", "enum": ["click", "type", "select", "press", "scroll", "back", "forward", "reload", "navigate", "wait"]},
          "selector": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "CSS selector of the element: required for click, type and select; optional for press (focus first), scroll (into view) and wait."},
          "text": {"type": "string", "maxLength": 10000, "description": "type: the text to type (replaces the field's value); wait: text to wait for on the page."},
          "value": {"type": "string", "maxLength": 10000, "description": "select: the option's value or visible text."},
          "key": {"type": "string", "minLength": 1, "maxLength": 16, "description": "press: KEYS, or one character."},
          "url": {"type": "string", "minLength": 1, "maxLength": 8192, "description": "navigate: the http:// or https:// URL."},
          "pixels": {"type": "integer", "minimum": -100000, "maximum": 100000, "description": "scroll without selector: CSS pixels down (negative: up); default one viewport."}
        },
        "required": ["action"],
        "additionalProperties": false
      }
    },` + readProps + `
  },
  "required": ["page_id", "actions"],
  "additionalProperties": false
}`)

var shotInput = json.RawMessage(`{
  "type": "object",
  "properties": {
    "page_id": {"type": "string", "minLength": 1, "maxLength": 32, "description": "The page to capture."},
    "full_page": {"type": "boolean", "default": false, "description": "Capture the whole page (up to 16384 CSS pixels high), not only the viewport."},
    "width": {"type": "integer", "minimum": 100, "maximum": 3840, "description": "Viewport width for the capture, in pixels (default: the page's, 1280)."},
    "height": {"type": "integer", "minimum": 100, "maximum": 3840, "description": "Viewport height for the capture, in pixels (default: the page's, 800)."}
  },
  "required": ["page_id"],
  "additionalProperties": false
}`)

var shotOutput = json.RawMessage(`{
  "type": "object",
  "properties": {
    "page_id": {"type": "string"},
    "url": {"type": "string"},
    "width": {"type": "integer", "description": "The PNG's width in pixels."},
    "height": {"type": "integer", "description": "The PNG's height in pixels."},
    "scale": {"type": "number", "description": "Below 1 when the image was shrunk to fit the size limit."}
  },
  "required": ["page_id", "url", "width", "height", "scale"],
  "additionalProperties": false
}`)

var pagesInput = json.RawMessage(`{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["list", "close", "close_all"], "default": "list", "description": "list the session's pages, close one (page_id), or close_all: end the session with its cookies and storage."},
    "page_id": {"type": "string", "minLength": 1, "maxLength": 32, "description": "close: the page to close."}
  },
  "additionalProperties": false
}`)

var pagesOutput = json.RawMessage(`{
  "type": "object",
  "properties": {
    "pages": {"type": "array", "items": {"type": "object", "properties": {"page_id": {"type": "string"}, "url": {"type": "string"}, "title": {"type": "string"}}, "required": ["page_id", "url", "title"], "additionalProperties": false}}
  },
  "required": ["pages"],
  "additionalProperties": false
}`)

// Bindings returns the four tools' bindings (url, tenants and token_env
// are filled in by the service).
func Bindings() []tool.Binding {
	keys := strings.Join(chrome.KeyNames(), ", ")
	act := strings.Replace(string(actInput), "KEYS", keys, 1)
	return []tool.Binding{
		{
			Name:        OpenName,
			Title:       "Open a page in a browser",
			Annotations: &tool.Annotations{ReadOnlyHint: true},
			Description: `Open a web page in a real browser (Chromium) and read what rendered, after its scripts ran: title, final URL, and the page as Markdown (or text or HTML), with pagination like web_fetch (max_length, start_index). ` +
				`Use it for pages that build their content with JavaScript. Each call without page_id opens a new page (a session may have a few); the result's page_id is for browser_act, browser_screenshot and later reads. ` +
				`The result also lists the elements you can act on, with a CSS selector for each. Cookies and storage last for this session only. Private, loopback and other internal addresses are refused, for the page and everything it loads.`,
			InputSchema:    openInput,
			OutputSchema:   pageOutput,
			TimeoutSeconds: 90,
		},
		{
			Name:        ActName,
			Title:       "Act on a browser page",
			Annotations: &tool.Annotations{},
			Description: `Act on a page opened with browser_open, as a person would: click, type into a field, select an option, press a key, scroll, go back or forward, reload, navigate to a URL, or wait for a selector or a text. ` +
				`Several steps may run in one call; the result is the page afterwards, read as browser_open reads it (with the elements you can act on).`,
			InputSchema:    json.RawMessage(act),
			OutputSchema:   pageOutput,
			TimeoutSeconds: 120,
		},
		{
			Name:           ScreenshotName,
			Title:          "Screenshot a browser page",
			Annotations:    &tool.Annotations{ReadOnlyHint: true},
			Description:    `Capture a page opened with browser_open as a PNG image: the viewport (optionally resized) or the whole page. Large captures are shrunk to stay under 1.5 MB.`,
			InputSchema:    shotInput,
			OutputSchema:   shotOutput,
			TimeoutSeconds: 60,
			MaxOutputBytes: screenshotOutputBytes,
		},
		{
			Name:           PagesName,
			Title:          "List or close browser pages",
			Annotations:    &tool.Annotations{IdempotentHint: true},
			Description:    `List this session's open browser pages (page_id, URL, title), close one, or close them all and end the browsing session with its cookies and storage.`,
			InputSchema:    pagesInput,
			OutputSchema:   pagesOutput,
			TimeoutSeconds: 30,
		},
	}
}
