package local

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/cgroup"
)

// What seals a sandbox from the service that runs it: no inherited file
// descriptors, per-session cgroups, and finding what an earlier run left.

// sealFDs marks every file descriptor from 3 up close-on-exec, so that
// nothing the service inherited from whatever started it (a shell's fd,
// a supervisor's socket, a file a wrapper opened) reaches a sandbox: Go
// opens its own descriptors close-on-exec, but leaves inherited ones as
// they came. os/exec's ExtraFiles are unaffected (they are dup2'ed into
// the child without the flag). close_range(2) with CLOSE_RANGE_CLOEXEC
// (Linux 5.11) does it in one call; older kernels get one fcntl per open
// descriptor.
func sealFDs() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("seal inherited file descriptors: %w", err)
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
	}
	return nil
}

// The environment of the outer bwrap and the sandbox's init (bwrap's
// --clearenv applies to the command only): tagVar names the service whose
// sandbox it is, jobVar the job, cmdVar the one command (a random mark).
// None is secret; the session can read them in /proc/1/environ, and the
// tag is a hash of the workspace root.
const (
	tagVar = "BRAIN_SANDBOX_SERVICE"
	jobVar = "BRAIN_SANDBOX_JOB"
	cmdVar = "BRAIN_SANDBOX_COMMAND"
)

// env is the environment of the outer bwrap for command mark of job.
func (b *Backend) env(job, mark string) []string {
	env := []string{tagVar + "=" + b.cfg.Tag, cmdVar + "=" + mark}
	if job != "" {
		env = append(env, jobVar+"="+job)
	}
	return env
}

