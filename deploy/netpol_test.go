package deploy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The namespace the suite is applied to (any one: the manifests name
// none), and the ones its allows name outside it.
const (
	suiteNS      = "brain-tools"
	ingressNS    = "ingress-nginx" // local-operator-page: the approval page's ingress controller
	monitoringNS = "monitoring"    // metrics-scrape: Prometheus
)

// peer is one end of a connection: a pod (its labels, its namespace's
// labels, its containers' named ports) or an address outside the cluster.
type peer struct {
	name  string
	ns    string
	pod   map[string]string
	ports map[string]int32 // container port name → number
	addr  netip.Addr       // valid for an address outside the cluster
}

func (p peer) isPod() bool { return p.pod != nil }

func (p peer) nsLabels() labels.Set {
	return labels.Set{"kubernetes.io/metadata.name": p.ns}
}

// policyAllows reports whether the NetworkPolicies allow a TCP or UDP
// connection from → to:port, as the NetworkPolicy API defines it: a pod
// that no policy selects for a direction is open in that direction; a pod
// that one selects takes only what some selecting policy's rules allow;
// both ends must agree. Only the suite's namespace has policies. It knows
// what the suite's policies use (pod and namespace selectors, ipBlock,
// numeric and named ports) and refuses the rest (endPort).
func policyAllows(t *testing.T, pols []*networkingv1.NetworkPolicy, from, to peer, proto corev1.Protocol, port int32) bool {
	t.Helper()
	ok := true
	if from.isPod() && from.ns == suiteNS {
		ok = ok && direction(t, pols, networkingv1.PolicyTypeEgress, from, to, proto, port)
	}
	if to.isPod() && to.ns == suiteNS {
		ok = ok && direction(t, pols, networkingv1.PolicyTypeIngress, to, from, proto, port)
	}
	return ok
}

// direction: the policies of kind typ that select self, and whether one of
// their rules admits other on proto/port (named ports are those of the
// destination: other for egress, self for ingress).
func direction(t *testing.T, pols []*networkingv1.NetworkPolicy, typ networkingv1.PolicyType, self, other peer, proto corev1.Protocol, port int32) bool {
	t.Helper()
	dest := self
	if typ == networkingv1.PolicyTypeEgress {
		dest = other
	}
	selected := false
	for _, p := range pols {
		if !slices.Contains(p.Spec.PolicyTypes, typ) || !selects(t, &p.Spec.PodSelector, self.pod) {
			continue
		}
		selected = true
		var rules [][]networkingv1.NetworkPolicyPeer
		var ports [][]networkingv1.NetworkPolicyPort
		if typ == networkingv1.PolicyTypeIngress {
			for _, r := range p.Spec.Ingress {
				rules, ports = append(rules, r.From), append(ports, r.Ports)
			}
		} else {
			for _, r := range p.Spec.Egress {
				rules, ports = append(rules, r.To), append(ports, r.Ports)
			}
		}
		for i := range rules {
			if peersMatch(t, rules[i], other) && portsMatch(t, ports[i], dest, proto, port) {
				return true
			}
		}
	}
	return !selected
}

func selects(t *testing.T, s *metav1.LabelSelector, set map[string]string) bool {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatalf("selector %v: %v", s, err)
	}
	return sel.Matches(labels.Set(set))
}

// peersMatch: an empty list matches everything; a pod selector alone
// means pods of the policy's own namespace.
func peersMatch(t *testing.T, peers []networkingv1.NetworkPolicyPeer, p peer) bool {
	t.Helper()
	if len(peers) == 0 {
		return true
	}
	for _, np := range peers {
		switch {
		case np.IPBlock != nil:
			if p.isPod() {
				continue // the suite's blocks are for addresses outside the cluster
			}
			if inBlock(t, np.IPBlock, p.addr) {
				return true
			}
		case p.isPod():
			nsOK := np.NamespaceSelector == nil && p.ns == suiteNS ||
				np.NamespaceSelector != nil && selects(t, np.NamespaceSelector, p.nsLabels())
			podOK := np.PodSelector == nil || selects(t, np.PodSelector, p.pod)
			if nsOK && podOK {
				return true
			}
		}
	}
	return false
}

func inBlock(t *testing.T, b *networkingv1.IPBlock, a netip.Addr) bool {
	t.Helper()
	in := func(cidr string) bool {
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			t.Fatalf("ipBlock %q: %v", cidr, err)
		}
		return p.Contains(a)
	}
	if !in(b.CIDR) {
		return false
	}
	for _, e := range b.Except {
		if in(e) {
			return false
		}
	}
	return true
}

func portsMatch(t *testing.T, ports []networkingv1.NetworkPolicyPort, dest peer, proto corev1.Protocol, port int32) bool {
	t.Helper()
	if len(ports) == 0 {
		return true
	}
	for _, pp := range ports {
		if pp.EndPort != nil {
			t.Fatalf("endPort: not a feature this test evaluates")
		}
		want := corev1.ProtocolTCP
		if pp.Protocol != nil {
			want = *pp.Protocol
		}
		if want != proto {
			continue
		}
		switch {
		case pp.Port == nil:
			return true
		case pp.Port.StrVal != "":
			if n, ok := dest.ports[pp.Port.StrVal]; ok && n == port {
				return true
			}
		case pp.Port.IntVal == port:
			return true
		}
	}
	return false
}

