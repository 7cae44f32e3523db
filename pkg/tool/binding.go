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
// field of the contract's binding table. A tool service publishes its own
// bindings at GET /tools so that a host config can be generated.
type Binding struct {
	// Name is what the model sees: a letter, then up to 63 letters, digits
	// or underscores. Unique within a host config.
	Name string `json:"name"`
	// Description tells the model when to call the tool. Required.
	Description string `json:"description"`
	// InputSchema is the JSON Schema (draft 2020-12 by default) of the
	// arguments. Required; must be a JSON object.
	InputSchema json.RawMessage `json:"input_schema"`
	// OutputSchema optionally validates successful structured_content.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// URL is the http(s) endpoint the host POSTs calls to: no credentials,
	// no fragment.
	URL string `json:"url"`
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
	if err := ValidateURL(b.URL); err != nil {
		return bad("url", "%v", err)
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
