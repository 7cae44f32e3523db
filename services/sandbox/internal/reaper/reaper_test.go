package reaper

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReapsOrphansButNotItsOwn: a child started through Start is left to
// its Wait, even when it exits at once, while what it orphans — reparented
// to this process, a child subreaper — is reaped.
func TestReapsOrphansButNotItsOwn(t *testing.T) {
	if err := Become(); err != nil {
		t.Skipf("needs PR_SET_CHILD_SUBREAPER (Linux 3.4): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go Run(ctx, nil, nil)
	before := Reaped()
	for range 20 {
		// The shell prints its background child's pid and exits at once;
		// the child, orphaned, comes to this process.
		cmd := exec.Command("sh", "-c", "sleep 0.05 & echo $!")
		var out strings.Builder
		cmd.Stdout = &out
		if err := Start(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the child's own Wait: %v (reaped by the reaper?)", err)
		}
		Done(cmd.Process.Pid)
		if _, err := strconv.Atoi(strings.TrimSpace(out.String())); err != nil {
			t.Fatalf("no orphan pid: %q", out.String())
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for Reaped()-before < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("reaped %d orphans, want 20", Reaped()-before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
