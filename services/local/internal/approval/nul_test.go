package approval

import (
	"context"
	"testing"

	"github.com/brain-tools/suite/pkg/jobs"
)

// TestNULInToolCallsIsRefused: a NUL (U+0000) in a string the store keeps
// or finds an approval by — action, details, the request's tenant_id,
// session_id and call_id, approval_status's and approval_cancel's call_id —
// is refused before the store sees it, the same on both stores. A tester
// found PostgreSQL answering "could not record the approval request:
// internal error" with unknown_outcome (invalid byte sequence for encoding
// "UTF8": 0x00) although nothing was recorded, where SQLite stored the
// request.
func TestNULInToolCallsIsRefused(t *testing.T) {
	const nul = "a\x00b"
	for _, be := range []struct {
		name string
		cfg  func(t *testing.T) Config
	}{
		{"sqlite", func(*testing.T) Config { return Config{} }},
		{"postgres", func(t *testing.T) Config { return Config{DatabaseURL: pg.NewDatabase(t)} }},
	} {
		t.Run(be.name, func(t *testing.T) {
			f := newFixture(t, be.cfg(t))
			type tc struct {
				name                  string
				tool                  string
				tenant, session, call string
				args                  map[string]any
				want                  string
			}
			var cases []tc
			// timeout_seconds 1: a request taken by mistake expires at
			// once instead of holding the test.
			for _, tool := range []string{"request_approval", "approval_start"} {
				cases = append(cases,
					tc{tool + " action", tool, "t1", "s1", "c-action", map[string]any{"action": nul, "timeout_seconds": 1}, "invalid arguments: action: must not contain NUL (U+0000)"},
					tc{tool + " details", tool, "t1", "s1", "c-details", map[string]any{"action": "x", "details": nul, "timeout_seconds": 1}, "invalid arguments: details: must not contain NUL (U+0000)"},
					tc{tool + " tenant_id", tool, nul, "s1", "c-tenant", map[string]any{"action": "x", "timeout_seconds": 1}, "invalid request: tenant_id: must not contain NUL (U+0000)"},
					tc{tool + " session_id", tool, "t1", nul, "c-session", map[string]any{"action": "x", "timeout_seconds": 1}, "invalid request: session_id: must not contain NUL (U+0000)"},
					tc{tool + " call_id", tool, "t1", "s1", nul, map[string]any{"action": "x", "timeout_seconds": 1}, "invalid request: call_id: must not contain NUL (U+0000)"},
				)
			}
			for _, tool := range []string{"approval_status", "approval_cancel"} {
				cases = append(cases,
					tc{tool + " call_id argument", tool, "t1", "s1", "c-status", map[string]any{"call_id": nul}, "invalid arguments: call_id: must not contain NUL (U+0000)"},
					tc{tool + " tenant_id", tool, nul, "s1", "c-status", map[string]any{"call_id": "c1"}, "invalid request: tenant_id: must not contain NUL (U+0000)"},
					tc{tool + " session_id", tool, "t1", nul, "c-status", map[string]any{"call_id": "c1"}, "invalid request: session_id: must not contain NUL (U+0000)"},
					tc{tool + " call_id", tool, "t1", "s1", nul, map[string]any{"approval_id": jobs.NewID()}, "invalid request: call_id: must not contain NUL (U+0000)"},
				)
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					res, _ := callAs(t, f, c.tenant, c.session, c.call, c.tool, c.args)
					if !res.IsError || res.UnknownOutcome || len(res.Content) != 1 || res.Content[0].Text != c.want {
						t.Fatalf("got is_error %v, unknown_outcome %v, %+v; want is_error, no unknown_outcome, %q", res.IsError, res.UnknownOutcome, res.Content, c.want)
					}
				})
			}
			got, n, err := f.svc.store.Find(context.Background(), Query{Scope: Scope{All: true}, State: StateAll, Limit: 10})
			if err != nil || n != 0 {
				t.Fatalf("recorded %d approvals (%v): %+v; want none", n, err, got)
			}
		})
	}
}
