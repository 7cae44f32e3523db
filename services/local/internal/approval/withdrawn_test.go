package approval

import (
	"context"
	"io/fs"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/servicetest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// TestCancelAfterDecision: approval_cancel of an approval an operator
// already approved or denied answers the decision as it stands, and local
// records that the caller withdrew after it (the decision was not used),
// once, with one WARN; a withdrawal sent again keeps the first time and
// logs nothing more. Cancelling a pending approval cancels it and one that
// expired stays expired, neither marked. On SQLite and on PostgreSQL.
func TestCancelAfterDecision(t *testing.T) {
	for _, be := range []string{"sqlite", "postgres"} {
		t.Run(be, func(t *testing.T) {
			cfg := Config{}
			if be == "postgres" {
				cfg.DatabaseURL = pg.NewDatabase(t)
			}
			var logs servicetest.LogBuffer
			f := newFixtureLogged(t, cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
			ctx := context.Background()
			start := func(args map[string]any) string {
				t.Helper()
				_, m := callJSON(t, f, "t1", "approval_start", args)
				id, _ := m["approval_id"].(string)
				if id == "" {
					t.Fatalf("approval_start: %v", m)
				}
				return id
			}
			cancel := func(id string) map[string]any {
				t.Helper()
				res, m := callJSON(t, f, "t1", "approval_cancel", map[string]any{"approval_id": id})
				if res.IsError {
					t.Fatalf("approval_cancel: %+v", res)
				}
				m["text"] = res.Content[0].Text
				return m
			}
			for _, tt := range []struct {
				decision Status
				state    string
			}{{Approved, "succeeded"}, {Denied, "failed"}} {
				id := start(map[string]any{"action": "rotate keys " + string(tt.decision)})
				if _, err := f.svc.Decide(ctx, id, tt.decision, "alice", "ok"); err != nil {
					t.Fatal(err)
				}
				before := time.Now().UTC().Truncate(time.Millisecond)
				m := cancel(id)
				sc := m["result"].(map[string]any)["structured_content"].(map[string]any)
				if m["state"] != tt.state || sc["decision"] != string(tt.decision) || sc["operator"] != "alice" {
					t.Fatalf("cancel after %s = %v", tt.decision, m)
				}
				if text := m["text"].(string); !strings.Contains(text, "after this decision: the decision was not used") {
					t.Fatalf("cancel text %q", text)
				}
				a, _ := f.svc.store.Get(ctx, id)
				if a.Status != tt.decision || a.WithdrawnAt.Before(before) || a.WithdrawnAt.After(time.Now()) {
					t.Fatalf("after the cancel: %s, withdrawn at %v (cancel sent at %v)", a.Status, a.WithdrawnAt, before)
				}
				time.Sleep(5 * time.Millisecond)
				cancel(id)
				if again, _ := f.svc.store.Get(ctx, id); !again.WithdrawnAt.Equal(a.WithdrawnAt) || again.Status != tt.decision {
					t.Fatalf("cancel sent again: %s withdrawn at %v, want %v kept", again.Status, again.WithdrawnAt, a.WithdrawnAt)
				}
				var warns []string
				for _, line := range strings.Split(logs.String(), "\n") {
					if strings.Contains(line, "level=WARN") && strings.Contains(line, "approval_id="+id) {
						warns = append(warns, line)
					}
				}
				if len(warns) != 1 {
					t.Fatalf("%d WARN lines for %s, want 1:\n%s", len(warns), id, logs.String())
				}
				for _, want := range []string{"decision was not used", "tenant_id=t1", "operator=alice", "status=" + string(tt.decision)} {
					if !strings.Contains(warns[0], want) {
						t.Errorf("WARN %q lacks %q", warns[0], want)
					}
				}
			}

			pending := start(map[string]any{"action": "still pending"})
			if m := cancel(pending); m["state"] != "cancelled" {
				t.Fatalf("cancel of a pending approval = %v", m)
			}
			if a, _ := f.svc.store.Get(ctx, pending); a.Status != Cancelled || a.Operator != CallerOperator || a.DecisionNotUsed() {
				t.Fatalf("cancelled approval %+v", a)
			}
			cancel(pending)
			if a, _ := f.svc.store.Get(ctx, pending); a.Status != Cancelled || a.DecisionNotUsed() {
				t.Fatalf("cancelled approval cancelled again %+v", a)
			}

			exp := start(map[string]any{"action": "soon gone", "timeout_seconds": 1})
			if _, err := f.svc.Wait(ctx, "t1", exp); err != nil {
				t.Fatal(err)
			}
			if m := cancel(exp); m["state"] != "failed" || strings.Contains(m["text"].(string), "not used") {
				t.Fatalf("cancel of an expired approval = %v", m)
			}
			if a, _ := f.svc.store.Get(ctx, exp); a.Status != Expired || a.DecisionNotUsed() {
				t.Fatalf("expired approval %+v", a)
			}
		})
	}
}

// TestPostgresUpgradeAddsWithdrawnAt: a PostgreSQL approval store at
// schema step 1 upgrades in place at open: its decided approval is kept,
// reads as used, and can be marked withdrawn after its decision; a mark
// made at step 2 is kept beside the audit log by step 3.
func TestPostgresUpgradeAddsWithdrawnAt(t *testing.T) {
	url := pg.NewDatabase(t)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	dir, err := fs.Sub(migrations, "migrations/postgres")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, dir, goose.WithDisableGlobalRegistry(true), goose.WithTableName(postgresVersionTable))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO approvals (id, tenant_id, session_id, call_id, origin, action, details, details_hash, status, created_at, expires_at, decided_at, operator)
		VALUES ('bbbbbbbbbbbbbbbbbbbbbbbbbb', 'acme', 's', 'c', 'approval_start', 'x', '', 'h', 'approved', 1, 2, 1, 'bob')`); err != nil {
		t.Fatal(err)
	}
	// At step 2, one marked not used, with its audit row: step 3 copies
	// the mark beside the audit log.
	if _, err := p.UpTo(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO approvals (id, tenant_id, session_id, call_id, origin, action, details, details_hash, status, created_at, expires_at, decided_at, operator, withdrawn_at)
		VALUES ('cccccccccccccccccccccccccc', 'acme', 's', 'c2', 'approval_start', 'x', '', 'h', 'denied', 1, 2, 1, 'bob', 7000)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO audit_log (at, operator, tenant_id, approval_id, decision, details_hash, comment)
		VALUES (1, 'bob', 'acme', 'cccccccccccccccccccccccccc', 'denied', 'h', '')`); err != nil {
		t.Fatal(err)
	}
	s := postgresBackend.open(t, url)
	var marks []time.Time
	if _, err := s.Audit(ctx, AuditQuery{Scope: Scope{All: true}}, func(e AuditEntry) error { marks = append(marks, e.WithdrawnAt); return nil }); err != nil ||
		len(marks) != 1 || !marks[0].Equal(time.UnixMilli(7000).UTC()) {
		t.Fatalf("the audit row of a decision marked before the upgrade: %v %v", marks, err)
	}
	a, err := s.Get(ctx, "bbbbbbbbbbbbbbbbbbbbbbbbbb")
	if err != nil || a.Status != Approved || a.Operator != "bob" || a.DecisionNotUsed() {
		t.Fatalf("after the upgrade: %+v %v", a, err)
	}
	if a, marked, err := s.MarkWithdrawn(ctx, a.ID); err != nil || !marked || !a.DecisionNotUsed() {
		t.Fatalf("mark on the upgraded database: %+v %v %v", a, marked, err)
	}
	var version int
	if err := db.QueryRowContext(ctx, `SELECT max(version_id) FROM `+postgresVersionTable).Scan(&version); err != nil || version != 3 {
		t.Fatalf("schema version %d: %v", version, err)
	}
}
