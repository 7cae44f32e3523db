package deploy

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// brainReplicas are the brain services of compose.yaml's postgres profile,
// behind the load balancer brainLB.
var brainReplicas = []string{"brain-pg-1", "brain-pg-2"}

const brainLB = "brain-pg"

// localReplicas are the approval service's replicas of the postgres
// profile, behind localLB, which the replicated brain calls.
var localReplicas = []string{"local-pg-1", "local-pg-2"}

const localLB = "local-pg"

// TestComposePostgresProfile: `docker compose --profile postgres up` adds
// PostgreSQL and two brain replicas on it behind one published port; the
// default profile stays the stack TestCompose checks.
func TestComposePostgresProfile(t *testing.T) {
	root := repoRoot(t)
	env := exampleEnv(t, root)
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "compose.yaml")}},
		Environment: env,
	}, loader.WithProfiles([]string{"postgres"}))
	if err != nil {
		t.Fatalf("load compose.yaml with the postgres profile: %v", err)
	}
	for _, name := range append(append([]string{"postgres", brainLB, localLB}, brainReplicas...), localReplicas...) {
		svc, ok := p.Services[name]
		if !ok {
			t.Fatalf("no service %s in the postgres profile", name)
		}
		if !slices.Equal(svc.Profiles, []string{"postgres"}) {
			t.Errorf("%s: profiles %v, want [postgres] (not in the default stack)", name, svc.Profiles)
		}
		checkNetworks(t, svc)
		if slices.Contains(brainReplicas, name) {
			checkStopGrace(t, svc, brainStopGrace)
		}
		if svc.HealthCheck == nil || len(svc.HealthCheck.Test) == 0 {
			t.Errorf("%s: no health check", name)
		}
	}
	pg := p.Services["postgres"]
	if ok, _ := regexp.MatchString(`^postgres:\d+\.\d+(-alpine)?$`, pg.Image); !ok {
		t.Errorf("postgres: image %q, want postgres pinned to a minor release", pg.Image)
	}
	if len(pg.Ports) != 0 {
		t.Errorf("postgres: published %v; want it reachable inside the network only", pg.Ports)
	}
	if !slices.ContainsFunc(pg.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Type == types.VolumeTypeVolume && v.Target == "/var/lib/postgresql/data"
	}) {
		t.Errorf("postgres: no named volume on /var/lib/postgresql/data")
	}
	settings, err := serviceSettings(root, "brain")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, s := range settings {
		known[s.Name] = true
	}
	hc := readHostConfig(t, root)
	for _, k := range hc.APIKeys {
		known[k.Env] = true
	}
	for _, tl := range hc.Tools {
		known[tl.TokenEnv] = true
	}
	sqliteBrain := p.Services["brain"]
	for _, name := range brainReplicas {
		svc := p.Services[name]
		if svc.Image != sqliteBrain.Image || !slices.Equal(svc.Command, sqliteBrain.Command) {
			t.Errorf("%s: image %q command %v, want brain's (%q %v)", name, svc.Image, svc.Command, sqliteBrain.Image, sqliteBrain.Command)
		}
		for k := range svc.Environment {
			if !known[k] {
				t.Errorf("%s: %s is neither a brain setting nor named by the host config", name, k)
			}
		}
		u, err := url.Parse(envOf(svc, "BRAIN_DATABASE_URL"))
		if err != nil || u.Scheme != "postgres" || u.Hostname() != "postgres" || u.Path != "/"+envOf(pg, "POSTGRES_DB") {
			t.Errorf("%s: BRAIN_DATABASE_URL %q, want postgres://…@postgres:5432/%s (%v)", name, envOf(svc, "BRAIN_DATABASE_URL"), envOf(pg, "POSTGRES_DB"), err)
		} else if pw, _ := u.User.Password(); u.User.Username() != envOf(pg, "POSTGRES_USER") || pw != envOf(pg, "POSTGRES_PASSWORD") {
			t.Errorf("%s: BRAIN_DATABASE_URL's user and password are not postgres's POSTGRES_USER and POSTGRES_PASSWORD", name)
		}
		if envOf(svc, "BRAIN_DATA_DIR") != "" || len(svc.Ports) != 0 {
			t.Errorf("%s: BRAIN_DATA_DIR %q, ports %v; want neither (state in PostgreSQL, reached through %s)", name, envOf(svc, "BRAIN_DATA_DIR"), svc.Ports, brainLB)
		}
		if got := envOf(svc, "BRAIN_PUBLIC_URL"); got != "http://"+brainLB+":8080" {
			t.Errorf("%s: BRAIN_PUBLIC_URL %q, want http://%s:8080 (tools inspect through the balancer, on either replica)", name, got, brainLB)
		}
		if d, ok := svc.DependsOn["postgres"]; !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s: does not wait for postgres to be healthy", name)
		}
		for dep := range sqliteBrain.DependsOn {
			if dep == "local" {
				dep = localLB // the replicated approvals
			}
			if _, ok := svc.DependsOn[dep]; !ok {
				t.Errorf("%s: does not wait for %s, as brain does", name, dep)
			}
		}
		if !slices.ContainsFunc(svc.Volumes, func(v types.ServiceVolumeConfig) bool {
			return v.Source == filepath.Join(root, "deploy", "brain-pg.compose.json") && v.Target == "/etc/brain/brain.json"
		}) {
			t.Errorf("%s: does not read deploy/brain-pg.compose.json as its host config", name)
		}
	}
	checkLocalReplicas(t, root, p, env)
	lb := p.Services[brainLB]
	if len(lb.Ports) != 1 || lb.Ports[0].HostIP != "127.0.0.1" || lb.Ports[0].Target != 8080 || lb.Ports[0].Published != env["BRAIN_PG_PORT"] {
		t.Errorf("%s: ports %v, want one, 127.0.0.1:${BRAIN_PG_PORT}:8080", brainLB, lb.Ports)
	}
	conf, err := os.ReadFile(filepath.Join(root, "deploy", "brain-pg.nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	servers := upstreams(conf)
	var want []string
	for _, name := range brainReplicas {
		want = append(want, name+":"+portOfEnv(t, p.Services[name], "BRAIN_ADDR"))
		if d, ok := lb.DependsOn[name]; !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s: does not wait for %s to be healthy", brainLB, name)
		}
	}
	if !slices.Equal(servers, want) {
		t.Errorf("deploy/brain-pg.nginx.conf upstream servers %v, want %v", servers, want)
	}
	for _, directive := range []string{"proxy_buffering off;", "proxy_http_version 1.1;", "listen 8080;"} {
		if !regexp.MustCompile(regexp.QuoteMeta(directive)).Match(conf) {
			t.Errorf("deploy/brain-pg.nginx.conf lacks %q (event streams pass unbuffered)", directive)
		}
	}
	inspect := envOf(p.Services["local"], "INSPECT_BRAIN_URLS")
	if !slices.Contains(regexp.MustCompile(`,`).Split(inspect, -1), "http://"+brainLB+":8080") {
		t.Errorf("local: INSPECT_BRAIN_URLS %q lacks http://%s:8080, the replicas' brain_url", inspect, brainLB)
	}
}