// killMarked SIGKILLs every process whose environment carries command
// mark: a sandbox's init that outlived its outer bwrap, killed while it
// was still setting the sandbox up (bwrap arms --die-with-parent only just
// before it starts the command), before bwrap had said which process the
// init is. Killing the init ends its PID namespace. It looks until none is
// left, for at most a second.
func killMarked(mark string) {
	deadline := time.Now().Add(time.Second)
	for {
		found := 0
		for _, pid := range allPIDs() {
			if environValue(pid, cmdVar) == mark && !isZombie(pid) {
				found++
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if found == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// killLeftovers finds and kills what earlier runs of this service left
// running, before this run starts any sandbox: every process in the
// session cgroups, every process whose environment carries the service's
// tag (the two bwrap processes of each sandbox: killing the sandbox's
// init ends its PID namespace and all in it), and, as root, every process
// of the session uids (Config.UIDs). A sandbox whose bwrap was still
// setting it up when the service died may run on without its parent
// (bwrap arms --die-with-parent just before it starts the command); this
// is where such a sandbox ends.
func (b *Backend) killLeftovers() backend.Leftovers {
	left := backend.Leftovers{Jobs: map[string]bool{}}
	killed := map[int]bool{}
	kill := func(pid int) {
		if pid == os.Getpid() || killed[pid] {
			return
		}
		// One already dying (SIGKILL pending: its service's death took it
		// with it, and it has not quite exited) did not outlive the
		// service; only the others are counted.
		job, dying := environValue(pid, jobVar), isDying(pid)
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed[pid] = !dying
			if job != "" && !dying {
				left.Jobs[job] = true
			}
		}
	}
	if b.cg != nil {
		groups, err := b.cg.Leftovers()
		if err != nil {
			b.log.Warn("list leftover cgroups", "err", err)
		}
		for _, g := range groups {
			if pids, err := g.Procs(); err == nil {
				for _, p := range pids {
					kill(p)
				}
			}
			if err := g.Kill(2 * time.Second); err != nil {
				b.log.Warn("kill leftover cgroup", "cgroup", g.Name(), "err", err)
			}
			if err := g.Remove(); err != nil {
				b.log.Warn("remove leftover cgroup", "cgroup", g.Name(), "err", err)
			}
		}
	}
	lo, hi := b.cfg.UIDs[0], b.cfg.UIDs[1]
	byUID := b.asRoot && lo > 0 && hi >= lo
	deadline := time.Now().Add(5 * time.Second)
	for {
		found := 0
		for _, pid := range allPIDs() {
			if pid == os.Getpid() {
				continue
			}
			mine := environValue(pid, tagVar) == b.cfg.Tag
			if !mine && byUID {
				uid, ok := realUID(pid)
				mine = ok && uid >= lo && uid <= hi
			}
			if mine && !isZombie(pid) {
				found++
				kill(pid)
			}
		}
		if found == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, outlived := range killed {
		if outlived {
			left.Processes++
		}
	}
	left.At = time.Now()
	if left.Processes > 0 {
		b.log.Warn("killed what an earlier run of the service left running", "processes", left.Processes, "jobs", len(left.Jobs))
	}
	return left
}

// allPIDs lists the processes /proc shows.
func allPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// environValue returns the value of key in pid's initial environment, ""
// when absent or unreadable.
func environValue(pid int, key string) string {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return ""
	}
	prefix := []byte(key + "=")
	for kv := range bytes.SplitSeq(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			return string(v)
		}
	}
	return ""
}

// procStatus returns the value of a field of /proc/<pid>/status.
func procStatus(pid int, field string) (string, bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return "", false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// realUID returns pid's real uid.
func realUID(pid int) (int, bool) {
	v, ok := procStatus(pid, "Uid")
	if !ok {
		return 0, false
	}
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0, false
	}
	uid, err := strconv.Atoi(f[0])
	return uid, err == nil
}

// isZombie reports whether pid has exited and waits to be reaped: a
// SIGKILL cannot end it further, its parent (or the reaper) must.
func isZombie(pid int) bool {
	v, ok := procStatus(pid, "State")
	return ok && strings.HasPrefix(v, "Z")
}

// isDying reports whether pid has exited or has a SIGKILL pending (its
// own or its thread group's).
func isDying(pid int) bool {
	if v, ok := procStatus(pid, "State"); !ok || strings.HasPrefix(v, "Z") || strings.HasPrefix(v, "X") {
		return true
	}
	for _, f := range []string{"SigPnd", "ShdPnd"} {
		v, _ := procStatus(pid, f)
		if mask, err := strconv.ParseUint(v, 16, 64); err == nil && mask&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return false
}

// sessionGroup is one session's cgroup and, on cgroup v1, the OS thread
// its commands are forked from.
type sessionGroup struct {
	g  cgroup.Group
	sp *spawner // v1 only
}

// start runs startFn, which starts cmd, so that cmd starts inside the
// group (see cgroup.Group.Place and Join).
func (sg *sessionGroup) start(cmd *exec.Cmd, startFn func() error) error {
	if sg.sp != nil {
		return sg.sp.do(startFn)
	}
	done, err := sg.g.Place(cmd)
	if err != nil {
		return err
	}
	defer done()
	return startFn()
}

// spawner runs functions on one OS thread that it moved into a v1 cgroup,
// so that every child they fork starts in it (v1 has no
// CLONE_INTO_CGROUP). The thread must outlive the children it forks: a
// child's Pdeathsig fires when the thread that forked it exits, so the
// spawner of a session lives as long as the session's group. When it
// stops, it moves the thread back to the service's cgroups and hands it
// back to Go; if that fails it keeps the thread locked, so that Go
// discards it rather than run other goroutines in the session's group.
type spawner struct {
	reqs chan func()
}

func newSpawner(g cgroup.Group) (*spawner, error) {
	sp := &spawner{reqs: make(chan func())}
	joined := make(chan error, 1)
	goLocked(func() {
		if err := g.Join(unix.Gettid()); err != nil {
			joined <- err
			return
		}
		joined <- nil
		for f := range sp.reqs {
			f()
		}
		if g.Leave(unix.Gettid()) == nil {
			runtime.UnlockOSThread()
		}
	})
	if err := <-joined; err != nil {
		return nil, err
	}
	return sp, nil
}

// goLocked runs f in a new goroutine locked to an OS thread that is not
// the process's main thread. The main thread is the thread group leader,
// whose cgroups are those /proc/self/cgroup shows and whose v1 memory
// cgroup is charged with the whole process's memory: it must never sit in
// a session's group. A goroutine that finds itself on the main thread
// keeps it locked while it starts another goroutine, which therefore runs
// on another thread, and lets go once that one has locked its own.
func goLocked(f func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			f()
			return
		}
		elsewhere := make(chan struct{})
		goLocked(func() {
			close(elsewhere)
			f()
		})
		<-elsewhere
		runtime.UnlockOSThread()
	}()
}

// do runs f on the spawner's thread and returns its error.
func (sp *spawner) do(f func() error) error {
	done := make(chan error, 1)
	sp.reqs <- func() { done <- f() }
	return <-done
}

// stop ends the spawner's thread.
func (sp *spawner) stop() { close(sp.reqs) }
