package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/brain-tools/suite/pkg/bearer"
	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
	"github.com/brain-tools/suite/services/brain/internal/mcpcall"
	"github.com/brain-tools/suite/services/brain/internal/seal"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/julienschmidt/httprouter"
)

// A session's tool set (after the second peer, seed 003): one PUT
// /sessions/{id}/tools replaces it whole, GET reads it back in the same
// vocabulary with its secrets withheld. Entries:
//
//	{"name": "echo"}                                  a tool of the tenant's catalog (host config or custom)
//	{"type": "function", "name", "description",       a function tool the application answers
//	 "parameters"?, "timeout_seconds"?}               (requires_input, POST /tool_calls/{id}/respond)
//	{"type": "mcp", "name", "url", "headers"?,         an MCP server (Streamable HTTP); its tools are
//	 "authorization"?, "allowed_tools"?, "required"?}  called "name.tool"
//
// Naming only narrows: a catalog entry grants a tool only while the
// tenant's catalog has it (a host config reload or a deleted custom tool
// takes it away, and the read-back says so); an MCP server's tools are
// those it lists, narrowed by allowed_tools. A session created with
// config.tools (or config.toolset_id) and never given a set with PUT has
// those tools as catalog entries.
//
// An MCP server's tools are listed when the set is applied. One that
// cannot be listed is recorded (mcp.unavailable; its read-back keeps
// allowed_tools as asked and says status "unavailable" and the reason, so
// that nothing reads as in force that is not); when it is required, every
// tool call of the session is refused with invalid_request naming the
// server and the cause — after brain has tried the server once more —
// until it answers or the set changes. An MCP tool's exposed name has a dot, which no catalog,
// function or server name may have, so it collides with none of them.

// Limits of a session's tool set.
const (
	// MaxSessionTools is the most entries of a tool set (the peer's 32).
	MaxSessionTools = 32
	// MaxToolNameChars is the longest entry name (the peer's 1–64).
	MaxToolNameChars = 64
	// MaxMCPHeaders is the most headers of one MCP server entry.
	MaxMCPHeaders = 32
	// MaxMCPSecretBytes is the longest header value or authorization.
	MaxMCPSecretBytes = 4096
	// MaxAllowedTools is the longest allowed_tools.
	MaxAllowedTools = 128
	// MaxServerTools is the most tools one MCP server gives a session;
	// past it, the server's later tools are left out.
	MaxServerTools = 128
	// MaxLeftOutListed is the most tools an mcp entry's read-back lists in
	// left_out; its reason counts the rest.
	MaxLeftOutListed = 32
	// maxListPages bounds the tools/list pages read of one server.
	maxListPages = 20
)

// Entry types.
const (
	entryCatalog  = ""
	entryFunction = "function"
	entryMCP      = "mcp"
)

// entryFields is what each entry type accepts, in the order a refusal
// lists them.
var entryFields = map[string][]string{
	entryCatalog:  {"name"},
	entryFunction: {"type", "name", "description", "parameters", "timeout_seconds"},
	entryMCP:      {"type", "name", "url", "headers", "authorization", "allowed_tools", "required"},
}

func entryKind(typ string) string {
	switch typ {
	case entryFunction:
		return "a function entry"
	case entryMCP:
		return "an mcp entry"
	}
	return `a catalog entry ({"name": ...}; add "type": "function" or "mcp" for the others)`
}

// reservedHeaders are headers of the MCP transport and of HTTP itself,
// which an entry's headers may not set.
var reservedHeaders = []string{"Authorization", "Accept", "Content-Type", "Content-Length", "Host", "Connection",
	"Transfer-Encoding", "Te", "Upgrade", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id", "Traceparent", "Tracestate"}

// mcpToolRE is the MCP tool-name rule (2025-11-25, "Tool names").
var mcpToolRE = regexp.MustCompile(`^[A-Za-z0-9_./-]{1,128}$`)

// sessionEntry is one entry of a tool set as brain keeps it; stored with
// its secrets sealed (SealedAuthorization, SealedHeaders), held in memory
// with them open (authorization, headers).
type sessionEntry struct {
	Type           string          `json:"type,omitempty"`
	Name           string          `json:"name"`
	Description    string          `json:"description,omitempty"`
	Parameters     json.RawMessage `json:"parameters,omitempty"`
	TimeoutSeconds int             `json:"timeout_seconds,omitempty"`
	URL            string          `json:"url,omitempty"`
	// AllowedTools is allowed_tools as asked; nil when omitted (all).
	AllowedTools        []string          `json:"allowed_tools"`
	Required            bool              `json:"required,omitempty"`
	SealedAuthorization []byte            `json:"sealed_authorization,omitempty"`
	SealedHeaders       map[string][]byte `json:"sealed_headers,omitempty"`
	// Listed are the server's tools the session has, as listed when the
	// set was applied (after allowed_tools); Unavailable why it could not
	// be listed ("" when it was).
	Listed      []listedTool `json:"listed,omitempty"`
	Unavailable string       `json:"unavailable,omitempty"`
	// LeftOut are tools of the server that allowed_tools allows and the
	// session did not get when it was listed, with why (at most
	// MaxLeftOutListed); Partial says why the listing may hold more than
	// LeftOut and Listed show ("" when it does not).
	LeftOut []leftOutTool `json:"left_out,omitempty"`
	Partial string        `json:"partial,omitempty"`

	authorization string
	headers       http.Header
}

// leftOutTool is a tool of an MCP server that a session does not get
// although its allowed_tools allows it, and why.
type leftOutTool struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// listedTool is one tool an MCP server listed.
type listedTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// toolSet is a session's tool set in memory: its entries and the bindings
// of its function and MCP tools by the name they are called.
type toolSet struct {
	// fromConfig: the session was never given a set with PUT; entries are
	// its config.tools, as catalog entries.
	fromConfig bool
	mu         sync.Mutex // guards entries, tools and leftOut; held while a required server is tried again
	entries    []*sessionEntry
	tools      map[string]*config.Tool
	// leftOut says, by the name it would be called, why a stored function
	// tool or MCP tool is not in tools (its schema no longer compiles);
	// never "" for one left out.
	leftOut map[string]string
}

// snapshot is the set's entries and why each tool left out of it is (by
// the name it would be called).
func (ts *toolSet) snapshot() ([]*sessionEntry, map[string]string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.entries), maps.Clone(ts.leftOut)
}

