package operator

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/local/internal/approval"
)

// TestAuditExportFailureIsVisible: the audit CSV export is whole or
// visibly broken, on both stores. A failure before the first row (here
// the store closed) is an error status, not a 200 with the header row
// alone; one after rows went out cuts the download, which the client
// reads as a broken body, not as a shorter complete file. An export with
// no rows is a complete file of its header row.
func TestAuditExportFailureIsVisible(t *testing.T) {
	errLost := errors.New("connection to the store lost")
	for _, st := range stores {
		for _, tc := range []struct {
			name      string
			path      string
			breakIt   func(s *stack)
			status    int
			rows      int  // CSV records read, the header row one of them
			cut       bool // the body ends in an error
			wantCSV   bool
			wantInLog string
		}{
			{name: "store down before the first row", path: "/operator/audit.csv",
				breakIt: func(s *stack) { s.svc.Store().Close() }, status: http.StatusInternalServerError},
			{name: "store fails after two rows went out", path: "/operator/audit.csv",
				breakIt: func(s *stack) {
					audit := s.page.auditRows
					s.page.auditRows = func(ctx context.Context, q approval.AuditQuery, f func(approval.AuditEntry) error) (int, error) {
						n := 0
						return audit(ctx, q, func(e approval.AuditEntry) error {
							if n == 2 {
								return errLost
							}
							n++
							return f(e)
						})
					}
				}, status: http.StatusOK, rows: 3, cut: true, wantCSV: true},
			{name: "no rows", path: "/operator/audit.csv?tenant=nobody", status: http.StatusOK, rows: 1, wantCSV: true},
			{name: "every row", path: "/operator/audit.csv", status: http.StatusOK, rows: 4, wantCSV: true},
		} {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				s := newStackOn(t, Config{}, st.config(t))
				ctx := context.Background()
				for i := range 3 {
					a, _, err := s.svc.Request(ctx, approval.NewApproval{TenantID: "acme", SessionID: "s", CallID: fmt.Sprint("c", i), Origin: approval.OriginJob, Action: "x", Timeout: time.Hour})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := s.svc.Decide(ctx, a.ID, approval.Approved, "alice", "fine"); err != nil {
						t.Fatal(err)
					}
				}
				c := s.client()
				c.signIn("alice", operatorToken)
				if tc.breakIt != nil {
					tc.breakIt(s)
				}
				resp, err := c.http.Get(c.base + tc.path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, readErr := io.ReadAll(resp.Body)
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
				}
				if isCSV := resp.Header.Get("Content-Disposition") != ""; isCSV != tc.wantCSV {
					t.Fatalf("Content-Disposition %q, want an attachment: %v", resp.Header.Get("Content-Disposition"), tc.wantCSV)
				}
				if cut := readErr != nil; cut != tc.cut {
					t.Fatalf("reading the body: %v; want it cut: %v", readErr, tc.cut)
				}
				if tc.cut && !errors.Is(readErr, io.ErrUnexpectedEOF) {
					t.Fatalf("reading the body: %v, want an unexpected EOF", readErr)
				}
				if !tc.wantCSV {
					return
				}
				rows, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
				if err != nil || len(rows) != tc.rows || rows[0][0] != "seq" {
					t.Fatalf("export rows %q (%v), want %d with the header row", rows, err, tc.rows)
				}
			})
		}
	}
}
