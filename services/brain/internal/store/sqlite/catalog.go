package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/brain-tools/suite/services/brain/internal/store"
)

// The catalog (store.Catalog) on SQLite: the tables of migration
// 00005_catalog.sql. Every check of a write (a name taken, a stale
// revision, a limit, a session no longer active) is made by the single
// writer in the write's own transaction.

var _ store.Catalog = (*DB)(nil)

// count returns the tenant's rows in table, within tx.
func count(tx *sql.Tx, table, tenantID string) (int, error) {
	var n int
	err := tx.QueryRow(`SELECT COUNT(*) FROM `+table+` WHERE tenant_id = ?`, tenantID).Scan(&n)
	return n, err
}

func insertRevision(tx *sql.Tx, r *store.ToolRevision) error {
	_, err := tx.Exec(`INSERT INTO tool_revisions (id, tool_id, tenant_id, definition, created_at) VALUES (?, ?, ?, ?, ?)`,
		r.ID, r.ToolID, r.TenantID, string(r.Definition), r.CreatedAt.UnixNano())
	return err
}

// CreateCustomTool implements store.Catalog.
func (db *DB) CreateCustomTool(ctx context.Context, t *store.CustomTool, limit int) error {
	return db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		n, err := count(tx, "custom_tools", t.TenantID)
		if err != nil {
			return nil, fmt.Errorf("create custom tool: %w", err)
		}
		if n >= limit {
			return nil, &store.LimitError{What: "custom tools", Limit: limit}
		}
		var taken int
		if err := tx.QueryRow(`SELECT COUNT(*) FROM custom_tools WHERE tenant_id = ? AND name = ?`, t.TenantID, t.Name).Scan(&taken); err != nil {
			return nil, fmt.Errorf("create custom tool: %w", err)
		}
		if taken > 0 {
			return nil, store.ErrNameTaken
		}
		if err := insertRevision(tx, t.Revision); err != nil {
			return nil, fmt.Errorf("create custom tool: %w", err)
		}
		if _, err := tx.Exec(`INSERT INTO custom_tools (id, tenant_id, name, revision_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			t.ID, t.TenantID, t.Name, t.Revision.ID, t.CreatedAt.UnixNano(), t.UpdatedAt.UnixNano()); err != nil {
			return nil, fmt.Errorf("create custom tool: %w", err)
		}
		return nil, nil
	})
}

const customToolSelect = `SELECT t.id, t.tenant_id, t.name, t.created_at, t.updated_at,
	r.id, r.tool_id, r.tenant_id, r.definition, r.created_at
	FROM custom_tools t JOIN tool_revisions r ON r.id = t.revision_id`

func scanCustomTool(sc scanner) (*store.CustomTool, error) {
	var (
		t                store.CustomTool
		r                store.ToolRevision
		def              string
		tc, tu, rcreated int64
	)
	if err := sc.Scan(&t.ID, &t.TenantID, &t.Name, &tc, &tu, &r.ID, &r.ToolID, &r.TenantID, &def, &rcreated); err != nil {
		return nil, err
	}
	t.CreatedAt, t.UpdatedAt = fromUnixNano(tc), fromUnixNano(tu)
	r.Definition, r.CreatedAt = []byte(def), fromUnixNano(rcreated)
	t.Revision = &r
	return &t, nil
}

func (db *DB) oneCustomTool(ctx context.Context, where string, args ...any) (*store.CustomTool, error) {
	t, err := scanCustomTool(db.read.QueryRowContext(ctx, customToolSelect+` WHERE `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read custom tool: %w", err)
	}
	return t, nil
}

// CustomTool implements store.Catalog.
func (db *DB) CustomTool(ctx context.Context, tenantID, id string) (*store.CustomTool, error) {
	return db.oneCustomTool(ctx, `t.id = ? AND t.tenant_id = ?`, id, tenantID)
}

// CustomToolByName implements store.Catalog.
func (db *DB) CustomToolByName(ctx context.Context, tenantID, name string) (*store.CustomTool, error) {
	return db.oneCustomTool(ctx, `t.tenant_id = ? AND t.name = ?`, tenantID, name)
}

// CustomTools implements store.Catalog.
func (db *DB) CustomTools(ctx context.Context, tenantID string) ([]*store.CustomTool, error) {
	rows, err := db.read.QueryContext(ctx, customToolSelect+` WHERE t.tenant_id = ? ORDER BY t.id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list custom tools: %w", err)
	}
	defer rows.Close()
	var out []*store.CustomTool
	for rows.Next() {
		t, err := scanCustomTool(rows)
		if err != nil {
			return nil, fmt.Errorf("list custom tools: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list custom tools: %w", err)
	}
	return out, nil
}

// UpdateCustomTool implements store.Catalog.
func (db *DB) UpdateCustomTool(ctx context.Context, tenantID, id, fromRevision string, rev *store.ToolRevision, limit int) (*store.CustomTool, error) {
	err := db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		var cur string
		err := tx.QueryRow(`SELECT revision_id FROM custom_tools WHERE id = ? AND tenant_id = ?`, id, tenantID).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("update custom tool: %w", err)
		}
		if cur != fromRevision {
			return nil, &store.RevisionError{Current: cur}
		}
		if limit > 0 {
			var n int
			if err := tx.QueryRow(`SELECT COUNT(*) FROM tool_revisions WHERE tool_id = ? AND tenant_id = ?`, id, tenantID).Scan(&n); err != nil {
				return nil, fmt.Errorf("update custom tool: count revisions: %w", err)
			}
			if n >= limit {
				return nil, &store.LimitError{What: "revisions", Limit: limit}
			}
		}
		if err := insertRevision(tx, rev); err != nil {
			return nil, fmt.Errorf("update custom tool: %w", err)
		}
		if _, err := tx.Exec(`UPDATE custom_tools SET revision_id = ?, updated_at = ? WHERE id = ? AND tenant_id = ?`,
			rev.ID, rev.CreatedAt.UnixNano(), id, tenantID); err != nil {
			return nil, fmt.Errorf("update custom tool: %w", err)
		}
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return db.CustomTool(ctx, tenantID, id)
}