// mcpName is the name an MCP server's tool is called by in a session.
func mcpName(server, tool string) string { return server + "." + tool }

// entryAD binds a sealed value of an MCP entry to its tenant, session,
// server and header ("" for authorization).
func entryAD(tenant, session, server, header string) []byte {
	return seal.AD("mcp", tenant, session, server, header)
}

// build compiles the bindings of the set's function tools and of its MCP
// servers' listed tools for tenant. A function tool was compiled when it
// was given (decodeEntry); one stored by an earlier brain that this one
// no longer compiles (a schema with a reference cycle, refused since) is
// left out with a warning, so the session's other tools go on working:
// its calls are refused as a tool the session does not have, and nothing
// lists it as the session's (its names, the refusal's "enabled:", the
// read-back: a function entry reads "unavailable" with the reason, an MCP
// server's allowed_tools leave the tool out).
func (ts *toolSet) build(s *Server, tenant string) {
	ts.tools, ts.leftOut = map[string]*config.Tool{}, map[string]string{}
	for _, e := range ts.entries {
		switch e.Type {
		case entryFunction:
			t, err := functionTool(tenant, e)
			if err != nil {
				s.log.Warn("function tool left out of a stored session tool set: its parameters do not compile; give the session a tool set without it",
					"tenant_id", tenant, "tool", e.Name, "err", err)
				ts.leftOut[e.Name] = "left out: " + functionToolProblem(err) + "; PUT the set with this entry's parameters fixed, or without it"
				continue
			}
			ts.tools[e.Name] = t
		case entryMCP:
			for _, lt := range e.Listed {
				t, err := mcpTool(tenant, e, lt)
				if err != nil {
					s.log.Warn("mcp tool left out: its binding does not compile", "server", e.Name, "tool", lt.Name, "err", err)
					ts.leftOut[mcpName(e.Name, lt.Name)] = "left out: its schema as listed does not compile: " + err.Error()
					continue
				}
				ts.tools[t.Name] = t
			}
		}
	}
}

// functionToolProblem says why a function entry's binding does not
// compile, naming the entry's field ("parameters: reference cycle: …").
func functionToolProblem(err error) string {
	var fe *strictjson.FieldError
	if errors.As(err, &fe) {
		return strings.ReplaceAll(fe.Field, "input_schema", "parameters") + ": " + fe.Problem
	}
	return strings.ReplaceAll(err.Error(), "input_schema", "parameters")
}

func functionTool(tenant string, e *sessionEntry) (*config.Tool, error) {
	params := e.Parameters
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object"}`)
	}
	return config.NewTool(tool.Binding{Name: e.Name, Description: e.Description, InputSchema: params, Type: tool.TypeFunction,
		Tenants: []string{tenant}, TimeoutSeconds: e.TimeoutSeconds}, config.ToolOptions{Origin: config.OriginSession})
}

func mcpTool(tenant string, e *sessionEntry, lt listedTool) (*config.Tool, error) {
	desc := strings.TrimSpace(lt.Description)
	if desc == "" {
		desc = fmt.Sprintf("MCP tool %s of server %s.", lt.Name, e.Name)
	}
	// The binding is checked under the server's name (a valid binding
	// name) and called by the exposed one.
	return config.NewTool(tool.Binding{Name: e.Name, Description: desc, InputSchema: lt.InputSchema, OutputSchema: lt.OutputSchema,
		URL: e.URL, MCPTool: lt.Name, Tenants: []string{tenant}},
		config.ToolOptions{Origin: config.OriginSession, Name: mcpName(e.Name, lt.Name), Token: e.authorization, Headers: e.headers, Server: e.Name})
}

// decodeToolSet decodes and checks the body of PUT /sessions/{id}/tools:
// {"tools": [...]}, with the read-back's object and session_id taken back
// as they were sent. Every refusal names the field.
func (s *Server) decodeToolSet(ctx context.Context, tenant, sessionID string, data []byte) ([]*sessionEntry, error) {
	var body struct {
		Tools     *[]json.RawMessage `json:"tools"`
		Object    *string            `json:"object"`
		SessionID *string            `json:"session_id"`
	}
	if err := httpapi.DecodeObject(data, &body); err != nil {
		var ae *httpapi.Error
		if errors.As(err, &ae) && strings.Contains(ae.Message, "unknown field") {
			ae.Message += `; the body is {"tools": [...]}`
		}
		return nil, err
	}
	switch {
	case body.Object != nil && *body.Object != "session.tools":
		return nil, httpapi.BadRequest(`object: must be "session.tools" when sent, got %q`, *body.Object)
	case body.SessionID != nil && *body.SessionID != sessionID:
		return nil, httpapi.BadRequest("session_id: %q is not this session (%q)", *body.SessionID, sessionID)
	case body.Tools == nil:
		return nil, httpapi.BadRequest(`tools: required: the whole tool set, which replaces the session's ([] for none)`)
	case len(*body.Tools) > MaxSessionTools:
		return nil, httpapi.BadRequest("tools: %d entries, more than the ceiling of %d tools per session", len(*body.Tools), MaxSessionTools)
	}
	entries := make([]*sessionEntry, 0, len(*body.Tools))
	seen := map[string]int{}
	for i, raw := range *body.Tools {
		e, err := s.decodeEntry(ctx, tenant, i, raw)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[e.Name]; dup {
			return nil, httpapi.BadRequest("tools[%d].name: %q is named twice (also tools[%d]); names are unique within a session's tool set", i, e.Name, j)
		}
		seen[e.Name] = i
		entries = append(entries, e)
	}
	return entries, nil
}

