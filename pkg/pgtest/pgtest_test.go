package pgtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var srv *Server

func TestMain(m *testing.M) { Main(m, "pgtest", &srv) }

func TestDatabasesAreSeparate(t *testing.T) {
	t.Parallel()
	a, b := srv.NewDatabase(t), srv.NewDatabase(t)
	if a == b {
		t.Fatalf("two databases with one URL %s", a)
	}
	name := func(u string) string {
		return strings.TrimPrefix(strings.SplitN(u, "?", 2)[0], "postgres://"+User+"@/")
	}
	if _, err := srv.Psql(name(a), "-c", "CREATE TABLE t (v int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if out, err := srv.Psql(name(a), "-At", "-c", "SELECT count(*) FROM t"); err != nil || strings.TrimSpace(out) != "1" {
		t.Fatalf("count in a: %q, %v", out, err)
	}
	if _, err := srv.Psql(name(b), "-At", "-c", "SELECT count(*) FROM t"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("table of a visible in b: %v", err)
	}
}

func TestServerSettings(t *testing.T) {
	t.Parallel()
	tests := []struct{ setting, want string }{
		{"fsync", "off"},
		{"synchronous_commit", "off"},
		{"listen_addresses", ""},
		{"server_encoding", "UTF8"},
	}
	for _, tt := range tests {
		out, err := srv.Psql("postgres", "-At", "-c", "SHOW "+tt.setting)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(out); got != tt.want {
			t.Errorf("%s = %q, want %q", tt.setting, got, tt.want)
		}
	}
}

func TestCloseRemovesDirectory(t *testing.T) {
	t.Parallel()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, ".s.PGSQL.5432")); err != nil {
		t.Errorf("no socket in the server's directory: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("directory %s still there after Close: %v", s.Dir, err)
	}
	if _, err := srv.Psql("postgres", "-c", "SELECT 1"); err != nil {
		t.Errorf("shared server gone after another one closed: %v", err)
	}
}

func TestMissingBinaries(t *testing.T) {
	t.Setenv("PGTEST_BIN", t.TempDir())
	if _, err := Start(); err == nil || !strings.Contains(err.Error(), "initdb") {
		t.Errorf("Start with no binaries: %v, want an error naming initdb", err)
	}
}

func TestCPUTimeGrows(t *testing.T) {
	t.Parallel()
	before, err := srv.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Psql("postgres", "-c", "SELECT count(*) FROM generate_series(1, 3000000)"); err != nil {
		t.Fatal(err)
	}
	after, err := srv.CPUTime()
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("CPU time %v before a query that counts 3 million rows, %v after: want it to grow", before, after)
	}
}
