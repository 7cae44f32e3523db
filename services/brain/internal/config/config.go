// Package config loads and checks brain's host config: the tool bindings of
// the contract's "Configure a tool" table and the API keys that map clients
// to tenants.
//
// The file is JSON, decoded strictly (unknown fields, field names in the
// wrong case, keys written twice in one object, trailing data and wrong
// types are refused):
//
//	{"tools": [<binding>, ...], "api_keys": [{"env": "BRAIN_API_KEY", "tenant": "local"}, ...],
//	 "approvals": {"tool": "request_approval", "cancel_tool": "approval_cancel", "timeout_seconds": 300}}
//
// approvals is optional: it names the approval tool brain calls for a gated
// call (a binding with require_approval "always", or one a session gates),
// so that an operator answers on the approval page, the tool brain
// withdraws such an approval with once the gated call no longer waits for
// it, and how long a gated call waits for its answer.
//
// Every binding is checked when brain starts, as the contract requires, and
// every error names the binding and the field at fault, for example
// `tools[1] "echo": timeout_seconds: must be from 1 to 86400, got 0`.
package config

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/bearer"
	"github.com/brain-tools/suite/pkg/schema"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
)

// MaxFileBytes caps the host config file Load reads (8 MiB).
const MaxFileBytes = 8 << 20

// Config is a checked host config: every binding valid, its schemas
// compiled, its token resolved, every API key resolved.
type Config struct {
	// Tools are the bindings in file order; names are unique.
	Tools []*Tool
	// APIKeys map client bearer tokens to tenants; values are unique.
	APIKeys []APIKey
	// Approvals is how gated calls are answered.
	Approvals Approvals

	byName map[string]*Tool
	// broken are the quoted names of bindings that failed to parse: a
	// reference to one is not also "not a binding".
	broken []string
}

// Approvals configures approval gates (the host config's approvals
// object). A gated call waits in requires_input for an answer through
// POST /tool_calls/{id}/respond, and, when Tool is set, brain also calls
// Tool for it (a child call whose parent_id is the gated call) so that an
// operator answers on the approval page.
type Approvals struct {
	// Tool is the approval tool, a binding of this config that takes
	// {"action", "details", "timeout_seconds"} and answers with
	// structured_content {"decision": approved|denied|expired|cancelled,
	// "operator", "comment"}: the local service's request_approval. nil
	// when approvals.tool is not set.
	Tool *Tool
	// CancelTool withdraws the approval an approval call asked for, named
	// by that call's ID ({"call_id": ...}: the local service's
	// approval_cancel), once its gated call stops waiting for it another
	// way (answered through the API, expired, cancelled, its session
	// ended). nil when approvals.cancel_tool is not set: the approval tool
	// is left to notice the dropped stream.
	CancelTool *Tool
	// Timeout is how long a gated call waits for its answer
	// (approvals.timeout_seconds, 1 to 86400, default 300 s); then it ends
	// failed with approval_expired.
	Timeout time.Duration
	// DetailsMaxChars is the longest details Tool takes, in characters:
	// the maxLength of its input_schema's properties.details (16384 for
	// local's request_approval); 0 when it declares none. brain shows a
	// gated call's arguments in full when they fit, and otherwise their
	// beginning under a notice that says so.
	DetailsMaxChars int
}

// MinApprovalDetailsChars is the shortest details an approval tool must
// take: room for where a gated call comes from, the notice of arguments
// too long to show in full, and the beginning of the arguments.
const MinApprovalDetailsChars = 1024

// DefaultApprovalTimeoutSeconds is approvals.timeout_seconds when unset.
const DefaultApprovalTimeoutSeconds = 300

// approvalsJSON is the approvals object as written.
type approvalsJSON struct {
	Tool           *string `json:"tool"`
	CancelTool     *string `json:"cancel_tool"`
	TimeoutSeconds *int    `json:"timeout_seconds"`
}

// ApprovalSample is what brain sends an approval tool, with the largest
// timeout_seconds a config may ask for and details of
// MinApprovalDetailsChars characters: Parse checks that the tool takes it.
func ApprovalSample(timeoutSeconds int) json.RawMessage {
	data, _ := json.Marshal(map[string]any{"action": "Call tool x", "details": strings.Repeat("d", MinApprovalDetailsChars), "timeout_seconds": timeoutSeconds})
	return data
}

