package approval

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Account is an operator of the approval page: a name, the tenants whose
// approvals the operator may see and decide (all of them for an admin), and
// how the operator signs in — a personal token (kept as its SHA-256) or an
// identity an authenticating proxy vouches for, or both.
type Account struct {
	Name  string
	Admin bool
	// Tenants are the tenants a non-admin sees, sorted; unused for admins.
	Tenants []string
	// TokenHash is HashToken of the personal token, "" without one.
	TokenHash string
	// Identity is the proxy-vouched identity (an e-mail address, say), ""
	// without one.
	Identity string
}

// Sees reports whether the account may see and decide tenant's approvals.
func (a Account) Sees(tenant string) bool {
	return a.Admin || slices.Contains(a.Tenants, tenant)
}

// Scope is the account's view for store queries.
func (a Account) Scope() Scope { return Scope{All: a.Admin, Tenants: a.Tenants} }

// Scope limits a store query to some tenants' approvals: all of them, or
// those of Tenants (none when empty).
type Scope struct {
	All     bool
	Tenants []string
}

// where returns the SQL condition of s on column col and its arguments.
func (s Scope) where(col string) (string, []any) {
	if s.All {
		return "TRUE", nil
	}
	if len(s.Tenants) == 0 {
		return "FALSE", nil
	}
	args := make([]any, len(s.Tenants))
	for i, t := range s.Tenants {
		args[i] = t
	}
	return col + " IN (" + strings.TrimSuffix(strings.Repeat("?,", len(args)), ",") + ")", args
}

// HashToken is the hex SHA-256 the store keeps of a personal token. Tokens
// are random secrets of 16 bytes or more, so a fast hash is enough to keep
// the database from holding them.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// ErrNoAccount is the answer for a token or identity no account has.
var ErrNoAccount = errors.New("no operator account")

