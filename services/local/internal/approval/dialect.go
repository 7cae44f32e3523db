package approval

import (
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
)

// dialect is what the store's SQL says differently on each backend; the
// statements themselves are written once, with ? placeholders.
type dialect struct {
	name  string // the backend, and its directory of migrations
	goose goose.Dialect
	// dollar: placeholders are $1, $2… (PostgreSQL), not ?.
	dollar bool
	// ord is the column of the order rows were stored in: SQLite's rowid,
	// PostgreSQL's identity column.
	ord string
	// lowerASCII lowers the ASCII letters of column col, and only those,
	// whatever the database's locale.
	lowerASCII func(col string) string
	// binary makes an ORDER BY compare bytes, as SQLite's does.
	binary string
	// lockTenant, when set, is run with a tenant ID before its pending
	// approvals are counted, so that replicas count one at a time.
	lockTenant string
	// lockAccounts, when set, makes the replacement of the operator
	// accounts one at a time across replicas.
	lockAccounts string
	// skipLocked ends a SELECT of rows to remove so that replicas removing
	// at once take different rows.
	skipLocked string
}

var (
	sqliteDialect = &dialect{
		name: "sqlite", goose: goose.DialectSQLite3, ord: "rowid",
		lowerASCII: func(col string) string { return "lower(" + col + ")" }, // SQLite's lower() is ASCII-only
	}
	postgresDialect = &dialect{
		name: "postgres", goose: goose.DialectPostgres, dollar: true, ord: "ord",
		// The "C" collation's lower() is ASCII-only.
		lowerASCII:   func(col string) string { return "lower(" + col + ` COLLATE "C")` },
		binary:       ` COLLATE "C"`,
		lockTenant:   `SELECT pg_advisory_xact_lock(hashtext('approvals/tenant'), hashtext(?))`,
		lockAccounts: `LOCK TABLE operator_accounts IN SHARE ROW EXCLUSIVE MODE`,
		skipLocked:   ` FOR UPDATE SKIP LOCKED`,
	}
)

// bind returns query with its ? placeholders in the dialect's form. The
// store's statements have no ? in a string literal.
func (d *dialect) bind(query string) string {
	if !d.dollar {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// lowerASCIIString lowers the ASCII letters of s, and only those: a search
// text as the column's lowerASCII sees it.
func lowerASCIIString(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}