// detailsMaxLength reads the maxLength an approval tool's input schema
// declares for details (0 when it declares none there).
func detailsMaxLength(inputSchema json.RawMessage) int {
	var s struct {
		Properties struct {
			Details struct {
				MaxLength *float64 `json:"maxLength"`
			} `json:"details"`
		} `json:"properties"`
	}
	if json.Unmarshal(inputSchema, &s) != nil || s.Properties.Details.MaxLength == nil || *s.Properties.Details.MaxLength < 0 {
		return 0
	}
	return int(min(*s.Properties.Details.MaxLength, 1<<31))
}

// CancelSample is what brain sends a cancel tool: the ID of the approval
// call whose approval it withdraws. Parse checks that the tool takes it.
func CancelSample() json.RawMessage {
	return json.RawMessage(`{"call_id":"call_0123456789abcdefghijklmnop"}`)
}

// APIKey maps the value of an environment variable, a client's bearer
// token, to a tenant. The value itself is kept unexported so that printing
// or logging a Config never shows it.
type APIKey struct {
	// Env names the environment variable holding the key. Required.
	Env string `json:"env"`
	// Tenant is the tenant a request with this key acts for. Required.
	Tenant string `json:"tenant"`

	sum   [sha256.Size]byte
	short bool // the key has fewer than bearer.MinTokenBytes bytes
}

// Short reports whether the key is shorter than bearer.MinTokenBytes (16
// bytes): accepted, but brain warns at start.
func (k APIKey) Short() bool { return k.short }

// CatalogEntry is what GET /catalog shows of a binding: never its url,
// token_env, secret or limits (the contract's "Enable tools for a session").
//
// Type is "function" for a function tool, whose calls the application
// answers; RequireApproval is "always" for a gated tool. Both are omitted
// otherwise. Source says which is which: "host_config" for the operator's
// bindings, "custom" for the tenant's own custom tools, which also carry
// their ID and current_revision_id (null for a host-config binding, as the
// peer's built-in tools have none). Shadowed marks a custom tool whose
// name a host-config binding of the tenant has taken since: the binding
// is the one a session gets by that name.
type CatalogEntry struct {
	Name              string          `json:"name"`
	Description       string          `json:"description"`
	InputSchema       json.RawMessage `json:"input_schema"`
	OutputSchema      json.RawMessage `json:"output_schema,omitempty"`
	Type              string          `json:"type,omitempty"`
	RequireApproval   string          `json:"require_approval,omitempty"`
	Source            string          `json:"source"`
	ID                string          `json:"id,omitempty"`
	CurrentRevisionID *string         `json:"current_revision_id"`
	Shadowed          bool            `json:"shadowed,omitempty"`
}

// Catalog sources (CatalogEntry.Source).
const (
	SourceHostConfig = "host_config"
	SourceCustom     = "custom"
)

type file struct {
	Tools     []json.RawMessage `json:"tools"`
	APIKeys   []json.RawMessage `json:"api_keys"`
	Approvals *approvalsJSON    `json:"approvals"`
}

// Load reads the host config at path (at most MaxFileBytes) and checks it
// with Parse. getenv resolves token_env and api_keys variables; nil means
// os.Getenv.
func Load(path string, getenv func(string) string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data, getenv)
	if err != nil {
		return nil, fmt.Errorf("load config %s: %w", path, err)
	}
	return c, nil
}

