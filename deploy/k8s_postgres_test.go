package deploy

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// sharedStores are the services that keep their state in PostgreSQL when
// their database URL is set, and the data directory they then go without.
var sharedStores = map[string]struct{ urlEnv, dataEnv string }{
	"brain": {"BRAIN_DATABASE_URL", "BRAIN_DATA_DIR"},
	"local": {"APPROVAL_DATABASE_URL", "APPROVAL_DATA_DIR"},
}

// shared reports whether the workload of brain or local keeps its state in
// PostgreSQL (its database URL set, from the Secret): then it runs as
// several replicas, not as the single SQLite StatefulSet.
func shared(w workload) bool {
	st, ok := sharedStores[w.name]
	if !ok || len(w.template.Spec.Containers) != 1 {
		return false
	}
	for _, e := range w.template.Spec.Containers[0].Env {
		if e.Name == st.urlEnv {
			return true
		}
	}
	return false
}

// checkReplicas: brain or local on PostgreSQL is a Deployment of at least
// two replicas with a PodDisruptionBudget that keeps one, and no volume of
// its own (a data dir would be a second, unshared store).
func checkReplicas(w workload, pdbs map[string]*policyv1.PodDisruptionBudget) []error {
	st := sharedStores[w.name]
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s: "+format, append([]any{w.kind, w.name}, args...)...))
	}
	if w.kind != "Deployment" {
		fail("%s on PostgreSQL is a Deployment (any replica serves any request)", w.name)
	}
	if w.replicas < 2 {
		fail("%s on PostgreSQL runs at least two replicas, have %d", w.name, w.replicas)
	}
	if len(w.claims) > 0 {
		fail("volumeClaimTemplates %v: %s on PostgreSQL has no data of its own", w.claims, w.name)
	}
	for _, v := range w.template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			fail("volume %s: %s on PostgreSQL has no data of its own", v.Name, w.name)
		}
	}
	c := w.template.Spec.Containers[0]
	if _, ok := envValue(c, st.dataEnv); ok {
		fail("sets %s beside %s", st.dataEnv, st.urlEnv)
	}
	for _, e := range c.Env {
		if e.Name == st.urlEnv && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			fail("%s holds the database password: it comes from Secret %s", st.urlEnv, secretName)
		}
	}
	pdb, ok := pdbs[w.name]
	switch {
	case !ok:
		fail("no PodDisruptionBudget")
	case pdb.Spec.Selector == nil || !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(labels.Set(w.template.Labels)):
		fail("PodDisruptionBudget %s does not select %s's pods", pdb.Name, w.name)
	case pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 || pdb.Spec.MinAvailable.IntValue() >= int(w.replicas):
		fail("PodDisruptionBudget %s: want minAvailable 1..replicas-1 (a drain keeps one, and can go on), have %v", pdb.Name, pdb.Spec.MinAvailable)
	}
	return errs
}

// TestKustomizePostgresOverlay: deploy/k8s/overlays/postgres replaces the
// base's SQLite StatefulSets of brain and local with replicas on
// PostgreSQL that roll one pod at a time, the new one ready first, lets
// both reach the database, and keeps an operator on one local replica;
// everything else is the base.
func TestKustomizePostgresOverlay(t *testing.T) {
	base, overlay := render(t, "k8s/base"), render(t, "k8s/overlays/postgres")
	deps := map[string]*appsv1.Deployment{}
	var egress *networkingv1.NetworkPolicy
	for _, o := range overlay.objs {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			if _, ok := sharedStores[o.Name]; ok {
				t.Errorf("the overlay keeps the SQLite StatefulSet %s", o.Name)
			}
		case *appsv1.Deployment:
			deps[o.Name] = o
		case *corev1.Service:
			if o.Name == "local" && o.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
				t.Errorf("Service local: sessionAffinity %q, want ClientIP (sign-ins live in a replica's memory)", o.Spec.SessionAffinity)
			}
		case *networkingv1.NetworkPolicy:
			if o.Name == "postgres-egress" {
				egress = o
			}
		}
	}
	for name := range sharedStores {
		dep := deps[name]
		if dep == nil {
			t.Errorf("the overlay has no Deployment %s", name)
			continue
		}
		ru := dep.Spec.Strategy.RollingUpdate
		if dep.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil ||
			ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 || ru.MaxSurge == nil || ru.MaxSurge.IntValue() < 1 {
			t.Errorf("%s's rollout: %+v; want RollingUpdate with maxUnavailable 0, maxSurge ≥ 1", name, dep.Spec.Strategy)
		}
	}
	for _, w := range overlay.workloads() {
		if _, ok := sharedStores[w.name]; ok && !shared(w) {
			t.Errorf("the overlay's %s does not set %s", w.name, sharedStores[w.name].urlEnv)
		}
		if _, ok := sharedStores[w.name]; ok && egress != nil {
			sel, err := metav1.LabelSelectorAsSelector(&egress.Spec.PodSelector)
			if err != nil || !sel.Matches(labels.Set(w.template.Labels)) {
				t.Errorf("NetworkPolicy postgres-egress does not select %s's pods (%v)", w.name, err)
			}
		}
	}
	if egress == nil || len(egress.Spec.Egress) != 1 || len(egress.Spec.Egress[0].Ports) != 1 || egress.Spec.Egress[0].Ports[0].Port.IntValue() != 5432 {
		t.Errorf("NetworkPolicy postgres-egress: %+v; want egress to PostgreSQL's port 5432", egress)
	}
	for _, w := range base.workloads() {
		if _, ok := sharedStores[w.name]; ok && (shared(w) || w.kind != "StatefulSet") {
			t.Errorf("the base's %s: %s, shared %v; want the SQLite StatefulSet", w.name, w.kind, shared(w))
		}
	}
	if got, want := len(overlay.objs), len(base.objs)+3; got != want {
		t.Errorf("the overlay has %d objects, want %d: the base's, brain's and local's StatefulSets swapped for Deployments, their PDBs, and postgres-egress", got, want)
	}
}
