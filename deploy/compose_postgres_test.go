package deploy

import (
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
	for _, name := range append([]string{"postgres", brainLB}, brainReplicas...) {
		svc, ok := p.Services[name]
		if !ok {
			t.Fatalf("no service %s in the postgres profile", name)
		}
		if !slices.Equal(svc.Profiles, []string{"postgres"}) {
			t.Errorf("%s: profiles %v, want [postgres] (not in the default stack)", name, svc.Profiles)
		}
		checkNetworks(t, svc)
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
			if _, ok := svc.DependsOn[dep]; !ok {
				t.Errorf("%s: does not wait for %s, as brain does", name, dep)
			}
		}
	}
	lb := p.Services[brainLB]
	if len(lb.Ports) != 1 || lb.Ports[0].HostIP != "127.0.0.1" || lb.Ports[0].Target != 8080 || lb.Ports[0].Published != env["BRAIN_PG_PORT"] {
		t.Errorf("%s: ports %v, want one, 127.0.0.1:${BRAIN_PG_PORT}:8080", brainLB, lb.Ports)
	}
	conf, err := os.ReadFile(filepath.Join(root, "deploy", "brain-pg.nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var servers []string
	for _, m := range regexp.MustCompile(`(?m)^\s*server\s+([^\s;]+);`).FindAllSubmatch(conf, -1) {
		servers = append(servers, string(m[1]))
	}
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

func portOfEnv(t *testing.T, svc types.ServiceConfig, name string) string {
	t.Helper()
	u, err := url.Parse("http://" + envOf(svc, name))
	if err != nil {
		t.Fatalf("%s: %s: %v", svc.Name, name, err)
	}
	return u.Port()
}
