// Package backend is what the sandbox tools need from a place that runs
// commands: run one command in a session's workspace with its output
// streamed, read, write and list the workspace's files, and let go of a
// workspace when it expires. Subpackages adapt one provider each: local
// (bubblewrap on this host), e2b, daytona and modal.
package backend

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// Stream names an output stream of a command.
type Stream int

// The output streams.
const (
	Stdout Stream = 1
	Stderr Stream = 2
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("stream(%d)", int(s))
}

// ExecRequest is one command to run.
type ExecRequest struct {
	// Command is a shell command line, run with the backend's shell (bash
	// where there is one) as `shell -c Command`.
	Command string
	// Dir is the working directory relative to the workspace root, clean
	// and slash-separated ("" or "." is the root); see CleanPath.
	Dir string
	// Env is added to an environment that is otherwise cleared, apart from
	// the backend's PATH and HOME defaults, which Env may override.
	Env map[string]string
	// Stdin is the command's standard input when non-nil; nil gives an
	// empty input (/dev/null), so a command reading it ends at once.
	Stdin []byte
	// Timeout is the command's time limit. Backends whose provider can
	// enforce a deadline on its side pass it on; every backend also kills
	// the command when ctx ends.
	Timeout time.Duration
	// Job is the job ID of a sandbox_start command, empty for others. The
	// local backend marks the command's sandbox with it, so that a later
	// run of the service that finds the sandbox still running at its start
	// can tell which job it was (see Leftovers).
	Job string
}

// OutputFunc receives a command's output as it arrives. It may be called
// from two goroutines at once (one per stream); p is only valid during the
// call.
type OutputFunc func(s Stream, p []byte)

// ExecResult is how a command ended.
type ExecResult struct {
	// ExitCode is the command's exit status; 128+n when signal n ended it
	// inside the sandbox; -1 when the backend killed it (ctx ended or a
	// limit in Reason) and no status came back.
	ExitCode int
	// Killed is true when the backend killed the command because ctx ended
	// or for Reason.
	Killed bool
	// Reason says why the backend killed the command when it was not ctx
	// ("disk quota exceeded: …"). Empty otherwise.
	Reason string
	// Disk is the workspace's disk use around the command, from a backend
	// that enforces a disk quota on the workspace (local); nil from the
	// others, whose providers' disks are their own limit.
	Disk *DiskUse
	// Memory is set when the session's memory bound killed processes
	// while the command ran (local, with cgroups).
	Memory *MemoryKill
}

// MemoryKill is the session's memory bound at work: the kernel's OOM
// killer ended Kills of the session's processes (all of its sandboxes
// together are bound to Limit bytes) while a command ran.
type MemoryKill struct {
	Limit int64
	Kills int64
}

// Leftovers is what a backend found of earlier runs of the service when
// it started, and ended: processes of their sandboxes that were still
// running (a sandbox whose bwrap was still setting up when the service
// died can outlive it).
type Leftovers struct {
	// At is when they were killed.
	At time.Time
	// Processes is how many were killed.
	Processes int
	// Jobs holds the job IDs (ExecRequest.Job) of the sandboxes among
	// them.
	Jobs map[string]bool
}

// DiskUse is a workspace's disk use against its quota, in bytes of
// allocated blocks as workspace.Usage measures them.
type DiskUse struct {
	// Quota is the workspace's quota.
	Quota int64
	// Before is what the workspace used when the command started, After
	// what it used once the command and every process it started had
	// ended; -1 when that measurement failed (Err says why).
	Before, After int64
	// NoWrite is true when the workspace was already over its quota (or
	// could not be measured) when the command started, so the command ran
	// without the right to write to files (it could still delete them).
	NoWrite bool
	// Err is the last measurement that failed, nil when none did.
	Err error
}

// Over reports whether the workspace was over its quota, or could not be
// measured, when the command ended.
func (d *DiskUse) Over() bool { return d != nil && (d.After < 0 || d.After > d.Quota) }

// Bytes renders a byte count for people: "30000000 bytes (28.6 MiB)", or
// "512 bytes" below 1 KiB.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	v, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%d bytes (%.1f %s)", n, v, suffix)
}

// FileInfo describes one entry of a workspace listing.
type FileInfo struct {
	// Path is relative to the listed directory, slash-separated.
	Path string `json:"path"`
	// Type is "file", "dir", "symlink" or "other".
	Type string `json:"type"`
	// Size in bytes (files), 0 when the backend does not tell.
	Size int64 `json:"size"`
	// Mode is the permission bits as octal text ("0644"), empty when the
	// backend does not tell.
	Mode string `json:"mode,omitempty"`
	// ModTime is the last modification, zero when the backend does not
	// tell.
	ModTime time.Time `json:"mod_time,omitzero"`
}

