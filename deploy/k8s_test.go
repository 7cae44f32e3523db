package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/deploy/envdoc"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The rules the manifests keep (deploy/README.md, "Kubernetes").
const (
	secretName = "brain-tools"
	partOf     = "brain-tools"
	portName   = "http"
)

// stateless are the services run as N replicas with a PDB and an HPA
// (whose minReplicas sets the floor; the Deployment leaves spec.replicas
// to it); the others run one replica.
var stateless = []string{"storage", "search", "webfetch"}

// requiredLabels every object of the suite carries.
var requiredLabels = []string{"app.kubernetes.io/name", "app.kubernetes.io/part-of", "app.kubernetes.io/component"}

// newObject returns the k8s.io/api type for apiVersion and kind; a kind
// the suite does not use is refused, so a typo in either is an error.
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, nil
	case "apps/v1 StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1 Secret":
		return &corev1.Secret{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, nil
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, nil
	}
	return nil, fmt.Errorf("apiVersion %q kind %q: not a type the suite's manifests use", apiVersion, kind)
}

// splitDocs splits a YAML stream into its non-empty documents.
func splitDocs(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var probe map[string]any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			return nil, err
		}
		if len(probe) > 0 {
			docs = append(docs, doc)
		}
	}
}

// decodeStrict decodes one document into its k8s.io/api type, refusing
// unknown and duplicate fields. patch drops the strategic-merge-patch
// directives ($patch, $setElementOrder/..., $retainKeys,
// $deleteFromPrimitiveList/...) first, which a patch may carry.
func decodeStrict(doc []byte, patch bool) (any, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	obj, err := newObject(tm.APIVersion, tm.Kind)
	if err != nil {
		return nil, err
	}
	if patch {
		var m any
		if err := yaml.UnmarshalStrict(doc, &m); err != nil {
			return nil, err
		}
		if doc, err = json.Marshal(dropDirectives(m)); err != nil {
			return nil, err
		}
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return obj, nil
}

func dropDirectives(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if strings.HasPrefix(k, "$") {
				delete(v, k)
				continue
			}
			v[k] = dropDirectives(e)
		}
	case []any:
		for i, e := range v {
			v[i] = dropDirectives(e)
		}
	}
	return v
}

// TestManifestFilesStrict decodes every YAML file under deploy/k8s as it
// is committed: kustomization.yaml into kustomize's Kustomization, the
// rest into the k8s.io/api types, unknown fields refused; every path a
// kustomization names exists.
func TestManifestFilesStrict(t *testing.T) {
	var files []string
	err := filepath.WalkDir("k8s", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	patches := map[string]bool{}
	var kusts, others []string
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			kusts = append(kusts, f)
		} else {
			others = append(others, f)
		}
	}
	if len(kusts) < 2 {
		t.Fatalf("want a base and an overlay kustomization under deploy/k8s, found %v", kusts)
	}
	for _, f := range kusts {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var k kusttypes.Kustomization
			if err := yaml.UnmarshalStrict(data, &k); err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			dir := filepath.Dir(f)
			var paths []string
			paths = append(paths, k.Resources...)
			for _, p := range k.Patches {
				if p.Path != "" {
					paths = append(paths, p.Path)
					patches[filepath.Join(dir, p.Path)] = true
				}
			}
			for _, g := range k.ConfigMapGenerator {
				paths = append(paths, g.FileSources...)
			}
			if len(k.SecretGenerator) > 0 {
				t.Errorf("secretGenerator: secrets are created by the operator, referenced by name only")
			}
			for _, p := range paths {
				if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
					t.Errorf("names %s: %v", p, err)
				}
			}
		})
	}
	for _, f := range others {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			docs, err := splitDocs(data)
			if err != nil {
				t.Fatal(err)
			}
			if len(docs) == 0 {
				t.Fatal("no documents")
			}
			for i, doc := range docs {
				if _, err := decodeStrict(doc, patches[f]); err != nil {
					t.Errorf("document %d: %v", i, err)
				}
			}
		})
	}
}