// Parse checks a host config document. It reports every invalid binding
// and API key, each error on its own line (errors.Join) and naming the entry
// ("tools[1] \"echo\"", "api_keys[0]") and the field. getenv resolves
// token_env and api_keys variables; nil means os.Getenv. A variable that is
// unset or empty counts as not set.
//
// Beyond each entry's own rules it refuses: a key written twice in any
// object of the document (encoding/json would keep the last silently) or a
// field name in the wrong case; no api_keys at all (no client could call
// brain); and a binding tenant that no api_keys entry maps to (nobody could
// call the tool for that tenant).
func Parse(data []byte, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("config: must be a JSON object with tools and api_keys")
	}
	var f file
	// Duplicate names are found below, all of them, each named by binding.
	if err := strictjson.UnmarshalKeepingDuplicates(data, &f); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c := &Config{byName: map[string]*Tool{}}
	var errs []error
	dups, err := duplicateKeys(data)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	for _, d := range dups {
		errs = append(errs, duplicateError(d, f.Tools))
	}
	firstIndex := map[string]int{}
	for i, raw := range f.Tools {
		t, err := parseTool(raw, getenv)
		if err != nil {
			errs = append(errs, fmt.Errorf("tools[%d]%s: %w", i, quotedName(raw), err))
			if name := quotedName(raw); name != "" {
				c.broken = append(c.broken, name)
			}
			continue
		}
		if j, dup := firstIndex[t.Name]; dup {
			errs = append(errs, fmt.Errorf("tools[%d] %q: name: duplicate of tools[%d]; names are unique within the host config", i, t.Name, j))
			continue
		}
		firstIndex[t.Name] = i
		c.Tools = append(c.Tools, t)
		c.byName[t.Name] = t
	}
	seen := map[[sha256.Size]byte]int{}
	keyTenants := map[string]bool{}
	if len(f.APIKeys) == 0 {
		errs = append(errs, errors.New(`api_keys: required: at least one {"env": ..., "tenant": ...} entry; without one no client can call brain`))
	}
	for i, raw := range f.APIKeys {
		k, err := parseAPIKey(raw, getenv)
		if k.Tenant != "" {
			keyTenants[k.Tenant] = true
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("api_keys[%d]: %w", i, err))
			continue
		}
		if j, dup := seen[k.sum]; dup {
			errs = append(errs, fmt.Errorf("api_keys[%d]: env: %s has the same value as api_keys[%d]; every API key must be distinct", i, k.Env, j))
			continue
		}
		seen[k.sum] = i
		c.APIKeys = append(c.APIKeys, k)
	}
	if len(f.APIKeys) > 0 {
		for _, t := range c.Tools {
			for j, tenant := range t.Tenants {
				if !keyTenants[tenant] {
					errs = append(errs, fmt.Errorf("tools[%d] %q: tenants[%d]: tenant %q has no api_keys entry, so nobody could call this tool for it", firstIndex[t.Name], t.Name, j, tenant))
				}
			}
		}
	}
	errs = append(errs, c.parseApprovals(f.Approvals, firstIndex)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// parseApprovals checks the approvals object: tool names a binding that
// brain can call for any gated call (not a function tool, not gated
// itself, allowed for every tenant of a binding that is always gated, and
// taking ApprovalSample's arguments); cancel_tool, which needs tool, one
// brain can call for every tenant tool is allowed for, taking
// CancelSample's; timeout_seconds is 1..86400.
func (c *Config) parseApprovals(a *approvalsJSON, index map[string]int) []error {
	c.Approvals.Timeout = DefaultApprovalTimeoutSeconds * time.Second
	if a == nil {
		return nil
	}
	var errs []error
	if a.TimeoutSeconds != nil {
		if n := *a.TimeoutSeconds; n < 1 || n > tool.MaxTimeoutSeconds {
			errs = append(errs, fmt.Errorf("approvals: timeout_seconds: must be from 1 to %d, got %d", tool.MaxTimeoutSeconds, n))
		} else {
			c.Approvals.Timeout = time.Duration(n) * time.Second
		}
	}
	if a.Tool == nil {
		if a.CancelTool != nil {
			errs = append(errs, errors.New("approvals: cancel_tool: needs approvals.tool: brain withdraws only the approvals it asked for with it"))
		}
		return errs
	}
	name := *a.Tool
	t, err := c.approvalsBinding("tool", "the approval tool", "answer gated calls through the API only", name)
	if t == nil {
		return appendErr(errs, err)
	}
	secs := int(c.Approvals.Timeout / time.Second)
	if err := t.ValidateArguments(ApprovalSample(secs)); err != nil {
		errs = append(errs, fmt.Errorf("approvals: tool: %q does not take brain's approval request {action, details of %d characters, timeout_seconds: %d}: %v", name, MinApprovalDetailsChars, secs, err))
	}
	c.Approvals.DetailsMaxChars = detailsMaxLength(t.InputSchema)
	for _, g := range c.Tools {
		if !g.Gated() {
			continue
		}
		for j, tenant := range g.Tenants {
			if !t.Allowed(tenant) {
				errs = append(errs, fmt.Errorf("tools[%d] %q: tenants[%d]: approvals.tool %q is not allowed for tenant %q, so nobody could answer this tool's gated calls on the approval page", index[g.Name], g.Name, j, name, tenant))
			}
		}
	}
	var ct *Tool
	if a.CancelTool != nil {
		cname := *a.CancelTool
		if ct, err = c.approvalsBinding("cancel_tool", "the tool that withdraws an approval", "leave dropped approvals to the approval tool", cname); ct == nil {
			errs = appendErr(errs, err)
		} else {
			if err := ct.ValidateArguments(CancelSample()); err != nil {
				errs = append(errs, fmt.Errorf("approvals: cancel_tool: %q does not take brain's withdrawal {call_id: the approval call's ID}: %v", cname, err))
			}
			for _, tenant := range t.Tenants {
				if !ct.Allowed(tenant) {
					errs = append(errs, fmt.Errorf("approvals: cancel_tool: %q is not allowed for tenant %q, which approvals.tool %q is: brain could not withdraw that tenant's approvals", cname, tenant, name))
				}
			}
		}
	}
	if len(errs) == 0 {
		c.Approvals.Tool, c.Approvals.CancelTool = t, ct
	}
	return errs
}

// approvalsBinding is the binding approvals.<field> names, the role it
// plays and what omitting the field does said in its errors: one brain
// calls itself (not a function tool, not gated). It returns nil with the
// error, or with none when the binding named failed to parse (its own
// errors are reported).
func (c *Config) approvalsBinding(field, role, omit, name string) (*Tool, error) {
	t, ok := c.byName[name]
	switch {
	case name == "":
		return nil, fmt.Errorf("approvals: %s: must name a binding (%s); omit it to %s", field, role, omit)
	case !ok && slices.Contains(c.broken, fmt.Sprintf(" %q", name)):
		return nil, nil
	case !ok:
		return nil, fmt.Errorf("approvals: %s: %q is not a binding of this config", field, name)
	case t.Function():
		return nil, fmt.Errorf("approvals: %s: %q is a function tool; %s must be one brain calls", field, name, role)
	case t.Gated():
		return nil, fmt.Errorf("approvals: %s: %q has require_approval %q; %s cannot wait for an approval itself", field, name, tool.ApprovalAlways, role)
	}
	return t, nil
}

// appendErr appends err to errs unless it is nil.
func appendErr(errs []error, err error) []error {
	if err != nil {
		return append(errs, err)
	}
	return errs
}

// duplicateError names the entry and the field of a duplicate key, e.g.
// `tools[1] "echo": input_schema.properties.text: duplicate key ...`.
func duplicateError(d duplicateKey, tools []json.RawMessage) error {
	const problem = "duplicate key: written more than once in the same object (JSON decoders keep only one of them, silently)"
	path := append(append([]any(nil), d.Path...), d.Key)
	if len(path) >= 3 {
		if i, ok := path[1].(int); ok {
			switch path[0] {
			case "tools":
				name := ""
				if i < len(tools) {
					name = quotedName(tools[i])
				}
				return fmt.Errorf("tools[%d]%s: %s: %s", i, name, fieldPath(path[2:]), problem)
			case "api_keys":
				return fmt.Errorf("api_keys[%d]: %s: %s", i, fieldPath(path[2:]), problem)
			}
		}
	}
	return fmt.Errorf("config: %s: %s", fieldPath(path), problem)
}

// quotedName returns ` "name"` for a binding whose name can be read, so
// that an error names the binding even when another field is broken.
func quotedName(raw json.RawMessage) string {
	var head struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &head) != nil || head.Name == "" {
		return ""
	}
	return fmt.Sprintf(" %q", head.Name)
}

