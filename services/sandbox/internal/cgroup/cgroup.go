// Package cgroup bounds all of a sandbox session's processes together —
// memory, process count and CPU — with a control group per session, on
// cgroup v2 (the unified hierarchy most current hosts run) or v1 (separate
// memory, pids and cpu hierarchies, as on the test machine).
//
// The groups live below the service's own cgroup, as a delegated subtree:
//
//	<own>/<name>/<session>   one group per session (Create), its limits set
//	<own>/<name>.service     v2 only: where the service moves itself, since
//	                         a v2 group with processes cannot pass
//	                         controllers to its children
//
// name is chosen by the caller (the local backend names it after its
// workspace root), so a later process of the same service finds the groups
// an earlier one left (Leftovers) and another service on the host does not.
//
// A process must be in its session's group from its fork on, or what it
// forks before being moved escapes the bound. On v2, clone3's
// CLONE_INTO_CGROUP does that (Group.Place sets exec.Cmd's CgroupFD). v1
// has no such flag: there a child inherits the cgroups of the thread that
// forks it, so the local backend forks a session's commands from an OS
// thread of its own that sits in the session's groups (Group.Join).
//
// Why not github.com/containerd/cgroups/v3: what this needs of cgroupfs is a
// dozen file writes, and what matters here — placing a child at its fork
// (CLONE_INTO_CGROUP, a v1 thread), killing what an earlier process left,
// reading OOM kills for the answer — it does not do; it would add
// cilium/ebpf, go-systemd, godbus, logrus and protobuf to the service for
// those writes.
//
// Tested how: the v1 path runs for real on the test machine (root, with
// v1 memory, pids and cpu mounted); the v2 path's file writes are checked
// against a temporary directory laid out like cgroupfs, since no v2
// controllers are mounted there.
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Limits bound all of one session's processes together. A zero field is
// not bounded.
type Limits struct {
	// Memory is the most memory in bytes (RAM, the sandbox's /tmp tmpfs
	// included, which is memory); swap is not allowed past it.
	Memory int64
	// Pids is the most processes and threads at once.
	Pids int
	// CPU is the most CPU time per wall-clock time, in CPUs (1.5 is one
	// and a half cores).
	CPU float64
}

// cpuPeriod is the CFS period in µs that CPU quotas are written against.
const cpuPeriod = 100000

// cpuQuota is l.CPU as a quota of cpuPeriod.
func (l Limits) cpuQuota() int64 { return int64(l.CPU * cpuPeriod) }

// Controllers says which bounds a Manager can set: memory, pids, cpu.
type Controllers struct{ Memory, Pids, CPU bool }

// Manager creates the session groups on one host's cgroups. It is safe
// for concurrent use.
type Manager interface {
	// Version is 1 or 2.
	Version() int
	// Controllers are the bounds in force.
	Controllers() Controllers
	// Create makes the group of session with limits l (or finds it, and
	// sets l again).
	Create(session string, l Limits) (Group, error)
	// Leftovers returns the groups that exist, an earlier process's
	// included.
	Leftovers() ([]Group, error)
	// Close removes the subtree when no group is left in it.
	Close() error
}

// Group is one session's group.
type Group interface {
	// Name is the session name Create was given.
	Name() string
	// Place prepares cmd to be started inside the group (v2: clone3 into
	// the group's directory); done closes what it opened, after Start.
	// On v1 it returns ErrJoin: start cmd from a thread that Join moved.
	Place(cmd *exec.Cmd) (done func(), err error)
	// Join moves the OS thread tid into the group (v1), so that children
	// it forks start there. The thread counts against Limits.Pids, and
	// must be gone (or moved out) before Remove.
	Join(tid int) error
	// Leave moves the OS thread tid back into the service's own cgroups
	// (v1).
	Leave(tid int) error
	// Procs returns the processes in the group, this process excluded.
	Procs() ([]int, error)
	// OOMKills returns how many of the group's processes the kernel's OOM
	// killer has killed since the group was made.
	OOMKills() (int64, error)
	// Kill SIGKILLs every process in the group (this process excluded)
	// and waits up to wait for it to be empty.
	Kill(wait time.Duration) error
	// Remove deletes the group; it must be empty.
	Remove() error
}

// ErrJoin is Place's answer on v1: the child must be forked from a thread
// that Join moved into the group.
var ErrJoin = errors.New("cgroup v1: fork from a thread in the group")

