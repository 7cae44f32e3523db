package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The catalog (store.Catalog) on PostgreSQL: the tables of migration
// 00004_catalog.sql. A write that checks a tenant's count or name first
// takes a transaction-scoped advisory lock on the tenant and the kind, so
// that replicas racing for the last place under a limit (or one name) are
// serialized; a custom tool's update locks its row.

var _ store.Catalog = (*DB)(nil)

// lockTenant serializes, until tx ends, the writes of kind for tenant.
func lockTenant(ctx context.Context, tx pgx.Tx, kind, tenantID string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, kind+"/"+tenantID)
	return err
}

// countRows returns the tenant's rows of table.
func countRows(ctx context.Context, tx pgx.Tx, table, tenantID string) (int, error) {
	var n int
	err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM `+table+` WHERE tenant_id = $1`, tenantID).Scan(&n)
	return n, err
}

func insertRevision(ctx context.Context, tx pgx.Tx, r *store.ToolRevision) error {
	_, err := tx.Exec(ctx, `INSERT INTO tool_revisions (id, tool_id, tenant_id, definition, created_at) VALUES ($1, $2, $3, $4, $5)`,
		r.ID, r.ToolID, r.TenantID, string(r.Definition), unixNano(r.CreatedAt))
	return err
}

// CreateCustomTool implements store.Catalog.
func (db *DB) CreateCustomTool(ctx context.Context, t *store.CustomTool, limit int) error {
	return db.tx(ctx, "create custom tool", func(tx pgx.Tx) ([]*store.Event, error) {
		if err := lockTenant(ctx, tx, "custom_tools", t.TenantID); err != nil {
			return nil, err
		}
		n, err := countRows(ctx, tx, "custom_tools", t.TenantID)
		if err != nil {
			return nil, err
		}
		if n >= limit {
			return nil, &store.LimitError{What: "custom tools", Limit: limit}
		}
		var taken bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM custom_tools WHERE tenant_id = $1 AND name = $2)`, t.TenantID, t.Name).Scan(&taken); err != nil {
			return nil, err
		}
		if taken {
			return nil, store.ErrNameTaken
		}
		if err := insertRevision(ctx, tx, t.Revision); err != nil {
			return nil, err
		}
		_, err = tx.Exec(ctx, `INSERT INTO custom_tools (id, tenant_id, name, revision_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			t.ID, t.TenantID, t.Name, t.Revision.ID, unixNano(t.CreatedAt), unixNano(t.UpdatedAt))
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return nil, store.ErrNameTaken
		}
		return nil, err
	})
}

const customToolSelect = `SELECT t.id, t.tenant_id, t.name, t.created_at, t.updated_at,
	r.id, r.tool_id, r.tenant_id, r.definition, r.created_at
	FROM custom_tools t JOIN tool_revisions r ON r.id = t.revision_id`

func scanCustomTool(row pgx.Row) (*store.CustomTool, error) {
	var (
		t                store.CustomTool
		r                store.ToolRevision
		def              string
		tc, tu, rcreated int64
	)
	if err := row.Scan(&t.ID, &t.TenantID, &t.Name, &tc, &tu, &r.ID, &r.ToolID, &r.TenantID, &def, &rcreated); err != nil {
		return nil, err
	}
	t.CreatedAt, t.UpdatedAt = fromUnixNano(tc), fromUnixNano(tu)
	r.Definition, r.CreatedAt = json.RawMessage(def), fromUnixNano(rcreated)
	t.Revision = &r
	return &t, nil
}

func (db *DB) oneCustomTool(ctx context.Context, where string, args ...any) (*store.CustomTool, error) {
	t, err := scanCustomTool(db.pool.QueryRow(ctx, customToolSelect+` WHERE `+where, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read custom tool: %w", err)
	}
	return t, nil
}

// CustomTool implements store.Catalog.
func (db *DB) CustomTool(ctx context.Context, tenantID, id string) (*store.CustomTool, error) {
	return db.oneCustomTool(ctx, `t.id = $1 AND t.tenant_id = $2`, id, tenantID)
}

// CustomToolByName implements store.Catalog.
func (db *DB) CustomToolByName(ctx context.Context, tenantID, name string) (*store.CustomTool, error) {
	return db.oneCustomTool(ctx, `t.tenant_id = $1 AND t.name = $2`, tenantID, name)
}

// CustomTools implements store.Catalog.
func (db *DB) CustomTools(ctx context.Context, tenantID string) ([]*store.CustomTool, error) {
	rows, err := db.pool.Query(ctx, customToolSelect+` WHERE t.tenant_id = $1 ORDER BY t.id`, tenantID)
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
	err := db.tx(ctx, "update custom tool", func(tx pgx.Tx) ([]*store.Event, error) {
		var cur string
		err := tx.QueryRow(ctx, `SELECT revision_id FROM custom_tools WHERE id = $1 AND tenant_id = $2 FOR UPDATE`, id, tenantID).Scan(&cur)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, store.ErrNotFound
		}
		if err != nil {
			return nil, err
		}
		if cur != fromRevision {
			return nil, &store.RevisionError{Current: cur}
		}
		if limit > 0 {
			// The tool's row is locked (FOR UPDATE): no other revision of
			// it is added meanwhile.
			var n int
			if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM tool_revisions WHERE tool_id = $1 AND tenant_id = $2`, id, tenantID).Scan(&n); err != nil {
				return nil, fmt.Errorf("count revisions: %w", err)
			}
			if n >= limit {
				return nil, &store.LimitError{What: "revisions", Limit: limit}
			}
		}
		if err := insertRevision(ctx, tx, rev); err != nil {
			return nil, err
		}
		_, err = tx.Exec(ctx, `UPDATE custom_tools SET revision_id = $1, updated_at = $2 WHERE id = $3`, rev.ID, unixNano(rev.CreatedAt), id)
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	return db.CustomTool(ctx, tenantID, id)
}