// TestDecodeStrictRefuses shows the decoder the tests rely on refuses
// what kubectl would silently drop or reject late.
func TestDecodeStrictRefuses(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"unknown field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selectr: {a: b}}\n", "unknown field"},
		{"misspelled probe", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers: [{name: x, readinesProbe: {}}]\n", "unknown field"},
		{"duplicate key", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nmetadata: {name: y}\n", "already set"},
		{"unknown kind", "apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: x}\n", "not a type"},
		{"old api version", "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: x}\n", "not a type"},
		{"misspelt NetworkPolicy field", "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: x}\nspec: {podSelector: {}, policyType: [Ingress]}\n", "unknown field"},
		{"NetworkPolicy port as a list", "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: x}\nspec: {podSelector: {}, ingress: [{ports: [{port: [80]}]}]}\n", "NetworkPolicy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeStrict([]byte(tt.doc), false)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// rendered is one kustomize build, decoded.
type rendered struct {
	objs []any
}

// builds holds kustomize's output per directory: TestCheckSuiteCatches
// needs a fresh decoding of k8s/base to break for each case, not a fresh
// kustomize run.
var builds sync.Map // dir → func() ([]byte, error)

// render builds dir with kustomize (once per test binary) and decodes the
// output afresh, so the caller may modify the objects.
func render(t *testing.T, dir string) *rendered {
	t.Helper()
	build, _ := builds.LoadOrStore(dir, sync.OnceValues(func() ([]byte, error) {
		k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
		rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
		}
		return rm.AsYaml()
	}))
	out, err := build.(func() ([]byte, error))()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := splitDocs(out)
	if err != nil {
		t.Fatal(err)
	}
	r := &rendered{}
	for i, doc := range docs {
		obj, err := decodeStrict(doc, false)
		if err != nil {
			t.Fatalf("%s: rendered document %d: %v", dir, i, err)
		}
		r.objs = append(r.objs, obj)
	}
	return r
}

// workload is a Deployment or StatefulSet, seen the same way.
type workload struct {
	kind, name string
	meta       map[string]string
	replicas   int32 // spec.replicas, 1 when unset (the API's default)
	// replicasSet: spec.replicas is in the manifest. An HPA's target must
	// leave it out, or every kubectl apply resets the HPA's choice.
	replicasSet bool
	selector    map[string]string
	template    corev1.PodTemplateSpec
	claims      []string // volumeClaimTemplates names
}

func (r *rendered) workloads() []workload {
	var ws []workload
	for _, o := range r.objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			ws = append(ws, workload{"Deployment", o.Name, o.Labels, deref(o.Spec.Replicas), o.Spec.Replicas != nil, selectorOf(o.Spec.Selector), o.Spec.Template, nil})
		case *appsv1.StatefulSet:
			var claims []string
			for _, c := range o.Spec.VolumeClaimTemplates {
				claims = append(claims, c.Name)
			}
			ws = append(ws, workload{"StatefulSet", o.Name, o.Labels, deref(o.Spec.Replicas), o.Spec.Replicas != nil, selectorOf(o.Spec.Selector), o.Spec.Template, claims})
		}
	}
	return ws
}

func deref(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// selectorOf returns a selector's matchLabels; the suite uses no
// matchExpressions, and a selector with some counts as not matching.
func selectorOf(s *metav1.LabelSelector) map[string]string {
	if s == nil || len(s.MatchExpressions) > 0 {
		return nil
	}
	return s.MatchLabels
}

func envValue(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom == nil {
			return e.Value, true
		}
	}
	return "", false
}