// netPeers are the suite's pods from a rendering, by name, plus pods and
// addresses elsewhere.
func netPeers(r *rendered) map[string]peer {
	ps := map[string]peer{
		"app":        {name: "app", ns: "apps", pod: map[string]string{"app": "client"}},
		"same-ns":    {name: "same-ns", ns: suiteNS, pod: map[string]string{"app": "intruder"}},
		"ingress":    {name: "ingress", ns: ingressNS, pod: map[string]string{"app.kubernetes.io/name": "ingress-nginx"}},
		"prometheus": {name: "prometheus", ns: monitoringNS, pod: map[string]string{"app.kubernetes.io/name": "prometheus"}},
		"kube-dns":   {name: "kube-dns", ns: "kube-system", pod: map[string]string{"k8s-app": "kube-dns"}},
		"public4":    {name: "public4", addr: netip.MustParseAddr("93.184.215.14")},
		"public6":    {name: "public6", addr: netip.MustParseAddr("2606:4700:4700::1111")},
		"private":    {name: "private", addr: netip.MustParseAddr("10.1.2.3")},
		"metadata":   {name: "metadata", addr: netip.MustParseAddr("169.254.169.254")},
		"ula6":       {name: "ula6", addr: netip.MustParseAddr("fd00::1")},
	}
	for _, w := range r.workloads() {
		p := peer{name: w.name, ns: suiteNS, pod: w.template.Labels, ports: map[string]int32{}}
		for _, c := range w.template.Spec.Containers {
			for _, cp := range c.Ports {
				p.ports[cp.Name] = cp.ContainerPort
			}
		}
		ps[w.name] = p
	}
	return ps
}

func (r *rendered) networkPolicies() []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, o := range r.objs {
		if p, ok := o.(*networkingv1.NetworkPolicy); ok {
			out = append(out, p)
		}
	}
	return out
}

// flow is one connection and whether the policies must allow it.
type flow struct {
	from, to string
	proto    corev1.Protocol
	port     int32 // 0: the destination's port named http
	allow    bool
}

// String is "want allowed: from → to TCP/port" (or denied).
func (f flow) String() string {
	want := "denied"
	if f.allow {
		want = "allowed"
	}
	return fmt.Sprintf("want %s: %s → %s %s/%d", want, f.from, f.to, f.proto, f.port)
}

// suiteFlows is what the suite's network must be, for a rendering whose
// sandbox calls out (base, remote backend) or not (the local overlay).
func suiteFlows(r *rendered, sandboxCallsOut bool) []flow {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	var toolServices, all []string
	for _, w := range r.workloads() {
		all = append(all, w.name)
		if w.template.Labels["app.kubernetes.io/component"] == "tool-service" {
			toolServices = append(toolServices, w.name)
		}
	}
	callsOut := map[string][]int32{"storage": {443}, "search": {443}, "webfetch": {80, 443}, "browser": {80, 443}}
	if sandboxCallsOut {
		callsOut["sandbox"] = []int32{443}
	}
	fs := []flow{
		// Clients reach brain's API, nothing else of the suite.
		{"app", "brain", tcp, 0, true},
		{"same-ns", "brain", tcp, 0, true},
		{"app", "brain", tcp, 9090, false},
		// The approval page through the ingress controller; inspect_session
		// back to brain.
		{"ingress", "local", tcp, 0, true},
		{"ingress", "storage", tcp, 0, false},
		{"app", "local", tcp, 0, false},
		{"local", "brain", tcp, 0, true},
		{"local", "sandbox", tcp, 0, false},
		{"webfetch", "brain", tcp, 0, false},
		// web_fetch renders through the browser service; nothing else
		// of the suite calls it but brain.
		{"webfetch", "browser", tcp, 0, true},
		{"local", "browser", tcp, 0, false},
		{"browser", "webfetch", tcp, 0, false},
		{"sandbox", "storage", tcp, 0, false},
		{"brain", "app", tcp, 8080, false},
	}
	for _, s := range toolServices {
		fs = append(fs,
			flow{"brain", s, tcp, 0, true},      // brain calls every tool service
			flow{"app", s, tcp, 0, false},       // nobody else does,
			flow{"same-ns", s, tcp, 0, false},   // not even from the suite's namespace
			flow{"brain", s, tcp, 22, false},    // and only on its port
			flow{"prometheus", s, tcp, 0, true}) // scraped
	}
	for _, s := range all {
		fs = append(fs,
			flow{s, "kube-dns", udp, 53, true},
			flow{s, "kube-dns", tcp, 53, true},
			flow{s, "kube-dns", tcp, 80, false},
			flow{"prometheus", s, tcp, 0, true},
			flow{s, "metadata", tcp, 80, false},
			flow{s, "private", tcp, 443, false},
			flow{s, "ula6", tcp, 443, false})
		ports := callsOut[s]
		for _, port := range []int32{80, 443, 22} {
			allow := slices.Contains(ports, port)
			fs = append(fs, flow{s, "public4", tcp, port, allow}, flow{s, "public6", tcp, port, allow})
		}
	}
	return fs
}

