// Package local runs sandbox commands on this host with bubblewrap (bwrap).
//
// Each command gets a fresh sandbox: every namespace unshared (so no
// network: only a loopback of its own), its own PID namespace with the
// command as PID 1 (--as-pid-1), --die-with-parent and --new-session, the
// host's system directories read-only, the session's workspace at
// /workspace as the only writable place besides a size-capped /tmp (the
// root and /dev, which bwrap builds as tmpfs, are remounted read-only, so
// /dev/shm is read-only too), an
// environment cleared apart from what the call gives, and stdin /dev/null
// unless input is given.
//
// Resource limits are set with prlimit(1) from util-linux, which execs
// bwrap: prlimit(2) sets soft and hard limits in one call by resource name,
// before any sandbox code runs, and bwrap and everything inside inherit
// them; nothing inside can raise a hard limit (no CAP_SYS_RESOURCE). The
// alternatives were worse: a shell `ulimit` line depends on the shell's
// dialect (dash's -p is processes, bash's is the pipe size), prlimit on a
// running pid races the child's first fork, and Go has no per-child rlimit.
//
// The workspace's disk quota is enforced by measuring it before, during and
// after each command (quota.go), with RLIMIT_FSIZE capping each file and a
// seccomp filter refusing the two ways to allocate disk around that cap
// (seccomp.go).
//
// RLIMIT_NPROC counts processes per real uid and does not apply to root,
// so when the service runs as root each session's commands run under their
// own unprivileged host uid (the workspace's UID): bwrap then maps the
// sandbox user (uid 1000 inside) to that uid, and a fork bomb stops at the
// limit instead of filling the host's process table.
//
// Without --as-pid-1, bwrap's own PID-1 reaper outlives the outer bwrap for
// a moment as a zombie of the host's init; those zombies count against
// RLIMIT_NPROC and made back-to-back commands of one session fail to fork.
// With the command as PID 1 the outer bwrap reaps it itself. When PID 1
// exits the kernel kills every other process in the namespace, so
// background children (`sleep 1000 &`, `nohup …`, `setsid …`) never outlive
// the call; on a timeout or cancel the service SIGKILLs bwrap's process
// group and --die-with-parent takes the namespace down with it.
//
// A sandbox that bwrap cannot set up (the workspace unreachable for the
// session's uid, a mount refused) must not pass for the command's own
// failure: bwrap then exits 1 with its message on stderr, exactly like a
// command that exits 1. bwrap's --json-status-fd tells them apart: it
// writes {"exit-code": N} only when the command was started (its execvp
// succeeded) and has ended. Its {"child-pid": N} line is no such sign: bwrap
// writes it right after clone(2), before the child mounts anything, so it
// is there for a failed setup too. A process that exits without an
// exit-code line is therefore a sandbox that did not start, and Exec
// returns an error wrapping backend.ErrNotStarted with bwrap's message.
package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/cgroup"
	"github.com/brain-tools/suite/services/sandbox/internal/reaper"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// errNoInit: bwrap has not yet said which process is the sandbox's init.
var errNoInit = errors.New("no init yet")

// Limits are the rlimits of every process in a sandbox. Zero fields take
// the defaults of DefaultLimits.
type Limits struct {
	// CPUSeconds is RLIMIT_CPU, per process (soft = hard).
	CPUSeconds int
	// AddressSpace is RLIMIT_AS in bytes, per process.
	AddressSpace int64
	// Processes is RLIMIT_NPROC: processes and threads of the session's
	// uid, all its sandboxes together. Only enforced when commands run
	// under a non-root uid (see the package doc).
	Processes int
	// FileSize is RLIMIT_FSIZE in bytes: the largest file a process may
	// write.
	FileSize int64
	// OpenFiles is RLIMIT_NOFILE per process.
	OpenFiles int
}

// DefaultLimits are the limits used for zero fields of Config.Limits.
var DefaultLimits = Limits{
	CPUSeconds:   3600,
	AddressSpace: 4 << 30,
	Processes:    256,
	FileSize:     1 << 30,
	OpenFiles:    1024,
}