// allowedEnv is every variable a service reads: its envdoc settings, and
// for brain also the names its host config gives (api_keys[].env,
// token_env).
func allowedEnv(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	for _, name := range envdoc.Names() {
		settings, err := serviceSettings(root, name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = map[string]bool{}
		for _, s := range settings {
			out[name][s.Name] = true
		}
	}
	hc := readHostConfig(t, root)
	for _, k := range hc.APIKeys {
		out["brain"][k.Env] = true
	}
	for _, tl := range hc.Tools {
		if tl.TokenEnv != "" {
			out["brain"][tl.TokenEnv] = true
		}
	}
	return out
}

// addrVar is the variable holding each service's listen address.
func addrVar(service string) string {
	if service == "brain" {
		return "BRAIN_ADDR"
	}
	return "ADDR"
}

// defaultPort is the port of the service's default listen address, from
// the code (envdoc: envDefault or the default set in main).
func defaultPort(t *testing.T, root, service string) string {
	t.Helper()
	settings, err := serviceSettings(root, service)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		if s.Name == addrVar(service) {
			_, port, err := net.SplitHostPort(s.Default)
			if err != nil {
				t.Fatalf("%s: default %s=%q: %v", service, s.Name, s.Default, err)
			}
			return port
		}
	}
	t.Fatalf("%s: no %s setting", service, addrVar(service))
	return ""
}

