package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/strictjson"
)

// Binding declares one tool in the host config's tools array, with every
// field of the contract's binding table and three of the host's own: type
// (a function tool the application answers), require_approval and
// max_concurrency. A tool service publishes its own bindings at GET /tools
// so that a host config can be generated.
type Binding struct {
	// Name is what the model sees: a letter, then up to 63 letters, digits
	// or underscores. Unique within a host config.
	Name string `json:"name"`
	// Title is a short human-readable name for user interfaces ("Word
	// count"), MCP's tool title. Optional; not the contract's, which hosts
	// ignore or show.
	Title string `json:"title,omitempty"`
	// Description tells the model when to call the tool. Required.
	Description string `json:"description"`
	// Annotations are hints about the tool's behaviour that MCP hosts use
	// to decide whether to ask the user before a call. Optional.
	Annotations *Annotations `json:"annotations,omitempty"`
	// InputSchema is the JSON Schema (draft 2020-12 by default) of the
	// arguments. Required; must be a JSON object.
	InputSchema json.RawMessage `json:"input_schema"`
	// OutputSchema optionally validates successful structured_content.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Type is TypeFunction for a function tool, which has no url: the host
	// records the call and waits for the application to answer it (the
	// peers' "function" tools). Empty for a tool the host calls at URL.
	Type string `json:"type,omitempty"`
	// URL is the http(s) endpoint the host POSTs calls to: no credentials,
	// no fragment. Required unless Type is TypeFunction, and refused then.
	URL string `json:"url,omitempty"`
	// Tenants lists the tenants allowed to use the tool. Required.
	Tenants []string `json:"tenants"`
	// TokenEnv names the environment variable whose value the host sends as
	// a bearer token; it must be set when the host starts.
	TokenEnv string `json:"token_env,omitempty"`
	// TimeoutSeconds limits the whole call: 1 to 86400, default 300.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
	// MaxOutputBytes is the largest response accepted: up to 2 MiB,
	// default 1 MiB.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
	// InspectSession sends a read-only session token with each call.
	InspectSession bool `json:"inspect_session,omitempty"`
	// MCPTool names the remote tool for tools served by an MCP server.
	MCPTool string `json:"mcp_tool,omitempty"`
	// Required, for an MCP binding, makes session creation fail with a 4xx
	// naming the server when it cannot be reached, instead of recording an
	// mcp.unavailable event and going on without the tool.
	Required bool `json:"required,omitempty"`
	// RequireApproval is ApprovalAlways to have the host ask before each
	// call is sent (the call waits in requires_input for an answer) or
	// ApprovalNever, the default when empty. A session may tighten it,
	// never loosen it. Not for a function tool.
	RequireApproval string `json:"require_approval,omitempty"`
	// MaxConcurrency caps the tenant's calls of the tool in progress at
	// once: 1 to MaxConcurrencyLimit, 0 (unset) for no cap. Further calls
	// wait queued, first come first served.
	MaxConcurrency int `json:"max_concurrency,omitempty"`
}

// TypeFunction is Binding.Type of a function tool.
const TypeFunction = "function"

// Values of Binding.RequireApproval.
const (
	ApprovalAlways = "always"
	ApprovalNever  = "never"
)

// MaxConcurrencyLimit is the largest max_concurrency.
const MaxConcurrencyLimit = 10000

// Function reports whether the binding is a function tool.
func (b *Binding) Function() bool { return b.Type == TypeFunction }

// Gated reports whether the binding asks for approval before each call.
func (b *Binding) Gated() bool { return b.RequireApproval == ApprovalAlways }

// Annotations are the MCP specification's tool annotations (2025-11-25,
// "Tool annotations"): hints, never guarantees, about what a call does, so
// a host can decide whether to ask the user first. A host must not trust
// them from a server it does not trust.
type Annotations struct {
	// ReadOnlyHint: the tool does not change its environment. Default false.
	ReadOnlyHint bool `json:"readOnlyHint,omitempty"`
	// DestructiveHint: the tool may destroy or overwrite (meaningful when
	// not read-only). nil means the MCP default, true.
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	// IdempotentHint: calling again with the same arguments has no further
	// effect (meaningful when not read-only). Default false.
	IdempotentHint bool `json:"idempotentHint,omitempty"`
	// OpenWorldHint: the tool reaches an open world (the web, a provider);
	// false for a closed one (its own store). nil means the MCP default,
	// true.
	OpenWorldHint *bool `json:"openWorldHint,omitempty"`
}

// ReadOnly returns the annotations of a tool that only reads its own,
// closed world (a counter, a status lookup): read-only, not open-world.
func ReadOnly() *Annotations {
	f := false
	return &Annotations{ReadOnlyHint: true, OpenWorldHint: &f}
}

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

// mcpToolRE is the MCP specification's tool-name rule (2025-11-25, "Tool
// names"): 1 to 128 characters from A-Z, a-z, 0-9, _, -, . and /.
var mcpToolRE = regexp.MustCompile(`^[A-Za-z0-9_./-]{1,128}$`)