// Config configures the local backend.
type Config struct {
	// Bwrap and Prlimit are the programs; empty means look them up in PATH.
	Bwrap, Prlimit string
	// Shell runs the command line inside the sandbox as `Shell -c CMD`.
	// Default /bin/bash, or /bin/sh when there is no bash.
	Shell string
	// ReadOnly lists host paths mounted read-only at the same place.
	// Symbolic links (Debian's /bin -> usr/bin) are recreated as links;
	// missing paths are skipped. Default DefaultReadOnly.
	ReadOnly []string
	// TmpSize caps the sandbox's /tmp (a tmpfs, in memory) in bytes.
	// Default 64 MiB.
	TmpSize int64
	// Limits are the rlimits; zero fields take DefaultLimits.
	Limits Limits
	// SandboxUID is the uid and gid the command has inside the sandbox.
	// Default 1000.
	SandboxUID int
	// Quota is the disk quota of a workspace in bytes. 0 means no check.
	// See "The disk quota" in README.md: the workspace is measured before
	// each command, while it runs and after it ends; a command that pushes
	// it over is killed, one that starts in a workspace already over it
	// runs without the right to write to files, and Limits.FileSize is at
	// most Quota.
	Quota int64
	// QuotaInterval is how often a running command's workspace is
	// measured, at least; a measurement that takes longer than a quarter of
	// it stretches the next wait to four times its own time, so measuring
	// a large workspace takes at most a fifth of a core per running
	// command. Default DefaultQuotaInterval.
	QuotaInterval time.Duration
	// KillGrace is how long to wait for output pipes to close after the
	// sandbox has ended before closing them ourselves. Default 2 s.
	KillGrace time.Duration
	// ProbeUID is the host uid the start-up probe runs as; -1 runs it as
	// the service's own uid.
	ProbeUID int
	// ProbeDir is where the probe makes its scratch workspace: the
	// workspace root, so that the probe reaches it exactly as session
	// sandboxes reach theirs (through every parent directory, as
	// ProbeUID). Its name starts with ".trash-", so a workspace manager
	// starting on that root deletes one a crash left behind. Empty: the
	// system's temporary directory.
	ProbeDir string
	// Tag names this service's sandboxes: it is in the environment of
	// each sandbox's bwrap processes, and names the service's cgroup
	// subtree ("brain-sandbox-" + Tag), so that a later run finds what an
	// earlier one left (and another service on the host does not). Letters,
	// digits and dashes; required.
	Tag string
	// UIDs is the range of host uids, both ends included, that the
	// service's sandboxes run as (sessions and the probe): as root, a
	// process of these uids found at start is a leftover and is killed.
	// {0, 0} (or running as another user): none.
	UIDs [2]int
	// Cgroup chooses how per-session bounds are set: "auto" (default),
	// "v2", "v1" or "off" (see package cgroup).
	Cgroup cgroup.Mode
	// Session bounds all of one session's processes together (memory,
	// processes, CPU) through its cgroup; zero fields take
	// DefaultSessionLimits.
	Session cgroup.Limits
	// Logger may be nil.
	Logger *slog.Logger
}

// DefaultSessionLimits are Config.Session's defaults: enough for builds
// and tests of ordinary projects, and little enough that one session
// cannot take a host of a few cores and some GiB.
var DefaultSessionLimits = cgroup.Limits{Memory: 2 << 30, Pids: 256, CPU: 1}

// DefaultQuotaInterval is Config.QuotaInterval's default.
const DefaultQuotaInterval = 50 * time.Millisecond

// DefaultReadOnly are the host paths a sandbox sees read-only by default:
// the system's programs, libraries and configuration.
var DefaultReadOnly = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// DefaultPath is the PATH inside a sandbox unless the call sets one.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Backend runs commands with bwrap. Create it with New.
type Backend struct {
	cfg     Config
	log     *slog.Logger
	asRoot  bool
	mounts  []string // bwrap options for the read-only system paths
	probeMu sync.Mutex
	probeAt time.Time
	probeOK error

	usageMu sync.Mutex
	usage   map[string]*usageState // by workspace ID; see quota.go
	walks   atomic.Int64           // workspace measurements taken

	cg       cgroup.Manager // nil: no per-session bounds (cgErr says why)
	cgErr    error
	groupsMu sync.Mutex
	groups   map[string]*sessionGroup // by workspace ID
	probeSG  *sessionGroup
	left     backend.Leftovers

	startMu    sync.Mutex
	startFails int   // commands in a row whose sandbox did not start
	startErr   error // the last such failure
}

var _ backend.Backend = (*Backend)(nil)