// checkSuite runs every rule over one rendering and returns what breaks
// them. env lists the variables each service reads, ports each service's
// port from its code.
func checkSuite(r *rendered, env map[string]map[string]bool, ports map[string]string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	ws := r.workloads()
	byName := map[string]workload{}
	for _, w := range ws {
		byName[w.name] = w
	}
	for _, name := range envdoc.Names() {
		if _, ok := byName[name]; !ok {
			fail("%s: no Deployment or StatefulSet", name)
		}
	}
	services := map[string]*corev1.Service{}
	pdbs := map[string]*policyv1.PodDisruptionBudget{}
	hpas := map[string]*autoscalingv2.HorizontalPodAutoscaler{}
	configMaps := map[string]*corev1.ConfigMap{}
	for _, o := range r.objs {
		switch o := o.(type) {
		case *corev1.Service:
			services[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			pdbs[o.Name] = o
		case *autoscalingv2.HorizontalPodAutoscaler:
			hpas[o.Spec.ScaleTargetRef.Kind+"/"+o.Spec.ScaleTargetRef.Name] = o
		case *corev1.ConfigMap:
			configMaps[o.Name] = o
		case *corev1.Secret:
			fail("Secret %s is committed: secrets are referenced by name only", o.Name)
		}
		if m, ok := o.(interface{ GetLabels() map[string]string }); ok {
			kind := fmt.Sprintf("%T", o)
			name := o.(interface{ GetName() string }).GetName()
			if _, isCM := o.(*corev1.ConfigMap); isCM {
				continue
			}
			for _, l := range requiredLabels {
				if m.GetLabels()[l] == "" {
					fail("%s %s: no label %s", kind, name, l)
				}
			}
			if m.GetLabels()["app.kubernetes.io/part-of"] != partOf {
				fail("%s %s: app.kubernetes.io/part-of is not %s", kind, name, partOf)
			}
		}
	}

	for _, w := range ws {
		tl := w.template.Labels
		for _, l := range requiredLabels {
			if tl[l] == "" {
				fail("%s %s: pod template has no label %s", w.kind, w.name, l)
			}
		}
		if tl["app.kubernetes.io/name"] != w.name {
			fail("%s %s: pod template's app.kubernetes.io/name is %q", w.kind, w.name, tl["app.kubernetes.io/name"])
		}
		if len(w.selector) == 0 || !labels.SelectorFromSet(w.selector).Matches(labels.Set(tl)) {
			fail("%s %s: selector %v does not match the pod template's labels %v", w.kind, w.name, w.selector, tl)
		}
		if len(w.template.Spec.Containers) != 1 {
			fail("%s %s: want one container, have %d", w.kind, w.name, len(w.template.Spec.Containers))
			continue
		}
		c := w.template.Spec.Containers[0]
		errs = append(errs, checkContainer(w, c, env[w.name], ports[w.name])...)

		// Its Service.
		svc, ok := services[w.name]
		switch {
		case !ok:
			fail("%s %s: no Service %s", w.kind, w.name, w.name)
		case !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(tl)) || len(svc.Spec.Selector) == 0:
			fail("Service %s: selector %v does not match the pod template's labels", w.name, svc.Spec.Selector)
		case len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != portName || fmt.Sprint(svc.Spec.Ports[0].Port) != ports[w.name]:
			fail("Service %s: want one port %s → targetPort %s, have %+v", w.name, ports[w.name], portName, svc.Spec.Ports)
		}

		// An HPA owns its target's replica count: a spec.replicas in the
		// manifest would be applied over the HPA's choice on every
		// kubectl apply (the HPA's minReplicas is the floor instead).
		if hpa, ok := hpas[w.kind+"/"+w.name]; ok && w.replicasSet {
			fail("%s %s: sets spec.replicas (%d) but HorizontalPodAutoscaler %s scales it: leave replicas out, the HPA's minReplicas governs", w.kind, w.name, w.replicas, hpa.Name)
		}
		if slices.Contains(stateless, w.name) {
			if w.kind != "Deployment" {
				fail("%s %s: a stateless service is a Deployment, scaled by its HorizontalPodAutoscaler", w.kind, w.name)
			}
			pdb, ok := pdbs[w.name]
			if !ok {
				fail("%s: no PodDisruptionBudget", w.name)
			} else if sel := pdb.Spec.Selector; sel == nil || len(sel.MatchLabels) == 0 || !labels.SelectorFromSet(sel.MatchLabels).Matches(labels.Set(tl)) {
				fail("PodDisruptionBudget %s: selector does not match %s's pods", pdb.Name, w.name)
			} else if pdb.Spec.MinAvailable == nil && pdb.Spec.MaxUnavailable == nil {
				fail("PodDisruptionBudget %s: neither minAvailable nor maxUnavailable", pdb.Name)
			}
			hpa, ok := hpas["Deployment/"+w.name]
			if !ok {
				fail("%s: no HorizontalPodAutoscaler targeting Deployment %s", w.name, w.name)
			} else if hpa.Spec.ScaleTargetRef.APIVersion != "apps/v1" || hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 || hpa.Spec.MaxReplicas < *hpa.Spec.MinReplicas || len(hpa.Spec.Metrics) == 0 {
				fail("HorizontalPodAutoscaler %s: want apps/v1 target, minReplicas >= 2, maxReplicas >= minReplicas, a metric", hpa.Name)
			}
		} else if shared(w) {
			errs = append(errs, checkReplicas(w, pdbs)...)
		} else {
			if w.replicas != 1 {
				fail("%s %s: a stateful service runs one replica, have %d", w.kind, w.name, w.replicas)
			}
			if _, ok := pdbs[w.name]; ok {
				fail("%s: a PodDisruptionBudget on a single replica blocks node drains", w.name)
			}
		}
	}

	// brain's storage on a volume, its config from the generated ConfigMap,
	// and the time to stop that its shutdown takes.
	if b, ok := byName["brain"]; ok && len(b.template.Spec.Containers) == 1 {
		if g := b.template.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second < brainStopGrace {
			got := "unset (30)"
			if g != nil {
				got = fmt.Sprint(*g)
			}
			fail("brain: terminationGracePeriodSeconds %s, want at least %d: brain's shutdown may take that long, and is killed past it", got, int(brainStopGrace.Seconds()))
		}
		if !shared(b) {
			errs = append(errs, checkDataVolume(b, "BRAIN_DATA_DIR")...)
		}
		c := b.template.Spec.Containers[0]
		i := slices.Index(c.Args, "-config")
		if i < 0 || i+1 >= len(c.Args) {
			fail("brain: no -config argument")
		} else if err := checkBrainConfig(b, c.Args[i+1], configMaps); err != nil {
			errs = append(errs, err)
		}
	}
	if l, ok := byName["local"]; ok && !shared(l) {
		errs = append(errs, checkDataVolume(l, "APPROVAL_DATA_DIR")...)
	}
	return errs
}

