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

func TestBytesAndOver(t *testing.T) {
	for n, want := range map[int64]string{
		0:           "0 bytes",
		1023:        "1023 bytes",
		1024:        "1024 bytes (1.0 KiB)",
		10485760:    "10485760 bytes (10.0 MiB)",
		30109696:    "30109696 bytes (28.7 MiB)",
		1 << 30:     "1073741824 bytes (1.0 GiB)",
		5 << 40:     "5497558138880 bytes (5.0 TiB)",
		5000 << 40:  "5497558138880000 bytes (5000.0 TiB)",
		-1:          "-1 bytes",
		1<<20 - 1:   "1048575 bytes (1024.0 KiB)",
		1<<20 + 512: "1049088 bytes (1.0 MiB)",
	} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	var none *DiskUse
	for _, tt := range []struct {
		d    *DiskUse
		over bool
	}{
		{none, false},
		{&DiskUse{Quota: 100, After: 100}, false},
		{&DiskUse{Quota: 100, After: 101}, true},
		{&DiskUse{Quota: 100, After: -1}, true},
		{&DiskUse{Quota: 100, Before: 200, After: 50, NoWrite: true}, false},
	} {
		if got := tt.d.Over(); got != tt.over {
			t.Errorf("%+v.Over() = %v, want %v", tt.d, got, tt.over)
		}
	}
}