// New checks the configuration, finds bwrap and prlimit, and runs the
// start-up probe: a real sandbox with every option Exec uses. Its error
// says exactly what is missing (see Probe).
//
// Before the probe it seals the process's inherited file descriptors
// (sealFDs), opens the cgroups of Config.Cgroup (without them it runs,
// and Bounds says why), and kills what earlier runs of the service left
// running (Leftovers).
func New(ctx context.Context, cfg Config) (*Backend, error) {
	b, err := newBackend(cfg)
	if err != nil {
		return nil, err
	}
	if err := sealFDs(); err != nil {
		return nil, fmt.Errorf("local sandbox: %w", err)
	}
	if b.asRoot {
		b.cg, b.cgErr = cgroup.Open(b.cfg.Cgroup, "brain-sandbox-"+b.cfg.Tag)
	} else {
		b.cgErr = errors.New("the service does not run as root")
	}
	b.left = b.killLeftovers()
	if b.cg != nil {
		if b.probeSG, err = b.newGroup("probe"); err != nil {
			b.log.Warn("per-session bounds not in force: cannot make a cgroup", "err", err)
			b.cg, b.cgErr = nil, err
		}
	}
	if err := b.Probe(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// Close kills what is left in the session cgroups and removes them (the
// service is stopping, its commands have ended). Without cgroups it does
// nothing.
func (b *Backend) Close() error {
	if b.cg == nil {
		return nil
	}
	b.groupsMu.Lock()
	groups := b.groups
	b.groups = map[string]*sessionGroup{}
	b.groupsMu.Unlock()
	var errs []error
	for _, sg := range append(slices.Collect(maps.Values(groups)), b.probeSG) {
		if sg == nil {
			continue
		}
		errs = append(errs, sg.g.Kill(2*time.Second))
		if sg.sp != nil {
			sg.sp.stop()
		}
		errs = append(errs, sg.g.Remove())
	}
	b.probeSG = nil
	errs = append(errs, b.cg.Close())
	return errors.Join(errs...)
}

// Leftovers is what New found still running of earlier runs, and killed.
func (b *Backend) Leftovers() backend.Leftovers { return b.left }

// Bounds describes the per-session bounds in force, for the start-up log
// and /healthz: the cgroup version and each bound, or why there are none.
func (b *Backend) Bounds() map[string]any {
	l := b.cfg.Session
	if b.cg == nil {
		reason := "not in force: no cgroups"
		if b.cgErr != nil {
			reason = "not in force: " + b.cgErr.Error()
		}
		return map[string]any{"memory": reason, "pids": reason, "cpu": reason}
	}
	c := b.cg.Controllers()
	off := fmt.Sprintf("not in force: cgroup v%d has no such controller here", b.cg.Version())
	out := map[string]any{"cgroup": fmt.Sprintf("v%d", b.cg.Version()), "memory": off, "pids": off, "cpu": off}
	if c.Memory {
		out["memory"] = l.Memory
	}
	if c.Pids {
		out["pids"] = l.Pids
	}
	if c.CPU {
		out["cpu"] = l.CPU
	}
	return out
}

// newGroup makes the cgroup of session (and, on v1, its spawner thread).
func (b *Backend) newGroup(session string) (*sessionGroup, error) {
	g, err := b.cg.Create(session, b.cfg.Session)
	if err != nil {
		return nil, err
	}
	sg := &sessionGroup{g: g}
	if b.cg.Version() == 1 {
		if sg.sp, err = newSpawner(g); err != nil {
			_ = g.Remove()
			return nil, err
		}
	}
	return sg, nil
}

// group returns ws's session group, making it on first use; nil without
// cgroups. A group that cannot be made is an error: the command would run
// without the bounds the service says are in force.
func (b *Backend) group(ws *workspace.Workspace) (*sessionGroup, error) {
	if b.cg == nil {
		return nil, nil
	}
	b.groupsMu.Lock()
	defer b.groupsMu.Unlock()
	if sg := b.groups[ws.ID]; sg != nil {
		return sg, nil
	}
	sg, err := b.newGroup(ws.Key)
	if err != nil {
		return nil, notStarted(fmt.Errorf("make the session's cgroup: %w", err))
	}
	b.groups[ws.ID] = sg
	return sg, nil
}

func newBackend(cfg Config) (*Backend, error) {
	if cfg.Bwrap == "" {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			return nil, errors.New("local sandbox: bwrap not found in PATH: install bubblewrap (services/sandbox/deps.sh, or apt-get install bubblewrap)")
		}
		cfg.Bwrap = p
	}
	if cfg.Prlimit == "" {
		p, err := exec.LookPath("prlimit")
		if err != nil {
			return nil, errors.New("local sandbox: prlimit not found in PATH: install util-linux")
		}
		cfg.Prlimit = p
	}
	if cfg.ReadOnly == nil {
		cfg.ReadOnly = DefaultReadOnly
	}
	if cfg.Shell == "" {
		cfg.Shell = "/bin/bash"
		if _, err := os.Stat(cfg.Shell); err != nil {
			cfg.Shell = "/bin/sh"
		}
	}
	if cfg.TmpSize <= 0 {
		cfg.TmpSize = 64 << 20
	}
	if cfg.SandboxUID <= 0 {
		cfg.SandboxUID = 1000
	}
	if cfg.QuotaInterval <= 0 {
		cfg.QuotaInterval = DefaultQuotaInterval
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = 2 * time.Second
	}
	l := &cfg.Limits
	d := DefaultLimits
	if l.CPUSeconds <= 0 {
		l.CPUSeconds = d.CPUSeconds
	}
	if l.AddressSpace <= 0 {
		l.AddressSpace = d.AddressSpace
	}
	if l.Processes <= 0 {
		l.Processes = d.Processes
	}
	if l.FileSize <= 0 {
		l.FileSize = d.FileSize
	}
	if cfg.Quota > 0 && l.FileSize > cfg.Quota {
		// No file can be larger than the workspace may be.
		l.FileSize = cfg.Quota
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = d.OpenFiles
	}
	if hostSeccompErr != nil {
		return nil, fmt.Errorf("local sandbox: %w", hostSeccompErr)
	}
	if cfg.Tag == "" {
		return nil, errors.New("local sandbox: Config.Tag is empty: it names this service's sandboxes")
	}
	for _, r := range cfg.Tag {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return nil, fmt.Errorf("local sandbox: tag %q: only letters, digits and dashes", cfg.Tag)
		}
	}
	if cfg.Cgroup == "" {
		cfg.Cgroup = "auto"
	}
	ds := DefaultSessionLimits
	if cfg.Session.Memory <= 0 {
		cfg.Session.Memory = ds.Memory
	}
	if cfg.Session.Pids <= 0 {
		cfg.Session.Pids = ds.Pids
	}
	if cfg.Session.CPU <= 0 {
		cfg.Session.CPU = ds.CPU
	}
	b := &Backend{cfg: cfg, log: cfg.Logger, asRoot: os.Geteuid() == 0, usage: map[string]*usageState{}, groups: map[string]*sessionGroup{}}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	mounts, err := systemMounts(cfg.ReadOnly)
	if err != nil {
		return nil, err
	}
	b.mounts = mounts
	return b, nil
}

// systemMounts turns the read-only paths into bwrap options: --ro-bind for
// directories and files, --symlink for links (so /bin -> usr/bin keeps
// working), nothing for paths that do not exist.
func systemMounts(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("local sandbox: read-only path %q is not absolute", p)
		}
		p = filepath.Clean(p)
		if p == "/" || p == backend.WorkspaceMount || p == "/tmp" || p == "/proc" || p == "/dev" {
			return nil, fmt.Errorf("local sandbox: read-only path %q would hide the sandbox's own mounts", p)
		}
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("local sandbox: read-only path: %w", err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return nil, fmt.Errorf("local sandbox: read-only path: %w", err)
			}
			out = append(out, "--symlink", target, p)
			continue
		}
		out = append(out, "--ro-bind", p, p)
	}
	return out, nil
}