// entryBody is one entry as sent.
type entryBody struct {
	Type           *string            `json:"type"`
	Name           *string            `json:"name"`
	Description    *string            `json:"description"`
	Parameters     json.RawMessage    `json:"parameters"`
	TimeoutSeconds *int               `json:"timeout_seconds"`
	URL            *string            `json:"url"`
	Headers        map[string]*string `json:"headers"`
	Authorization  *string            `json:"authorization"`
	AllowedTools   []*string          `json:"allowed_tools"`
	Required       json.RawMessage    `json:"required"`
	// Status and Reason are a function or mcp entry's read-back fields,
	// taken back as they were read (checked, then ignored: brain compiles
	// the function and lists the server).
	Status json.RawMessage `json:"status"`
	Reason json.RawMessage `json:"reason"`
	// LeftOut is an mcp entry's read-back field, taken back likewise.
	LeftOut json.RawMessage `json:"left_out"`
}

// Statuses of a function or mcp entry's read-back.
const (
	statusAvailable   = "available"
	statusUnavailable = "unavailable"
)

// readBackFields are the fields of a function or mcp entry's read-back
// that are not request fields but go back to PUT as they were read.
var readBackFields = map[string][]string{entryFunction: {"status", "reason"}, entryMCP: {"status", "reason", "left_out"}}

func (s *Server) decodeEntry(ctx context.Context, tenant string, i int, raw json.RawMessage) (*sessionEntry, error) {
	field := fmt.Sprintf("tools[%d]", i)
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		kind := "nothing"
		if len(t) > 0 {
			kind = httpapi.JSONKind(t[0])
		}
		return nil, httpapi.BadRequest(`%s: must be an object such as {"name": "echo"}, got %s`, field, kind)
	}
	var keys map[string]json.RawMessage
	if err := httpapi.DecodeObject(raw, &keys); err != nil {
		return nil, prefixed(field, err)
	}
	if _, ok := keys["redacted"]; ok {
		return nil, httpapi.BadRequest("%s.redacted: not a request field: it names the secrets a read withheld; re-send the secrets themselves (authorization, headers), or build the body from your own source", field)
	}
	typ := entryCatalog
	if rt, ok := keys["type"]; ok {
		if json.Unmarshal(rt, &typ) != nil || (typ != entryFunction && typ != entryMCP) {
			return nil, httpapi.BadRequest(`%s.type: must be "function" or "mcp" (or omitted, for a tool of the tenant's catalog: {"name": ...}), got %s`, field, strictjson.Clip(string(rt), 64))
		}
	}
	accepted := entryFields[typ]
	for _, k := range sortedKeys(keys) {
		if slices.Contains(accepted, k) || slices.Contains(readBackFields[typ], k) {
			continue
		}
		why := "unknown field"
		if typ == entryMCP && (k == "command" || k == "args" || k == "env_refs") {
			why = "brain starts no MCP server processes; it connects to one at url (Streamable HTTP)"
		}
		return nil, httpapi.BadRequest("%s.%s: %s; %s accepts %s", field, strictjson.Clip(k, 64), why, entryKind(typ), strings.Join(accepted, ", "))
	}
	if st, ok := keys["status"]; ok {
		var v string
		if json.Unmarshal(st, &v) != nil || (v != statusAvailable && v != statusUnavailable) {
			how := "it lists the server when the set is applied"
			if typ == entryFunction {
				how = "it compiles the parameters when the set is applied"
			}
			return nil, httpapi.BadRequest(`%s.status: must be "available" or "unavailable" when sent back from a read, got %s (brain says which: %s)`,
				field, strictjson.Clip(string(st), 64), how)
		}
	}
	if rs, ok := keys["reason"]; ok {
		var v string
		if json.Unmarshal(rs, &v) != nil {
			return nil, httpapi.BadRequest("%s.reason: must be a string when sent back from a read, got %s", field, strictjson.Clip(string(rs), 64))
		}
	}
	if lo, ok := keys["left_out"]; ok {
		if t := bytes.TrimSpace(lo); t[0] != '[' {
			return nil, httpapi.BadRequest("%s.left_out: must be an array when sent back from a read, got %s (brain says which tools it left out when it lists the server)",
				field, httpapi.JSONKind(t[0]))
		}
	}
	if rq, ok := keys["required"]; ok {
		if t := bytes.TrimSpace(rq); !bytes.Equal(t, []byte("true")) && !bytes.Equal(t, []byte("false")) {
			got := httpapi.JSONKind(t[0])
			if got != "null" {
				got += " " + strictjson.Clip(string(t), 64)
			}
			if t[0] == '"' {
				got += " (a string is not read as false: false is a choice to make, not a default to fall into)"
			}
			return nil, httpapi.BadRequest("%s.required: must be true or false, got %s", field, got)
		}
	}
	var b entryBody
	if err := httpapi.DecodeObject(raw, &b); err != nil {
		return nil, prefixed(field, err)
	}
	e := &sessionEntry{Type: typ}
	if b.Name == nil {
		return nil, httpapi.BadRequest("%s.name: required", field)
	}
	e.Name = *b.Name
	if n := len([]rune(e.Name)); n < 1 || n > MaxToolNameChars {
		return nil, httpapi.BadRequest("%s.name: must be 1 to %d characters, got %d", field, MaxToolNameChars, n)
	}
	switch typ {
	case entryCatalog:
		if _, ok, err := s.catalogTool(ctx, tenant, e.Name); err != nil {
			return nil, err
		} else if !ok {
			return nil, httpapi.BadRequest("%s.name: unknown tool %q (not in the catalog of tenant %q); a tool the deployment does not give the tenant cannot be named into a session", field, e.Name, tenant)
		}
		return e, nil
	case entryFunction:
		return e, s.checkFunctionEntry(field, tenant, e, &b)
	}
	return e, s.checkMCPEntry(field, e, &b)
}

