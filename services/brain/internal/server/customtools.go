package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/julienschmidt/httprouter"
)

// Custom tools: a tenant's own bindings, made through the API (after the
// first peer's custom tools, seed 001). Each has an immutable name and an
// immutable revision per definition; an update must name the current
// revision (current_revision_id), so that nobody changes a definition they
// have not read, and makes a new one. A call records the revision it runs
// with and keeps it however the tool changes while the call is in flight.
//
// The definition has the contract's binding fields that are a tenant's to
// choose — name, description, input_schema, output_schema, url,
// timeout_seconds, max_output_bytes — and auth_secret_name, the tenant
// secret sent as its bearer token (the peer's authSecretName). Its url is
// checked by the SSRF guard when the tool is created or updated, and every
// call is dialed through it.

// Sizes a tenant's tool definitions may have (custom tools, each revision,
// session function tools). A description is read by the model on every
// turn the tool is offered: 16 KiB is room for a long one with examples,
// and bounds what a tenant stores and GET /catalog answers (at most 1000
// custom tools of a tenant). The host config's bindings are the
// operator's and not capped here.
const (
	// MaxToolDescriptionBytes is the longest description.
	MaxToolDescriptionBytes = 16 << 10
	// MaxToolURLBytes is the longest url of a custom tool or a session's
	// MCP server.
	MaxToolURLBytes = 2048
)

// checkDescription refuses a description past MaxToolDescriptionBytes,
// naming field.
func checkDescription(field, d string) error {
	if len(d) > MaxToolDescriptionBytes {
		return httpapi.BadRequest("%s: %d bytes, longer than the limit of %d bytes (16 KiB)", field, len(d), MaxToolDescriptionBytes)
	}
	return nil
}

// checkURLSize refuses a url past MaxToolURLBytes, naming field.
func checkURLSize(field, u string) error {
	if len(u) > MaxToolURLBytes {
		return httpapi.BadRequest("%s: %d bytes, longer than the limit of %d bytes", field, len(u), MaxToolURLBytes)
	}
	return nil
}

