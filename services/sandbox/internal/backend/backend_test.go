package backend

import (
	"errors"
	"strings"
	"testing"
)

func TestCleanPath(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{"", "", nil},
		{".", "", nil},
		{"/workspace", "", nil},
		{"/workspace/", "", nil},
		{"src/a.go", "src/a.go", nil},
		{"./src/../src/a.go", "src/a.go", nil},
		{"/workspace/src/a.go", "src/a.go", nil},
		{"/workspace/../workspace/x", "x", nil},
		{"a//b/", "a/b", nil},
		{"..", "", ErrOutside},
		{"../x", "", ErrOutside},
		{"a/../../x", "", ErrOutside},
		{"/etc/passwd", "", ErrOutside},
		{"/workspacex/a", "", ErrOutside},
		{"/workspace/../etc", "", ErrOutside},
		{"/", "", ErrOutside},
	}
	for _, tt := range tests {
		got, err := CleanPath(tt.in)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("CleanPath(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
	if _, err := CleanPath("a\x00b"); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("NUL byte: %v", err)
	}
}

func TestSortAndCap(t *testing.T) {
	in := []FileInfo{{Path: "b"}, {Path: "a/x"}, {Path: "a"}}
	out, truncated := SortAndCap(in, 2)
	if len(out) != 2 || out[0].Path != "a" || out[1].Path != "a/x" || !truncated {
		t.Errorf("SortAndCap = %v, %v", out, truncated)
	}
	if _, truncated := SortAndCap(in, 3); truncated {
		t.Error("truncated at the exact limit")
	}
}

func TestKillTaggedScriptMatchesWholeRecords(t *testing.T) {
	s := KillTaggedScript("brainabc123")
	for _, want := range []string{"grep -lsxz 'BRAIN_SANDBOX_RUN=brainabc123' /proc/[0-9]*/environ", "kill -9", "exit 0"} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q: %s", want, s)
		}
	}
}
