// Package reaper makes the sandbox service reap every child it causes.
//
// A sandbox is two bwrap processes: the outer one, which the service
// starts and waits for, and the sandbox's own init (PID 1 of its PID
// namespace), which the outer one forks. When the outer one dies first (a
// SIGKILL on a timeout or cancel that lands before it has reaped the init),
// the init is reparented to the nearest child subreaper or to PID 1, and
// becomes a zombie there when it exits. When the service is PID 1 (as in
// the container image) nobody else reaps such zombies; in the image all
// sessions share one uid, and every zombie counts against that uid's
// RLIMIT_NPROC until commands can no longer start.
//
// Run therefore makes the service a child subreaper (PR_SET_CHILD_SUBREAPER;
// as PID 1 it is a reaper already) and reaps every child that exits and
// that it did not start through Start — the orphans — on each SIGCHLD and
// once a second. Children started through Start are left to their
// exec.Cmd.Wait: Start holds a lock that Run's reaping takes too, so a
// child that exits before Start has recorded its pid is not reaped by
// mistake (Wait would then fail with ECHILD).
//
// The service's own process reaps every such child (Run in main, with no
// filter). A test binary that serves the sandbox in-process has children
// of its own that it waits for, so it reaps only the sandboxes' processes
// (Run with Sandbox), and starts its own bwrap children through Start.
package reaper

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

var (
	// spawnMu is held for reading while a child is being started and
	// recorded, and for writing while orphans are reaped.
	spawnMu sync.RWMutex
	trackMu sync.Mutex
	tracked = map[int]bool{}
	reaped  atomic.Int64
	running atomic.Bool
)

// Start starts cmd and records its pid as a child the reaper must leave to
// cmd.Wait. Call Done with the pid once Wait has returned.
func Start(cmd *exec.Cmd) error {
	spawnMu.RLock()
	defer spawnMu.RUnlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	trackMu.Lock()
	tracked[cmd.Process.Pid] = true
	trackMu.Unlock()
	return nil
}

// Done forgets a pid recorded by Start, once its Wait has returned.
func Done(pid int) {
	trackMu.Lock()
	delete(tracked, pid)
	trackMu.Unlock()
}

// Reaped returns how many orphans Run has reaped in this process.
func Reaped() int64 { return reaped.Load() }

// Running reports whether Run is reaping in this process.
func Running() bool { return running.Load() }

// Become makes this process a child subreaper (PR_SET_CHILD_SUBREAPER), so
// that orphans of its children come to it rather than to PID 1; as PID 1
// it does nothing, as PID 1 gets them anyway.
func Become() error {
	if os.Getpid() == 1 {
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("reaper: become a child subreaper: %w", err)
	}
	return nil
}

// Run reaps orphans until ctx ends: call Become first. With only set, it
// reaps only the exited children for which only returns true.
func Run(ctx context.Context, logger *slog.Logger, only func(pid int) bool) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	running.Store(true)
	defer running.Store(false)
	wake := time.NewTimer(time.Second)
	defer wake.Stop()
	for {
		n, blocked := reapOrphans(only)
		if n > 0 {
			logger.Debug("reaped orphans", "count", n)
		}
		// A child of Start's that has exited hides the others from waitid
		// until its Wait reaps it, which takes moments: look again soon.
		next := time.Second
		if blocked {
			next = 10 * time.Millisecond
		}
		wake.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-sig:
		case <-wake.C:
		}
	}
}

// Sandbox reports whether pid is a process of a sandbox's own making: a
// sandbox's init, which the outer bwrap leaves to others to reap, or an
// outer bwrap (or the prlimit that execs it) whose service died. Zombies
// keep their name, so this holds for an exited one.
func Sandbox(pid int) bool {
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	c := string(bytes.TrimSpace(comm))
	return err == nil && (c == "bwrap" || c == "prlimit")
}

// sigchldPIDOffset is where si_pid lies in a siginfo_t on 64-bit Linux:
// after si_signo, si_errno and si_code (three int32) and the padding that
// aligns the union to 8 bytes.
const sigchldPIDOffset = 16

// reapOrphans reaps every exited child that Start did not record and
// returns how many, and whether an exited child of Start's stood in the
// way (waitid shows one exited child at a time).
func reapOrphans(only func(pid int) bool) (n int, blocked bool) {
	spawnMu.Lock()
	defer spawnMu.Unlock()
	for {
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
			return n, false // ECHILD: no children at all
		}
		pid := int(*(*int32)(unsafe.Add(unsafe.Pointer(&info), sigchldPIDOffset)))
		if pid <= 0 {
			return n, false // children, none exited
		}
		trackMu.Lock()
		mine := tracked[pid]
		trackMu.Unlock()
		if mine || only != nil && !only(pid) {
			return n, true
		}
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err == nil {
			n++
			reaped.Add(1)
		}
	}
}