func parseAPIKey(raw json.RawMessage, getenv func(string) string) (APIKey, error) {
	var k APIKey
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return k, errors.New(`must be an object {"env": ..., "tenant": ...}`)
	}
	if err := strictjson.UnmarshalKeepingDuplicates(raw, &k); err != nil {
		return k, err
	}
	switch {
	case k.Env == "":
		return k, errors.New("env: required: the environment variable holding the key")
	case k.Tenant == "":
		return k, errors.New("tenant: required")
	}
	v := getenv(k.Env)
	if v == "" {
		return k, fmt.Errorf("env: %s is not set", k.Env)
	}
	if err := bearer.CheckToken(v); err != nil {
		return k, fmt.Errorf("env: %s %w", k.Env, err)
	}
	k.short = len(v) < bearer.MinTokenBytes
	k.sum = sha256.Sum256([]byte(v))
	return k, nil
}

// Tool returns the binding named name.
func (c *Config) Tool(name string) (*Tool, bool) {
	t, ok := c.byName[name]
	return t, ok
}

// TenantForKey returns the tenant of the API key equal to key (APIKeyFor).
func (c *Config) TenantForKey(key string) (tenant string, ok bool) {
	k, ok := c.APIKeyFor(key)
	return k.Tenant, ok
}

// APIKeyFor returns the API key equal to key. It compares SHA-256 digests
// in constant time against every key, so neither the position of a match
// nor the length of a key shows in the timing.
func (c *Config) APIKeyFor(key string) (k APIKey, ok bool) {
	if key == "" {
		return APIKey{}, false
	}
	sum := sha256.Sum256([]byte(key))
	for _, cand := range c.APIKeys {
		if subtle.ConstantTimeCompare(sum[:], cand.sum[:]) == 1 && !ok {
			k, ok = cand, true
		}
	}
	return k, ok
}