// prefixed puts field before the field a decoding refusal names
// ("tools[0].description: wrong type"), or before the refusal of the
// whole value ("tools[0]: must be a JSON object").
func prefixed(field string, err error) error {
	var ae *httpapi.Error
	if errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
		var fe *strictjson.FieldError
		switch rest, ok := strings.CutPrefix(ae.Message, "request body: "); {
		case errors.As(ae.Cause, &fe) && fe.Field != "":
			ae.Message = field + "." + fe.Error()
		case ok:
			ae.Message = field + ": " + rest
		default:
			ae.Message = field + "." + ae.Message
		}
	}
	return err
}

func checkEntryName(field string, e *sessionEntry, what string) error {
	if !tool.ValidName(e.Name) {
		return httpapi.BadRequest("%s.name: %q is not a %s name: a letter, then up to 63 letters, digits or underscores", field, e.Name, what)
	}
	return nil
}

func (s *Server) checkFunctionEntry(field, tenant string, e *sessionEntry, b *entryBody) error {
	if err := checkEntryName(field, e, "function tool"); err != nil {
		return err
	}
	if b.Description == nil || strings.TrimSpace(*b.Description) == "" {
		return httpapi.BadRequest("%s.description: required: what the function does, for the model", field)
	}
	e.Description = *b.Description
	if err := checkDescription(field+".description", e.Description); err != nil {
		return err
	}
	if !isNull(b.Parameters) {
		e.Parameters = b.Parameters
	}
	if b.TimeoutSeconds != nil {
		if n := *b.TimeoutSeconds; n < 1 || n > tool.MaxTimeoutSeconds {
			return httpapi.BadRequest("%s.timeout_seconds: must be from 1 to %d, got %d", field, tool.MaxTimeoutSeconds, n)
		}
		e.TimeoutSeconds = *b.TimeoutSeconds
	}
	if _, err := functionTool(tenant, e); err != nil {
		return httpapi.BadRequest("%s.%s", field, functionToolProblem(err))
	}
	return nil
}

func (s *Server) checkMCPEntry(field string, e *sessionEntry, b *entryBody) error {
	if err := checkEntryName(field, e, "server"); err != nil {
		return err
	}
	if b.URL == nil {
		return httpapi.BadRequest("%s.url: required: the server's MCP endpoint (Streamable HTTP)", field)
	}
	e.URL = *b.URL
	if err := checkURLSize(field+".url", e.URL); err != nil {
		return err
	}
	if err := tool.ValidateURL(e.URL); err != nil {
		return httpapi.BadRequest("%s.url: %v", field, err)
	}
	u, _ := url.Parse(e.URL)
	if _, err := s.guard.CheckURL(u); err != nil {
		return httpapi.BadRequest("%s.url: %v (a tenant's MCP server must be at a public address unless the operator allows a range)", field, err)
	}
	if b.Authorization != nil {
		a := *b.Authorization
		switch {
		case a == "":
			return httpapi.BadRequest("%s.authorization: must not be empty; omit it to send none", field)
		case len(a) > MaxMCPSecretBytes:
			return httpapi.BadRequest("%s.authorization: longer than %d bytes", field, MaxMCPSecretBytes)
		}
		if err := bearer.CheckToken(a); err != nil {
			return httpapi.BadRequest("%s.authorization: %v (it is sent as Authorization: Bearer)", field, err)
		}
		e.authorization = a
	}
	if len(b.Headers) > MaxMCPHeaders {
		return httpapi.BadRequest("%s.headers: %d headers, more than %d", field, len(b.Headers), MaxMCPHeaders)
	}
	if len(b.Headers) > 0 {
		e.headers = http.Header{}
	}
	for _, name := range sortedKeys(b.Headers) {
		hf := fmt.Sprintf("%s.headers.%s", field, strictjson.Clip(name, 64))
		v := b.Headers[name]
		canon := http.CanonicalHeaderKey(name)
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			return httpapi.BadRequest("%s: not a valid header name", hf)
		case slices.Contains(reservedHeaders, canon):
			if canon == "Authorization" {
				return httpapi.BadRequest("%s: give the server's token as authorization (sent as Authorization: Bearer)", hf)
			}
			return httpapi.BadRequest("%s: brain sets this header itself", hf)
		case e.headers.Get(canon) != "":
			return httpapi.BadRequest("%s: the header is given twice (names are case-insensitive)", hf)
		case v == nil:
			return httpapi.BadRequest("%s: must be a string, got null", hf)
		case *v == "":
			return httpapi.BadRequest("%s: must not be empty", hf)
		case len(*v) > MaxMCPSecretBytes:
			return httpapi.BadRequest("%s: longer than %d bytes", hf, MaxMCPSecretBytes)
		case !httpguts.ValidHeaderFieldValue(*v):
			return httpapi.BadRequest("%s: not a valid header value (control characters)", hf)
		}
		e.headers.Set(canon, *v)
	}
	if b.AllowedTools != nil {
		if len(b.AllowedTools) > MaxAllowedTools {
			return httpapi.BadRequest("%s.allowed_tools: %d names, more than %d", field, len(b.AllowedTools), MaxAllowedTools)
		}
		e.AllowedTools = []string{}
		for j, n := range b.AllowedTools {
			af := fmt.Sprintf("%s.allowed_tools[%d]", field, j)
			switch {
			case n == nil:
				return httpapi.BadRequest("%s: must be a tool name, got null", af)
			case !mcpToolRE.MatchString(*n):
				return httpapi.BadRequest("%s: %q is not an MCP tool name: 1 to 128 letters, digits, '_', '-', '.' or '/'", af, *n)
			case slices.Contains(e.AllowedTools, *n):
				return httpapi.BadRequest("%s: %q is listed twice", af, *n)
			}
			e.AllowedTools = append(e.AllowedTools, *n)
		}
	}
	e.Required = bytes.Equal(bytes.TrimSpace(b.Required), []byte("true"))
	return nil
}

