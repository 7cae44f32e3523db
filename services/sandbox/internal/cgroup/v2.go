package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// v2 is the unified hierarchy: own is the service's cgroup directory.
type v2 struct {
	parent string // own/<name>
	ctl    Controllers
	self   int
}

// openV2 prepares own/<name> for session groups: it moves the service
// (pid self, with all its threads) into own/<name>.service, as a v2 group
// with processes cannot enable controllers for its children, then enables
// memory, pids and cpu for own and own/<name>. It refuses when own holds
// processes other than the service, which would then stay in a group
// with controllers enabled below it.
func openV2(own, name string, self int) (*v2, error) {
	avail, err := os.ReadFile(filepath.Join(own, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("read the service's cgroup %s: %w", own, err)
	}
	var ctl Controllers
	var enable []string
	for f := range strings.FieldsSeq(string(avail)) {
		switch f {
		case "memory":
			ctl.Memory = true
		case "pids":
			ctl.Pids = true
		case "cpu":
			ctl.CPU = true
		default:
			continue
		}
		enable = append(enable, "+"+f)
	}
	if len(enable) == 0 {
		return nil, fmt.Errorf("%s offers none of the memory, pids and cpu controllers (it has %q)", own, strings.TrimSpace(string(avail)))
	}
	procs, err := readProcs(filepath.Join(own, "cgroup.procs"), self)
	if err != nil {
		return nil, err
	}
	if len(procs) > 0 {
		return nil, fmt.Errorf("the service's cgroup %s holds %d other processes, so it cannot pass controllers to groups below it; run the service in a cgroup of its own (a container, or systemd with Delegate=yes)", own, len(procs))
	}
	leaf := filepath.Join(own, name+".service")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("make %s: %w", leaf, err)
	}
	if err := write(leaf, "cgroup.procs", strconv.Itoa(self)); err != nil {
		return nil, fmt.Errorf("move the service into %s: %w", leaf, err)
	}
	ctlLine := strings.Join(enable, " ")
	if err := write(own, "cgroup.subtree_control", ctlLine); err != nil {
		return nil, fmt.Errorf("enable %s in %s: %w", ctlLine, own, err)
	}
	parent := filepath.Join(own, name)
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("make %s: %w", parent, err)
	}
	if err := write(parent, "cgroup.subtree_control", ctlLine); err != nil {
		return nil, fmt.Errorf("enable %s in %s: %w", ctlLine, parent, err)
	}
	return &v2{parent: parent, ctl: ctl, self: self}, nil
}

func (m *v2) Version() int             { return 2 }
func (m *v2) Controllers() Controllers { return m.ctl }

func (m *v2) Create(session string, l Limits) (Group, error) {
	g := &group2{name: session, dir: filepath.Join(m.parent, session), self: m.self}
	if err := os.Mkdir(g.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("make cgroup %s: %w", g.dir, err)
	}
	var errs []error
	if m.ctl.Memory && l.Memory > 0 {
		errs = append(errs, write(g.dir, "memory.max", strconv.FormatInt(l.Memory, 10)))
		// No swap past the bound (absent where the kernel has no swap
		// accounting).
		if _, err := os.Stat(filepath.Join(g.dir, "memory.swap.max")); err == nil {
			errs = append(errs, write(g.dir, "memory.swap.max", "0"))
		}
	}
	if m.ctl.Pids && l.Pids > 0 {
		errs = append(errs, write(g.dir, "pids.max", strconv.Itoa(l.Pids)))
	}
	if m.ctl.CPU && l.CPU > 0 {
		errs = append(errs, write(g.dir, "cpu.max", fmt.Sprintf("%d %d", l.cpuQuota(), cpuPeriod)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", g.dir, err)
	}
	return g, nil
}

func (m *v2) Leftovers() ([]Group, error) {
	names, err := subdirs(m.parent)
	if err != nil {
		return nil, err
	}
	var out []Group
	for _, n := range names {
		out = append(out, &group2{name: n, dir: filepath.Join(m.parent, n), self: m.self})
	}
	return out, nil
}

func (m *v2) Close() error { return rmdir(m.parent) }

type group2 struct {
	name, dir string
	self      int
}

func (g *group2) Name() string { return g.name }

func (g *group2) Place(cmd *exec.Cmd) (func(), error) {
	fd, err := unix.Open(g.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", g.dir, err)
	}
	if cmd.SysProcAttr == nil {
		return nil, errors.New("place in cgroup: cmd has no SysProcAttr")
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = fd
	return func() { unix.Close(fd) }, nil
}

func (g *group2) Join(int) error  { return errors.New("cgroup v2: use Place") }
func (g *group2) Leave(int) error { return errors.New("cgroup v2: use Place") }

func (g *group2) Procs() ([]int, error) {
	return readProcs(filepath.Join(g.dir, "cgroup.procs"), g.self)
}

func (g *group2) OOMKills() (int64, error) {
	return readKey(filepath.Join(g.dir, "memory.events"), "oom_kill")
}

func (g *group2) Kill(wait time.Duration) error {
	// cgroup.kill (Linux 5.14) kills the whole group at once; without it,
	// one process at a time.
	_ = write(g.dir, "cgroup.kill", "1")
	return killProcs(g.Procs, wait)
}

func (g *group2) Remove() error { return rmdir(g.dir) }
