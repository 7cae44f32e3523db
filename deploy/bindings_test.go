package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestBindingsMatchExamples: the host configs of compose and Kubernetes bind
// the same tools as examples/brain.json (which `make config` regenerates
// from what the services publish and examples/brain.host.json adds),
// field for field, but for the URL, which names the service where it runs,
// and have the same approvals object. A schema or description changed in a
// service and in examples but not here would have brain refuse, under
// compose or Kubernetes, arguments the service now takes; a gate, a cap or
// a function tool missing here would leave the deployed host less careful
// than the demo.
func TestBindingsMatchExamples(t *testing.T) {
	root := repoRoot(t)
	read := func(rel string) (map[string]map[string]any, any) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Tools     []map[string]any `json:"tools"`
			Approvals any              `json:"approvals"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		m := map[string]map[string]any{}
		for _, b := range doc.Tools {
			name, _ := b["name"].(string)
			delete(b, "url")
			m[name] = b
		}
		return m, doc.Approvals
	}
	want, wantApprovals := read("examples/brain.json")
	for _, rel := range []string{"deploy/brain.compose.json", "deploy/brain-pg.compose.json", "deploy/k8s/base/brain.json"} {
		got, approvals := read(rel)
		if !reflect.DeepEqual(approvals, wantApprovals) {
			t.Errorf("%s: approvals %v differ from examples/brain.json's %v", rel, approvals, wantApprovals)
		}
		for name, b := range want {
			g, ok := got[name]
			if !ok {
				t.Errorf("%s: no binding %q (examples/brain.json has it)", rel, name)
				continue
			}
			for k := range mergeKeys(b, g) {
				if !reflect.DeepEqual(b[k], g[k]) {
					t.Errorf("%s: binding %q: %s differs from examples/brain.json", rel, name, k)
				}
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s: binding %q is not in examples/brain.json", rel, name)
			}
		}
	}
}

func mergeKeys(a, b map[string]any) map[string]bool {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}