// listServer lists the tools of MCP server entry e (within the probe
// timeout) and keeps those allowed_tools allows, up to MaxServerTools; on
// failure it records why.
func (s *Server) listServer(ctx context.Context, tenant string, e *sessionEntry) {
	ctx, cancel := context.WithTimeoutCause(ctx, mcpcall.DefaultProbeTimeout, fmt.Errorf("no answer within %s", mcpcall.DefaultProbeTimeout))
	defer cancel()
	d, err := s.tenantMCP.DiscoverEndpoint(ctx, mcpcall.Endpoint{URL: e.URL, Token: e.authorization, Headers: e.headers}, maxListPages)
	if err != nil {
		e.Listed, e.Unavailable = nil, mcpReason(ctx, e.URL, err)
		return
	}
	e.Listed, e.Unavailable, e.LeftOut, e.Partial = nil, "", nil, ""
	leftOut, warned := 0, false
	skip := func(name, why string) {
		leftOut++
		if len(e.LeftOut) < MaxLeftOutListed {
			e.LeftOut = append(e.LeftOut, leftOutTool{Name: strictjson.Clip(name, 128), Reason: strictjson.Clip(why, 300)})
		}
	}
	listed := map[string]bool{}
	for _, t := range d.Tools {
		listed[t.Name] = true
		if e.AllowedTools != nil && !slices.Contains(e.AllowedTools, t.Name) {
			continue
		}
		if !mcpToolRE.MatchString(t.Name) {
			skip(t.Name, "its name is not an MCP tool name (1 to 128 of A-Z, a-z, 0-9, _, ., /, -)")
			continue
		}
		if len(e.Listed) == MaxServerTools {
			if !warned {
				warned = true
				s.log.Warn("mcp server lists more tools than a session takes; the rest are left out", "server", e.Name, "max", MaxServerTools)
			}
			skip(t.Name, tooMany)
			continue
		}
		in, err := json.Marshal(t.InputSchema)
		if err != nil {
			skip(t.Name, "its input schema is not JSON")
			continue
		}
		lt := listedTool{Name: t.Name, Description: t.Description, InputSchema: in}
		if lt.Description == "" {
			lt.Description = t.Title
		}
		if t.OutputSchema != nil {
			if out, err := json.Marshal(t.OutputSchema); err == nil {
				lt.OutputSchema = out
			}
		}
		if _, err := mcpTool(tenant, e, lt); err != nil {
			s.log.Warn("mcp tool left out: its schema does not compile", "server", e.Name, "tool", t.Name, "err", err)
			skip(t.Name, "its schema does not compile: "+err.Error())
			continue
		}
		e.Listed = append(e.Listed, lt)
	}
	for _, n := range e.AllowedTools {
		if !listed[n] {
			skip(n, "allowed_tools names it, and the server does not list it")
		}
	}
	var partial []string
	if d.Stop == "page cap" {
		partial = append(partial, fmt.Sprintf("the server's tools/list was read up to %d pages: tools on later pages are not in the set", maxListPages))
	}
	if leftOut > len(e.LeftOut) {
		partial = append(partial, fmt.Sprintf("%d tools left out, the first %d in left_out", leftOut, len(e.LeftOut)))
	}
	e.Partial = strings.Join(partial, "; ")
}

// tooMany is why a server's tools past MaxServerTools are left out.
var tooMany = fmt.Sprintf("the server lists more than %d tools, the most a session takes from one server", MaxServerTools)

// mcpReason says why the server at url could not be listed, without its
// url: "HTTP 401 Unauthorized", "tools/list page 1: …".
func mcpReason(ctx context.Context, url string, err error) string {
	if ctx.Err() != nil {
		return context.Cause(ctx).Error()
	}
	msg := strings.TrimPrefix(err.Error(), "discover "+url+": ")
	msg = strings.TrimPrefix(msg, "connect: ")
	return strictjson.Clip(msg, 300)
}

// listServers lists every MCP server of entries at once.
func (s *Server) listServers(ctx context.Context, tenant string, entries []*sessionEntry) {
	var wg sync.WaitGroup
	for _, e := range entries {
		if e.Type == entryMCP {
			wg.Go(func() { s.listServer(ctx, tenant, e) })
		}
	}
	wg.Wait()
}

// sealEntries is the set as stored: each secret sealed for its owner.
func (s *Server) sealEntries(tenant, sessionID string, entries []*sessionEntry) json.RawMessage {
	for _, e := range entries {
		e.SealedAuthorization, e.SealedHeaders = nil, nil
		if e.authorization != "" {
			e.SealedAuthorization = s.sealer.Seal(entryAD(tenant, sessionID, e.Name, ""), []byte(e.authorization))
		}
		for name := range e.headers {
			if e.SealedHeaders == nil {
				e.SealedHeaders = map[string][]byte{}
			}
			e.SealedHeaders[name] = s.sealer.Seal(entryAD(tenant, sessionID, e.Name, name), []byte(e.headers.Get(name)))
		}
	}
	return mustJSON(map[string]any{"tools": entries})
}

