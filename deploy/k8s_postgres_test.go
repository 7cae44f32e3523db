package deploy

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// sharedBrain reports whether brain's workload keeps its state in
// PostgreSQL (BRAIN_DATABASE_URL set, from the Secret): then it runs as
// several replicas, not as the single SQLite StatefulSet.
func sharedBrain(w workload) bool {
	if len(w.template.Spec.Containers) != 1 {
		return false
	}
	for _, e := range w.template.Spec.Containers[0].Env {
		if e.Name == "BRAIN_DATABASE_URL" {
			return true
		}
	}
	return false
}

// checkBrainReplicas: brain on PostgreSQL is a Deployment of at least two
// replicas with a PodDisruptionBudget that keeps one, and no volume of its
// own (a data dir would be a second, unshared store).
func checkBrainReplicas(w workload, pdbs map[string]*policyv1.PodDisruptionBudget) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s: "+format, append([]any{w.kind, w.name}, args...)...))
	}
	if w.kind != "Deployment" {
		fail("brain on PostgreSQL is a Deployment (any replica serves any request)")
	}
	if w.replicas < 2 {
		fail("brain on PostgreSQL runs at least two replicas, have %d", w.replicas)
	}
	if len(w.claims) > 0 {
		fail("volumeClaimTemplates %v: brain on PostgreSQL has no data of its own", w.claims)
	}
	c := w.template.Spec.Containers[0]
	if _, ok := envValue(c, "BRAIN_DATA_DIR"); ok {
		fail("sets BRAIN_DATA_DIR beside BRAIN_DATABASE_URL")
	}
	for _, e := range c.Env {
		if e.Name == "BRAIN_DATABASE_URL" && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			fail("BRAIN_DATABASE_URL holds the database password: it comes from Secret %s", secretName)
		}
	}
	pdb, ok := pdbs[w.name]
	switch {
	case !ok:
		fail("no PodDisruptionBudget")
	case pdb.Spec.Selector == nil || !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(labels.Set(w.template.Labels)):
		fail("PodDisruptionBudget %s does not select brain's pods", pdb.Name)
	case pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 || pdb.Spec.MinAvailable.IntValue() >= int(w.replicas):
		fail("PodDisruptionBudget %s: want minAvailable 1..replicas-1 (a drain keeps one, and can go on), have %v", pdb.Name, pdb.Spec.MinAvailable)
	}
	return errs
}

// TestKustomizePostgresOverlay: deploy/k8s/overlays/postgres replaces the
// base's SQLite StatefulSet with brain replicas on PostgreSQL that roll
// one pod at a time, the new one ready first; everything else is the base.
func TestKustomizePostgresOverlay(t *testing.T) {
	base, overlay := render(t, "k8s/base"), render(t, "k8s/overlays/postgres")
	var dep *appsv1.Deployment
	for _, o := range overlay.objs {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			if o.Name == "brain" {
				t.Error("the overlay keeps the SQLite StatefulSet brain")
			}
		case *appsv1.Deployment:
			if o.Name == "brain" {
				dep = o
			}
		}
	}
	if dep == nil {
		t.Fatal("the overlay has no Deployment brain")
	}
	ru := dep.Spec.Strategy.RollingUpdate
	if dep.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil ||
		ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 || ru.MaxSurge == nil || ru.MaxSurge.IntValue() < 1 {
		t.Errorf("brain's rollout: %+v; want RollingUpdate with maxUnavailable 0, maxSurge ≥ 1", dep.Spec.Strategy)
	}
	for _, w := range overlay.workloads() {
		if w.name == "brain" && !sharedBrain(w) {
			t.Error("the overlay's brain does not set BRAIN_DATABASE_URL")
		}
	}
	for _, w := range base.workloads() {
		if w.name == "brain" && (sharedBrain(w) || w.kind != "StatefulSet") {
			t.Errorf("the base's brain: %s, shared %v; want the SQLite StatefulSet", w.kind, sharedBrain(w))
		}
	}
	if got, want := len(overlay.objs), len(base.objs)+1; got != want {
		t.Errorf("the overlay has %d objects, want %d: the base's, brain's StatefulSet swapped for a Deployment, and its PDB", got, want)
	}
}
