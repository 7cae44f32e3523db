package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/julienschmidt/httprouter"
)

// Toolsets: a tenant's named, reusable lists of tools of its catalog (the
// first peer's Toolsets, seed 001), host-config bindings and custom tools
// by name. A session created with config.toolset_id gets the toolset's
// tools as they are then; changing the toolset later changes no session
// (a running session's tools change with PUT /sessions/{id}/tools).

// Limits of a toolset.
const (
	MaxToolsetNameChars        = 64
	MaxToolsetDescriptionChars = 1024
)

// ToolsetJSON is a toolset as the API shows it.
type ToolsetJSON struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description *string  `json:"description"`
	Tools       []string `json:"tools"`
	CreatedAt   string   `json:"created_at"`
	UpdatedAt   string   `json:"updated_at"`
}

func toolsetJSON(ts *store.Toolset) ToolsetJSON {
	tools := ts.Tools
	if tools == nil {
		tools = []string{}
	}
	return ToolsetJSON{ID: ts.ID, Name: ts.Name, Description: optString(ts.Description), Tools: tools,
		CreatedAt: timeString(ts.CreatedAt), UpdatedAt: timeString(ts.UpdatedAt)}
}

// decodeToolset decodes and checks a toolset body {name, description?,
// tools?}: a name of 1 to 64 characters, not blank; a description of at
// most 1024; at most MaxSessionTools tools, each once and each a tool of
// the tenant's catalog now.
func (s *Server) decodeToolset(ctx context.Context, tenant string, data []byte) (*store.Toolset, error) {
	var body struct {
		Name        *string   `json:"name"`
		Description *string   `json:"description"`
		Tools       []*string `json:"tools"`
	}
	if err := httpapi.DecodeObject(data, &body); err != nil {
		return nil, err
	}
	ts := &store.Toolset{TenantID: tenant, Tools: []string{}}
	switch {
	case body.Name == nil:
		return nil, httpapi.BadRequest("name: required")
	case strings.TrimSpace(*body.Name) == "":
		return nil, httpapi.BadRequest("name: must not be blank")
	case utf8.RuneCountInString(*body.Name) > MaxToolsetNameChars:
		return nil, httpapi.BadRequest("name: longer than %d characters (got %d)", MaxToolsetNameChars, utf8.RuneCountInString(*body.Name))
	}
	if err := noNUL("name", *body.Name); err != nil {
		return nil, err
	}
	ts.Name = *body.Name
	if body.Description != nil {
		if n := utf8.RuneCountInString(*body.Description); n > MaxToolsetDescriptionChars {
			return nil, httpapi.BadRequest("description: longer than %d characters (got %d)", MaxToolsetDescriptionChars, n)
		}
		if err := noNUL("description", *body.Description); err != nil {
			return nil, err
		}
		ts.Description = *body.Description
	}
	if len(body.Tools) > MaxSessionTools {
		return nil, httpapi.BadRequest("tools: %d tools, more than the %d a session can have", len(body.Tools), MaxSessionTools)
	}
	seen := map[string]int{}
	for i, name := range body.Tools {
		field := fmt.Sprintf("tools[%d]", i)
		if name == nil || *name == "" {
			return nil, httpapi.BadRequest("%s: must be a tool name", field)
		}
		if j, dup := seen[*name]; dup {
			return nil, httpapi.BadRequest("%s: tool %q is listed twice (also tools[%d])", field, *name, j)
		}
		seen[*name] = i
		if _, ok, err := s.catalogTool(ctx, tenant, *name); err != nil {
			return nil, err
		} else if !ok {
			return nil, httpapi.BadRequest("%s: unknown tool %q (not in the catalog of tenant %q)", field, *name, tenant)
		}
		ts.Tools = append(ts.Tools, *name)
	}
	return ts, nil
}

func (s *Server) createToolset(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	tenant, data, err := s.writeRequest(r)
	if err != nil {
		return err
	}
	ts, err := s.decodeToolset(r.Context(), tenant, data)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	ts.ID, ts.CreatedAt, ts.UpdatedAt = newID("tset"), now, now
	var le *store.LimitError
	if err := s.store.CreateToolset(r.Context(), ts, s.limits.Toolsets); errors.As(err, &le) {
		return httpapi.Conflict("toolsets: tenant %q has %d already, the most it keeps; delete one first", tenant, le.Limit)
	} else if err != nil {
		return fmt.Errorf("create toolset: %w", err)
	}
	httpapi.WriteJSON(w, http.StatusCreated, toolsetJSON(ts))
	return nil
}

// toolset returns the tenant's toolset id, or 404.
func (s *Server) toolset(ctx context.Context, tenant, id string) (*store.Toolset, error) {
	ts, err := s.store.Toolset(ctx, tenant, id)
	return ts, storeErr(err, "toolset", id)
}

func (s *Server) getToolset(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, err := s.readRequest(r)
	if err != nil {
		return err
	}
	ts, err := s.toolset(r.Context(), tenant, p.ByName("id"))
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, toolsetJSON(ts))
	return nil
}

func (s *Server) listToolsets(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	tenant, err := s.readRequest(r)
	if err != nil {
		return err
	}
	list, err := s.store.Toolsets(r.Context(), tenant)
	if err != nil {
		return fmt.Errorf("list toolsets: %w", err)
	}
	out := make([]ToolsetJSON, 0, len(list))
	for _, ts := range list {
		out = append(out, toolsetJSON(ts))
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"toolsets": out})
	return nil
}

// updateToolset answers PUT /toolsets/{id}: the whole toolset again.
func (s *Server) updateToolset(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, data, err := s.writeRequest(r)
	if err != nil {
		return err
	}
	id := p.ByName("id")
	cur, err := s.toolset(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	ts, err := s.decodeToolset(r.Context(), tenant, data)
	if err != nil {
		return err
	}
	ts.ID, ts.CreatedAt, ts.UpdatedAt = id, cur.CreatedAt, time.Now().UTC()
	if err := storeErr(s.store.UpdateToolset(r.Context(), ts), "toolset", id); err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, toolsetJSON(ts))
	return nil
}

func (s *Server) deleteToolset(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	tenant, err := s.readRequest(r)
	if err != nil {
		return err
	}
	id := p.ByName("id")
	ts, err := s.toolset(r.Context(), tenant, id)
	if err != nil {
		return err
	}
	if err := storeErr(s.store.DeleteToolset(r.Context(), tenant, id), "toolset", id); err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, toolsetJSON(ts))
	return nil
}