// Name returns "local".
func (b *Backend) Name() string { return "local" }

// Limits returns the limits in force (defaults applied).
func (b *Backend) Limits() Limits { return b.cfg.Limits }

// command is one prepared sandbox run.
type command struct {
	cmd      *exec.Cmd
	argsR    *os.File // bwrap options, read by bwrap from fd 3
	argsData []byte
	// statusR reads what bwrap writes to its --json-status-fd (fd 4 of
	// the child, statusW here): see the package doc.
	statusR, statusW *os.File
	// seccompR holds the seccomp filter bwrap reads from fd 5; nil when
	// this host has none (see seccomp.go).
	seccompR *os.File
	// disk is the quota check of the run; nil for none (the probe).
	disk *backend.DiskUse
	// mark is in the environment of the command's bwrap processes (cmdVar).
	mark string
}

// Fds of the prlimit+bwrap child: bwrap's options, its JSON status and
// the seccomp filter.
const (
	argsFD    = "3"
	statusFD  = "4"
	seccompFD = "5"
)

// seccompPipe returns the read end of a pipe holding the seccomp filter,
// or nil when this host has none. The filter is a few hundred bytes, well
// within a pipe's buffer, so it is written here at once.
func seccompPipe() (*os.File, error) {
	if hostSeccomp == nil {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(hostSeccomp)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// notStarted wraps why a sandbox could not be set up (see
// backend.ErrNotStarted).
func notStarted(err error) error { return fmt.Errorf("%w: %w", backend.ErrNotStarted, err) }

// setupError is a sandbox that exited without bwrap reporting that the
// command had started: bwrap (or prlimit before it) failed to set it up.
type setupError struct {
	code int    // the exit status of prlimit or bwrap
	msg  string // what they wrote to stderr, trimmed, at most setupMsgBytes
}

// setupMsgBytes caps the stderr a setupError quotes.
const setupMsgBytes = 4 << 10

func (e *setupError) Error() string {
	msg := e.msg
	if msg == "" {
		msg = fmt.Sprintf("bwrap exited %d without a message", e.code)
	}
	return fmt.Sprintf("%v: %s", backend.ErrNotStarted, msg)
}

func (e *setupError) Unwrap() error { return backend.ErrNotStarted }

// prlimitArgs returns prlimit's arguments up to and including its "--",
// with RLIMIT_FSIZE fsize.
func (b *Backend) prlimitArgs(fsize int64) []string {
	l := b.cfg.Limits
	return []string{
		b.cfg.Prlimit,
		"--cpu=" + strconv.Itoa(l.CPUSeconds),
		"--as=" + strconv.FormatInt(l.AddressSpace, 10),
		"--nproc=" + strconv.Itoa(l.Processes),
		"--fsize=" + strconv.FormatInt(fsize, 10),
		"--nofile=" + strconv.Itoa(l.OpenFiles),
		"--core=0",
		"--",
	}
}

// options returns bwrap's options for req in a workspace at dir.
func (b *Backend) options(dir string, req backend.ExecRequest) []string {
	sid := strconv.Itoa(b.cfg.SandboxUID)
	opts := []string{
		// bwrap's own init is the sandbox's PID 1, so the command's signals
		// and exit status are its own (kill -9 $$ is 137); no user
		// namespaces inside, so no private mount can get around the
		// workspace's quota or the /tmp cap.
		"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
		"--uid", sid, "--gid", sid, "--cap-drop", "ALL", "--hostname", "sandbox",
	}
	opts = append(opts, b.mounts...)
	opts = append(opts,
		"--proc", "/proc",
		// /dev and the root are tmpfs mounts bwrap makes; left writable
		// they would be uncapped scratch space in memory.
		"--dev", "/dev", "--remount-ro", "/dev",
		"--size", strconv.FormatInt(b.cfg.TmpSize, 10), "--tmpfs", "/tmp",
		"--bind", dir, backend.WorkspaceMount,
		"--remount-ro", "/",
		"--chdir", path.Join(backend.WorkspaceMount, req.Dir),
		"--clearenv",
		"--setenv", "PATH", DefaultPath,
		"--setenv", "HOME", backend.WorkspaceMount,
		"--setenv", "LANG", "C.UTF-8",
	)
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		opts = append(opts, "--setenv", k, req.Env[k])
	}
	return opts
}

func (b *Backend) sysProcAttr(uid int) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if uid >= 0 && b.asRoot {
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}
	}
	return attr
}

// DirectCommand returns the prlimit+bwrap command Exec would start for req
// in a workspace at dir owned by uid, with bwrap's options on the command
// line and only the seccomp filter's pipe (fd 3): the baseline of the
// benchmark that compares the service with spawning bwrap directly. Call
// done once the command has started or failed to.
func (b *Backend) DirectCommand(dir string, uid int, req backend.ExecRequest) (cmd *exec.Cmd, done func(), err error) {
	argv := append(b.prlimitArgs(b.cfg.Limits.FileSize), b.cfg.Bwrap)
	argv = append(argv, b.options(dir, req)...)
	seccompR, err := seccompPipe()
	if err != nil {
		return nil, nil, err
	}
	done = func() {}
	if seccompR != nil {
		argv = append(argv, "--add-seccomp-fd", "3")
		done = func() { seccompR.Close() }
	}
	argv = append(argv, "--", b.cfg.Shell, "-c", req.Command)
	cmd = &exec.Cmd{Path: b.cfg.Prlimit, Args: argv, Env: []string{}, Dir: "/"}
	if seccompR != nil {
		cmd.ExtraFiles = []*os.File{seccompR}
	}
	cmd.SysProcAttr = b.sysProcAttr(uid)
	return cmd, done, nil
}

