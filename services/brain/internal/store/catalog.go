package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// What each tenant keeps beside its sessions: custom tools with their
// revisions, secrets, toolsets, and the tool set of each session it
// changed with PUT /sessions/{id}/tools. Every read and write names the
// tenant; a row of another tenant is ErrNotFound, whatever the ID.

// CustomTool is a tenant's custom tool: an immutable name and the revision
// it is now. Each update makes a new revision and never changes an old one,
// so a call that recorded its revision ID can always read the definition it
// ran with.
type CustomTool struct {
	ID        string
	TenantID  string
	Name      string
	Revision  *ToolRevision // the current revision
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ToolRevision is one immutable definition of a custom tool. Definition is
// the tool's binding fields as JSON (the server's customToolDefinition);
// the store keeps it as it is.
type ToolRevision struct {
	ID         string
	ToolID     string
	TenantID   string
	Definition json.RawMessage
	CreatedAt  time.Time
}

// Secret is a tenant secret: Sealed is its value encrypted by package
// seal, never the value itself. Lists leave Sealed nil.
type Secret struct {
	TenantID  string
	Name      string
	Sealed    []byte
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Toolset is a named, reusable list of tool names of a tenant's catalog.
type Toolset struct {
	ID          string
	TenantID    string
	Name        string
	Description string
	Tools       []string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// SessionTools is the tool set a session was given with PUT: Entries is
// the set as the server keeps it (JSON, its secrets sealed), Names the
// tool names the session has under it, stored as the session's tools too.
type SessionTools struct {
	SessionID string
	TenantID  string
	Entries   json.RawMessage
	Names     []string
	UpdatedAt time.Time
}

// ErrNameTaken refuses a custom tool whose name the tenant already has.
var ErrNameTaken = errors.New("name taken")

// RevisionError refuses an update of a custom tool that does not name its
// current revision: Current is the revision it is now.
type RevisionError struct {
	Current string
}

func (e *RevisionError) Error() string {
	return fmt.Sprintf("stale revision: the current revision is %s", e.Current)
}

// LimitError refuses a write that would make a tenant keep more than Limit
// rows of one kind.
type LimitError struct {
	What  string // "custom tools", "secrets", "toolsets", "revisions" (of one custom tool)
	Limit int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("a tenant keeps at most %d %s", e.Limit, e.What)
}

// Catalog is the part of a Store that keeps what tenants make through the
// API. Writes commit before they return; each check (a name taken, a
// stale revision, a limit, a session no longer active) is made in the
// write's own transaction, so two concurrent writers cannot both pass it.
type Catalog interface {
	// CreateCustomTool inserts t with its first revision t.Revision.
	// ErrNameTaken when the tenant has a custom tool of that name;
	// *LimitError past limit custom tools of the tenant.
	CreateCustomTool(ctx context.Context, t *CustomTool, limit int) error
	// CustomTool returns the tenant's custom tool id with its current
	// revision, or ErrNotFound.
	CustomTool(ctx context.Context, tenantID, id string) (*CustomTool, error)
	// CustomToolByName is CustomTool by the tool's name.
	CustomToolByName(ctx context.Context, tenantID, name string) (*CustomTool, error)
	// CustomTools lists the tenant's custom tools, oldest first.
	CustomTools(ctx context.Context, tenantID string) ([]*CustomTool, error)
	// UpdateCustomTool makes rev the current revision of the tenant's tool
	// id when its current revision is fromRevision (else *RevisionError;
	// ErrNotFound when there is no such tool), and returns the tool;
	// *LimitError when the tool has limit revisions already (its first
	// one counts; limit <= 0: no limit).
	UpdateCustomTool(ctx context.Context, tenantID, id, fromRevision string, rev *ToolRevision, limit int) (*CustomTool, error)
	// DeleteCustomTool removes the tenant's tool id (its name is free
	// again). Its revisions stay: calls name them. ErrNotFound when none.
	DeleteCustomTool(ctx context.Context, tenantID, id string) error
	// ToolRevision returns the tenant's revision id, or ErrNotFound.
	ToolRevision(ctx context.Context, tenantID, id string) (*ToolRevision, error)

	// PutSecret stores s, replacing the value of the tenant's secret of
	// that name (created is false then; CreatedAt stays). *LimitError past
	// limit secrets of the tenant.
	PutSecret(ctx context.Context, s *Secret, limit int) (created bool, err error)
	// Secret returns the tenant's secret name with its sealed value, or
	// ErrNotFound.
	Secret(ctx context.Context, tenantID, name string) (*Secret, error)
	// Secrets lists the tenant's secrets by name, without their values.
	Secrets(ctx context.Context, tenantID string) ([]*Secret, error)
	// DeleteSecret removes the tenant's secret name, or ErrNotFound.
	DeleteSecret(ctx context.Context, tenantID, name string) error

	// CreateToolset inserts ts; *LimitError past limit toolsets of the
	// tenant.
	CreateToolset(ctx context.Context, ts *Toolset, limit int) error
	// Toolset returns the tenant's toolset id, or ErrNotFound.
	Toolset(ctx context.Context, tenantID, id string) (*Toolset, error)
	// Toolsets lists the tenant's toolsets, oldest first.
	Toolsets(ctx context.Context, tenantID string) ([]*Toolset, error)
	// UpdateToolset replaces the name, description, tools and updated_at
	// of the tenant's toolset ts.ID, or ErrNotFound.
	UpdateToolset(ctx context.Context, ts *Toolset) error
	// DeleteToolset removes the tenant's toolset id, or ErrNotFound.
	DeleteToolset(ctx context.Context, tenantID, id string) error

	// PutSessionTools stores st as the tool set of the tenant's session
	// st.SessionID and st.Names as its tools, and appends evs, while the
	// session is active (else *StateError naming its status; ErrNotFound
	// when the tenant has no such session).
	PutSessionTools(ctx context.Context, st *SessionTools, evs ...*Event) error
	// SessionTools returns the tool set stored for the tenant's session,
	// or ErrNotFound when it was never given one with PUT.
	SessionTools(ctx context.Context, tenantID, sessionID string) (*SessionTools, error)
}
