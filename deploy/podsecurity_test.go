package deploy

import (
	"strings"
	"testing"

	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// TestPodSecurity evaluates every rendered pod template with the Pod
// Security admission's own checks (k8s.io/pod-security-admission, the
// code the API server runs): the base meets "restricted", so it runs in a
// namespace that enforces it; the sandbox-local overlay's sandbox meets no
// level below "privileged", which is what deploy/README.md tells operators
// to label its namespace with, and its other pods stay restricted.
func TestPodSecurity(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	allowed := func(w workload, level psaapi.Level) (bool, string) {
		res := policy.AggregateCheckResults(eval.EvaluatePod(psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}, &w.template.ObjectMeta, &w.template.Spec))
		return res.Allowed, strings.Join(res.ForbiddenReasons, "; ")
	}
	tests := []struct {
		dir string
		// privileged names the workloads that need the privileged level.
		privileged []string
	}{
		{"k8s/base", nil},
		{"k8s/overlays/sandbox-local", []string{"sandbox"}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			for _, w := range render(t, tt.dir).workloads() {
				needsPrivileged := false
				for _, p := range tt.privileged {
					needsPrivileged = needsPrivileged || p == w.name
				}
				ok, why := allowed(w, psaapi.LevelRestricted)
				switch {
				case !needsPrivileged && !ok:
					t.Errorf("%s %s: not allowed under restricted: %s", w.kind, w.name, why)
				case needsPrivileged && ok:
					t.Errorf("%s %s: meets restricted, but the docs say its namespace must be privileged", w.kind, w.name)
				case needsPrivileged:
					if ok, _ := allowed(w, psaapi.LevelBaseline); ok {
						t.Errorf("%s %s: meets baseline, but the docs say its namespace must be privileged", w.kind, w.name)
					}
					_, why := allowed(w, psaapi.LevelBaseline)
					t.Logf("%s %s needs privileged; baseline forbids: %s", w.kind, w.name, why)
				}
			}
		})
	}
}