// prepare builds the prlimit+bwrap command for req in a workspace at dir
// owned by uid (-1: run as the service's uid). With noWrite set, the
// command may not write to files (RLIMIT_FSIZE 0): its workspace is over
// its quota.
func (b *Backend) prepare(dir string, uid int, req backend.ExecRequest, noWrite bool) (*command, error) {
	fsize := b.cfg.Limits.FileSize
	if noWrite {
		fsize = 0
	}
	// Everything but the command line goes through fd 3, so the
	// environment (which may hold secrets) never shows in the host's
	// process list and no option can be mistaken for part of the command.
	argv := append(b.prlimitArgs(fsize), b.cfg.Bwrap, "--args", argsFD, "--json-status-fd", statusFD)
	if hostSeccomp != nil {
		argv = append(argv, "--add-seccomp-fd", seccompFD)
	}
	argv = append(argv, "--", b.cfg.Shell, "-c", req.Command)
	var data bytes.Buffer
	for _, o := range b.options(dir, req) {
		if strings.IndexByte(o, 0) >= 0 {
			return nil, fmt.Errorf("sandbox option %q contains a NUL byte", o)
		}
		data.WriteString(o)
		data.WriteByte(0)
	}

	argsR, argsW, err := os.Pipe()
	if err != nil {
		return nil, notStarted(err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		argsR.Close()
		argsW.Close()
		return nil, notStarted(err)
	}
	seccompR, err := seccompPipe()
	if err != nil {
		argsR.Close()
		argsW.Close()
		statusR.Close()
		statusW.Close()
		return nil, notStarted(err)
	}
	mark := rand.Text()
	cmd := &exec.Cmd{Path: b.cfg.Prlimit, Args: argv, Env: b.env(req.Job, mark), Dir: "/"}
	cmd.ExtraFiles = []*os.File{argsR, statusW} // fds 3 and 4
	if seccompR != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, seccompR) // fd 5
	}
	cmd.SysProcAttr = b.sysProcAttr(uid)
	c := &command{cmd: cmd, argsR: argsR, argsData: data.Bytes(), statusR: statusR, statusW: statusW, seccompR: seccompR, mark: mark}
	go func() {
		// bwrap reads its options right away; if it dies first the write
		// fails with EPIPE, and bwrap never reports a started command.
		_, _ = argsW.Write(c.argsData)
		argsW.Close()
	}()
	return c, nil
}

// Exec runs req in ws's workspace. See backend.Backend.
func (b *Backend) Exec(ctx context.Context, ws *workspace.Workspace, req backend.ExecRequest, out backend.OutputFunc) (backend.ExecResult, error) {
	if req.Dir != "" {
		if err := b.checkDir(ws, req.Dir); err != nil {
			return backend.ExecResult{}, err
		}
	}
	sg, err := b.group(ws)
	if err != nil {
		b.noteStart(err)
		return backend.ExecResult{}, err
	}
	var kills0 int64 = -1
	if sg != nil {
		if n, err := sg.g.OOMKills(); err == nil {
			kills0 = n
		}
	}
	res, err := b.execIn(ctx, ws, sg, req, out)
	b.noteStart(err)
	if err == nil && kills0 >= 0 {
		if n, kerr := sg.g.OOMKills(); kerr == nil && n > kills0 {
			res.Memory = &backend.MemoryKill{Limit: b.cfg.Session.Memory, Kills: n - kills0}
		}
	}
	return res, err
}

// noteStart records whether a command's sandbox started, for Check.
func (b *Backend) noteStart(err error) {
	b.startMu.Lock()
	defer b.startMu.Unlock()
	switch {
	case err == nil:
		b.startFails, b.startErr = 0, nil
	case errors.Is(err, backend.ErrNotStarted):
		b.startFails++
		b.startErr = err
	}
}

// startFailLimit is how many commands in a row must fail to start before
// Check reports the service unhealthy: one may be its session's fault (its
// process bound reached), several in a row of any sessions are the host's.
const startFailLimit = 3

func (b *Backend) execIn(ctx context.Context, ws *workspace.Workspace, sg *sessionGroup, req backend.ExecRequest, out backend.OutputFunc) (backend.ExecResult, error) {
	if b.cfg.Quota <= 0 {
		c, err := b.prepare(ws.Dir, ws.UID, req, false)
		if err != nil {
			return backend.ExecResult{}, err
		}
		return b.run(ctx, c, sg, ws.Dir, req.Stdin, out)
	}

	// A workspace already over its quota gets no more data: its command
	// runs with RLIMIT_FSIZE 0, so it can read, list and delete but its
	// first write to a file fails (EFBIG, SIGXFSZ). Refusing it outright
	// would leave the session no way to delete files and get back under
	// the quota.
	used, err := b.beginCommand(ws)
	disk := &backend.DiskUse{Quota: b.cfg.Quota, Before: used, NoWrite: used > b.cfg.Quota}
	if err != nil {
		// Not measurable is not under the quota.
		b.log.Warn("measure workspace before a command", "dir", ws.Dir, "err", err)
		disk.Before, disk.NoWrite, disk.Err = -1, true, err
	}
	res, err := func() (backend.ExecResult, error) {
		c, err := b.prepare(ws.Dir, ws.UID, req, disk.NoWrite)
		if err != nil {
			return backend.ExecResult{}, err
		}
		c.disk = disk
		return b.run(ctx, c, sg, ws.Dir, req.Stdin, out)
	}()
	// Once more now that every process of the sandbox is gone: what was
	// written since the last measurement counts too, and a command
	// shorter than QuotaInterval was never measured at all.
	after, merr := b.endCommand(ws)
	if err != nil {
		return res, err
	}
	disk.After = after
	if merr != nil {
		b.log.Warn("measure workspace after a command", "dir", ws.Dir, "err", merr)
		disk.After, disk.Err = -1, merr
	}
	res.Disk = disk
	return res, nil
}