// deleteOne runs a DELETE that must remove one row of the tenant's.
func (db *DB) deleteOne(ctx context.Context, what, q string, args ...any) error {
	return db.tx(ctx, "delete "+what, func(tx pgx.Tx) ([]*store.Event, error) {
		tag, err := tx.Exec(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 0 {
			return nil, store.ErrNotFound
		}
		return nil, nil
	})
}

// DeleteCustomTool implements store.Catalog.
func (db *DB) DeleteCustomTool(ctx context.Context, tenantID, id string) error {
	return db.deleteOne(ctx, "custom tool", `DELETE FROM custom_tools WHERE id = $1 AND tenant_id = $2`, id, tenantID)
}

// ToolRevision implements store.Catalog.
func (db *DB) ToolRevision(ctx context.Context, tenantID, id string) (*store.ToolRevision, error) {
	var (
		r       store.ToolRevision
		def     string
		created int64
	)
	err := db.pool.QueryRow(ctx, `SELECT id, tool_id, tenant_id, definition, created_at FROM tool_revisions WHERE id = $1 AND tenant_id = $2`,
		id, tenantID).Scan(&r.ID, &r.ToolID, &r.TenantID, &def, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read tool revision: %w", err)
	}
	r.Definition, r.CreatedAt = json.RawMessage(def), fromUnixNano(created)
	return &r, nil
}

// PutSecret implements store.Catalog.
func (db *DB) PutSecret(ctx context.Context, s *store.Secret, limit int) (bool, error) {
	var created bool
	err := db.tx(ctx, "put secret", func(tx pgx.Tx) ([]*store.Event, error) {
		if err := lockTenant(ctx, tx, "secrets", s.TenantID); err != nil {
			return nil, err
		}
		tag, err := tx.Exec(ctx, `UPDATE secrets SET sealed = $1, updated_at = $2 WHERE tenant_id = $3 AND name = $4`,
			s.Sealed, unixNano(s.UpdatedAt), s.TenantID, s.Name)
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() > 0 {
			created = false
			return nil, nil
		}
		n, err := countRows(ctx, tx, "secrets", s.TenantID)
		if err != nil {
			return nil, err
		}
		if n >= limit {
			return nil, &store.LimitError{What: "secrets", Limit: limit}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO secrets (tenant_id, name, sealed, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)`,
			s.TenantID, s.Name, s.Sealed, unixNano(s.CreatedAt), unixNano(s.UpdatedAt)); err != nil {
			return nil, err
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
	err := db.pool.QueryRow(ctx, `SELECT sealed, created_at, updated_at FROM secrets WHERE tenant_id = $1 AND name = $2`,
		tenantID, name).Scan(&s.Sealed, &created, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
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
	rows, err := db.pool.Query(ctx, `SELECT name, created_at, updated_at FROM secrets WHERE tenant_id = $1 ORDER BY name`, tenantID)
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
	return db.deleteOne(ctx, "secret", `DELETE FROM secrets WHERE tenant_id = $1 AND name = $2`, tenantID, name)
}

// CreateToolset implements store.Catalog.
func (db *DB) CreateToolset(ctx context.Context, ts *store.Toolset, limit int) error {
	tools, err := json.Marshal(nonNil(ts.Tools))
	if err != nil {
		return fmt.Errorf("create toolset: %w", err)
	}
	return db.tx(ctx, "create toolset", func(tx pgx.Tx) ([]*store.Event, error) {
		if err := lockTenant(ctx, tx, "toolsets", ts.TenantID); err != nil {
			return nil, err
		}
		n, err := countRows(ctx, tx, "toolsets", ts.TenantID)
		if err != nil {
			return nil, err
		}
		if n >= limit {
			return nil, &store.LimitError{What: "toolsets", Limit: limit}
		}
		_, err = tx.Exec(ctx, `INSERT INTO toolsets (id, tenant_id, name, description, tools, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			ts.ID, ts.TenantID, ts.Name, ts.Description, string(tools), unixNano(ts.CreatedAt), unixNano(ts.UpdatedAt))
		return nil, err
	})
}

const toolsetSelect = `SELECT id, tenant_id, name, description, tools, created_at, updated_at FROM toolsets`

func scanToolset(row pgx.Row) (*store.Toolset, error) {
	var (
		ts               store.Toolset
		tools            string
		created, updated int64
	)
	if err := row.Scan(&ts.ID, &ts.TenantID, &ts.Name, &ts.Description, &tools, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(tools), &ts.Tools); err != nil {
		return nil, fmt.Errorf("toolset %s: tools: %w", ts.ID, err)
	}
	ts.CreatedAt, ts.UpdatedAt = fromUnixNano(created), fromUnixNano(updated)
	return &ts, nil
}

// Toolset implements store.Catalog.
func (db *DB) Toolset(ctx context.Context, tenantID, id string) (*store.Toolset, error) {
	ts, err := scanToolset(db.pool.QueryRow(ctx, toolsetSelect+` WHERE id = $1 AND tenant_id = $2`, id, tenantID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read toolset: %w", err)
	}
	return ts, nil
}

// Toolsets implements store.Catalog.
func (db *DB) Toolsets(ctx context.Context, tenantID string) ([]*store.Toolset, error) {
	rows, err := db.pool.Query(ctx, toolsetSelect+` WHERE tenant_id = $1 ORDER BY id`, tenantID)
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
	tools, err := json.Marshal(nonNil(ts.Tools))
	if err != nil {
		return fmt.Errorf("update toolset: %w", err)
	}
	return db.tx(ctx, "update toolset", func(tx pgx.Tx) ([]*store.Event, error) {
		tag, err := tx.Exec(ctx, `UPDATE toolsets SET name = $1, description = $2, tools = $3, updated_at = $4 WHERE id = $5 AND tenant_id = $6`,
			ts.Name, ts.Description, string(tools), unixNano(ts.UpdatedAt), ts.ID, ts.TenantID)
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 0 {
			return nil, store.ErrNotFound
		}
		return nil, nil
	})
}

// DeleteToolset implements store.Catalog.
func (db *DB) DeleteToolset(ctx context.Context, tenantID, id string) error {
	return db.deleteOne(ctx, "toolset", `DELETE FROM toolsets WHERE id = $1 AND tenant_id = $2`, id, tenantID)
}

// PutSessionTools implements store.Catalog: the session's row is locked
// (nextSeq) while its status is checked, its tool set and tools replaced
// and its events numbered.
func (db *DB) PutSessionTools(ctx context.Context, st *store.SessionTools, evs ...*store.Event) error {
	names, err := json.Marshal(nonNil(st.Names))
	if err != nil {
		return fmt.Errorf("put session tools: %w", err)
	}
	return db.tx(ctx, "put session tools", func(tx pgx.Tx) ([]*store.Event, error) {
		seq, err := nextSeq(ctx, tx, st.TenantID, st.SessionID, len(evs), store.SessionActive)
		if err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO session_tools (session_id, tenant_id, entries, updated_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (session_id) DO UPDATE SET entries = excluded.entries, updated_at = excluded.updated_at`,
			st.SessionID, st.TenantID, string(st.Entries), unixNano(st.UpdatedAt)); err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, `UPDATE sessions SET tools = $1, updated_at = $2 WHERE id = $3`, string(names), unixNano(st.UpdatedAt), st.SessionID); err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return nil, nil
		}
		return evs, db.appendEvents(ctx, tx, seq, evs...)
	})
}

// SessionTools implements store.Catalog.
func (db *DB) SessionTools(ctx context.Context, tenantID, sessionID string) (*store.SessionTools, error) {
	st := store.SessionTools{SessionID: sessionID, TenantID: tenantID}
	var (
		entries, names string
		updated        int64
	)
	err := db.pool.QueryRow(ctx, `SELECT st.entries, st.updated_at, s.tools FROM session_tools st
		JOIN sessions s ON s.id = st.session_id WHERE st.session_id = $1 AND st.tenant_id = $2`, sessionID, tenantID).Scan(&entries, &updated, &names)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read session tools: %w", err)
	}
	if err := json.Unmarshal([]byte(names), &st.Names); err != nil {
		return nil, fmt.Errorf("read session tools %s: %w", sessionID, err)
	}
	st.Entries, st.UpdatedAt = json.RawMessage(entries), fromUnixNano(updated)
	return &st, nil
}