// openEntries reads a stored set, opening its secrets.
func (s *Server) openEntries(tenant, sessionID string, data json.RawMessage) ([]*sessionEntry, error) {
	var stored struct {
		Tools []*sessionEntry `json:"tools"`
	}
	if err := json.Unmarshal(data, &stored); err != nil {
		return nil, fmt.Errorf("session %s tool set: %w", sessionID, err)
	}
	for _, e := range stored.Tools {
		if e.SealedAuthorization != nil {
			v, err := s.sealer.Open(entryAD(tenant, sessionID, e.Name, ""), e.SealedAuthorization)
			if err != nil {
				return nil, fmt.Errorf("session %s tool set: server %s: authorization: %w", sessionID, e.Name, err)
			}
			e.authorization = string(v)
		}
		for name, sealed := range e.SealedHeaders {
			v, err := s.sealer.Open(entryAD(tenant, sessionID, e.Name, name), sealed)
			if err != nil {
				return nil, fmt.Errorf("session %s tool set: server %s: header %s: %w", sessionID, e.Name, name, err)
			}
			if e.headers == nil {
				e.headers = http.Header{}
			}
			e.headers.Set(name, string(v))
		}
	}
	return stored.Tools, nil
}

// toolSetOf returns session sess's tool set: cached, read from the store,
// or, for a session never given one with PUT, its config.tools.
func (s *Server) toolSetOf(ctx context.Context, sess *store.Session) (*toolSet, error) {
	s.mu.Lock()
	ts, ok := s.toolSets[sess.ID]
	epoch := s.toolSetEpoch
	s.mu.Unlock()
	if ok {
		return ts, nil
	}
	ts = &toolSet{}
	st, err := s.store.SessionTools(ctx, sess.TenantID, sess.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		ts.fromConfig = true
		for _, name := range sess.Tools {
			ts.entries = append(ts.entries, &sessionEntry{Name: name})
		}
	case err != nil:
		return nil, fmt.Errorf("read session tools: %w", err)
	default:
		if ts.entries, err = s.openEntries(sess.TenantID, sess.ID, st.Entries); err != nil {
			return nil, err
		}
	}
	ts.build(s, sess.TenantID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.toolSetEpoch == epoch {
		s.cacheToolSetLocked(sess.ID, ts)
	}
	return ts, nil
}

// dropToolSets forgets the cached tool sets of ids (all when none is
// given): another replica replaced them, or may have.
func (s *Server) dropToolSets(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.toolSetEpoch++
	if len(ids) == 0 {
		clear(s.toolSets)
	}
	for _, id := range ids {
		delete(s.toolSets, id)
	}
}

func (s *Server) cacheToolSet(id string, ts *toolSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cacheToolSetLocked(id, ts)
}

func (s *Server) cacheToolSetLocked(id string, ts *toolSet) {
	if _, ok := s.toolSets[id]; !ok && len(s.toolSets) >= maxCachedSessions {
		for k := range s.toolSets {
			delete(s.toolSets, k)
			break
		}
	}
	s.toolSets[id] = ts
}

// names are the tools the set gives the session now, in entry order: the
// catalog entries the tenant's catalog still has, function tools, and each
// MCP server's listed tools.
func (s *Server) toolNames(ctx context.Context, tenant string, ts *toolSet) ([]string, error) {
	entries, leftOut := ts.snapshot()
	out := []string{}
	for _, e := range entries {
		switch e.Type {
		case entryCatalog:
			if _, ok, err := s.catalogTool(ctx, tenant, e.Name); err != nil {
				return nil, err
			} else if ok {
				out = append(out, e.Name)
			}
		case entryFunction:
			if leftOut[e.Name] == "" {
				out = append(out, e.Name)
			}
		case entryMCP:
			for _, lt := range e.Listed {
				if n := mcpName(e.Name, lt.Name); leftOut[n] == "" {
					out = append(out, n)
				}
			}
		}
	}
	return out, nil
}

// EntryJSON is one entry of a tool set as GET shows it, in the PUT
// vocabulary and order: what the session has, its secrets withheld and
// named in Redacted.
type EntryJSON struct {
	Type           string          `json:"type,omitempty"`
	Name           string          `json:"name"`
	Description    string          `json:"description,omitempty"`
	Parameters     json.RawMessage `json:"parameters,omitempty"`
	TimeoutSeconds int             `json:"timeout_seconds,omitempty"`
	URL            string          `json:"url,omitempty"`
	AllowedTools   *[]string       `json:"allowed_tools,omitempty"`
	Required       *bool           `json:"required,omitempty"`
	// LeftOut (an available mcp entry's) are the server's tools that
	// allowed_tools allows and the session does not have, with why.
	LeftOut []leftOutTool `json:"left_out,omitempty"`
	// Status is a function or mcp entry's: "available" (in force; for a
	// server, listed, and allowed_tools are the tools it gives the
	// session) or "unavailable" (Reason says why, and it gives the session
	// no tool: a server that could not be listed, a function stored by an
	// earlier brain whose parameters this one does not compile).
	Status   string   `json:"status,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Redacted []string `json:"redacted,omitempty"`
}

// readBack is the set as GET shows it: a catalog entry only while the
// tenant's catalog has the tool; a function "available", or, left out,
// "unavailable" with the reason (kept for its owner to fix); an MCP
// server "available" with allowed_tools the tools it listed that are in
// force (the intersection), left_out those allowed and not in force with
// why, and a reason when the listing may hold more (its page cap, more
// left out than listed), or, when it could not be listed,
// "unavailable" with the reason and allowed_tools as asked (for when it
// answers again) — it gives the session none of them.
func (s *Server) readBack(ctx context.Context, tenant string, ts *toolSet) ([]EntryJSON, error) {
	entries, leftOut := ts.snapshot()
	out := []EntryJSON{}
	for _, e := range entries {
		switch e.Type {
		case entryCatalog:
			if _, ok, err := s.catalogTool(ctx, tenant, e.Name); err != nil {
				return nil, err
			} else if ok {
				out = append(out, EntryJSON{Name: e.Name})
			}
		case entryFunction:
			f := EntryJSON{Type: entryFunction, Name: e.Name, Description: e.Description, Parameters: e.Parameters, TimeoutSeconds: e.TimeoutSeconds,
				Status: statusAvailable}
			if why, ok := leftOut[e.Name]; ok {
				f.Status, f.Reason = statusUnavailable, why
			}
			out = append(out, f)
		case entryMCP:
			m := EntryJSON{Type: entryMCP, Name: e.Name, URL: e.URL, Required: &e.Required, Status: statusAvailable}
			switch {
			case e.Unavailable == "":
				allowed := []string{}
				for _, lt := range e.Listed {
					if why := leftOut[mcpName(e.Name, lt.Name)]; why != "" {
						m.LeftOut = append(m.LeftOut, leftOutTool{Name: lt.Name, Reason: why})
					} else {
						allowed = append(allowed, lt.Name)
					}
				}
				m.AllowedTools = &allowed
				m.LeftOut = append(m.LeftOut, e.LeftOut...)
				m.Reason = e.Partial
			default:
				m.Status, m.Reason = statusUnavailable, e.Unavailable
				if e.AllowedTools != nil {
					m.AllowedTools = &e.AllowedTools
				}
			}
			if e.authorization != "" {
				m.Redacted = append(m.Redacted, "authorization")
			}
			for _, name := range sortedKeys(e.headers) {
				m.Redacted = append(m.Redacted, "headers."+name)
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// sessionToolsJSON is the answer of GET and PUT /sessions/{id}/tools.
func (s *Server) writeToolSet(w http.ResponseWriter, ctx context.Context, sess *store.Session, ts *toolSet) error {
	tools, err := s.readBack(ctx, sess.TenantID, ts)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"object": "session.tools", "session_id": sess.ID, "tools": tools})
	return nil
}

func (s *Server) getSessionTools(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, err := s.readRequest(r)
	if err != nil {
		return err
	}
	sess, err := s.session(r.Context(), tenant, p.ByName("id"))
	if err != nil {
		return err
	}
	ts, err := s.toolSetOf(r.Context(), sess)
	if err != nil {
		return err
	}
	return s.writeToolSet(w, r.Context(), sess, ts)
}

// postSessionTools refuses POST: a tool set is replaced, never appended to.
func (s *Server) postSessionTools(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	if _, err := s.tenant(r); err != nil {
		return err
	}
	return httpapi.BadRequest("method: POST /sessions/%s/tools would append; the tool set is replaced, not appended: send the whole set with PUT", p.ByName("id"))
}

// unavailableData is the data of an mcp.unavailable event of a session's
// MCP server, shaped as the peer's mcp_unavailable item.
type unavailableData struct {
	Type     string `json:"type"`
	Server   string `json:"server"`
	Reason   string `json:"reason"`
	Required bool   `json:"required"`
}

// putSessionTools answers PUT /sessions/{id}/tools: the set replaces the
// session's whole; its MCP servers are listed now; the answer is the set
// as GET reads it. Calls in flight keep the binding they started with.
func (s *Server) putSessionTools(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, data, err := s.writeRequest(r)
	if err != nil {
		return err
	}
	sess, err := s.session(r.Context(), tenant, p.ByName("id"))
	if err != nil {
		return err
	}
	if sess.Status != store.SessionActive {
		return httpapi.Conflict("session %q is %s", sess.ID, sess.Status)
	}
	entries, err := s.decodeToolSet(r.Context(), tenant, sess.ID, data)
	if err != nil {
		return err
	}
	if err := s.refuseGatedFunction(sess, entries); err != nil {
		return err
	}
	s.listServers(r.Context(), tenant, entries)
	ts := &toolSet{entries: entries}
	ts.build(s, tenant)
	return s.storeToolSet(r.Context(), w, sess, ts, true)
}

// refuseGatedFunction refuses a tool set with a function tool under a
// name sess gates (config.require_approval "always"), as POST /sessions
// refuses that gate: a function tool is answered by the application
// itself, so there is nothing for an operator to approve before it.
func (s *Server) refuseGatedFunction(sess *store.Session, entries []*sessionEntry) error {
	for i, e := range entries {
		function := e.Type == entryFunction
		if e.Type == entryCatalog {
			t, ok := s.config().Tool(e.Name)
			function = ok && t.Function()
		}
		if function && sessionGates(sess, e.Name) {
			return httpapi.BadRequest(`tools[%d].name: %q is a function tool, answered by the application itself, and the session's config.require_approval.%s is "always": a function tool cannot be gated; give it another name`, i, e.Name, e.Name)
		}
	}
	return nil
}

