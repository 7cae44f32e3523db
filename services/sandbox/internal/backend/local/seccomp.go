package local

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"syscall"

	"golang.org/x/net/bpf"
)

// The disk quota is enforced by measuring the workspace while a command
// runs, and RLIMIT_FSIZE caps each file a sandbox writes, so that what a
// command can add between two measurements is bounded by how fast it can
// write. Two kernel paths allocate disk without that cap and without
// writing: fallocate(2) with FALLOC_FL_KEEP_SIZE reserves blocks past the
// end of a file of any size (the file's size, which RLIMIT_FSIZE checks,
// stays put), so one call can take all of the host's free disk at once;
// and io_uring runs the same fallocate without a system call a seccomp
// filter could see. The sandbox's seccomp filter therefore refuses:
//
//   - fallocate with any mode but those that grow a file only through its
//     size (0, FALLOC_FL_ZERO_RANGE, FALLOC_FL_INSERT_RANGE: RLIMIT_FSIZE
//     applies) or free space (FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE,
//     FALLOC_FL_COLLAPSE_RANGE), with EOPNOTSUPP, which callers treat as
//     "this file system cannot" (posix_fallocate then writes zeros, which
//     RLIMIT_FSIZE caps);
//   - io_uring_setup, with ENOSYS, as on a kernel without io_uring.
//
// Everything else is allowed: the sandbox's other walls are namespaces,
// mounts and rlimits, not a system call list.

// Linux's fallocate modes (linux/falloc.h).
const (
	fallocKeepSize      = 0x01
	fallocPunchHole     = 0x02
	fallocCollapseRange = 0x08
	fallocZeroRange     = 0x10
	fallocInsertRange   = 0x20
)

// allowedFallocModes are the fallocate modes the filter lets through.
var allowedFallocModes = []uint32{0, fallocPunchHole | fallocKeepSize, fallocCollapseRange, fallocZeroRange, fallocInsertRange}

// Seccomp's return actions and the layout of struct seccomp_data
// (linux/seccomp.h): nr at 0, arch at 4, args[i] at 16+8i.
const (
	seccompRetAllow = 0x7fff0000
	seccompRetErrno = 0x00050000
	offNR           = 0
	offArch         = 4
	offArg1Low      = 16 + 8 // the low half on a little-endian host
)

// abi is one system call ABI a process of this host's architecture can
// use: its AUDIT_ARCH_* value and its numbers for the calls filtered.
type abi struct {
	arch          uint32
	fallocate     uint32
	ioUringSetup  uint32
	maskX32NRBits bool // x86-64: x32 calls are the same numbers | 0x40000000
}

// abis lists the ABIs per GOARCH, the native one first (linux/audit.h and
// the architectures' syscall tables). A GOARCH missing here gets no filter.
var abis = map[string][]abi{
	"amd64": {
		{arch: 0xc000003e, fallocate: 285, ioUringSetup: 425, maskX32NRBits: true}, // x86-64 (and x32)
		{arch: 0x40000003, fallocate: 324, ioUringSetup: 425},                      // i386
	},
	"arm64": {
		{arch: 0xc00000b7, fallocate: 47, ioUringSetup: 425},  // aarch64
		{arch: 0x40000028, fallocate: 352, ioUringSetup: 425}, // arm (EABI)
	},
}

const x32Bit = 0x40000000

// seccompProgram returns the filter for GOARCH goarch as bwrap reads it
// from --add-seccomp-fd (struct sock_filter entries in the host's byte
// order), or nil when goarch has no entry in abis.
func seccompProgram(goarch string) ([]byte, error) {
	raw, err := seccompFilter(goarch)
	if err != nil || raw == nil {
		return nil, err
	}
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out, nil
}

// seccompFilter assembles the filter described above for goarch.
func seccompFilter(goarch string) ([]bpf.RawInstruction, error) {
	list := abis[goarch]
	if list == nil {
		return nil, nil
	}
	var p program
	p.add(bpf.LoadAbsolute{Off: offArch, Size: 4})
	for i, a := range list {
		p.jumpIfEq(a.arch, fmt.Sprintf("abi%d", i), "")
	}
	p.add(bpf.RetConstant{Val: seccompRetAllow}) // an ABI this kernel does not run here
	for i, a := range list {
		p.label(fmt.Sprintf("abi%d", i))
		p.add(bpf.LoadAbsolute{Off: offNR, Size: 4})
		if a.maskX32NRBits {
			p.add(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: ^uint32(x32Bit)})
		}
		p.jumpIfEq(a.ioUringSetup, "enosys", "")
		p.jumpIfEq(a.fallocate, "mode", "")
		p.add(bpf.RetConstant{Val: seccompRetAllow})
	}
	p.label("mode")
	p.add(bpf.LoadAbsolute{Off: offArg1Low, Size: 4})
	for _, m := range allowedFallocModes {
		p.jumpIfEq(m, "allow", "")
	}
	p.add(bpf.RetConstant{Val: seccompRetErrno | uint32(syscall.EOPNOTSUPP)})
	p.label("allow")
	p.add(bpf.RetConstant{Val: seccompRetAllow})
	p.label("enosys")
	p.add(bpf.RetConstant{Val: seccompRetErrno | uint32(syscall.ENOSYS)})
	return p.assemble()
}

// program is a BPF program with named jump targets, resolved by assemble.
type program struct {
	insts  []bpf.Instruction
	jumps  map[int][2]string // instruction index -> labels if true, if false ("" = next)
	labels map[string]int
}

func (p *program) add(i bpf.Instruction) { p.insts = append(p.insts, i) }

func (p *program) jumpIfEq(val uint32, ifTrue, ifFalse string) {
	if p.jumps == nil {
		p.jumps = map[int][2]string{}
	}
	p.jumps[len(p.insts)] = [2]string{ifTrue, ifFalse}
	p.add(bpf.JumpIf{Cond: bpf.JumpEqual, Val: val})
}

func (p *program) label(name string) {
	if p.labels == nil {
		p.labels = map[string]int{}
	}
	p.labels[name] = len(p.insts)
}

func (p *program) assemble() ([]bpf.RawInstruction, error) {
	skip := func(from int, label string) (uint8, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := p.labels[label]
		if !ok || to <= from || to-from-1 > 255 {
			return 0, fmt.Errorf("seccomp filter: bad jump from %d to %q", from, label)
		}
		return uint8(to - from - 1), nil
	}
	for i, targets := range p.jumps {
		j := p.insts[i].(bpf.JumpIf)
		var err error
		if j.SkipTrue, err = skip(i, targets[0]); err != nil {
			return nil, err
		}
		if j.SkipFalse, err = skip(i, targets[1]); err != nil {
			return nil, err
		}
		p.insts[i] = j
	}
	return bpf.Assemble(p.insts)
}

// hostSeccomp is this host's filter, nil when GOARCH has none.
var hostSeccomp, hostSeccompErr = seccompProgram(runtime.GOARCH)
