package tools

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/sandbox/internal/backend"
)

func TestProgressCapsAndKeepsCharactersWhole(t *testing.T) {
	r := &run{started: time.Now()}
	// é split across two writes stays whole in the event.
	r.addProgress(backend.Stdout, []byte("caf\xc3"), 100)
	r.addProgress(backend.Stdout, []byte("\xa9"), 100)
	ev := r.takeProgress()
	if ev["stdout"] != "café" {
		t.Errorf("event %v", ev)
	}
	if r.takeProgress() != nil {
		t.Error("a second event without new output")
	}
	// Past the cap, output is counted, not kept, and decoding resumes at a
	// character start.
	r.addProgress(backend.Stderr, []byte(strings.Repeat("é", 10)), 5) // 20 bytes, room 5
	r.addProgress(backend.Stderr, []byte("\xa9zz"), 5)                // the cut é's end is skipped; one z fits
	ev = r.takeProgress()
	if ev["stderr"] != "ééz" || ev["stderr_skipped_bytes"] != int64(16+1+1) {
		t.Errorf("capped event %v", ev)
	}
	r.addProgress(backend.Stderr, []byte("\xa9ok"), 5)
	ev = r.takeProgress()
	if ev["stderr"] != "ok" || ev["stderr_skipped_bytes"] != int64(1) {
		t.Errorf("resynced event %v", ev)
	}
}

func TestValidPrefix(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{{"abc", 5, "abc"}, {"abc", 2, "ab"}, {"aé", 2, "a"}, {"aé", 3, "aé"}, {"é", 0, ""}} {
		if got := validPrefix(tt.s, tt.n); got != tt.want {
			t.Errorf("validPrefix(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func TestAsText(t *testing.T) {
	for _, tt := range []struct {
		in   string
		cut  bool
		want string
		ok   bool
	}{
		{"hello\n\tworld\r\n\x1b[0m", false, "hello\n\tworld\r\n\x1b[0m", true},
		{"caf\xc3", true, "caf", true},
		{"caf\xc3", false, "", false},
		{"\x00\x01\x02binary", false, "", false},
		{"\xff\xfe", false, "", false},
	} {
		got, ok := asText([]byte(tt.in), tt.cut)
		if got != tt.want || ok != tt.ok {
			t.Errorf("asText(%q, %v) = %q, %v; want %q, %v", tt.in, tt.cut, got, ok, tt.want, tt.ok)
		}
	}
}

func TestExitNotes(t *testing.T) {
	for code, want := range map[int]string{137: "SIGKILL", 152: "CPU time", 153: "file size", 127: "not found", 0: "", 1: ""} {
		if got := exitNote(code); !strings.Contains(got, want) || (want == "" && got != "") {
			t.Errorf("exitNote(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestDiskNote(t *testing.T) {
	tests := []struct {
		name string
		d    backend.DiskUse
		want []string // parts of the note; nil: no note
	}{
		{"under the quota", backend.DiskUse{Quota: 1 << 20, Before: 4096, After: 8192}, nil},
		{"at the quota", backend.DiskUse{Quota: 1 << 20, Before: 4096, After: 1 << 20}, nil},
		{"crossed it", backend.DiskUse{Quota: 10485760, Before: 4096, After: 30109696}, []string{
			"disk quota exceeded: the workspace uses 30109696 bytes (28.7 MiB), over its quota of 10485760 bytes (10.0 MiB)",
			"Delete at least 19623936 bytes (18.7 MiB) of files",
			"every command runs without the right to write to files and sandbox_write_file is refused",
		}},
		{"still over after a no-write run", backend.DiskUse{Quota: 100 << 10, Before: 300 << 10, After: 200 << 10, NoWrite: true}, []string{
			"the workspace uses 204800 bytes (200.0 KiB), over its quota of 102400 bytes (100.0 KiB)",
			"already over its quota when this command started",
			"Delete at least 102400 bytes (100.0 KiB)",
		}},
		{"back under after a no-write run", backend.DiskUse{Quota: 100 << 10, Before: 300 << 10, After: 8192, NoWrite: true}, []string{
			"was over its disk quota when this command started",
			"now uses 8192 bytes (8.0 KiB) of its quota of 102400 bytes (100.0 KiB), so commands can write again",
		}},
		{"not measurable", backend.DiskUse{Quota: 100, Before: 4096, After: -1, Err: errors.New("permission denied")}, []string{
			"could not be measured (permission denied)", "counts as over its quota of 100 bytes",
		}},
	}
	for _, tt := range tests {
		got := diskNote(&tt.d)
		if tt.want == nil && got != "" {
			t.Errorf("%s: note %q, want none", tt.name, got)
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: note %q does not say %q", tt.name, got, w)
			}
		}
	}
}