func checkFlows(t *testing.T, r *rendered, fs []flow) []string {
	t.Helper()
	ps := netPeers(r)
	pols := r.networkPolicies()
	var bad []string
	for _, f := range fs {
		from, ok1 := ps[f.from]
		to, ok2 := ps[f.to]
		if !ok1 || !ok2 {
			t.Fatalf("%v: unknown peer", f)
		}
		if f.port == 0 {
			f.port = to.ports[portName]
		}
		if got := policyAllows(t, pols, from, to, f.proto, f.port); got != f.allow {
			bad = append(bad, f.String()+", but the NetworkPolicies say the opposite")
		}
	}
	return bad
}

// checkNetwork holds a rendering to the suite's flows, and to a
// default-deny policy: one that selects every workload of the suite for
// both directions and allows nothing, so a pod that later joins the suite
// starts closed even where no other policy names it.
func checkNetwork(t *testing.T, r *rendered, sandboxCallsOut bool) []string {
	t.Helper()
	bad := checkFlows(t, r, suiteFlows(r, sandboxCallsOut))
	deny := false
	for _, p := range r.networkPolicies() {
		if len(p.Spec.Ingress) > 0 || len(p.Spec.Egress) > 0 ||
			!slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			continue
		}
		all := true
		for _, w := range r.workloads() {
			all = all && selects(t, &p.Spec.PodSelector, w.template.Labels)
		}
		deny = deny || all
	}
	if !deny {
		bad = append(bad, "no default-deny NetworkPolicy: none selects every workload for Ingress and Egress with no rules")
	}
	return bad
}

// TestNetworkPolicies renders the base and the overlay and checks, flow by
// flow, that their NetworkPolicies deny by default and allow exactly what
// the suite needs: clients → brain, brain → the tool services, DNS,
// scraping, the approval page's ingress, and egress to public addresses
// only for the services that call a provider.
func TestNetworkPolicies(t *testing.T) {
	for _, tt := range []struct {
		dir             string
		sandboxCallsOut bool
	}{
		{"k8s/base", true},
		{"k8s/overlays/sandbox-local", false},
	} {
		t.Run(tt.dir, func(t *testing.T) {
			r := render(t, tt.dir)
			if len(r.networkPolicies()) == 0 {
				t.Fatal("no NetworkPolicy in the build")
			}
			for _, b := range checkNetwork(t, r, tt.sandboxCallsOut) {
				t.Error(b)
			}
		})
	}
}

// TestNetworkPoliciesCatch breaks the base's policies one way at a time
// and expects the flows to name the break.
func TestNetworkPoliciesCatch(t *testing.T) {
	drop := func(name string) func(r *rendered) {
		return func(r *rendered) {
			r.objs = slices.DeleteFunc(r.objs, func(o any) bool {
				p, ok := o.(*networkingv1.NetworkPolicy)
				return ok && p.Name == name
			})
		}
	}
	policy := func(r *rendered, name string) *networkingv1.NetworkPolicy {
		for _, p := range r.networkPolicies() {
			if p.Name == name {
				return p
			}
		}
		t.Fatalf("no NetworkPolicy %s", name)
		return nil
	}
	tests := []struct {
		name    string
		breakIt func(r *rendered)
		want    string
	}{
		{"no default deny", drop("default-deny"), "no default-deny NetworkPolicy"},
		{"default deny that misses a workload", func(r *rendered) {
			policy(r, "default-deny").Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] = "tool-service"
		}, "no default-deny NetworkPolicy"},
		{"scrape from anywhere", func(r *rendered) { policy(r, "metrics-scrape").Spec.Ingress[0].From = nil }, "want denied: app → local"},
		{"no DNS", drop("dns"), "want allowed: brain → kube-dns UDP/53"},
		{"tool services open to all", func(r *rendered) { policy(r, "tool-services").Spec.Ingress[0].From = nil }, "want denied: app → search"},
		{"metadata service reachable", func(r *rendered) {
			b := policy(r, "webfetch-egress").Spec.Egress[0].To[0].IPBlock
			b.Except = slices.DeleteFunc(b.Except, func(s string) bool { return s == "169.254.0.0/16" })
		}, "want denied: webfetch → metadata TCP/80"},
		{"brain calls out", func(r *rendered) {
			p := policy(r, "brain")
			p.Spec.Egress = append(p.Spec.Egress, policy(r, "search-egress").Spec.Egress...)
		}, "want denied: brain → public4 TCP/443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, "k8s/base")
			if bad := checkNetwork(t, r, true); len(bad) > 0 {
				t.Fatalf("the good build fails already: %v", bad)
			}
			tt.breakIt(r)
			bad := strings.Join(checkNetwork(t, r, true), "\n")
			if !strings.Contains(bad, tt.want) {
				t.Fatalf("checkFlows = %q, want a failure containing %q", bad, tt.want)
			}
		})
	}
}