// customToolDefinition is a revision's definition, as stored and shown.
type customToolDefinition struct {
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	InputSchema    json.RawMessage `json:"input_schema"`
	OutputSchema   json.RawMessage `json:"output_schema,omitempty"`
	URL            string          `json:"url"`
	AuthSecretName string          `json:"auth_secret_name,omitempty"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	MaxOutputBytes int64           `json:"max_output_bytes"`
}

// customToolBody is the body of POST /custom_tools and PUT
// /custom_tools/{id}; PUT also names current_revision_id.
type customToolBody struct {
	Name              *string         `json:"name"`
	Description       *string         `json:"description"`
	InputSchema       json.RawMessage `json:"input_schema"`
	OutputSchema      json.RawMessage `json:"output_schema"`
	URL               *string         `json:"url"`
	AuthSecretName    *string         `json:"auth_secret_name"`
	TimeoutSeconds    *int            `json:"timeout_seconds"`
	MaxOutputBytes    *int64          `json:"max_output_bytes"`
	CurrentRevisionID *string         `json:"current_revision_id"`
}

// notForCustomTools are binding fields a tenant may not set, with why:
// each would reach past the tenant (the operator's environment, other
// tenants, brain's inspection tokens) or is the host's own.
var notForCustomTools = map[string]string{
	"token_env":        "a custom tool cannot read brain's environment; store the token as a tenant secret (PUT /secrets/{name}) and name it in auth_secret_name",
	"tenants":          "a custom tool belongs to the tenant that makes it, and to no other",
	"inspect_session":  "only the operator's bindings receive inspection tokens",
	"mcp_tool":         "give a session an MCP server with PUT /sessions/{id}/tools instead",
	"type":             "a function tool is declared in a session's tool set (PUT /sessions/{id}/tools)",
	"require_approval": "a session gates a tool with config.require_approval",
	"max_concurrency":  "only the operator caps a binding's concurrency",
}

// customToolFields lists what the body takes, for the refusal of an
// unknown field.
const customToolFields = "name, description, input_schema, output_schema, url, auth_secret_name, timeout_seconds, max_output_bytes (and current_revision_id in an update)"

// CustomToolJSON is a custom tool as the API shows it: its current
// definition, current_revision_id and times.
type CustomToolJSON struct {
	ID string `json:"id"`
	customToolDefinition
	CurrentRevisionID string `json:"current_revision_id"`
	CreatedAt         string `json:"created_at"`
	UpdatedAt         string `json:"updated_at"`
}

// RevisionJSON is one revision of a custom tool.
type RevisionJSON struct {
	ID     string `json:"id"`
	ToolID string `json:"tool_id"`
	customToolDefinition
	CreatedAt string `json:"created_at"`
}

func customToolJSON(t *store.CustomTool) CustomToolJSON {
	var def customToolDefinition
	_ = json.Unmarshal(t.Revision.Definition, &def) // brain wrote it
	return CustomToolJSON{ID: t.ID, customToolDefinition: def, CurrentRevisionID: t.Revision.ID,
		CreatedAt: timeString(t.CreatedAt), UpdatedAt: timeString(t.UpdatedAt)}
}

// decodeCustomTool decodes and checks a custom tool body: every field's
// rule names the field. current is the tool's definition for an update
// (nil on create): its name is the one the body may repeat, never change.
func (s *Server) decodeCustomTool(ctx context.Context, tenant string, data []byte, current *customToolDefinition) (*customToolDefinition, *customToolBody, error) {
	var keys map[string]json.RawMessage
	if err := httpapi.DecodeObject(data, &keys); err != nil {
		return nil, nil, err
	}
	for k := range keys {
		if why, ok := notForCustomTools[k]; ok {
			return nil, nil, httpapi.BadRequest("%s: not a field of a custom tool: %s", k, why)
		}
	}
	var b customToolBody
	if err := httpapi.DecodeObject(data, &b); err != nil {
		var ae *httpapi.Error
		if errors.As(err, &ae) && strings.Contains(ae.Message, "unknown field") {
			ae.Message += "; a custom tool takes " + customToolFields
		}
		return nil, nil, err
	}
	def := &customToolDefinition{InputSchema: b.InputSchema, OutputSchema: b.OutputSchema}
	if isNull(def.OutputSchema) {
		def.OutputSchema = nil
	}
	switch {
	case current != nil && b.Name != nil && *b.Name != current.Name:
		return nil, nil, httpapi.BadRequest("name: a custom tool's name is immutable (this one is %q); create another tool for another name", current.Name)
	case current != nil:
		def.Name = current.Name
	case b.Name == nil:
		return nil, nil, httpapi.BadRequest("name: required")
	default:
		def.Name = *b.Name
	}
	if b.Description == nil {
		return nil, nil, httpapi.BadRequest("description: required: what the tool does, for the model")
	}
	def.Description = *b.Description
	if err := checkDescription("description", def.Description); err != nil {
		return nil, nil, err
	}
	if b.URL == nil {
		return nil, nil, httpapi.BadRequest("url: required: the http or https endpoint brain posts calls to")
	}
	def.URL = *b.URL
	if err := checkURLSize("url", def.URL); err != nil {
		return nil, nil, err
	}
	if b.TimeoutSeconds != nil {
		if n := *b.TimeoutSeconds; n < 1 || n > tool.MaxTimeoutSeconds {
			return nil, nil, httpapi.BadRequest("timeout_seconds: must be from 1 to %d, got %d", tool.MaxTimeoutSeconds, n)
		}
		def.TimeoutSeconds = *b.TimeoutSeconds
	}
	if b.MaxOutputBytes != nil {
		if n := *b.MaxOutputBytes; n < 1 || n > tool.MaxOutputBytesLimit {
			return nil, nil, httpapi.BadRequest("max_output_bytes: must be from 1 to %d (2 MiB), got %d", tool.MaxOutputBytesLimit, n)
		}
		def.MaxOutputBytes = *b.MaxOutputBytes
	}
	if b.AuthSecretName != nil {
		name := *b.AuthSecretName
		if err := checkSecretName("auth_secret_name", name); err != nil {
			return nil, nil, err
		}
		if _, err := s.store.Secret(ctx, tenant, name); errors.Is(err, store.ErrNotFound) {
			return nil, nil, httpapi.BadRequest("auth_secret_name: no secret %q; store it first with PUT /secrets/%s", name, name)
		} else if err != nil {
			return nil, nil, fmt.Errorf("read secret: %w", err)
		}
		def.AuthSecretName = name
	}
	t, err := newCustomBinding(tenant, def, "", "")
	if err != nil {
		return nil, nil, err
	}
	def.TimeoutSeconds, def.MaxOutputBytes = t.TimeoutSeconds, t.Binding.MaxOutputBytes
	u, _ := url.Parse(def.URL) // ValidateURL passed
	if _, err := s.guard.CheckURL(u); err != nil {
		return nil, nil, httpapi.BadRequest("url: %v (a tenant's tool reaches only public addresses unless the operator allows a range)", err)
	}
	if current == nil {
		if h, ok := s.config().Tool(def.Name); ok && h.Allowed(tenant) {
			return nil, nil, httpapi.Conflict("name: %q is a tool of the host config for tenant %q; choose another name", def.Name, tenant)
		}
	}
	return def, &b, nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// newCustomBinding checks def as a binding of tenant's (every rule of the
// contract's binding table) and returns it, made of revision revID of
// custom tool toolID.
func newCustomBinding(tenant string, def *customToolDefinition, toolID, revID string) (*config.Tool, error) {
	b := tool.Binding{Name: def.Name, Description: def.Description, InputSchema: def.InputSchema, OutputSchema: def.OutputSchema,
		URL: def.URL, Tenants: []string{tenant}, TimeoutSeconds: def.TimeoutSeconds, MaxOutputBytes: def.MaxOutputBytes}
	t, err := config.NewTool(b, config.ToolOptions{Origin: config.OriginCustom, ToolID: toolID, RevisionID: revID, SecretName: def.AuthSecretName})
	if err != nil {
		var fe *strictjson.FieldError
		if errors.As(err, &fe) {
			return nil, httpapi.BadRequest("%s: %s", fe.Field, fe.Problem)
		}
		return nil, httpapi.BadRequest("%v", err) // schema errors name input_schema / output_schema
	}
	return t, nil
}

// maxCachedBindings bounds the compiled custom tools kept by revision.
const maxCachedBindings = 10000

// errRevisionDoesNotCompile is revisionTool's for a stored revision this
// brain does not compile: the tool reads as absent, as one whose binding
// left, and is not a fault of the request (a 500).
var errRevisionDoesNotCompile = errors.New("does not compile")

// revisionTool is the binding of custom-tool revision rev, compiled once
// and kept by its ID (a revision never changes).
func (s *Server) revisionTool(rev *store.ToolRevision) (*config.Tool, error) {
	s.mu.Lock()
	t, ok := s.bindings[rev.ID]
	s.mu.Unlock()
	if ok {
		return t, nil
	}
	var def customToolDefinition
	if err := json.Unmarshal(rev.Definition, &def); err != nil {
		return nil, fmt.Errorf("revision %s: definition: %w", rev.ID, err)
	}
	t, err := newCustomBinding(rev.TenantID, &def, rev.ToolID, rev.ID)
	if err != nil {
		s.log.Warn("custom tool revision left out: stored by an earlier brain, it does not compile here (a schema with a reference cycle, refused since); give the tool a new revision",
			"tenant_id", rev.TenantID, "tool_id", rev.ToolID, "revision_id", rev.ID, "err", err)
		return nil, fmt.Errorf("revision %s: %w: %w", rev.ID, errRevisionDoesNotCompile, err)
	}
	s.mu.Lock()
	if len(s.bindings) >= maxCachedBindings {
		for id := range s.bindings {
			delete(s.bindings, id)
			break
		}
	}
	s.bindings[rev.ID] = t
	s.mu.Unlock()
	return t, nil
}

// withSecret returns custom tool t with its tenant secret as its token,
// read now; a secret that is missing (or does not open) is the call's
// refusal before sending: the contract's "the credential is missing" row.
func (s *Server) withSecret(ctx context.Context, tenant string, t *config.Tool) (*config.Tool, *invoke.Outcome, error) {
	if t.SecretName == "" {
		return t, nil, nil
	}
	sec, err := s.store.Secret(ctx, tenant, t.SecretName)
	if errors.Is(err, store.ErrNotFound) {
		o := invoke.Refused(invoke.CodeMissingCredential, fmt.Sprintf("tool %s: its secret %q (auth_secret_name) is not set; store it with PUT /secrets/%s", t.Name, t.SecretName, t.SecretName))
		return t, &o, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read secret: %w", err)
	}
	value, err := s.sealer.Open(secretAD(tenant, t.SecretName), sec.Sealed)
	if err != nil {
		s.log.Error("tenant secret does not open", "tenant_id", tenant, "secret", t.SecretName, "err", err)
		o := invoke.Refused(invoke.CodeMissingCredential, fmt.Sprintf("tool %s: its secret %q cannot be read with brain's secrets key; store it again", t.Name, t.SecretName))
		return t, &o, nil
	}
	return t.WithToken(string(value)), nil, nil
}

// catalogTool is the tool named name in tenant's catalog now: a binding of
// the host config allowed for the tenant (it wins a name both have), or the
// tenant's custom tool at its current revision. ok is false when the
// tenant has no such tool.
func (s *Server) catalogTool(ctx context.Context, tenant, name string) (t *config.Tool, ok bool, err error) {
	if h, found := s.config().Tool(name); found && h.Allowed(tenant) {
		return h, true, nil
	}
	if !tool.ValidName(name) {
		return nil, false, nil
	}
	ct, err := s.store.CustomToolByName(ctx, tenant, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read custom tool: %w", err)
	}
	t, err = s.revisionTool(ct.Revision)
	if errors.Is(err, errRevisionDoesNotCompile) {
		return nil, false, nil
	}
	return t, err == nil, err
}

func (s *Server) catalog(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	tenant, err := s.readRequest(r)
	if err != nil {
		return err
	}
	cfg := s.config()
	entries := cfg.Catalog(tenant)
	custom, err := s.store.CustomTools(r.Context(), tenant)
	if err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	for _, ct := range custom {
		def := customToolJSON(ct).customToolDefinition
		rev := ct.Revision.ID
		h, shadowed := cfg.Tool(ct.Name)
		entries = append(entries, config.CatalogEntry{Name: ct.Name, Description: def.Description, InputSchema: def.InputSchema,
			OutputSchema: def.OutputSchema, Source: config.SourceCustom, ID: ct.ID, CurrentRevisionID: &rev,
			Shadowed: shadowed && h.Allowed(tenant)})
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"tools": entries})
	return nil
}

func (s *Server) createCustomTool(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	tenant, data, err := s.writeRequest(r)
	if err != nil {
		return err
	}
	def, _, err := s.decodeCustomTool(r.Context(), tenant, data, nil)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	ct := &store.CustomTool{ID: newID("ctool"), TenantID: tenant, Name: def.Name, CreatedAt: now, UpdatedAt: now}
	ct.Revision = &store.ToolRevision{ID: newID("rev"), ToolID: ct.ID, TenantID: tenant, Definition: mustJSON(def), CreatedAt: now}
	var le *store.LimitError
	switch err := s.store.CreateCustomTool(r.Context(), ct, s.limits.CustomTools); {
	case errors.Is(err, store.ErrNameTaken):
		return httpapi.Conflict("name: tenant %q already has a custom tool %q; update it (PUT /custom_tools/{id}) or delete it first", tenant, def.Name)
	case errors.As(err, &le):
		return httpapi.Conflict("custom tools: tenant %q has %d already, the most it keeps; delete one first", tenant, le.Limit)
	case err != nil:
		return fmt.Errorf("create custom tool: %w", err)
	}
	httpapi.WriteJSON(w, http.StatusCreated, customToolJSON(ct))
	return nil
}

// readRequest authenticates a request that takes no query parameters and
// returns its tenant.
func (s *Server) readRequest(r *http.Request) (string, error) {
	tenant, err := s.tenant(r)
	if err != nil {
		return "", err
	}
	if _, err := query(r); err != nil {
		return "", err
	}
	return tenant, nil
}

// storeErr is the answer to a store error about the tenant's what id: 404
// for store.ErrNotFound, the error (a 500) otherwise; nil for nil.
func storeErr(err error, what, id string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return httpapi.NotFound("%s %q not found", what, id)
	}
	return fmt.Errorf("%s %s: %w", what, id, err)
}

// writeRequest authenticates a write and reads its JSON body.
func (s *Server) writeRequest(r *http.Request) (tenant string, body []byte, err error) {
	if tenant, err = s.readRequest(r); err != nil {
		return "", nil, err
	}
	if err := httpapi.CheckJSON(r); err != nil {
		return "", nil, err
	}
	body, err = httpapi.ReadBody(r, s.maxBody)
	return tenant, body, err
}

// customTool returns the tenant's custom tool id, or 404.
func (s *Server) customTool(ctx context.Context, tenant, id string) (*store.CustomTool, error) {
	ct, err := s.store.CustomTool(ctx, tenant, id)
	return ct, storeErr(err, "custom tool", id)
}

func (s *Server) getCustomTool(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, err := s.readRequest(r)
	if err != nil {
		return err
	}
	ct, err := s.customTool(r.Context(), tenant, p.ByName("id"))
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, customToolJSON(ct))
	return nil
}

func (s *Server) listCustomTools(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	tenant, err := s.readRequest(r)
	if err != nil {
		return err
	}
	list, err := s.store.CustomTools(r.Context(), tenant)
	if err != nil {
		return fmt.Errorf("list custom tools: %w", err)
	}
	out := make([]CustomToolJSON, 0, len(list))
	for _, ct := range list {
		out = append(out, customToolJSON(ct))
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"custom_tools": out})
	return nil
}

// updateCustomTool answers PUT /custom_tools/{id}: the whole definition
// again (the name may be repeated, never changed) and current_revision_id,
// which must be the tool's current revision: a stale one is 409 naming the
// current revision, so nobody overwrites a definition they have not read.
// The answer is the tool at its new revision.
func (s *Server) updateCustomTool(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, data, err := s.writeRequest(r)
	if err != nil {
		return err
	}
	id := p.ByName("id")
	ct, err := s.customTool(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	var cur customToolDefinition
	_ = json.Unmarshal(ct.Revision.Definition, &cur)
	def, body, err := s.decodeCustomTool(r.Context(), tenant, data, &cur)
	if err != nil {
		return err
	}
	if body.CurrentRevisionID == nil || *body.CurrentRevisionID == "" {
		return httpapi.BadRequest("current_revision_id: required: the revision this update is made from (now %s); read the tool first", ct.Revision.ID)
	}
	now := time.Now().UTC()
	rev := &store.ToolRevision{ID: newID("rev"), ToolID: id, TenantID: tenant, Definition: mustJSON(def), CreatedAt: now}
	updated, err := s.store.UpdateCustomTool(r.Context(), tenant, id, *body.CurrentRevisionID, rev, s.limits.Revisions)
	var (
		re *store.RevisionError
		le *store.LimitError
	)
	switch {
	case errors.As(err, &re):
		return httpapi.Conflict("current_revision_id: %q is not the current revision of custom tool %q; it is now %s: read the tool again and update from that revision",
			*body.CurrentRevisionID, id, re.Current)
	case errors.As(err, &le):
		return httpapi.Conflict("revisions: custom tool %q (%s) has %d revisions, the most one tool keeps (they stay for the calls that name them); "+
			"to change it again, delete it (DELETE /custom_tools/%s; its calls keep their revisions) and create it anew under the same name",
			id, def.Name, le.Limit, id)
	case err != nil:
		return storeErr(err, "custom tool", id)
	}
	httpapi.WriteJSON(w, http.StatusOK, customToolJSON(updated))
	return nil
}

// deleteCustomTool answers DELETE /custom_tools/{id} with the tool as it
// was. Calls in flight keep their revision; sessions that named the tool
// no longer have it (their read-back says so); its name is free again.
func (s *Server) deleteCustomTool(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, err := s.readRequest(r)
	if err != nil {
		return err
	}
	id := p.ByName("id")
	ct, err := s.customTool(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	if err := storeErr(s.store.DeleteCustomTool(r.Context(), tenant, id), "custom tool", id); err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, customToolJSON(ct))
	return nil
}

// getRevision answers GET /tool_revisions/{id}: the definition a call's
// revision_id names, also after its tool changed or was deleted.
func (s *Server) getRevision(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, err := s.readRequest(r)
	if err != nil {
		return err
	}
	id := p.ByName("id")
	rev, err := s.store.ToolRevision(r.Context(), tenant, id)
	if err := storeErr(err, "tool revision", id); err != nil {
		return err
	}
	var def customToolDefinition
	_ = json.Unmarshal(rev.Definition, &def)
	httpapi.WriteJSON(w, http.StatusOK, RevisionJSON{ID: rev.ID, ToolID: rev.ToolID, customToolDefinition: def, CreatedAt: timeString(rev.CreatedAt)})
	return nil
}

// sortedKeys is the keys of m in order, for messages.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