// Catalog lists, in config order, the bindings tenant may use.
func (c *Config) Catalog(tenant string) []CatalogEntry {
	out := []CatalogEntry{}
	for _, t := range c.Tools {
		if t.Allowed(tenant) {
			e := CatalogEntry{
				Name:         t.Name,
				Description:  t.Description,
				InputSchema:  t.InputSchema,
				OutputSchema: t.OutputSchema,
				Type:         t.Type,
				Source:       SourceHostConfig,
			}
			if t.Gated() {
				e.RequireApproval = tool.ApprovalAlways
			}
			out = append(out, e)
		}
	}
	return out
}

// Tool is one checked binding. The embedded Binding has its defaults
// applied (TimeoutSeconds and MaxOutputBytes are never 0).
type Tool struct {
	tool.Binding
	// Token is the value of TokenEnv, sent as a bearer token; empty when
	// the binding has no token_env. Never logged (see LogValue). For a
	// custom tool it is its tenant secret, for a session's MCP server its
	// authorization.
	Token string
	// Origin is OriginHost, OriginCustom or OriginSession: bindings of a
	// tenant's own making are dialed through the SSRF guard.
	Origin string
	// Headers are sent with every request to a session's MCP server (its
	// headers, all secrets); nil otherwise. Never logged.
	Headers http.Header
	// ToolID and RevisionID name the custom tool and the revision the
	// binding was made of (a call records the revision); SecretName is the
	// tenant secret its Token comes from. Empty for other bindings.
	ToolID, RevisionID, SecretName string
	// Server names the session MCP server serving the tool ("" otherwise).
	Server string

	input   *schema.Schema
	output  *schema.Schema // nil without output_schema
	tenants map[string]struct{}
}

// Allowed reports whether tenant may use the tool (it is in tenants).
func (t *Tool) Allowed(tenant string) bool {
	_, ok := t.tenants[tenant]
	return ok
}

// Timeout is the whole-call limit of the binding's timeout_seconds.
func (t *Tool) Timeout() time.Duration {
	return t.Binding.Timeout()
}

// MaxOutputBytes is the binding's response cap in bytes (max_output_bytes).
func (t *Tool) MaxOutputBytes() int64 {
	return t.Binding.OutputLimit()
}

// ValidateArguments checks args, which must be a JSON object (the tool
// contract's request body carries the arguments as one), against
// input_schema (draft 2020-12 unless the schema says otherwise, format
// asserted). The error names the JSON pointer of each failing value, e.g.
// `arguments: at "/text": maxLength: got 5000, want 4096`.
func (t *Tool) ValidateArguments(args json.RawMessage) error {
	if t.input == nil {
		return errors.New("arguments: tool has no compiled input_schema")
	}
	return t.input.ValidateObject("arguments", args)
}

