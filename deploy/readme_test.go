package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brain-tools/suite/deploy/envdoc"
	"github.com/google/go-cmp/cmp"
)

// TestReadmeEnvTables fails when the environment tables of README.md
// differ from what the services' Config structs say (variable, default,
// doc comment), when its metrics table differs from pkg/metrics' catalogue
// (which TestMetricsEveryService checks against what every server
// serves), or when a Config struct with env tags is reached by no
// service's roots. Fix: go generate ./deploy.
func TestReadmeEnvTables(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := envdoc.Render(root, have)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(have)); diff != "" {
		t.Errorf("deploy/README.md's env tables differ from the code; run go generate ./deploy (-code +README):\n%s", diff)
	}
	// Each service's section says its image and port.
	for _, name := range envdoc.Names() {
		if !strings.Contains(string(have), "\n## "+name+"\n") || !strings.Contains(string(have), "`brain-tools/"+name+"`") {
			t.Errorf("README.md has no section ## %s naming image brain-tools/%s", name, name)
		}
	}
}
