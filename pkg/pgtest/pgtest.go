// Package pgtest starts a real PostgreSQL server for tests: its own data
// directory (initdb, removed at Close), listening only on a unix socket in
// that directory, with durability off (fsync, synchronous_commit and
// full_page_writes) since a test's data need not survive a crash.
//
// Start one Server per test binary (from TestMain, with Main): initdb and
// start-up take about a second. Each test then takes a database of its own
// with NewDatabase (a CREATE DATABASE, milliseconds), so tests run in
// parallel without seeing each other's rows.
//
// PostgreSQL refuses to run as root: when the tests run as root the server
// runs as the "postgres" user (the Debian package creates it), which owns
// the data directory. The binaries are Debian's postgresql-15 (or any
// version under /usr/lib/postgresql), or those in $PGTEST_BIN; a missing
// server is an error naming how to install it (services/brain/deps.sh),
// never a skip.
package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/servicetest"
)

// User is the database superuser of every Server; it needs no password
// (trust authentication on the server's own socket).
const User = "postgres"

// port is the socket's port number; with no TCP listener it only names the
// socket file (.s.PGSQL.5432), so every Server can use it.
const port = 5432

// Server is a running PostgreSQL server.
type Server struct {
	// Dir is the server's directory: data in Dir/data, the socket in Dir.
	Dir string
	// BinDir is the directory of the server's binaries (postgres, initdb,
	// psql, pg_dump, pg_restore).
	BinDir string

	cred *syscall.Credential // nil: run as the current user
	cmd  *exec.Cmd
	done chan error
	out  *servicetest.Output
	n    atomic.Int64 // databases created
}

// BinDir returns the directory of the PostgreSQL server binaries: $PGTEST_BIN,
// then the newest /usr/lib/postgresql/N/bin (Debian's layout), then the
// directory of postgres on $PATH.
func BinDir() (string, error) {
	if d := os.Getenv("PGTEST_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server binaries ($PGTEST_BIN, /usr/lib/postgresql/*/bin, postgres on $PATH): " +
		"run services/brain/deps.sh (apt-get install postgresql-15)")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start runs initdb in a new temporary directory and starts the server on
// a unix socket there; it returns once the server accepts connections.
// Stop it with Close, which also removes the directory.
func Start() (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	s := &Server{Dir: dir, BinDir: bin, out: &servicetest.Output{Max: 1 << 20}}
	if err := s.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("start postgres: the server refuses to run as root and there is no postgres user: %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(s.Dir, int(uid), int(gid)); err != nil {
			return fmt.Errorf("start postgres: %w", err)
		}
	}
	data := filepath.Join(s.Dir, "data")
	// --no-sync: a test cluster need not survive a power loss.
	initdb := s.command("initdb", "-D", data, "-U", User, "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("start postgres: initdb: %v: %s", err, out)
	}
	s.cmd = s.command("postgres", "-D", data, "-k", s.Dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "shared_buffers=64MB",
		"-c", "log_min_messages=warning", "-c", "logging_collector=off")
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	// Killed with the test binary if that dies without Close.
	s.cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.done = make(chan error, 1)
	go func() { s.done <- s.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("start postgres: exited (%v): %s", err, s.Log())
		default:
		}
		if s.command("pg_isready", "-q", "-h", s.Dir, "-p", strconv.Itoa(port), "-U", User).Run() == nil {
			return nil
		}
		if time.Now().After(deadline) {
			s.Close()
			return fmt.Errorf("start postgres: not accepting connections after 30s: %s", s.Log())
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// command is binary name of s.BinDir, run as the server's user.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.BinDir, name), args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd
}

// URL returns the connection URL of database name on s, for pgx and libpq
// (postgres://postgres@/NAME?host=DIR&port=5432, over the unix socket).
func (s *Server) URL(name string) string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable", User, name, s.Dir, port)
}

// Psql runs psql with args against database name and returns its output;
// an error carries what psql printed.
func (s *Server) Psql(name string, args ...string) (string, error) {
	return s.Run("psql", append([]string{"-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", s.URL(name)}, args...)...)
}