// checkContainer: probes on /healthz at the named port, resources, the
// listen port, env names, secrets by name, no privilege escalation.
func checkContainer(w workload, c corev1.Container, env map[string]bool, port string) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s: container %s: "+format, append([]any{w.kind, w.name, c.Name}, args...)...))
	}
	var named *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].Name == portName {
			named = &c.Ports[i]
		}
	}
	if named == nil {
		fail("no port named %s", portName)
	} else if fmt.Sprint(named.ContainerPort) != port {
		fail("containerPort %d, but the service's port (from its code) is %s", named.ContainerPort, port)
	}
	addr, ok := envValue(c, addrVar(w.name))
	if !ok {
		fail("%s is not set (the default listens on loopback only)", addrVar(w.name))
	} else if h, p, err := net.SplitHostPort(addr); err != nil || p != port || (h != "0.0.0.0" && h != "" && h != "::") {
		fail("%s=%q: want all interfaces on port %s", addrVar(w.name), addr, port)
	}
	for _, p := range []struct {
		kind  string
		probe *corev1.Probe
	}{{"readinessProbe", c.ReadinessProbe}, {"livenessProbe", c.LivenessProbe}} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			fail("no %s with httpGet", p.kind)
		case p.probe.HTTPGet.Path != "/healthz" || p.probe.HTTPGet.Port.String() != portName:
			fail("%s on %s port %s, want /healthz port %s", p.kind, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), portName)
		}
	}
	req, lim := c.Resources.Requests, c.Resources.Limits
	if req.Cpu().IsZero() || req.Memory().IsZero() {
		fail("resource requests need cpu and memory, have %v", req)
	}
	if lim.Memory().IsZero() {
		fail("no memory limit")
	} else if lim.Memory().Cmp(*req.Memory()) < 0 {
		fail("memory limit below the request")
	}
	for _, e := range c.Env {
		if !env[e.Name] {
			fail("env %s is not a setting of %s (envdoc)", e.Name, w.name)
		}
		if e.ValueFrom != nil {
			switch {
			case e.ValueFrom.SecretKeyRef != nil:
				if e.ValueFrom.SecretKeyRef.Name != secretName {
					fail("env %s from Secret %q, want %q", e.Name, e.ValueFrom.SecretKeyRef.Name, secretName)
				}
			default:
				fail("env %s: only secretKeyRef is used", e.Name)
			}
		}
		if e.ValueFrom == nil && looksSecret(e.Name) {
			fail("env %s has a literal value: secrets come from Secret %s", e.Name, secretName)
		}
	}
	if len(c.EnvFrom) > 0 {
		fail("envFrom hides which variables are set; list them")
	}
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || (sc.Privileged != nil && *sc.Privileged) {
		fail("securityContext must set allowPrivilegeEscalation: false and not be privileged")
	}
	if sc != nil && (sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL")) {
		fail("capabilities must drop ALL")
	}
	return errs
}

func looksSecret(name string) bool {
	for _, s := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD"} {
		if strings.Contains(name, s) && !strings.HasSuffix(name, "_KEY_PREFIX_MODE") && !strings.HasSuffix(name, "_KEY_ROOT") {
			return true
		}
	}
	return false
}