// SyncAccounts makes the stored accounts exactly accounts (the service's
// configuration), in one transaction: new ones are added, changed ones
// updated, the others removed. Decisions keep the names they were made
// under.
func (s *Store) SyncAccounts(ctx context.Context, accounts []Account) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sync operator accounts: %w", err)
	}
	defer tx.Rollback()
	if s.d.lockAccounts != "" {
		// Replicas starting together replace the accounts one after the
		// other, not into each other's rows.
		if _, err := tx.ExecContext(ctx, s.d.lockAccounts); err != nil {
			return fmt.Errorf("sync operator accounts: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM operator_accounts`); err != nil {
		return fmt.Errorf("sync operator accounts: %w", err)
	}
	now := s.now().UnixMilli()
	for _, a := range accounts {
		admin := 0
		if a.Admin {
			admin = 1
		}
		if _, err := tx.ExecContext(ctx, s.d.bind(`INSERT INTO operator_accounts (name, admin, tenants, token_sha256, identity, updated_at) VALUES (?, ?, ?, ?, ?, ?)`),
			a.Name, admin, strings.Join(a.Tenants, "\n"), nullString(a.TokenHash), nullString(a.Identity), now); err != nil {
			return fmt.Errorf("sync operator accounts: %s: %w", a.Name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sync operator accounts: commit: %w", err)
	}
	return nil
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

const accountColumns = `name, admin, tenants, coalesce(token_sha256, ''), coalesce(identity, '')`

func scanAccount(row scanner) (Account, error) {
	var a Account
	var admin int
	var tenants string
	if err := row.Scan(&a.Name, &admin, &tenants, &a.TokenHash, &a.Identity); err != nil {
		return Account{}, err
	}
	a.Admin = admin == 1
	if tenants != "" {
		a.Tenants = strings.Split(tenants, "\n")
	}
	return a, nil
}

// AccountByToken returns the account whose personal token is token, and
// ErrNoAccount when none has it.
func (s *Store) AccountByToken(ctx context.Context, token string) (Account, error) {
	return s.account(ctx, `token_sha256 = ?`, HashToken(token))
}

// AccountByIdentity returns the account of a proxy-vouched identity, and
// ErrNoAccount when none has it.
func (s *Store) AccountByIdentity(ctx context.Context, identity string) (Account, error) {
	return s.account(ctx, `identity = ?`, identity)
}

// AccountByName returns the account called name in any ASCII letter case
// (account names are ASCII), and ErrNoAccount when there is none.
func (s *Store) AccountByName(ctx context.Context, name string) (Account, error) {
	return s.account(ctx, s.d.lowerASCII("name")+` = ?`, lowerASCIIString(name))
}

func (s *Store) account(ctx context.Context, where string, arg any) (Account, error) {
	a, err := scanAccount(s.r.QueryRowContext(ctx, s.d.bind(`SELECT `+accountColumns+` FROM operator_accounts WHERE `+where), arg))
	if errors.Is(err, sql.ErrNoRows) {
		return Account{}, ErrNoAccount
	}
	if err != nil {
		return Account{}, fmt.Errorf("operator account: %w", err)
	}
	return a, nil
}

// AuditEntry is one row of the audit log: a decision on an approval.
type AuditEntry struct {
	Seq         int64
	At          time.Time
	Operator    string
	TenantID    string
	ApprovalID  string
	Decision    Status
	DetailsHash string
	Comment     string
	// WithdrawnAt is its approval's (Approval.WithdrawnAt): set when the
	// caller withdrew after this decision, which was then not used. Kept
	// with the audit log, so retention removing the approval keeps it.
	WithdrawnAt time.Time
}

// AuditQuery selects audit log rows: within Scope, of one tenant and one
// operator when set, newest first, Limit from Offset (Limit 0: all).
type AuditQuery struct {
	Scope    Scope
	Tenant   string
	Operator string
	Limit    int
	Offset   int
}

func (q AuditQuery) where() (string, []any) {
	cond, args := q.Scope.where("tenant_id")
	if q.Tenant != "" {
		cond += " AND tenant_id = ?"
		args = append(args, q.Tenant)
	}
	if q.Operator != "" {
		cond += " AND operator = ?"
		args = append(args, q.Operator)
	}
	return cond, args
}

// Audit calls f with each audit log row q selects, newest first, and
// returns how many rows match q without its Limit and Offset. An error of
// f stops the walk and is returned.
func (s *Store) Audit(ctx context.Context, q AuditQuery, f func(AuditEntry) error) (total int, err error) {
	cond, args := q.where()
	if err := s.r.QueryRowContext(ctx, s.d.bind(`SELECT count(*) FROM audit_log WHERE `+cond), args...).Scan(&total); err != nil {
		return 0, fmt.Errorf("audit log: %w", err)
	}
	query := `SELECT seq, at, operator, tenant_id, approval_id, decision, details_hash, comment,
		(SELECT n.withdrawn_at FROM audit_not_used n WHERE n.approval_id = audit_log.approval_id AND audit_log.decision IN ('approved','denied'))
		FROM audit_log WHERE ` + cond + ` ORDER BY seq DESC`
	if q.Limit > 0 {
		query += ` LIMIT ? OFFSET ?`
		args = append(args, q.Limit, q.Offset)
	}
	rows, err := s.r.QueryContext(ctx, s.d.bind(query), args...)
	if err != nil {
		return 0, fmt.Errorf("audit log: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e AuditEntry
		var at int64
		var withdrawn sql.NullInt64
		if err := rows.Scan(&e.Seq, &at, &e.Operator, &e.TenantID, &e.ApprovalID, &e.Decision, &e.DetailsHash, &e.Comment, &withdrawn); err != nil {
			return 0, fmt.Errorf("audit log: %w", err)
		}
		e.At = time.UnixMilli(at).UTC()
		if withdrawn.Valid {
			e.WithdrawnAt = time.UnixMilli(withdrawn.Int64).UTC()
		}
		if err := f(e); err != nil {
			return total, err
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("audit log: %w", err)
	}
	return total, nil
}