// deleteOne runs a DELETE that must remove one row of the tenant's.
func (db *DB) deleteOne(ctx context.Context, what, q string, args ...any) error {
	return db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		res, err := tx.Exec(q, args...)
		if err != nil {
			return nil, fmt.Errorf("delete %s: %w", what, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, fmt.Errorf("delete %s: %w", what, err)
		} else if n == 0 {
			return nil, store.ErrNotFound
		}
		return nil, nil
	})
}

// DeleteCustomTool implements store.Catalog.
func (db *DB) DeleteCustomTool(ctx context.Context, tenantID, id string) error {
	return db.deleteOne(ctx, "custom tool", `DELETE FROM custom_tools WHERE id = ? AND tenant_id = ?`, id, tenantID)
}

// ToolRevision implements store.Catalog.
func (db *DB) ToolRevision(ctx context.Context, tenantID, id string) (*store.ToolRevision, error) {
	var (
		r       store.ToolRevision
		def     string
		created int64
	)
	err := db.read.QueryRowContext(ctx, `SELECT id, tool_id, tenant_id, definition, created_at FROM tool_revisions WHERE id = ? AND tenant_id = ?`,
		id, tenantID).Scan(&r.ID, &r.ToolID, &r.TenantID, &def, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read tool revision: %w", err)
	}
	r.Definition, r.CreatedAt = []byte(def), fromUnixNano(created)
	return &r, nil
}