// checkDataVolume: the directory named by dirVar is a mount of a
// volumeClaimTemplate or a PersistentVolumeClaim.
func checkDataVolume(w workload, dirVar string) []error {
	c := w.template.Spec.Containers[0]
	dir, ok := envValue(c, dirVar)
	if !ok {
		return []error{fmt.Errorf("%s: %s is not set", w.name, dirVar)}
	}
	for _, m := range c.VolumeMounts {
		if filepath.Clean(m.MountPath) != filepath.Clean(dir) {
			continue
		}
		if slices.Contains(w.claims, m.Name) {
			return nil
		}
		for _, v := range w.template.Spec.Volumes {
			if v.Name == m.Name && v.PersistentVolumeClaim != nil {
				return nil
			}
		}
		return []error{fmt.Errorf("%s: %s=%s is mounted from volume %s, which is not persistent", w.name, dirVar, dir, m.Name)}
	}
	return []error{fmt.Errorf("%s: %s=%s is not on a volume", w.name, dirVar, dir)}
}

// checkBrainConfig: the -config file is brain.json of a ConfigMap mounted
// read-only, with the same content as deploy/brain.compose.json (whose
// URLs are the in-cluster Service names).
func checkBrainConfig(w workload, path string, cms map[string]*corev1.ConfigMap) error {
	c := w.template.Spec.Containers[0]
	for _, m := range c.VolumeMounts {
		if filepath.Dir(path) != filepath.Clean(m.MountPath) {
			continue
		}
		for _, v := range w.template.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			cm, ok := cms[v.ConfigMap.Name]
			if !ok {
				return fmt.Errorf("brain: ConfigMap %s is not in the build", v.ConfigMap.Name)
			}
			got, ok := cm.Data[filepath.Base(path)]
			if !ok {
				return fmt.Errorf("brain: ConfigMap %s has no %s", cm.Name, filepath.Base(path))
			}
			want, err := os.ReadFile("brain.compose.json")
			if err != nil {
				return err
			}
			if strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
				return fmt.Errorf("brain: ConfigMap %s's %s differs from deploy/brain.compose.json: copy it to deploy/k8s/base/brain.json", cm.Name, filepath.Base(path))
			}
			return nil
		}
	}
	return fmt.Errorf("brain: -config %s is not in a mounted ConfigMap", path)
}

// suiteInputs returns the env names each service reads and each service's
// default port: what checkSuite holds a build to.
func suiteInputs(t *testing.T) (env map[string]map[string]bool, ports map[string]string) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	env = allowedEnv(t, root)
	ports = map[string]string{}
	for _, name := range envdoc.Names() {
		ports[name] = defaultPort(t, root, name)
	}
	return env, ports
}

// TestKustomizeBuilds renders the base and the overlay with kustomize's
// own library, decodes every object strictly and holds each build to the
// rules of checkSuite; then checks what the overlay is for.
func TestKustomizeBuilds(t *testing.T) {
	env, ports := suiteInputs(t)
	tests := []struct {
		dir   string
		check func(t *testing.T, sandbox workload)
	}{
		{"k8s/base", func(t *testing.T, w workload) {
			c := w.template.Spec.Containers[0]
			if b, _ := envValue(c, "SANDBOX_BACKEND"); b == "local" || b == "" {
				t.Errorf("base sandbox runs the local backend (%q): the base is the unprivileged remote one", b)
			}
			ps := w.template.Spec.SecurityContext
			if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("base sandbox: want runAsNonRoot and RuntimeDefault seccomp, have %+v", ps)
			}
			if sc := c.SecurityContext; sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
				t.Errorf("base sandbox adds capabilities %v", sc.Capabilities.Add)
			}
		}},
		{"k8s/overlays/postgres", nil}, // its brain: TestKustomizePostgresOverlay
		{"k8s/overlays/sandbox-local", func(t *testing.T, w workload) {
			c := w.template.Spec.Containers[0]
			if b, _ := envValue(c, "SANDBOX_BACKEND"); b != "local" {
				t.Errorf("overlay: SANDBOX_BACKEND=%q, want local", b)
			}
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, "E2B_") {
					t.Errorf("overlay keeps %s", e.Name)
				}
			}
			ps := w.template.Spec
			if ps.HostUsers == nil || *ps.HostUsers {
				t.Error("overlay: hostUsers must be false (root in the pod's own user namespace)")
			}
			if sc := ps.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault ||
				sc.AppArmorProfile == nil || sc.AppArmorProfile.Type == corev1.AppArmorProfileTypeRuntimeDefault {
				t.Errorf("overlay: seccomp and AppArmor must allow unshare and mount, have %+v", sc)
			}
			sc := c.SecurityContext
			if sc.ProcMount == nil || *sc.ProcMount != corev1.UnmaskedProcMount {
				t.Error("overlay: procMount must be Unmasked for bwrap's --proc")
			}
			want := []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"}
			if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Add, want) {
				t.Errorf("overlay: capabilities add %v, want exactly %v", sc.Capabilities, want)
			}
			base, _ := envValue(c, "SANDBOX_UID_BASE")
			maxWS, _ := envValue(c, "SANDBOX_MAX_WORKSPACES")
			var b, m int
			if _, err := fmt.Sscan(base+" "+maxWS, &b, &m); err != nil || b <= 0 || b+m >= 65536 {
				t.Errorf("overlay: SANDBOX_UID_BASE=%q + SANDBOX_MAX_WORKSPACES=%q must stay inside the pod's 65536 uids", base, maxWS)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			r := render(t, tt.dir)
			for _, err := range checkSuite(r, env, ports) {
				t.Error(err)
			}
			for _, w := range r.workloads() {
				if w.name == "sandbox" && tt.check != nil {
					tt.check(t, w)
				}
			}
		})
	}
}

