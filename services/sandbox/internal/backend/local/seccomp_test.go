package local

import (
	"encoding/binary"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/net/bpf"

	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/backendtest"
)

// The seccomp filter, run on the BPF interpreter: fallocate modes that
// allocate past a file's size and io_uring are refused on every ABI of
// this architecture, the rest is allowed.
func TestSeccompFilterDecisions(t *testing.T) {
	raw, err := seccompFilter("amd64")
	if err != nil {
		t.Fatal(err)
	}
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("filter does not disassemble")
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	const (
		x8664 = 0xc000003e
		i386  = 0x40000003
		allow = seccompRetAllow
		notup = seccompRetErrno | uint32(syscall.EOPNOTSUPP)
		nosys = seccompRetErrno | uint32(syscall.ENOSYS)
	)
	tests := []struct {
		name           string
		arch, nr, mode uint32
		want           uint32
	}{
		{"write", x8664, 1, 0, allow},
		{"fallocate mode 0", x8664, 285, 0, allow},
		{"fallocate keep size", x8664, 285, fallocKeepSize, notup},
		{"fallocate punch hole", x8664, 285, fallocPunchHole | fallocKeepSize, allow},
		{"fallocate zero range", x8664, 285, fallocZeroRange, allow},
		{"fallocate zero range keep size", x8664, 285, fallocZeroRange | fallocKeepSize, notup},
		{"fallocate collapse", x8664, 285, fallocCollapseRange, allow},
		{"fallocate insert", x8664, 285, fallocInsertRange, allow},
		{"fallocate unshare", x8664, 285, 0x40, notup},
		{"fallocate write zeroes", x8664, 285, 0x80, notup},
		{"io_uring_setup", x8664, 425, 0, nosys},
		{"io_uring_enter", x8664, 426, 0, allow},
		{"x32 fallocate keep size", x8664, x32Bit | 285, fallocKeepSize, notup},
		{"x32 io_uring_setup", x8664, x32Bit | 425, 0, nosys},
		{"i386 fallocate keep size", i386, 324, fallocKeepSize, notup},
		{"i386 fallocate", i386, 324, 0, allow},
		{"i386 285 is not fallocate", i386, 285, fallocKeepSize, allow},
		{"i386 io_uring_setup", i386, 425, 0, nosys},
	}
	for _, tt := range tests {
		// seccomp_data, with each word the filter loads in the
		// interpreter's (network) byte order.
		in := make([]byte, 64)
		binary.BigEndian.PutUint32(in[offNR:], tt.nr)
		binary.BigEndian.PutUint32(in[offArch:], tt.arch)
		binary.BigEndian.PutUint32(in[offArg1Low:], tt.mode)
		got, err := vm.Run(in)
		if err != nil || uint32(got) != tt.want {
			t.Errorf("%s: %#x, %v; want %#x", tt.name, got, err, tt.want)
		}
	}
	if p, err := seccompProgram("riscv64"); p != nil || err != nil {
		t.Errorf("an architecture without syscall numbers here: %d bytes, %v; want no filter", len(p), err)
	}
	if p, _ := seccompProgram("arm64"); len(p) == 0 || len(p)%8 != 0 {
		t.Errorf("arm64 filter of %d bytes", len(p))
	}
}

// The filter in a real sandbox: fallocate that would allocate past the
// file's size fails and allocates nothing; the ordinary kind works within
// RLIMIT_FSIZE; io_uring is absent.
func TestSeccompInTheSandbox(t *testing.T) {
	t.Parallel()
	if hostSeccomp == nil {
		t.Skipf("no seccomp filter for GOARCH %s", runtime.GOARCH)
	}
	for _, tool := range []string{"fallocate", "perl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (util-linux, perl-base): run services/sandbox/deps.sh", tool)
		}
	}
	f := newFixture(t, Config{Limits: Limits{FileSize: 1 << 20}})
	ws := f.workspace(t)
	tests := []struct {
		name, cmd string
		exit      int
		stdout    string
		stderr    string
	}{
		// util-linux reports EOPNOTSUPP for -n as "keep size mode is
		// unsupported".
		{"keep size", "touch k && fallocate -n -l 100M k; stat -c %b k", 0, "0\n", "keep size mode is unsupported"},
		{"zero range keeping size", "fallocate -z -n -l 100M k", 1, "", "unsupported"},
		{"plain, within the file size limit", "fallocate -l 512K p && stat -c '%s %b' p", 0, "524288 1024\n", ""},
		{"plain, past the file size limit", "fallocate -l 2M q; echo $?", 0, "153\n", "File size limit exceeded"},
		{"dig holes (punch hole, keep size)", "head -c 524288 /dev/zero > z && fallocate -d z && stat -c '%s %b' z", 0, "524288 0\n", ""},
		{"io_uring_setup", `perl -e 'syscall(425, 1, 0); print "$!\n"'`, 0, "Function not implemented\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, stdout, stderr := backendtest.Exec(t, f.b, ws, backend.ExecRequest{Command: tt.cmd})
			if res.ExitCode != tt.exit || stdout != tt.stdout || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d stdout %q stderr %q; want %d %q %q", res.ExitCode, stdout, stderr, tt.exit, tt.stdout, tt.stderr)
			}
		})
	}
}