// upstreams are the server lines of an nginx upstream block.
func upstreams(conf []byte) []string {
	var servers []string
	for _, m := range regexp.MustCompile(`(?m)^\s*server\s+([^\s;]+);`).FindAllSubmatch(conf, -1) {
		servers = append(servers, string(m[1]))
	}
	return servers
}

// checkLocalReplicas: the profile's approval service is two local
// replicas on the profile's PostgreSQL (no data dir, no port of their own)
// behind localLB, which keeps an operator on one replica and publishes the
// page; the replicated brain's host config is brain.compose.json with the
// local tools at localLB.
func checkLocalReplicas(t *testing.T, root string, p *types.Project, env map[string]string) {
	t.Helper()
	settings, err := serviceSettings(root, "local")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, s := range settings {
		known[s.Name] = true
	}
	pg, sqliteLocal := p.Services["postgres"], p.Services["local"]
	for _, name := range localReplicas {
		svc := p.Services[name]
		if svc.Image != sqliteLocal.Image {
			t.Errorf("%s: image %q, want local's %q", name, svc.Image, sqliteLocal.Image)
		}
		for k := range svc.Environment {
			if !known[k] {
				t.Errorf("%s: %s is not a setting of local", name, k)
			}
		}
		u, err := url.Parse(envOf(svc, "APPROVAL_DATABASE_URL"))
		if err != nil || u.Scheme != "postgres" || u.Hostname() != "postgres" || u.Path != "/"+envOf(pg, "POSTGRES_DB") {
			t.Errorf("%s: APPROVAL_DATABASE_URL %q, want postgres://…@postgres:5432/%s (%v)", name, envOf(svc, "APPROVAL_DATABASE_URL"), envOf(pg, "POSTGRES_DB"), err)
		} else if pw, _ := u.User.Password(); u.User.Username() != envOf(pg, "POSTGRES_USER") || pw != envOf(pg, "POSTGRES_PASSWORD") {
			t.Errorf("%s: APPROVAL_DATABASE_URL's user and password are not postgres's", name)
		}
		if envOf(svc, "APPROVAL_DATA_DIR") != "" || len(svc.Ports) != 0 || len(svc.Volumes) != 0 {
			t.Errorf("%s: APPROVAL_DATA_DIR %q, ports %v, volumes %v; want none (state in PostgreSQL, reached through %s)", name, envOf(svc, "APPROVAL_DATA_DIR"), svc.Ports, svc.Volumes, localLB)
		}
		if got := envOf(svc, "PUBLIC_URL"); got != "http://"+localLB+":8081" {
			t.Errorf("%s: PUBLIC_URL %q, want http://%s:8081", name, got, localLB)
		}
		if got := envOf(svc, "APPROVAL_PAGE_URL"); got != "http://127.0.0.1:"+env["LOCAL_PG_PORT"] {
			t.Errorf("%s: APPROVAL_PAGE_URL %q, want the published page http://127.0.0.1:%s", name, got, env["LOCAL_PG_PORT"])
		}
		if got := envOf(svc, "INSPECT_BRAIN_URLS"); got != "http://"+brainLB+":8080" {
			t.Errorf("%s: INSPECT_BRAIN_URLS %q, want http://%s:8080", name, got, brainLB)
		}
		if d, ok := svc.DependsOn["postgres"]; !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s: does not wait for postgres to be healthy", name)
		}
		checkLimits(t, svc)
	}
	lb := p.Services[localLB]
	if len(lb.Ports) != 1 || lb.Ports[0].HostIP != "127.0.0.1" || lb.Ports[0].Target != 8081 || lb.Ports[0].Published != env["LOCAL_PG_PORT"] {
		t.Errorf("%s: ports %v, want one, 127.0.0.1:${LOCAL_PG_PORT}:8081", localLB, lb.Ports)
	}
	conf, err := os.ReadFile(filepath.Join(root, "deploy", "local-pg.nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, name := range localReplicas {
		want = append(want, name+":"+portOfEnv(t, p.Services[name], "ADDR"))
		if d, ok := lb.DependsOn[name]; !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s: does not wait for %s to be healthy", localLB, name)
		}
	}
	if got := upstreams(conf); !slices.Equal(got, want) {
		t.Errorf("deploy/local-pg.nginx.conf upstream servers %v, want %v", got, want)
	}
	for _, directive := range []string{"ip_hash;", "proxy_buffering off;", "proxy_http_version 1.1;", "listen 8081;"} {
		if !regexp.MustCompile(regexp.QuoteMeta(directive)).Match(conf) {
			t.Errorf("deploy/local-pg.nginx.conf lacks %q", directive)
		}
	}
	// The replicated brain's host config: brain.compose.json, but for the
	// local tools' host.
	plain, err := os.ReadFile(filepath.Join(root, "deploy", "brain.compose.json"))
	if err != nil {
		t.Fatal(err)
	}
	replicated, err := os.ReadFile(filepath.Join(root, "deploy", "brain-pg.compose.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.ReplaceAll(plain, []byte("http://local:8081/"), []byte("http://"+localLB+":8081/")); !bytes.Equal(replicated, want) {
		t.Error("deploy/brain-pg.compose.json is not deploy/brain.compose.json with the local tools at " + localLB +
			" (regenerate it: sed 's|http://local:8081/|http://local-pg:8081/|g' deploy/brain.compose.json > deploy/brain-pg.compose.json)")
	}
}

func portOfEnv(t *testing.T, svc types.ServiceConfig, name string) string {
	t.Helper()
	u, err := url.Parse("http://" + envOf(svc, name))
	if err != nil {
		t.Fatalf("%s: %s: %v", svc.Name, name, err)
	}
	return u.Port()
}