// Run runs one of the server's client binaries (pg_dump, pg_restore, psql…)
// with args and returns its standard output; an error carries its standard
// error. It runs as the current user: the binaries are clients.
func (s *Server) Run(name string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(s.BinDir, name), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// CreateDatabase creates a new empty database and returns its name.
func (s *Server) CreateDatabase() (string, error) {
	name := fmt.Sprintf("test_%d", s.n.Add(1))
	if _, err := s.Psql("postgres", "-c", "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return name, nil
}

// NewDatabase creates a database for t alone and returns its URL. It is
// not dropped when t ends (a drop costs about as much as the create, and
// Close removes the whole cluster).
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name, err := s.CreateDatabase()
	if err != nil {
		t.Fatal(err)
	}
	return s.URL(name)
}

// Log returns what the server printed so far.
func (s *Server) Log() string { return s.out.String() }

// Close stops the server (fast shutdown: open connections are ended) and
// removes its directory.
func (s *Server) Close() error {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		s.cmd = nil
	}
	return os.RemoveAll(s.Dir)
}

// Main is a test package's TestMain around one shared server: it starts
// it, sets *srv, runs m, stops it and exits with m's code. A server that
// cannot start exits 1 naming what the package needs.
func Main(m *testing.M, pkg string, srv **Server) {
	var err error
	*srv, err = Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s tests need PostgreSQL: %v\n", pkg, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := (*srv).Close(); err != nil {
		fmt.Fprintf(os.Stderr, "%s tests: stop postgres: %v\n", pkg, err)
	}
	os.Exit(code)
}

// clockTicks is the unit of the CPU times in /proc/PID/stat (USER_HZ,
// 100 on Linux for every architecture Go runs on).
const clockTicks = 100

// CPUTime returns the CPU time (user and system) the server has used so
// far: the postmaster's own, that of the backends it has reaped, and that
// of those still running (Linux /proc). Benchmarks read it before and
// after a run to state the database's CPU per operation. A backend that
// is reaped while its siblings are read (one whose client just left)
// would be in neither count, so the children are read between two reads
// of the postmaster, again until no child was reaped meanwhile.
func (s *Server) CPUTime() (time.Duration, error) {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0, errors.New("postgres cpu time: server not running")
	}
	pid := s.cmd.Process.Pid
	for range 100 {
		before, err := procStat(pid)
		if err != nil {
			return 0, fmt.Errorf("postgres cpu time: %w", err)
		}
		children, err := childTicks(pid)
		if err != nil {
			return 0, fmt.Errorf("postgres cpu time: %w", err)
		}
		after, err := procStat(pid)
		if err != nil {
			return 0, fmt.Errorf("postgres cpu time: %w", err)
		}
		if after.cutime+after.cstime == before.cutime+before.cstime {
			ticks := children + after.utime + after.stime + after.cutime + after.cstime
			return time.Duration(ticks) * time.Second / clockTicks, nil
		}
	}
	return 0, errors.New("postgres cpu time: backends kept ending while they were read")
}

// childTicks is the CPU time, in clock ticks, of the processes whose
// parent is pid.
func childTicks(pid int) (int64, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, err := procStat(p); err == nil && f.ppid == int64(pid) {
			ticks += f.utime + f.stime
		}
	}
	return ticks, nil
}

type stat struct{ ppid, utime, stime, cutime, cstime int64 }

// procStat reads the fields CPUTime needs from /proc/PID/stat, whose
// second field (the command, in parentheses) may hold spaces.
func procStat(pid int) (stat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return stat{}, errors.New("malformed stat")
	}
	f := strings.Fields(string(data[i+1:]))
	// After the command: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14).
	if len(f) < 15 {
		return stat{}, errors.New("short stat")
	}
	var st stat
	for i, dst := range []*int64{&st.ppid, &st.utime, &st.stime, &st.cutime, &st.cstime} {
		idx := []int{1, 11, 12, 13, 14}[i]
		if *dst, err = strconv.ParseInt(f[idx], 10, 64); err != nil {
			return stat{}, err
		}
	}
	return st, nil
}
