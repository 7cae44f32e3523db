package version

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestResolve(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	tests := []struct {
		name     string
		bi       *debug.BuildInfo
		ldV, ldR string
		want     Info
	}{
		{"no build info", nil, "", "", Info{Version: Devel, GoVersion: runtime.Version()}},
		{"work tree, no VCS stamp", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "", "",
			Info{Version: Devel, GoVersion: "go1.26.8"}},
		{"tagged module", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: vcs("0123456789abcdef0123456789abcdef01234567", "false")}, "", "",
			Info{Version: "v1.2.3", Revision: "0123456789abcdef0123456789abcdef01234567", GoVersion: "go1.26.8"}},
		{"modified work tree", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201194600-0123456789ab+dirty"}, Settings: vcs("0123456789ab", "true")}, "", "",
			Info{Version: "v0.0.0-20261201194600-0123456789ab+dirty", Revision: "0123456789ab-dirty", GoVersion: "go1.26.8"}},
		{"linker values win", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: vcs("aaaa", "true")}, "v9.9.9-rc.1", "bbbb",
			Info{Version: "v9.9.9-rc.1", Revision: "bbbb", GoVersion: "go1.26.8"}},
		{"linker version, revision from the build", &debug.BuildInfo{GoVersion: "go1.26.8", Settings: vcs("aaaa", "false")}, "v2.0.0", "",
			Info{Version: "v2.0.0", Revision: "aaaa", GoVersion: "go1.26.8"}},
		{"empty main version", &debug.BuildInfo{GoVersion: "go1.26.8"}, "", "", Info{Version: Devel, GoVersion: "go1.26.8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolve(tt.bi, tt.ldV, tt.ldR)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("resolve (-want +got):\n%s", diff)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		in   Info
		want string
	}{
		{Info{Version: "v1.2.3", Revision: "abc", GoVersion: "go1.26.8"}, "v1.2.3 (revision abc, go1.26.8)"},
		{Info{Version: Devel, GoVersion: "go1.26.8"}, "(devel) (go1.26.8)"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestPrintAndCollectorAgree: what -version prints and what build_info
// reports come from the same Get.
func TestPrintAndCollectorAgree(t *testing.T) {
	var b bytes.Buffer
	if err := Print(&b, "svc"); err != nil {
		t.Fatal(err)
	}
	i := Get()
	if got, want := b.String(), "svc "+i.String()+"\n"; got != want {
		t.Errorf("Print = %q, want %q", got, want)
	}
	want := `# HELP build_info The running build: always 1, labelled with the module version, VCS revision and Go version (the same as -version prints).
# TYPE build_info gauge
build_info{goversion="` + i.GoVersion + `",revision="` + i.Revision + `",service="svc",version="` + i.Version + `"} 1
`
	if err := testutil.CollectAndCompare(NewCollector("svc"), strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
