package operator

import (
	"context"
	"encoding/csv"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/local/internal/approval"
)

// TestDecisionNotUsed: an approval the operator approved on the page and
// its caller withdrew afterwards (approval_cancel) says so on its detail
// page — the decision was not used, and when the caller withdrew — and is
// marked in the queue, the recently decided list, the audit log and its
// export. An approval whose decision was used carries no mark.
func TestDecisionNotUsed(t *testing.T) {
	s := newStack(t, Config{})
	c := s.client()
	csrf := c.signIn("alice", operatorToken)
	ctx := context.Background()
	request := func(call string) approval.Approval {
		t.Helper()
		a, _, err := s.svc.Request(ctx, approval.NewApproval{TenantID: "acme", SessionID: "s", CallID: call, Origin: approval.OriginJob,
			Action: "drop table <" + call + ">", Timeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if a := c.post("/approval/"+a.ID+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}}); a.status != http.StatusSeeOther {
			t.Fatalf("approve: %d %s", a.status, a.body)
		}
		return a
	}
	unused, used := request("unused"), request("used")
	got, err := s.svc.Withdraw(ctx, unused.ID)
	if !errors.Is(err, approval.ErrDecided) || got.Status != approval.Approved || !got.DecisionNotUsed() {
		t.Fatalf("withdrawal after the decision: %+v %v", got, err)
	}
	at := got.WithdrawnAt.UTC()

	detail := c.get("/approval/" + unused.ID)
	for _, want := range []string{
		`<strong>approved</strong> by <strong>alice</strong>`,
		`id="not-used"`,
		"This decision was not used.",
		"The caller had stopped waiting for it (it was answered another way, or its call ended) and withdrew the request at",
		`<time datetime="` + at.Format(time.RFC3339) + `">` + at.Format("2006-01-02 15:04:05 UTC") + `</time>`,
		"drop table &lt;unused&gt;",
	} {
		if !strings.Contains(detail.body, want) {
			t.Errorf("detail of the unused decision lacks %q", want)
		}
	}
	if detail.status != http.StatusOK {
		t.Fatalf("detail: %d", detail.status)
	}
	if d := c.get("/approval/" + used.ID); d.status != http.StatusOK || strings.Contains(d.body, `id="not-used"`) || strings.Contains(d.body, "not used") {
		t.Fatalf("detail of a used decision is marked: %d", d.status)
	}

	const mark = `<span class="badge not-used" title="the caller withdrew at `
	for _, tt := range []struct {
		name, path string
	}{
		{"recently decided", "/approvals"},
		{"queue of approved", "/approvals?state=approved"},
		{"live rows", "/approvals/rows?state=approved"},
		{"audit log", "/operator/audit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := c.get(tt.path)
			if a.status != http.StatusOK {
				t.Fatalf("%s: %d", tt.path, a.status)
			}
			if n := strings.Count(a.body, mark); n != 1 {
				t.Fatalf("%s: %d not-used marks, want 1 (the unused decision's)", tt.path, n)
			}
			if !strings.Contains(a.body, mark+at.Format("2006-01-02 15:04:05 UTC")+`, after this decision">not used</span>`) {
				t.Fatalf("%s: the mark lacks the withdrawal's time", tt.path)
			}
		})
	}

	export := c.get("/operator/audit.csv")
	rows, err := csv.NewReader(strings.NewReader(export.body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]string{}
	for _, r := range rows[1:] {
		byID[r[4]] = r[8]
	}
	if rows[0][8] != "not_used_withdrawn_at" || byID[unused.ID] != got.WithdrawnAt.Format(time.RFC3339Nano) || byID[used.ID] != "" {
		t.Fatalf("export: header %q, not used %q / %q", rows[0], byID[unused.ID], byID[used.ID])
	}
}
