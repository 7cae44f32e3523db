package approval

import (
	"context"
	"fmt"
	"strings"
)

// Queue states a Query can ask for beside the statuses themselves.
const (
	// StateDecided selects every final status.
	StateDecided = "decided"
	// StateAll selects every approval.
	StateAll = "all"
)

// Query selects approvals for the operator page's queue.
type Query struct {
	Scope Scope
	// State is a Status ("pending" by default), StateDecided or StateAll.
	// Pending means pending and not yet past expires_at: an approval that
	// expired while nobody swept it (during a restart, say) is not offered.
	State   string
	Tenant  string // exact, "" for any
	Session string // exact, "" for any
	// Text matches approvals whose action or details contain it (ASCII
	// case-insensitive), or whose approval, session or call ID is it.
	Text string
	// Sort is "deadline" (expires_at, soonest first: the default),
	// "newest" or "oldest" (by created_at), or "decided" (decided_at,
	// newest first).
	Sort   string
	Limit  int
	Offset int
}

// ErrBadQuery wraps a Query field the store cannot use.
type ErrBadQuery struct{ Field, Problem string }

func (e *ErrBadQuery) Error() string { return e.Field + ": " + e.Problem }

func (q Query) where(d *dialect, nowMS int64) (string, []any, error) {
	cond, args := q.Scope.where("tenant_id")
	switch q.State {
	case "", string(Pending):
		cond += " AND status = 'pending' AND expires_at > ?"
		args = append(args, nowMS)
	case string(Approved), string(Denied), string(Expired), string(Cancelled):
		cond += " AND status = ?"
		args = append(args, q.State)
	case StateDecided:
		cond += " AND status != 'pending'"
	case StateAll:
	default:
		return "", nil, &ErrBadQuery{"state", fmt.Sprintf("%q is not pending, approved, denied, expired, cancelled, decided or all", q.State)}
	}
	if q.Tenant != "" {
		cond += " AND tenant_id = ?"
		args = append(args, q.Tenant)
	}
	if q.Session != "" {
		cond += " AND session_id = ?"
		args = append(args, q.Session)
	}
	if q.Text != "" {
		like := "%" + likeEscaper.Replace(lowerASCIIString(q.Text)) + "%"
		cond += ` AND (` + d.lowerASCII("action") + ` LIKE ? ESCAPE '\' OR ` + d.lowerASCII("details") + ` LIKE ? ESCAPE '\' OR id = ? OR session_id = ? OR call_id = ?)`
		args = append(args, like, like, q.Text, q.Text, q.Text)
	}
	return cond, args, nil
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// Find returns the approvals q selects, at most q.Limit from q.Offset, and
// how many match in all.
func (s *Store) Find(ctx context.Context, q Query) ([]Approval, int, error) {
	cond, args, err := q.where(s.d, s.now().UnixMilli())
	if err != nil {
		return nil, 0, err
	}
	order := "expires_at, " + s.d.ord
	switch q.Sort {
	case "", "deadline":
	case "newest":
		order = "created_at DESC, " + s.d.ord + " DESC"
	case "oldest":
		order = "created_at, " + s.d.ord
	case "decided":
		order = "decided_at DESC NULLS LAST, id" + s.d.binary
	default:
		return nil, 0, &ErrBadQuery{"sort", fmt.Sprintf("%q is not deadline, newest, oldest or decided", q.Sort)}
	}
	// The page and the total in one statement, so that both are of the
	// same moment (a count read apart could miss a row the page shows).
	rows, err := s.r.QueryContext(ctx, s.d.bind(`SELECT `+columns+`, count(*) OVER () FROM approvals WHERE `+cond+` ORDER BY `+order+` LIMIT ? OFFSET ?`), append(args, q.Limit, q.Offset)...)
	if err != nil {
		return nil, 0, fmt.Errorf("find approvals: %w", err)
	}
	defer rows.Close()
	var (
		out   []Approval
		total int
	)
	for rows.Next() {
		a, err := scanApproval(rows, &total)
		if err != nil {
			return nil, 0, fmt.Errorf("find approvals: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("find approvals: %w", err)
	}
	if len(out) == 0 {
		// No row to carry the total (an empty page, or Limit 0).
		if err := s.r.QueryRowContext(ctx, s.d.bind(`SELECT count(*) FROM approvals WHERE `+cond), args...).Scan(&total); err != nil {
			return nil, 0, fmt.Errorf("find approvals: %w", err)
		}
	}
	return out, total, nil
}

// Tenants returns the tenants within scope that have approvals, sorted:
// the choices of the queue's tenant filter.
func (s *Store) Tenants(ctx context.Context, scope Scope) ([]string, error) {
	cond, args := scope.where("tenant_id")
	rows, err := s.r.QueryContext(ctx, s.d.bind(`SELECT tenant_id FROM approvals WHERE `+cond+` GROUP BY tenant_id ORDER BY tenant_id`+s.d.binary+` LIMIT 1000`), args...)
	if err != nil {
		return nil, fmt.Errorf("tenants: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, fmt.Errorf("tenants: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// CountPendingIn counts the pending approvals within scope that are not
// past expires_at, as the queue shows them.
func (s *Store) CountPendingIn(ctx context.Context, scope Scope) (int, error) {
	_, n, err := s.Find(ctx, Query{Scope: scope, Limit: 0})
	return n, err
}
