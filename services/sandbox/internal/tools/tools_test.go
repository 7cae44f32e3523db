package tools

import (
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