// ValidateOutput checks a successful result's structured_content against
// output_schema; it returns nil when the binding has none.
func (t *Tool) ValidateOutput(structured json.RawMessage) error {
	if t.output == nil {
		return nil
	}
	return t.output.Validate("structured_content", structured)
}

// HasOutputSchema reports whether the binding sets output_schema.
func (t *Tool) HasOutputSchema() bool { return t.output != nil }

// LogValue keeps the token out of logs: a Tool logs as its name.
func (t *Tool) LogValue() slog.Value { return slog.StringValue(t.Name) }

// String names the tool without its token.
func (t *Tool) String() string { return "tool " + t.Name }

func parseTool(raw json.RawMessage, getenv func(string) string) (*Tool, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("must be a binding object")
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(raw, &present); err != nil {
		return nil, fmt.Errorf("must be a binding object: %w", err)
	}
	var b tool.Binding
	if err := strictjson.UnmarshalKeepingDuplicates(raw, &b); err != nil {
		return nil, err
	}
	// Binding.Validate reads 0 and "" as "not set"; a field written out
	// with such a value is a mistake the contract's ranges refuse.
	if _, ok := present["timeout_seconds"]; ok && b.TimeoutSeconds == 0 {
		return nil, fmt.Errorf("timeout_seconds: must be from 1 to %d, got 0", tool.MaxTimeoutSeconds)
	}
	if _, ok := present["max_output_bytes"]; ok && b.MaxOutputBytes == 0 {
		return nil, fmt.Errorf("max_output_bytes: must be from 1 to %d (2 MiB), got 0", tool.MaxOutputBytesLimit)
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(b.Description) == "" {
		return nil, errors.New("description: required: must not be blank")
	}
	if _, ok := present["token_env"]; ok && b.TokenEnv == "" {
		return nil, errors.New("token_env: must name an environment variable; omit it for no token")
	}
	if _, ok := present["mcp_tool"]; ok && b.MCPTool == "" {
		return nil, errors.New("mcp_tool: must name the remote tool; omit it for an HTTP tool")
	}
	if _, ok := present["type"]; ok && b.Type == "" {
		return nil, fmt.Errorf("type: must be %q; omit it for a tool brain calls at url", tool.TypeFunction)
	}
	if _, ok := present["require_approval"]; ok && b.RequireApproval == "" {
		return nil, fmt.Errorf("require_approval: must be %q or %q, got \"\"", tool.ApprovalAlways, tool.ApprovalNever)
	}
	if _, ok := present["max_concurrency"]; ok && b.MaxConcurrency == 0 {
		return nil, fmt.Errorf("max_concurrency: must be from 1 to %d, got 0; omit it for no cap", tool.MaxConcurrencyLimit)
	}
	t, err := build(b)
	if err != nil {
		return nil, err
	}
	if b.TokenEnv != "" {
		if t.Token = getenv(b.TokenEnv); t.Token == "" {
			return nil, fmt.Errorf("token_env: %s is not set", b.TokenEnv)
		}
		// Such a token could not go in an Authorization header: every call
		// of the tool would fail at the transport.
		if err := bearer.CheckToken(t.Token); err != nil {
			return nil, fmt.Errorf("token_env: %s %w", b.TokenEnv, err)
		}
	}
	return t, nil
}

// build makes a checked binding of b, already validated: defaults
// applied, tenants indexed (each once), schemas compiled.
func build(b tool.Binding) (*Tool, error) {
	t := &Tool{Binding: b, tenants: map[string]struct{}{}}
	t.Binding.TimeoutSeconds = int(b.Timeout() / time.Second)
	t.Binding.MaxOutputBytes = b.OutputLimit()
	first := map[string]int{}
	for i, name := range b.Tenants {
		if j, dup := first[name]; dup {
			return nil, fmt.Errorf("tenants[%d]: %q is listed twice (also tenants[%d])", i, name, j)
		}
		first[name] = i
		t.tenants[name] = struct{}{}
	}
	var err error
	if t.input, err = schema.Compile("input_schema", b.InputSchema); err != nil {
		return nil, err
	}
	if err := objectType(b.InputSchema); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(b.OutputSchema)) > 0 {
		if t.output, err = schema.Compile("output_schema", b.OutputSchema); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Origins of a binding (Tool.Origin).
const (
	// OriginHost: a binding of the operator's host config, called at its
	// trusted url.
	OriginHost = ""
	// OriginCustom: a tenant's custom tool, made through brain's API; its
	// url is the tenant's, dialed through the SSRF guard.
	OriginCustom = "custom"
	// OriginSession: a tool of one session's tool set — a function tool,
	// or a tool of an MCP server the tenant named (dialed through the
	// guard).
	OriginSession = "session"
)

// ToolOptions are what NewTool sets beyond the binding.
type ToolOptions struct {
	// Origin is OriginCustom or OriginSession.
	Origin string
	// Name, when set, is the name the tool is called by instead of the
	// binding's: "server.tool" for an MCP server's tool in a session,
	// which no binding name can be (it has a dot), so it collides with
	// nothing.
	Name string
	// Token is sent as Authorization: Bearer (a custom tool's secret, an
	// MCP server's authorization).
	Token string
	// Headers are sent with every request to a session's MCP server.
	Headers http.Header
	// ToolID and RevisionID name a custom tool and the revision the
	// binding is made of; SecretName the tenant secret of its token.
	ToolID, RevisionID, SecretName string
	// Server is the name of the session MCP server the tool is served by.
	Server string
}

// NewTool checks b as a host-config binding is checked (every rule of the
// contract's binding table; errors name the field) and returns it with o
// applied: the bindings brain makes at run time — a tenant's custom tools
// and the tools of a session's tool set — go through the same checks and
// the same compiled schemas as the operator's.
func NewTool(b tool.Binding, o ToolOptions) (*Tool, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(b.Description) == "" {
		return nil, &strictjson.FieldError{Field: "description", Problem: "required: must not be blank"}
	}
	t, err := build(b)
	if err != nil {
		return nil, err
	}
	t.Origin, t.Token, t.Headers = o.Origin, o.Token, o.Headers
	t.ToolID, t.RevisionID, t.SecretName, t.Server = o.ToolID, o.RevisionID, o.SecretName, o.Server
	if o.Name != "" {
		t.Name = o.Name
	}
	return t, nil
}

// WithToken returns a copy of t that sends token (a custom tool's secret,
// read for each call).
func (t *Tool) WithToken(token string) *Tool {
	cp := *t
	cp.Token = token
	return &cp
}

// Trusted reports whether t's url is the operator's (a host-config
// binding), and so is dialed without the SSRF guard.
func (t *Tool) Trusted() bool { return t.Origin == OriginHost }

// ShortToken reports whether the tool's token is shorter than
// bearer.MinTokenBytes (16 bytes): accepted, but brain warns at start.
func (t *Tool) ShortToken() bool { return t.Token != "" && len(t.Token) < bearer.MinTokenBytes }

// objectType refuses an input_schema whose top-level type is set and does
// not allow "object": brain sends a tool's arguments as a JSON object and
// refuses any other arguments, so such a tool could never be called. A type
// list that includes "object" (["object", "null"]) is accepted. Keywords are
// case-sensitive, so only "type" counts.
func objectType(inputSchema json.RawMessage) error {
	var kw map[string]json.RawMessage
	if json.Unmarshal(inputSchema, &kw) != nil {
		return nil // a boolean schema: Compile has judged it
	}
	typ, ok := kw["type"]
	if !ok {
		return nil
	}
	var one string
	if json.Unmarshal(typ, &one) == nil {
		if one != "object" {
			return fmt.Errorf(`input_schema: type: must be "object" (brain sends arguments as a JSON object and refuses any other), got %q`, one)
		}
		return nil
	}
	var many []string
	if json.Unmarshal(typ, &many) == nil && !slices.Contains(many, "object") {
		return fmt.Errorf(`input_schema: type: must include "object" (brain sends arguments as a JSON object and refuses any other), got %s`, typ)
	}
	return nil
}
