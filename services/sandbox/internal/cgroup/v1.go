package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// v1 is one directory per controller: the service's own cgroup in the
// memory, pids and cpu hierarchies, each with <name> below it.
type v1 struct {
	parents map[string]string // controller -> own/<name>
	owns    map[string]string // controller -> own
	ctl     Controllers
	self    int
}

// openV1 makes own/<name> in each of the memory, pids and cpu hierarchies
// that are mounted (dirs: controller -> the service's own cgroup there).
func openV1(dirs map[string]string, name string, self int) (*v1, error) {
	m := &v1{parents: map[string]string{}, owns: map[string]string{}, self: self}
	var errs []error
	for c, own := range dirs {
		p := filepath.Join(own, name)
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			errs = append(errs, fmt.Errorf("%s: make %s: %w", c, p, err))
			continue
		}
		m.parents[c], m.owns[c] = p, own
		switch c {
		case "memory":
			m.ctl.Memory = true
		case "pids":
			m.ctl.Pids = true
		case "cpu":
			m.ctl.CPU = true
		}
	}
	if len(m.parents) == 0 {
		if len(errs) == 0 {
			return nil, errors.New("none of the memory, pids and cpu hierarchies is mounted")
		}
		return nil, errors.Join(errs...)
	}
	return m, nil
}

func (m *v1) Version() int             { return 1 }
func (m *v1) Controllers() Controllers { return m.ctl }

func (m *v1) group(session string) *group1 {
	g := &group1{name: session, dirs: map[string]string{}, owns: m.owns, self: m.self}
	for c, p := range m.parents {
		g.dirs[c] = filepath.Join(p, session)
	}
	return g
}

func (m *v1) Create(session string, l Limits) (Group, error) {
	g := m.group(session)
	var errs []error
	for c, dir := range g.dirs {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("make cgroup %s: %w", dir, err)
		}
		switch {
		case c == "memory" && l.Memory > 0:
			v := strconv.FormatInt(l.Memory, 10)
			// memsw (memory + swap) must not be set below memory, so
			// memory goes first; no swap past the bound where the kernel
			// accounts swap.
			errs = append(errs, write(dir, "memory.limit_in_bytes", v))
			if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
				errs = append(errs, write(dir, "memory.memsw.limit_in_bytes", v))
			}
		case c == "pids" && l.Pids > 0:
			errs = append(errs, write(dir, "pids.max", strconv.Itoa(l.Pids)))
		case c == "cpu" && l.CPU > 0:
			errs = append(errs, write(dir, "cpu.cfs_period_us", strconv.Itoa(cpuPeriod)))
			errs = append(errs, write(dir, "cpu.cfs_quota_us", strconv.FormatInt(l.cpuQuota(), 10)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", session, err)
	}
	return g, nil
}

func (m *v1) Leftovers() ([]Group, error) {
	seen := map[string]bool{}
	var out []Group
	for _, p := range m.parents {
		names, err := subdirs(p)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if !seen[n] {
				seen[n] = true
				out = append(out, m.group(n))
			}
		}
	}
	return out, nil
}

func (m *v1) Close() error {
	var errs []error
	for _, p := range m.parents {
		errs = append(errs, rmdir(p))
	}
	return errors.Join(errs...)
}

type group1 struct {
	name string
	dirs map[string]string // controller -> group directory
	owns map[string]string // controller -> the service's own cgroup
	self int
}

func (g *group1) Name() string { return g.name }

func (g *group1) Place(*exec.Cmd) (func(), error) { return nil, ErrJoin }

// Join writes tid to each hierarchy's tasks file: v1 moves single threads,
// and a child inherits the cgroups of the thread that forks it.
func (g *group1) Join(tid int) error {
	for _, dir := range g.dirs {
		if err := write(dir, "tasks", strconv.Itoa(tid)); err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// Leave writes tid to the tasks file of the service's own cgroup in each
// hierarchy.
func (g *group1) Leave(tid int) error {
	var errs []error
	for _, dir := range g.owns {
		errs = append(errs, write(dir, "tasks", strconv.Itoa(tid)))
	}
	return errors.Join(errs...)
}

// Procs lists the processes of every hierarchy's group together: a
// process forked inside is in all of them.
func (g *group1) Procs() ([]int, error) {
	var out []int
	for _, dir := range g.dirs {
		pids, err := readProcs(filepath.Join(dir, "cgroup.procs"), g.self)
		if err != nil {
			return nil, err
		}
		for _, p := range pids {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// OOMKills reads memory.oom_control's oom_kill (Linux 4.13).
func (g *group1) OOMKills() (int64, error) {
	dir, ok := g.dirs["memory"]
	if !ok {
		return 0, errors.New("cgroup v1: no memory hierarchy")
	}
	return readKey(filepath.Join(dir, "memory.oom_control"), "oom_kill")
}

func (g *group1) Kill(wait time.Duration) error { return killProcs(g.Procs, wait) }

func (g *group1) Remove() error {
	var errs []error
	for _, dir := range g.dirs {
		errs = append(errs, rmdir(dir))
	}
	return errors.Join(errs...)
}