// storeToolSet stores ts as sess's tool set with its session.tools event
// (and, when fresh, an mcp.unavailable event per server that could not be
// listed), then caches it; with w it answers with the read-back.
func (s *Server) storeToolSet(ctx context.Context, w http.ResponseWriter, sess *store.Session, ts *toolSet, fresh bool) error {
	names, err := s.toolNames(ctx, sess.TenantID, ts)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	evs := []*store.Event{{Type: store.EventSessionTools, SessionID: sess.ID, Time: now,
		Data: mustJSON(sessionEventData{Status: store.SessionActive, Tools: names})}}
	for _, e := range ts.entries {
		if fresh && e.Type == entryMCP && e.Unavailable != "" {
			s.log.Warn("mcp server unavailable", "session_id", sess.ID, "server", e.Name, "reason", e.Unavailable, "required", e.Required)
			evs = append(evs, &store.Event{Type: store.EventMCPUnavailable, SessionID: sess.ID, Time: now,
				Data: mustJSON(unavailableData{Type: "mcp_unavailable", Server: e.Name, Reason: e.Unavailable, Required: e.Required})})
		}
	}
	// One writer at a time, so that the cache ends as the store does.
	s.toolSetMu.Lock()
	defer s.toolSetMu.Unlock()
	st := &store.SessionTools{SessionID: sess.ID, TenantID: sess.TenantID, Entries: s.sealEntries(sess.TenantID, sess.ID, ts.entries),
		Names: names, UpdatedAt: now}
	var se *store.StateError
	switch err := s.store.PutSessionTools(ctx, st, evs...); {
	case errors.Is(err, store.ErrNotFound):
		return httpapi.NotFound("session %q not found", sess.ID)
	case errors.As(err, &se):
		return httpapi.Conflict("session %q is %s", sess.ID, se.Status)
	case err != nil:
		return fmt.Errorf("put session tools: %w", err)
	}
	if s.shared == nil {
		s.cacheToolSet(sess.ID, ts)
	} else {
		// Another replica may replace the set right after this one: the
		// store has the last word, and the others are told to read it.
		s.dropToolSets(sess.ID)
		if err := s.shared.Notify(ctx, store.Signal{Kind: store.SignalSessionTools, SessionID: sess.ID}); err != nil {
			s.log.Warn("tell the other replicas of a new tool set", "session_id", sess.ID, "err", err)
		}
	}
	s.mu.Lock()
	if c, ok := s.sessions[sess.ID]; ok {
		c.Tools, c.UpdatedAt = names, now
	}
	s.mu.Unlock()
	if w == nil {
		return nil
	}
	return s.writeToolSet(w, ctx, sess, ts)
}