// Mode chooses the cgroup version: "auto" (v2 when its controllers are
// there, else v1), "v2", "v1", or "off".
type Mode string

// Open finds the host's cgroups as mode says and prepares the subtree
// name below the service's own cgroup. It fails, saying why, when no
// bound can be set (not root, nothing mounted, controllers missing, a v2
// cgroup shared with other processes); the caller then runs without
// per-session bounds and says so.
func Open(mode Mode, name string) (Manager, error) {
	if mode == "off" {
		return nil, errors.New("turned off (SANDBOX_CGROUP=off)")
	}
	if strings.ContainsAny(name, "/\x00") || name == "" || name == "." || name == ".." {
		return nil, fmt.Errorf("cgroup name %q is not a directory name", name)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	hs := parseMounts(string(mounts))
	paths := parseSelf(string(own))
	var errs []error
	if mode == "auto" || mode == "v2" {
		if h, ok := hs["2"]; ok {
			m, err := openV2(filepath.Join(h.dir(paths[""])), name, os.Getpid())
			if err == nil {
				return m, nil
			}
			errs = append(errs, fmt.Errorf("cgroup v2: %w", err))
		} else {
			errs = append(errs, errors.New("cgroup v2: not mounted"))
		}
	}
	if mode == "auto" || mode == "v1" {
		dirs := map[string]string{}
		for _, c := range []string{"memory", "pids", "cpu"} {
			if h, ok := hs[c]; ok {
				dirs[c] = h.dir(paths[c])
			}
		}
		m, err := openV1(dirs, name, os.Getpid())
		if err == nil {
			return m, nil
		}
		errs = append(errs, fmt.Errorf("cgroup v1: %w", err))
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("unknown SANDBOX_CGROUP %q: auto, v2, v1 or off", mode)
	}
	return nil, errors.Join(errs...)
}

// hierarchy is one cgroup mount: where it is mounted, and which cgroup
// path its mount point shows (a container's is often not the root).
type hierarchy struct{ mountpoint, root string }

// dir returns the directory of cgroup path p under this mount.
func (h hierarchy) dir(p string) string {
	rel, err := filepath.Rel(h.root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = "." // a cgroup namespace: the mount shows our own group
	}
	return filepath.Join(h.mountpoint, rel)
}

// parseMounts reads /proc/self/mountinfo: the cgroup2 mount as "2", each
// v1 controller by name ("memory", "pids", "cpu").
func parseMounts(s string) map[string]hierarchy {
	out := map[string]hierarchy{}
	for line := range strings.SplitSeq(s, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		h := hierarchy{mountpoint: unescape(f[4]), root: unescape(f[3])}
		switch g[0] {
		case "cgroup2":
			if _, dup := out["2"]; !dup {
				out["2"] = h
			}
		case "cgroup":
			for opt := range strings.SplitSeq(g[2], ",") {
				if opt == "memory" || opt == "pids" || opt == "cpu" {
					if _, dup := out[opt]; !dup {
						out[opt] = h
					}
				}
			}
		}
	}
	return out
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseSelf reads /proc/self/cgroup: the v2 path as "", each v1
// controller's path by name.
func parseSelf(s string) map[string]string {
	out := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

// write writes v to file f of dir, as cgroupfs wants: one write.
func write(dir, f, v string) error {
	if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", f, err)
	}
	return nil
}

// readProcs reads a cgroup.procs file, leaving out self.
func readProcs(path string, self int) ([]int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []int
	for f := range strings.FieldsSeq(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != self && !slices.Contains(out, pid) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// readKey returns the value of key in a flat keyed file ("oom_kill 3").
func readKey(path, key string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s", filepath.Base(path), key)
}

// killProcs SIGKILLs what procs lists until it lists nothing or wait
// passes. Killing a sandbox's init ends its whole PID namespace, so this
// converges in a pass or two.
func killProcs(procs func() ([]int, error), wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		pids, err := procs()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes still in the group after %s", len(pids), wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rmdir removes a group directory, retrying briefly: the kernel frees a
// group a moment after its last process is reaped.
func rmdir(dir string) error {
	var err error
	for range 100 {
		err = syscall.Rmdir(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}

// subdirs lists the group directories in dir.
func subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