// PutSecret implements store.Catalog.
func (db *DB) PutSecret(ctx context.Context, s *store.Secret, limit int) (bool, error) {
	var created bool
	err := db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		res, err := tx.Exec(`UPDATE secrets SET sealed = ?, updated_at = ? WHERE tenant_id = ? AND name = ?`,
			s.Sealed, s.UpdatedAt.UnixNano(), s.TenantID, s.Name)
		if err != nil {
			return nil, fmt.Errorf("put secret: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, fmt.Errorf("put secret: %w", err)
		} else if n > 0 {
			created = false
			return nil, nil
		}
		n, err := count(tx, "secrets", s.TenantID)
		if err != nil {
			return nil, fmt.Errorf("put secret: %w", err)
		}
		if n >= limit {
			return nil, &store.LimitError{What: "secrets", Limit: limit}
		}
		if _, err := tx.Exec(`INSERT INTO secrets (tenant_id, name, sealed, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
			s.TenantID, s.Name, s.Sealed, s.CreatedAt.UnixNano(), s.UpdatedAt.UnixNano()); err != nil {
			return nil, fmt.Errorf("put secret: %w", err)
		}
		created = true
		return nil, nil
	})
	return created, err
}

// Secret implements store.Catalog.
func (db *DB) Secret(ctx context.Context, tenantID, name string) (*store.Secret, error) {
	s := store.Secret{TenantID: tenantID, Name: name}
	var created, updated int64
	err := db.read.QueryRowContext(ctx, `SELECT sealed, created_at, updated_at FROM secrets WHERE tenant_id = ? AND name = ?`,
		tenantID, name).Scan(&s.Sealed, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read secret: %w", err)
	}
	s.CreatedAt, s.UpdatedAt = fromUnixNano(created), fromUnixNano(updated)
	return &s, nil
}

// Secrets implements store.Catalog.
func (db *DB) Secrets(ctx context.Context, tenantID string) ([]*store.Secret, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT name, created_at, updated_at FROM secrets WHERE tenant_id = ? ORDER BY name`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	defer rows.Close()
	var out []*store.Secret
	for rows.Next() {
		s := &store.Secret{TenantID: tenantID}
		var created, updated int64
		if err := rows.Scan(&s.Name, &created, &updated); err != nil {
			return nil, fmt.Errorf("list secrets: %w", err)
		}
		s.CreatedAt, s.UpdatedAt = fromUnixNano(created), fromUnixNano(updated)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// DeleteSecret implements store.Catalog.
func (db *DB) DeleteSecret(ctx context.Context, tenantID, name string) error {
	return db.deleteOne(ctx, "secret", `DELETE FROM secrets WHERE tenant_id = ? AND name = ?`, tenantID, name)
}

// CreateToolset implements store.Catalog.
func (db *DB) CreateToolset(ctx context.Context, ts *store.Toolset, limit int) error {
	tools, err := marshalStrings(ts.Tools)
	if err != nil {
		return fmt.Errorf("create toolset: %w", err)
	}
	return db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		n, err := count(tx, "toolsets", ts.TenantID)
		if err != nil {
			return nil, fmt.Errorf("create toolset: %w", err)
		}
		if n >= limit {
			return nil, &store.LimitError{What: "toolsets", Limit: limit}
		}
		if _, err := tx.Exec(`INSERT INTO toolsets (id, tenant_id, name, description, tools, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			ts.ID, ts.TenantID, ts.Name, ts.Description, tools, ts.CreatedAt.UnixNano(), ts.UpdatedAt.UnixNano()); err != nil {
			return nil, fmt.Errorf("create toolset: %w", err)
		}
		return nil, nil
	})
}

const toolsetSelect = `SELECT id, tenant_id, name, description, tools, created_at, updated_at FROM toolsets`

func scanToolset(sc scanner) (*store.Toolset, error) {
	var (
		ts               store.Toolset
		tools            string
		created, updated int64
	)
	if err := sc.Scan(&ts.ID, &ts.TenantID, &ts.Name, &ts.Description, &tools, &created, &updated); err != nil {
		return nil, err
	}
	var err error
	if ts.Tools, err = unmarshalStrings(tools); err != nil {
		return nil, fmt.Errorf("toolset %s: tools: %w", ts.ID, err)
	}
	ts.CreatedAt, ts.UpdatedAt = fromUnixNano(created), fromUnixNano(updated)
	return &ts, nil
}

// Toolset implements store.Catalog.
func (db *DB) Toolset(ctx context.Context, tenantID, id string) (*store.Toolset, error) {
	ts, err := scanToolset(db.read.QueryRowContext(ctx, toolsetSelect+` WHERE id = ? AND tenant_id = ?`, id, tenantID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read toolset: %w", err)
	}
	return ts, nil
}

// Toolsets implements store.Catalog.
func (db *DB) Toolsets(ctx context.Context, tenantID string) ([]*store.Toolset, error) {
	rows, err := db.read.QueryContext(ctx, toolsetSelect+` WHERE tenant_id = ? ORDER BY id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("list toolsets: %w", err)
	}
	defer rows.Close()
	var out []*store.Toolset
	for rows.Next() {
		ts, err := scanToolset(rows)
		if err != nil {
			return nil, fmt.Errorf("list toolsets: %w", err)
		}
		out = append(out, ts)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list toolsets: %w", err)
	}
	return out, nil
}

// UpdateToolset implements store.Catalog.
func (db *DB) UpdateToolset(ctx context.Context, ts *store.Toolset) error {
	tools, err := marshalStrings(ts.Tools)
	if err != nil {
		return fmt.Errorf("update toolset: %w", err)
	}
	return db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		res, err := tx.Exec(`UPDATE toolsets SET name = ?, description = ?, tools = ?, updated_at = ? WHERE id = ? AND tenant_id = ?`,
			ts.Name, ts.Description, tools, ts.UpdatedAt.UnixNano(), ts.ID, ts.TenantID)
		if err != nil {
			return nil, fmt.Errorf("update toolset: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, fmt.Errorf("update toolset: %w", err)
		} else if n == 0 {
			return nil, store.ErrNotFound
		}
		return nil, nil
	})
}

// DeleteToolset implements store.Catalog.
func (db *DB) DeleteToolset(ctx context.Context, tenantID, id string) error {
	return db.deleteOne(ctx, "toolset", `DELETE FROM toolsets WHERE id = ? AND tenant_id = ?`, id, tenantID)
}

// PutSessionTools implements store.Catalog.
func (db *DB) PutSessionTools(ctx context.Context, st *store.SessionTools, evs ...*store.Event) error {
	names, err := marshalStrings(st.Names)
	if err != nil {
		return fmt.Errorf("put session tools: %w", err)
	}
	return db.do(ctx, func(tx *sql.Tx) ([]*store.Event, error) {
		cur, err := db.sessionStatus(tx, st.TenantID, st.SessionID)
		if err != nil {
			return nil, err
		}
		if cur != store.SessionActive {
			return nil, &store.StateError{What: "session", Status: cur}
		}
		if _, err := tx.Exec(`INSERT INTO session_tools (session_id, tenant_id, entries, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (session_id) DO UPDATE SET entries = excluded.entries, updated_at = excluded.updated_at`,
			st.SessionID, st.TenantID, string(st.Entries), st.UpdatedAt.UnixNano()); err != nil {
			return nil, fmt.Errorf("put session tools: %w", err)
		}
		if _, err := tx.Exec(`UPDATE sessions SET tools = ?, updated_at = ? WHERE id = ? AND tenant_id = ?`,
			names, st.UpdatedAt.UnixNano(), st.SessionID, st.TenantID); err != nil {
			return nil, fmt.Errorf("put session tools: %w", err)
		}
		for _, ev := range evs {
			if err := db.appendEvent(tx, ev); err != nil {
				return nil, fmt.Errorf("put session tools: %w", err)
			}
		}
		return evs, nil
	})
}

// SessionTools implements store.Catalog.
func (db *DB) SessionTools(ctx context.Context, tenantID, sessionID string) (*store.SessionTools, error) {
	st := store.SessionTools{SessionID: sessionID, TenantID: tenantID}
	var (
		entries, names string
		updated        int64
	)
	err := db.read.QueryRowContext(ctx, `SELECT st.entries, st.updated_at, s.tools FROM session_tools st
		JOIN sessions s ON s.id = st.session_id WHERE st.session_id = ? AND st.tenant_id = ?`, sessionID, tenantID).
		Scan(&entries, &updated, &names)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read session tools: %w", err)
	}
	if st.Names, err = unmarshalStrings(names); err != nil {
		return nil, fmt.Errorf("read session tools %s: %w", sessionID, err)
	}
	st.Entries, st.UpdatedAt = []byte(entries), fromUnixNano(updated)
	return &st, nil
}