// Backend runs commands and file operations for a workspace. Every method
// is safe for concurrent use.
type Backend interface {
	// Name is the backend's config name: local, e2b, daytona or modal.
	Name() string
	// Check reports whether the backend can run commands now (the health
	// check). Its error says what is missing.
	Check(ctx context.Context) error
	// Exec runs req in ws, sending output to out, and returns once the
	// command and every process it started have ended or been killed. It
	// returns an error only when the command could not be run or its end
	// could not be learned (the provider failed); a command that fails is
	// a result with its exit code. An error wrapping ErrNotStarted says
	// the command certainly did not run because the sandbox itself could
	// not be set up.
	Exec(ctx context.Context, ws *workspace.Workspace, req ExecRequest, out OutputFunc) (ExecResult, error)
	// WriteFile writes data to the file at rel (see CleanPath), creating
	// parent directories and replacing any existing file. Errors:
	// ErrQuota, ErrIsDir, ErrOutside.
	WriteFile(ctx context.Context, ws *workspace.Workspace, rel string, data []byte) error
	// ReadFile reads at most limit bytes of the file at rel from offset
	// and returns them with the file's size (-1 when unknown). Errors:
	// ErrNotFound, ErrIsDir, ErrOutside.
	ReadFile(ctx context.Context, ws *workspace.Workspace, rel string, offset, limit int64) (data []byte, size int64, err error)
	// ListFiles lists the directory at rel down to depth levels (1 = its
	// entries only), at most limit entries sorted by path; truncated
	// tells whether more existed. Errors: ErrNotFound, ErrNotDir,
	// ErrOutside.
	ListFiles(ctx context.Context, ws *workspace.Workspace, rel string, depth, limit int) (entries []FileInfo, truncated bool, err error)
	// Release lets go of whatever the backend holds for ws (a remote
	// sandbox); the workspace manager calls it when ws expires.
	Release(ctx context.Context, ws *workspace.Workspace) error
}

// Errors of the file operations. Backends wrap them with the path.
var (
	ErrNotFound = errors.New("no such file or directory")
	ErrIsDir    = errors.New("is a directory")
	ErrNotDir   = errors.New("not a directory")
	ErrOutside  = errors.New("path leaves the workspace")
	ErrQuota    = errors.New("disk quota exceeded")
)

// ErrNotStarted is wrapped by an Exec error when the sandbox could not be
// set up (bwrap could not mount the workspace, say), so the command never
// ran: the caller reports the sandbox's failure, never an exit code the
// command did not return. The wrapping error carries the sandbox's own
// message.
var ErrNotStarted = errors.New("the sandbox could not start, so the command did not run")

// WorkspaceMount is where a sandbox sees its workspace. Paths given to the
// tools may be relative to it or absolute under it.
const WorkspaceMount = "/workspace"

// CleanPath turns a path from a tool call into a clean path relative to
// the workspace root: "src/a.go", "./src/../src/a.go" and
// "/workspace/src/a.go" are all "src/a.go"; "", ".", "/workspace" are "".
// A path that leaves the workspace ("../x", "/etc/passwd") is ErrOutside;
// NUL bytes are refused. Symbolic links are the backends' business.
func CleanPath(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("path %q: contains a NUL byte", p)
	}
	if strings.HasPrefix(p, "/") {
		rest, ok := strings.CutPrefix(path.Clean(p), WorkspaceMount)
		if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
			return "", fmt.Errorf("path %q: %w (absolute paths must be under %s)", p, ErrOutside, WorkspaceMount)
		}
		p = strings.TrimPrefix(rest, "/")
	}
	c := path.Clean(p)
	if c == "." {
		return "", nil
	}
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q: %w", p, ErrOutside)
	}
	return c, nil
}

// SortAndCap sorts entries by path and keeps at most limit, telling whether
// some were cut.
func SortAndCap(entries []FileInfo, limit int) ([]FileInfo, bool) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].Path < entries[j].Path })
	if limit > 0 && len(entries) > limit {
		return entries[:limit], true
	}
	return entries, false
}

// ModeString renders permission bits as the 4-digit octal text of
// FileInfo.Mode.
func ModeString(m fs.FileMode) string { return fmt.Sprintf("%04o", m.Perm()) }

// RunTagVar is the environment variable remote backends set on every
// command to the run's tag. Every process the command starts inherits it,
// also those that left its process group or session (setsid, nohup, a
// double fork), so KillTaggedScript can find and kill them all: remote
// sandboxes have no PID namespace per command to tear down.
const RunTagVar = "BRAIN_SANDBOX_RUN"

// KillTaggedScript returns a POSIX shell script that SIGKILLs every process
// whose environment holds RunTagVar=tag: one grep over /proc/*/environ
// (NUL-separated records, whole-record match), three passes so that
// children forked during a pass die too. It exits 0. tag must be
// shell-safe (letters and digits).
func KillTaggedScript(tag string) string {
	return `for pass in 1 2 3; do for f in $(grep -lsxz '` + RunTagVar + `=` + tag + `' /proc/[0-9]*/environ); do ` +
		`p=${f#/proc/}; p=${p%/environ}; [ "$p" != "$$" ] && kill -9 "$p" 2>/dev/null; done; done; exit 0`
}