// TestCheckSuiteCatches breaks a good build one way at a time and expects
// checkSuite to name each break.
func TestCheckSuiteCatches(t *testing.T) {
	env, ports := suiteInputs(t)
	container := func(r *rendered, name string) *corev1.Container {
		for _, o := range r.objs {
			switch o := o.(type) {
			case *appsv1.Deployment:
				if o.Name == name {
					return &o.Spec.Template.Spec.Containers[0]
				}
			case *appsv1.StatefulSet:
				if o.Name == name {
					return &o.Spec.Template.Spec.Containers[0]
				}
			}
		}
		t.Fatalf("no workload %s", name)
		return nil
	}
	drop := func(r *rendered, match func(any) bool) {
		r.objs = slices.DeleteFunc(r.objs, match)
	}
	tests := []struct {
		name    string
		breakIt func(r *rendered)
		want    string
	}{
		{"no readiness probe", func(r *rendered) { container(r, "webfetch").ReadinessProbe = nil }, "no readinessProbe"},
		{"liveness on another path", func(r *rendered) { container(r, "search").LivenessProbe.HTTPGet.Path = "/" }, "livenessProbe on / port http"},
		{"no cpu request", func(r *rendered) { delete(container(r, "storage").Resources.Requests, corev1.ResourceCPU) }, "resource requests need cpu and memory"},
		{"no memory limit", func(r *rendered) { container(r, "brain").Resources.Limits = nil }, "no memory limit"},
		{"wrong container port", func(r *rendered) { container(r, "local").Ports[0].ContainerPort = 9999 }, "containerPort 9999"},
		{"ADDR on loopback", func(r *rendered) { container(r, "webfetch").Env[0].Value = "127.0.0.1:8085" }, `ADDR="127.0.0.1:8085"`},
		{"unknown env name", func(r *rendered) {
			c := container(r, "search")
			c.Env = append(c.Env, corev1.EnvVar{Name: "SEARCH_PROVIDR", Value: "brave"})
		}, "SEARCH_PROVIDR is not a setting of search"},
		{"secret from another Secret", func(r *rendered) {
			c := container(r, "local")
			i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "BRAIN_TOOLS_KEY" })
			c.Env[i].ValueFrom.SecretKeyRef.Name = "other"
		}, `from Secret "other"`},
		{"secret as a literal", func(r *rendered) {
			c := container(r, "webfetch")
			c.Env = append(c.Env, corev1.EnvVar{Name: "BRAIN_TOOLS_KEY", Value: "hunter2"})
		}, "has a literal value"},
		{"a committed Secret", func(r *rendered) {
			r.objs = append(r.objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "brain-tools", Labels: map[string]string{}}, StringData: map[string]string{"BRAIN_TOOLS_KEY": "x"}})
		}, "Secret brain-tools is committed"},
		{"missing label", func(r *rendered) {
			for _, o := range r.objs {
				if s, ok := o.(*corev1.Service); ok && s.Name == "search" {
					delete(s.Labels, "app.kubernetes.io/component")
				}
			}
		}, "Service search: no label app.kubernetes.io/component"},
		{"NetworkPolicy without a label", func(r *rendered) {
			for _, o := range r.objs {
				if p, ok := o.(*networkingv1.NetworkPolicy); ok && p.Name == "dns" {
					delete(p.Labels, "app.kubernetes.io/part-of")
				}
			}
		}, "NetworkPolicy dns: no label app.kubernetes.io/part-of"},
		{"selector not matching", func(r *rendered) {
			for _, o := range r.objs {
				if d, ok := o.(*appsv1.Deployment); ok && d.Name == "storage" {
					d.Spec.Selector.MatchLabels["app.kubernetes.io/name"] = "store"
				}
			}
		}, "Deployment storage: selector"},
		{"no PDB", func(r *rendered) {
			drop(r, func(o any) bool { p, ok := o.(*policyv1.PodDisruptionBudget); return ok && p.Name == "webfetch" })
		}, "webfetch: no PodDisruptionBudget"},
		{"HPA on the wrong target", func(r *rendered) {
			for _, o := range r.objs {
				if h, ok := o.(*autoscalingv2.HorizontalPodAutoscaler); ok && h.Name == "search" {
					h.Spec.ScaleTargetRef.Name = "serch"
				}
			}
		}, "search: no HorizontalPodAutoscaler"},
		{"brain data not on a volume", func(r *rendered) {
			c := container(r, "brain")
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "data" })
		}, "BRAIN_DATA_DIR=/var/lib/brain is not on a volume"},
		{"brain config drifted", func(r *rendered) {
			for _, o := range r.objs {
				if cm, ok := o.(*corev1.ConfigMap); ok {
					cm.Data["brain.json"] = "{}"
				}
			}
		}, "differs from deploy/brain.compose.json"},
		{"replicas under an HPA", func(r *rendered) {
			for _, o := range r.objs {
				if d, ok := o.(*appsv1.Deployment); ok && d.Name == "search" {
					two := int32(2)
					d.Spec.Replicas = &two
				}
			}
		}, "Deployment search: sets spec.replicas (2) but HorizontalPodAutoscaler search scales it"},
		{"two brains", func(r *rendered) {
			for _, o := range r.objs {
				if s, ok := o.(*appsv1.StatefulSet); ok && s.Name == "brain" {
					two := int32(2)
					s.Spec.Replicas = &two
				}
			}
		}, "stateful service runs one replica"},
		{"brain killed while it stops", func(r *rendered) {
			for _, o := range r.objs {
				if s, ok := o.(*appsv1.StatefulSet); ok && s.Name == "brain" {
					thirty := int64(30)
					s.Spec.Template.Spec.TerminationGracePeriodSeconds = &thirty
				}
			}
		}, "brain: terminationGracePeriodSeconds 30, want at least 45"},
		{"privilege escalation", func(r *rendered) {
			yes := true
			container(r, "webfetch").SecurityContext.AllowPrivilegeEscalation = &yes
		}, "allowPrivilegeEscalation: false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, "k8s/base")
			if errs := checkSuite(r, env, ports); len(errs) > 0 {
				t.Fatalf("the good build fails already: %v", errors.Join(errs...))
			}
			tt.breakIt(r)
			err := errors.Join(checkSuite(r, env, ports)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("checkSuite = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