// ValidName reports whether name follows the contract's rule for tool names.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// Validate checks every field that can be checked without compiling the
// schemas or reading the environment (the host does both). The error is a
// *strictjson.FieldError naming the field.
func (b *Binding) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &strictjson.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case b.Name == "":
		return bad("name", "required")
	case !ValidName(b.Name):
		return bad("name", "%q must start with a letter and have up to 64 letters, digits or underscores", b.Name)
	case b.Description == "":
		return bad("description", "required")
	case len(bytes.TrimSpace(b.InputSchema)) == 0:
		return bad("input_schema", "required")
	case !isObject(b.InputSchema) || !json.Valid(b.InputSchema):
		return bad("input_schema", "must be a JSON Schema object")
	case len(bytes.TrimSpace(b.OutputSchema)) > 0 && (!isObject(b.OutputSchema) || !json.Valid(b.OutputSchema)):
		return bad("output_schema", "must be a JSON Schema object")
	case len(b.Tenants) == 0:
		return bad("tenants", "required: list the tenants allowed to use the tool")
	case b.TimeoutSeconds != 0 && (b.TimeoutSeconds < 1 || b.TimeoutSeconds > MaxTimeoutSeconds):
		return bad("timeout_seconds", "must be from 1 to %d, got %d", MaxTimeoutSeconds, b.TimeoutSeconds)
	case b.MaxOutputBytes != 0 && (b.MaxOutputBytes < 1 || b.MaxOutputBytes > MaxOutputBytesLimit):
		return bad("max_output_bytes", "must be from 1 to %d (2 MiB), got %d", MaxOutputBytesLimit, b.MaxOutputBytes)
	case b.Required && b.MCPTool == "":
		return bad("required", "only applies to a binding with mcp_tool")
	case b.MCPTool != "" && !mcpToolRE.MatchString(b.MCPTool):
		return bad("mcp_tool", "%q is not an MCP tool name: 1 to 128 letters, digits, '_', '-', '.' or '/'", b.MCPTool)
	}
	for i, t := range b.Tenants {
		if t == "" {
			return bad(fmt.Sprintf("tenants[%d]", i), "must not be empty")
		}
	}
	switch b.RequireApproval {
	case "", ApprovalAlways, ApprovalNever:
	default:
		return bad("require_approval", "must be %q or %q, got %q", ApprovalAlways, ApprovalNever, b.RequireApproval)
	}
	if b.MaxConcurrency < 0 || b.MaxConcurrency > MaxConcurrencyLimit {
		return bad("max_concurrency", "must be from 1 to %d (omit it for no cap), got %d", MaxConcurrencyLimit, b.MaxConcurrency)
	}
	switch b.Type {
	case "":
	case TypeFunction:
		return b.validateFunction(bad)
	default:
		return bad("type", "must be %q (a tool the application answers) or omitted (a tool called at url), got %q", TypeFunction, b.Type)
	}
	if b.URL == "" {
		return bad("url", "required (or \"type\": %q for a tool the application answers itself)", TypeFunction)
	}
	if err := ValidateURL(b.URL); err != nil {
		return bad("url", "%v", err)
	}
	return nil
}

// validateFunction refuses the fields a function tool cannot have: it is
// not called over HTTP or MCP, so it has no url, token, MCP tool or session
// inspection; and the application that answers it decides on it already,
// so it takes no approval gate.
func (b *Binding) validateFunction(bad func(field, format string, args ...any) error) error {
	const why = "a function tool is answered by the application (POST /tool_calls/{id}/respond), not called"
	switch {
	case b.URL != "":
		return bad("url", "%s: remove url, or remove \"type\": %q to call the tool at url", why, TypeFunction)
	case b.TokenEnv != "":
		return bad("token_env", "%s, so no token is sent", why)
	case b.MCPTool != "":
		return bad("mcp_tool", "%s on an MCP server", why)
	case b.InspectSession:
		return bad("inspect_session", "%s, so it gets no inspection token", why)
	case b.Gated():
		return bad("require_approval", "a function tool cannot be gated: the application that answers it decides on the call")
	}
	return nil
}

// ValidateURL applies the contract's rule for a binding's url: http or
// https, a host, no credentials, no fragment.
func ValidateURL(raw string) error {
	if raw == "" {
		return fmt.Errorf("required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a valid URL: %v", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme must be http or https, got %q", u.Scheme)
	case u.Hostname() == "":
		return fmt.Errorf("has no host")
	case strings.HasSuffix(u.Host, ":"):
		return fmt.Errorf("has an empty port after %q", u.Host)
	case u.Port() != "" && !validPort(u.Port()):
		return fmt.Errorf("port %q is not a number from 1 to 65535", u.Port())
	case u.User != nil:
		return fmt.Errorf("must not contain credentials")
	case u.Fragment != "" || u.RawFragment != "" || bytes.ContainsRune([]byte(raw), '#'):
		return fmt.Errorf("must not contain a fragment")
	}
	return nil
}

// Timeout returns the binding's whole-call limit, applying the default.
func (b *Binding) Timeout() time.Duration {
	if b.TimeoutSeconds == 0 {
		return DefaultTimeoutSeconds * time.Second
	}
	return time.Duration(b.TimeoutSeconds) * time.Second
}

// OutputLimit returns the binding's response size cap in bytes, applying
// the default.
func (b *Binding) OutputLimit() int64 {
	if b.MaxOutputBytes == 0 {
		return DefaultMaxOutputBytes
	}
	return b.MaxOutputBytes
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == p
}