// requireServers refuses a call of a session whose required MCP servers
// could not be listed, after trying each once more: invalid_request (the
// peer's code: waiting will not make a server reachable) naming each
// server and the cause. A server that answers now gives the session its
// tools, stored.
func (s *Server) requireServers(ctx context.Context, sess *store.Session, ts *toolSet) error {
	ts.mu.Lock()
	var failed []*sessionEntry
	for _, e := range ts.entries {
		if e.Type == entryMCP && e.Required && e.Unavailable != "" {
			failed = append(failed, e)
		}
	}
	if len(failed) == 0 {
		ts.mu.Unlock()
		return nil
	}
	next := &toolSet{}
	for _, e := range ts.entries {
		cp := *e
		next.entries = append(next.entries, &cp)
	}
	ts.mu.Unlock()
	var parts []string
	for _, e := range next.entries {
		if e.Type == entryMCP && e.Required && e.Unavailable != "" {
			s.listServer(ctx, sess.TenantID, e)
			if e.Unavailable != "" {
				parts = append(parts, fmt.Sprintf("%s: %s", e.Name, e.Unavailable))
			}
		}
	}
	if len(parts) > 0 {
		return httpapi.BadRequest("session %s: this session cannot start: required MCP server(s) failed to initialise — %s. That server is configured with `required: true`, "+
			"so the session refuses to run without it — fix the server, or set `required: false` (PUT /sessions/%s/tools) to let the agent continue with fewer tools.",
			sess.ID, strings.Join(parts, "; "), sess.ID)
	}
	next.build(s, sess.TenantID)
	return s.storeToolSet(ctx, nil, sess, next, false)
}

// sessionTool is the binding a new call of tool name in session sess runs
// with, the refusal it gets before sending (a custom tool's secret that
// is missing), or a 400 when the session does not have the tool.
func (s *Server) sessionTool(ctx context.Context, sess *store.Session, name string) (*config.Tool, *invoke.Outcome, error) {
	ts, err := s.toolSetOf(ctx, sess)
	if err != nil {
		return nil, nil, err
	}
	if err := s.requireServers(ctx, sess, ts); err != nil {
		return nil, nil, err
	}
	if ts, err = s.toolSetOf(ctx, sess); err != nil { // requireServers may have replaced it
		return nil, nil, err
	}
	ts.mu.Lock()
	t, ok := ts.tools[name]
	catalog := slices.ContainsFunc(ts.entries, func(e *sessionEntry) bool { return e.Type == entryCatalog && e.Name == name })
	why, gone := ts.leftOut[name]
	ts.mu.Unlock()
	if ok {
		return t, nil, nil
	}
	if catalog {
		t, ok, err := s.catalogTool(ctx, sess.TenantID, name)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, httpapi.BadRequest("tool: %q is no longer in the catalog of tenant %q (the host config or the tenant's custom tools changed), so session %q no longer has it", name, sess.TenantID, sess.ID)
		}
		return s.withSecret(ctx, sess.TenantID, t)
	}
	names, err := s.toolNames(ctx, sess.TenantID, ts)
	if err != nil {
		return nil, nil, err
	}
	if gone {
		return nil, nil, httpapi.BadRequest("tool: %q is not enabled in session %q: its stored entry is %s (enabled: %s)", name, sess.ID, why, strings.Join(names, ", "))
	}
	return nil, nil, httpapi.BadRequest("tool: %q is not enabled in session %q (enabled: %s)", name, sess.ID, strings.Join(names, ", "))
}
