package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseMountsAndSelf(t *testing.T) {
	mounts := strings.Join([]string{
		`25 31 0:22 / /sys/fs/cgroup rw,nosuid shared:9 - tmpfs tmpfs ro,mode=755`,
		`26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw`,
		`27 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:11 - cgroup cgroup rw,cpu,cpuacct`,
		`28 25 0:25 /docker/abc /sys/fs/cgroup/memory rw,nosuid shared:12 - cgroup cgroup rw,memory`,
		`29 25 0:26 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids`,
		`30 25 0:27 / /mnt/with\040space rw - cgroup cgroup rw,freezer`,
	}, "\n")
	got := parseMounts(mounts)
	want := map[string]hierarchy{
		"2":      {"/sys/fs/cgroup/unified", "/"},
		"cpu":    {"/sys/fs/cgroup/cpu,cpuacct", "/"},
		"memory": {"/sys/fs/cgroup/memory", "/docker/abc"},
		"pids":   {"/sys/fs/cgroup/pids", "/"},
	}
	if len(got) != len(want) {
		t.Fatalf("parseMounts = %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %v, want %v", k, got[k], w)
		}
	}
	self := parseSelf("12:pids:/user.slice\n4:memory:/docker/abc/inner\n3:cpu,cpuacct:/\n0::/system.slice/sandbox.service\n")
	if self["pids"] != "/user.slice" || self["memory"] != "/docker/abc/inner" || self["cpu"] != "/" || self["cpuacct"] != "/" || self[""] != "/system.slice/sandbox.service" {
		t.Fatalf("parseSelf = %v", self)
	}
	// A mount of a subtree shows the path relative to its root; a path
	// outside it (a cgroup namespace) is the mount point itself.
	if d := want["memory"].dir(self["memory"]); d != "/sys/fs/cgroup/memory/inner" {
		t.Errorf("dir = %s", d)
	}
	if d := want["memory"].dir("/elsewhere"); d != "/sys/fs/cgroup/memory" {
		t.Errorf("dir outside the mount's root = %s", d)
	}
	if unescape(`/mnt/with\040space`) != "/mnt/with space" {
		t.Error("unescape")
	}
}

