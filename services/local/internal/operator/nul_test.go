package operator

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/brain-tools/suite/services/local/internal/approval"
)

// TestNULInPageInputsIsRefused: a NUL (U+0000) in a value the page looks
// up in the store or keeps there — the queue's and the audit log's
// filters, a decision's comment — is a 400 naming the field on both
// stores, and decides nothing. A tester found PostgreSQL answering 500
// (invalid byte sequence for encoding "UTF8": 0x00) where SQLite answered
// 200 or took the comment, and the audit export answering 200 with the
// header row alone.
func TestNULInPageInputsIsRefused(t *testing.T) {
	const nul = "a%00b"
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			s := newStackOn(t, Config{}, st.config(t))
			c := s.client()
			csrf := c.signIn("alice", operatorToken)
			p := s.requestApproval("c1", map[string]any{"action": "rotate keys"})
			for _, tc := range []struct{ name, path, field string }{
				{"queue search", "/approvals?q=" + nul, "q"},
				{"queue tenant", "/approvals?tenant=" + nul, "tenant"},
				{"queue session", "/approvals?session=" + nul, "session"},
				{"live rows search", "/approvals/rows?q=" + nul, "q"},
				{"live rows tenant", "/approvals/rows?tenant=" + nul, "tenant"},
				{"live rows session", "/approvals/rows?session=" + nul, "session"},
				{"audit log tenant", "/operator/audit?tenant=" + nul, "tenant"},
				{"audit log operator", "/operator/audit?operator=" + nul, "operator"},
				{"audit export tenant", "/operator/audit.csv?tenant=" + nul, "tenant"},
				{"audit export operator", "/operator/audit.csv?operator=" + nul, "operator"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					a := c.get(tc.path)
					want := tc.field + ": must not contain NUL (U+0000)."
					has := strings.Contains(html.UnescapeString(a.body), want)
					if a.status != http.StatusBadRequest || !has || a.header.Get("Content-Disposition") != "" {
						t.Fatalf("GET %s: status %d, Content-Disposition %q, body has %q: %v; want 400 with it",
							tc.path, a.status, a.header.Get("Content-Disposition"), want, has)
					}
				})
			}
			t.Run("decision comment", func(t *testing.T) {
				a := c.post("/approval/"+p.ID+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}, "comment": {"a\x00b"}})
				want := "comment: must not contain NUL (U+0000)."
				if has := strings.Contains(html.UnescapeString(a.body), want); a.status != http.StatusBadRequest || !has {
					t.Fatalf("status %d, body has %q: %v; want 400 with it", a.status, want, has)
				}
				if got, err := s.svc.Store().Get(context.Background(), p.ID); err != nil || got.Status != approval.Pending {
					t.Fatalf("the refused decision decided the approval: %s %v", got.Status, err)
				}
			})
		})
	}
}
