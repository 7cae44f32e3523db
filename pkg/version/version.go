// Package version tells which build of the suite is running, in the same
// words everywhere an operator looks: a binary's -version flag, the
// build_info metric on /metrics, MCP's serverInfo.version and the images'
// OCI labels (which `make images` fills from the same values).
//
// The version and revision come from the binary's build information
// (runtime/debug.ReadBuildInfo): the main module's version (a tag such as
// v1.2.3, a pseudo-version, or "(devel)" for a build from a work tree) and
// the VCS commit the go command stamps. Either can be set at build time
// instead, which is what the Makefile does, since the go command stamps no
// VCS data in a workspace, a git worktree or with -buildvcs=false:
//
//	go build -ldflags "-X github.com/brain-tools/suite/pkg/version.version=v1.2.3 \
//	    -X github.com/brain-tools/suite/pkg/version.revision=$(git rev-parse HEAD)" ./services/brain
package version

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Set by the linker (-ldflags -X, see the package doc); empty means "from
// the build information".
var (
	version  string
	revision string
)

// Devel is the version of a build that says nothing better: the go
// command's own word for a main module built from a work tree.
const Devel = "(devel)"

// MetricName is the name of the gauge NewCollector returns.
const MetricName = "build_info"

// Info identifies one build.
type Info struct {
	// Version is the module version: the -ldflags value, else the build
	// information's main module version, else Devel. Never empty.
	Version string
	// Revision is the VCS commit: the -ldflags value, else the build
	// information's vcs.revision, with "-dirty" appended when vcs.modified
	// says the work tree had uncommitted changes; empty when unknown.
	Revision string
	// GoVersion is the Go toolchain that built the binary (go1.26.8).
	GoVersion string
}

// Get returns the running binary's Info. It is computed once.
func Get() Info { return current() }

var current = sync.OnceValue(func() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(bi, version, revision)
})

// resolve is Get without the process: the linker's values win, the build
// information fills what they leave empty. bi may be nil.
func resolve(bi *debug.BuildInfo, ldVersion, ldRevision string) Info {
	i := Info{Version: ldVersion, Revision: ldRevision, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		if i.Version == "" && bi.Main.Version != "" {
			i.Version = bi.Main.Version
		}
		if i.Revision == "" {
			var modified bool
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					i.Revision = s.Value
				case "vcs.modified":
					modified = s.Value == "true"
				}
			}
			if i.Revision != "" && modified {
				i.Revision += "-dirty"
			}
		}
	}
	if i.Version == "" {
		i.Version = Devel
	}
	return i
}

// String is the one-line form -version prints after the binary's name:
// "v1.2.3 (revision 0123abc…, go1.26.8)", without the revision part when
// it is unknown.
func (i Info) String() string {
	if i.Revision == "" {
		return fmt.Sprintf("%s (%s)", i.Version, i.GoVersion)
	}
	return fmt.Sprintf("%s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}

// Print writes what a binary's -version flag prints: its name, then Get's
// String, on one line.
func Print(w io.Writer, name string) error {
	_, err := fmt.Fprintf(w, "%s %s\n", name, Get())
	return err
}

// FlagUsage is the help text of every binary's -version flag.
const FlagUsage = "print the version (module version, VCS revision, Go version) and exit"

// NewCollector returns the build_info gauge of a service (or brain): always
// 1, with the labels service, version, revision and goversion of Get, so
// that a query such as count by (version) (build_info) tells which builds
// run. Register it once per registry.
func NewCollector(service string) prometheus.Collector {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricName,
		Help: "The running build: always 1, labelled with the module version, VCS revision and Go version (the same as -version prints).",
		ConstLabels: prometheus.Labels{
			"service": service, "version": i.Version, "revision": i.Revision, "goversion": i.GoVersion,
		},
	})
	g.Set(1)
	return g
}