// fakeV2 lays out a directory like a cgroup2 mount's group: the files the
// kernel would have, so that the v2 path's writes can be read back.
func fakeV2(t *testing.T, controllers, procs string) string {
	t.Helper()
	own := filepath.Join(t.TempDir(), "system.slice", "sandbox.service")
	if err := os.MkdirAll(own, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{"cgroup.controllers": controllers, "cgroup.procs": procs, "cgroup.subtree_control": ""} {
		if err := os.WriteFile(filepath.Join(own, f), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return own
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestV2Writes: the v2 path moves the service into a leaf of its own,
// enables the controllers for its group and the subtree, and writes each
// session's bounds (memory.max with no swap, pids.max, cpu.max); a group
// places a command by clone3 into its directory; OOM kills are read from
// memory.events. No v2 controllers are mounted on the test machine, so
// these are checked against a directory laid out like cgroupfs.
func TestV2Writes(t *testing.T) {
	self := 4242
	own := fakeV2(t, "cpuset cpu io memory hugetlb pids rdma", strconv.Itoa(self)+"\n")
	m, err := openV2(own, "brain-sandbox-x", self)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version() != 2 || m.Controllers() != (Controllers{Memory: true, Pids: true, CPU: true}) {
		t.Fatalf("version %d controllers %+v", m.Version(), m.Controllers())
	}
	for path, want := range map[string]string{
		"brain-sandbox-x.service/cgroup.procs":   "4242",
		"cgroup.subtree_control":                 "+cpu +memory +pids",
		"brain-sandbox-x/cgroup.subtree_control": "+cpu +memory +pids",
	} {
		if got := read(t, filepath.Join(own, path)); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	// The kernel makes memory.swap.max in a new group where swap is
	// accounted; the fake does the same before Create writes it.
	sdir := filepath.Join(own, "brain-sandbox-x", "s1")
	os.MkdirAll(sdir, 0o755)
	os.WriteFile(filepath.Join(sdir, "memory.swap.max"), []byte("max"), 0o644)
	g, err := m.Create("s1", Limits{Memory: 512 << 20, Pids: 64, CPU: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{"memory.max": "536870912", "memory.swap.max": "0", "pids.max": "64", "cpu.max": "150000 100000"} {
		if got := read(t, filepath.Join(sdir, f)); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	done, err := g.Place(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if !cmd.SysProcAttr.UseCgroupFD || cmd.SysProcAttr.CgroupFD <= 2 {
		t.Errorf("Place: UseCgroupFD %v CgroupFD %d", cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD)
	}
	done()
	if err := g.Join(1); err == nil {
		t.Error("Join on v2 succeeded")
	}
	os.WriteFile(filepath.Join(sdir, "memory.events"), []byte("low 0\nhigh 0\nmax 7\noom 2\noom_kill 3\noom_group_kill 0\n"), 0o644)
	if n, err := g.OOMKills(); err != nil || n != 3 {
		t.Errorf("OOMKills = %d, %v; want 3", n, err)
	}
	os.WriteFile(filepath.Join(sdir, "cgroup.procs"), []byte("4242\n"), 0o644)
	if pids, err := g.Procs(); err != nil || len(pids) != 0 {
		t.Errorf("Procs = %v, %v; want the service itself left out", pids, err)
	}
	left, err := m.Leftovers()
	if err != nil || len(left) != 1 || left[0].Name() != "s1" {
		t.Fatalf("Leftovers = %v, %v", left, err)
	}
	// Without memory, only what is there is set.
	own2 := fakeV2(t, "cpu pids", "4242\n")
	m2, err := openV2(own2, "b", self)
	if err != nil {
		t.Fatal(err)
	}
	if m2.Controllers() != (Controllers{Pids: true, CPU: true}) {
		t.Errorf("controllers %+v", m2.Controllers())
	}
	if _, err := m2.Create("s", Limits{Memory: 1 << 20, Pids: 8}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(own2, "b", "s", "memory.max")); !errors.Is(err, os.ErrNotExist) {
		t.Error("memory.max written without the memory controller")
	}
}

// TestV2Refuses: a v2 group shared with other processes cannot pass
// controllers down, and one without any of the three has nothing to give.
func TestV2Refuses(t *testing.T) {
	for _, tt := range []struct{ controllers, procs, want string }{
		{"memory pids cpu", "4242\n17\n", "holds 1 other processes"},
		{"io hugetlb", "4242\n", "offers none of the memory, pids and cpu controllers"},
	} {
		_, err := openV2(fakeV2(t, tt.controllers, tt.procs), "b", 4242)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("openV2(%q, %q) = %v, want %q", tt.controllers, tt.procs, err, tt.want)
		}
	}
}

// TestV1Real: on the test machine's v1 hierarchies, a session's group
// bounds a process forked from a thread that joined it, and is removed.
func TestV1Real(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups (CI runs as root)")
	}
	m, err := Open("v1", "cgroup-test-"+strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Skipf("needs cgroup v1 memory, pids or cpu mounted: %v", err)
	}
	defer func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}()
	if m.Version() != 1 {
		t.Fatalf("version %d", m.Version())
	}
	g, err := m.Create("s1", Limits{Memory: 64 << 20, Pids: 8, CPU: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Place(exec.Command("true")); !errors.Is(err, ErrJoin) {
		t.Errorf("Place on v1 = %v, want ErrJoin", err)
	}
	n, err := g.OOMKills()
	if m.Controllers().Memory && (err != nil || n != 0) {
		t.Errorf("OOMKills = %d, %v", n, err)
	}
	if err := g.Kill(time.Second); err != nil {
		t.Error(err)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if left, _ := m.Leftovers(); len(left) != 0 {
		t.Errorf("Leftovers after Remove = %v", left)
	}
}