func (b *Backend) checkDir(ws *workspace.Workspace, rel string) error {
	root, err := os.OpenRoot(ws.Dir)
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	fi, err := root.Stat(rel)
	if err != nil {
		return fmt.Errorf("cwd %q: %w", rel, mapErr(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("cwd %q: %w", rel, backend.ErrNotDir)
	}
	return nil
}

// run starts c (in sg's cgroup, when not nil), streams its output and
// waits for its sandbox to end, killing it when ctx ends or the disk quota
// says so.
func (b *Backend) run(ctx context.Context, c *command, sg *sessionGroup, dir string, stdin []byte, out backend.OutputFunc) (backend.ExecResult, error) {
	cmd := c.cmd
	// Until the child has started, every pipe end here is ours to close.
	var open []*os.File
	closeAll := func() {
		for _, f := range open {
			f.Close()
		}
	}
	open = append(open, c.argsR, c.statusR, c.statusW)
	if c.seccompR != nil {
		open = append(open, c.seccompR)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		closeAll()
		return backend.ExecResult{}, notStarted(err)
	}
	open = append(open, stdoutR, stdoutW)
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeAll()
		return backend.ExecResult{}, notStarted(err)
	}
	open = append(open, stderrR, stderrW)
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW
	var stdinW *os.File
	if stdin != nil {
		var stdinR *os.File
		stdinR, stdinW, err = os.Pipe()
		if err != nil {
			closeAll()
			return backend.ExecResult{}, notStarted(err)
		}
		cmd.Stdin = stdinR
		defer stdinR.Close()
		open = append(open, stdinW)
	}
	start := func() error { return reaper.Start(cmd) }
	if sg != nil {
		err = sg.start(cmd, start)
	} else {
		err = start()
	}
	if err != nil {
		closeAll()
		if sg != nil && errors.Is(err, syscall.EAGAIN) {
			err = fmt.Errorf("%w: the session has reached its bound of %d processes (SANDBOX_SESSION_PIDS)", err, b.cfg.Session.Pids)
		}
		return backend.ExecResult{}, notStarted(err)
	}
	// The child has its own copies of these now.
	c.argsR.Close()
	c.statusW.Close()
	if c.seccompR != nil {
		c.seccompR.Close()
	}
	stdoutW.Close()
	stderrW.Close()
	if stdinW != nil {
		go func() {
			// A command that does not read its input ends with EPIPE here.
			_, _ = stdinW.Write(stdin)
			stdinW.Close()
		}()
	}

	var readers sync.WaitGroup
	// setupMsg keeps the start of stderr: when the sandbox did not start,
	// it is bwrap's (or prlimit's) message. Written only by the stderr
	// reader, read after readers.Wait.
	var setupMsg bytes.Buffer
	drain := func(r *os.File, s backend.Stream) {
		defer readers.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				if s == backend.Stderr && setupMsg.Len() < setupMsgBytes {
					setupMsg.Write(buf[:min(n, setupMsgBytes-setupMsg.Len())])
				}
				out(s, buf[:n])
			}
			if err != nil {
				return
			}
		}
	}
	// started is set when bwrap reports the command's exit code, which it
	// does only for a command it started (see the package doc).
	var started bool
	var exitCode int
	// initFD is a pidfd of the sandbox's init (bwrap's child-pid), -1
	// until bwrap reports it: killing the init ends the sandbox's PID
	// namespace, and the outer bwrap then reaps it and exits, so no
	// process of the sandbox is orphaned.
	var killMu sync.Mutex
	killed, reason := false, ""
	var initMu sync.Mutex
	initFD := -1
	defer func() {
		initMu.Lock()
		if initFD >= 0 {
			unix.Close(initFD)
			initFD = -1
		}
		initMu.Unlock()
	}()
	readStatus := func() {
		defer readers.Done()
		// bwrap writes a few short JSON objects; nothing in the sandbox
		// can reach this pipe. The cap only guards against a broken bwrap.
		dec := json.NewDecoder(io.LimitReader(c.statusR, 64<<10))
		for {
			var st struct {
				ExitCode *int `json:"exit-code"`
				ChildPID *int `json:"child-pid"`
			}
			if dec.Decode(&st) != nil {
				break
			}
			if st.ChildPID != nil {
				if fd, err := unix.PidfdOpen(*st.ChildPID, 0); err == nil {
					initMu.Lock()
					initFD = fd
					initMu.Unlock()
					killMu.Lock()
					late := killed
					killMu.Unlock()
					if late {
						// Killed before bwrap said which process is the init.
						_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
					}
				}
			}
			if st.ExitCode != nil {
				started, exitCode = true, *st.ExitCode
			}
		}
		_, _ = io.Copy(io.Discard, c.statusR)
	}
	readers.Add(3)
	go drain(stdoutR, backend.Stdout)
	go drain(stderrR, backend.Stderr)
	go readStatus()

	pid := cmd.Process.Pid
	waitDone := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		reaper.Done(pid)
		close(waitDone)
	}()
	killOuter := func() {
		// The process group holds prlimit-turned-bwrap; its death takes
		// the sandbox's PID namespace down (--die-with-parent), but may
		// leave the init to be reaped by the service's reaper.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	kill := func(why string) {
		killMu.Lock()
		defer killMu.Unlock()
		if !killed {
			killed, reason = true, why
		}
		initMu.Lock()
		fd := initFD
		var err error = errNoInit
		if fd >= 0 {
			err = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		initMu.Unlock()
		if err != nil {
			killOuter()
			return
		}
		// The outer bwrap exits once it has reaped the init; if it does
		// not, it goes too.
		go func() {
			select {
			case <-waitDone:
			case <-time.After(time.Second):
				killOuter()
			}
		}()
	}
	var measure <-chan time.Time
	var measureTimer *time.Timer
	if c.disk != nil {
		measureTimer = time.NewTimer(b.cfg.QuotaInterval)
		defer measureTimer.Stop()
		measure = measureTimer.C
	}
wait:
	for {
		select {
		case <-waitDone:
			break wait
		case <-ctx.Done():
			kill("")
			<-waitDone
			break wait
		case <-measure:
			t0 := time.Now()
			u, err := b.measure(dir)
			took := time.Since(t0)
			// Usage above the quota is tolerated only while it does not
			// grow, so a command that cleans up an over-full workspace
			// may run.
			if err == nil && u > c.disk.Quota && u > c.disk.Before {
				kill(fmt.Sprintf("the workspace grew to %s, past its disk quota of %s", backend.Bytes(u), backend.Bytes(c.disk.Quota)))
				<-waitDone
				break wait
			}
			measureTimer.Reset(max(b.cfg.QuotaInterval, 4*took))
		}
	}

	// A sandbox killed while bwrap was still setting it up may have an
	// init that outlived the outer bwrap: end it (through its pidfd when
	// bwrap said which it is, else by the command's mark).
	killMu.Lock()
	wasKilled := killed
	killMu.Unlock()
	if wasKilled {
		initMu.Lock()
		fd := initFD
		if fd >= 0 {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		initMu.Unlock()
		if fd < 0 {
			killMarked(c.mark)
		}
	}

	// Every process of the sandbox is gone with its namespace, so the
	// pipes close; KillGrace guards against anything that kept a copy.
	pipesDone := make(chan struct{})
	go func() { readers.Wait(); close(pipesDone) }()
	select {
	case <-pipesDone:
	case <-time.After(b.cfg.KillGrace):
		b.log.Warn("sandbox output still open after the sandbox ended; closing it", "pid", pid)
		killOuter()
	}
	stdoutR.Close()
	stderrR.Close()
	c.statusR.Close()
	<-pipesDone

	killMu.Lock()
	defer killMu.Unlock()
	st := cmd.ProcessState
	if killed {
		// Whether by the init's death (the outer bwrap then exits with
		// its status) or the outer bwrap's own.
		return backend.ExecResult{ExitCode: -1, Killed: true, Reason: reason}, nil
	}
	if st.Exited() {
		if !started {
			b.forgetProbe()
			return backend.ExecResult{}, &setupError{code: st.ExitCode(), msg: strings.TrimSpace(strings.ToValidUTF8(setupMsg.String(), "\uFFFD"))}
		}
		return backend.ExecResult{ExitCode: exitCode}, nil
	}
	// Killed by someone else (the OOM killer, an operator).
	ws, _ := st.Sys().(syscall.WaitStatus)
	return backend.ExecResult{ExitCode: 128 + int(ws.Signal())}, nil
}

// Release forgets what the backend knows of ws's disk use and removes its
// cgroup (killing anything left in it); the workspace manager deletes the
// files.
func (b *Backend) Release(_ context.Context, ws *workspace.Workspace) error {
	b.usageMu.Lock()
	delete(b.usage, ws.ID)
	b.usageMu.Unlock()
	b.groupsMu.Lock()
	sg := b.groups[ws.ID]
	delete(b.groups, ws.ID)
	b.groupsMu.Unlock()
	if sg == nil {
		return nil
	}
	kerr := sg.g.Kill(2 * time.Second)
	if sg.sp != nil {
		sg.sp.stop()
	}
	return errors.Join(kerr, sg.g.Remove())
}

// Check reports the start-up probe's verdict, probing again when the last
// probe is over a minute old or a command's sandbox has failed to start
// since; and it reports commands that can no longer start: the last
// startFailLimit commands of any sessions all failed to start.
func (b *Backend) Check(ctx context.Context) error {
	b.startMu.Lock()
	fails, ferr := b.startFails, b.startErr
	b.startMu.Unlock()
	if fails >= startFailLimit {
		return fmt.Errorf("local sandbox: commands cannot start: the last %d sandboxes failed to start: %w", fails, ferr)
	}
	b.probeMu.Lock()
	stale := time.Since(b.probeAt) > time.Minute
	err := b.probeOK
	b.probeMu.Unlock()
	if !stale {
		return err
	}
	return b.Probe(ctx)
}

// forgetProbe makes the next Check probe again: a sandbox just failed to
// start, so the last verdict may be out of date.
func (b *Backend) forgetProbe() {
	b.probeMu.Lock()
	b.probeAt = time.Time{}
	b.probeMu.Unlock()
}

// Probe runs a command in a sandbox built exactly as Exec builds one, in a
// scratch workspace made as the workspace manager makes them (under
// Config.ProbeDir, owned by Config.ProbeUID), and explains a failure:
// bwrap missing, user namespaces blocked (with the sysctls that block
// them), mounts refused, the workspace unreachable for the sandbox's uid,
// limits refused.
func (b *Backend) Probe(ctx context.Context) error {
	err := b.probe(ctx)
	b.probeMu.Lock()
	b.probeAt, b.probeOK = time.Now(), err
	b.probeMu.Unlock()
	return err
}

func (b *Backend) probe(ctx context.Context) error {
	// <ProbeDir>/.trash-probe-*/files, as <root>/<key>/files: the parent
	// passable by all (0711), files/ owned by the sandbox's uid.
	scratch, err := os.MkdirTemp(b.cfg.ProbeDir, ".trash-probe-")
	if err != nil {
		return fmt.Errorf("local sandbox probe: %w", err)
	}
	defer os.RemoveAll(scratch)
	dir := filepath.Join(scratch, "files")
	if err := os.Chmod(scratch, 0o711); err != nil {
		return fmt.Errorf("local sandbox probe: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("local sandbox probe: %w", err)
	}
	uid := b.cfg.ProbeUID
	if !b.asRoot {
		uid = -1
	}
	if uid >= 0 {
		if err := os.Chown(dir, uid, uid); err != nil {
			return fmt.Errorf("local sandbox probe: give the scratch workspace to uid %d: %w", uid, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := b.prepare(dir, uid, backend.ExecRequest{Command: "test -w " + backend.WorkspaceMount + " && test -w /tmp && ! test -w /usr"}, false)
	if err != nil {
		return fmt.Errorf("local sandbox probe: %w", err)
	}
	var outMu sync.Mutex
	var errOut bytes.Buffer
	res, err := b.run(ctx, c, b.probeSG, dir, nil, func(_ backend.Stream, p []byte) {
		outMu.Lock()
		defer outMu.Unlock()
		if errOut.Len() < 4096 {
			errOut.Write(p)
		}
	})
	var setup *setupError
	if errors.As(err, &setup) {
		return explain(setup.code, setup.msg, dir)
	}
	if err != nil {
		return fmt.Errorf("local sandbox probe: %w", err)
	}
	if res.Killed {
		return errors.New("local sandbox probe: `true` in a sandbox did not finish within 20s")
	}
	if res.ExitCode == 0 {
		return nil
	}
	return fmt.Errorf("local sandbox probe: the sandbox started but /workspace or /tmp was not writable, or /usr was (exit %d) %s", res.ExitCode, strings.TrimSpace(errOut.String()))
}

// explain turns the message of a probe sandbox that did not start into
// what to fix. dir is the probe's workspace on the host.
func explain(code int, msg, dir string) error {
	base := fmt.Sprintf("local sandbox probe: bwrap exited %d before the command started: %s", code, msg)
	switch {
	case msg == "":
		return errors.New(base + "(no message)")
	case strings.Contains(msg, "Can't find source path") && strings.Contains(msg, "Permission denied"):
		why := "a directory above it does not let others pass (o+x)"
		if err := workspace.CheckTraversable(filepath.Dir(dir)); err != nil {
			why = err.Error()
		}
		return fmt.Errorf("%s: the sandbox's uid cannot reach its workspace %s: %s", base, dir, why)
	case strings.Contains(msg, "namespace") || strings.Contains(msg, "uid map") || strings.Contains(msg, "setting up uid") || strings.Contains(msg, "Operation not permitted"):
		return fmt.Errorf("%s: user namespaces are blocked here; need %s", base, userNSState())
	case strings.Contains(msg, "Can't mount proc") || strings.Contains(msg, "mount"):
		return fmt.Errorf("%s: this host refuses the mounts bwrap makes (in a container, /proc must not be masked read-only and mounts must be allowed, e.g. docker --security-opt seccomp=unconfined --security-opt apparmor=unconfined)", base)
	case strings.Contains(msg, "prlimit"):
		return fmt.Errorf("%s: prlimit could not set the sandbox limits", base)
	}
	return errors.New(base)
}

// userNSState reports the sysctls that govern unprivileged user namespaces.
func userNSState() string {
	var parts []string
	for _, s := range []struct{ path, want string }{
		{"/proc/sys/user/max_user_namespaces", "> 0"},
		{"/proc/sys/kernel/unprivileged_userns_clone", "= 1"},
		{"/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "= 0"},
	} {
		v, err := os.ReadFile(s.path)
		name := strings.ReplaceAll(strings.TrimPrefix(s.path, "/proc/sys/"), "/", ".")
		if err != nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s (is %s)", name, s.want, strings.TrimSpace(string(v))))
	}
	if len(parts) == 0 {
		return "user namespaces enabled in the kernel (CONFIG_USER_NS)"
	}
	return strings.Join(parts, ", ")
}

func mapErr(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return backend.ErrNotFound
	case errors.Is(err, syscall.ENOTDIR):
		return backend.ErrNotDir
	case errors.Is(err, syscall.EISDIR):
		return backend.ErrIsDir
	case errors.Is(err, syscall.ELOOP):
		return errors.New("is a symbolic link")
	case strings.Contains(err.Error(), "path escapes from parent"):
		return backend.ErrOutside
	}
	return err
}
