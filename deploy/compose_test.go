package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/brain-tools/suite/deploy/envdoc"
)

// The stack's shape that compose.yaml, the Dockerfiles and the services'
// code must agree on. Ports are not listed here: each comes from the
// default of the service's listen address in its own source (envdoc).
const (
	network   = "brain-tools"
	imageUser = "65532:65532"
	healthArg = "-healthcheck" // pkg/service.HealthCheckFlag, brain's -healthcheck flag
	versitygw = "versitygw"
)

// stackService is what the test expects of one of our services.
type stackService struct {
	name    string
	addrEnv string // the listen address variable
	// dataEnv names the service's state directory; dataVolume is the named
	// volume compose must mount there. Empty for stateless services.
	dataEnv, dataVolume string
	// published: the port is published on 127.0.0.1 (brain's API, the
	// approval page); the others are reachable only inside the network.
	// versitygw, not in this table, is published on 127.0.0.1 too, for
	// storage_presign's URLs (checkPresign).
	published bool
	// dependsOn are the services it must wait for, healthy.
	dependsOn []string
	// debianRuntime: the image runs on Debian slim (the sandbox's tools),
	// not on an empty base.
	debianRuntime bool
}

var stack = []stackService{
	{name: "brain", addrEnv: "BRAIN_ADDR", dataEnv: "BRAIN_DATA_DIR", dataVolume: "brain-data", published: true,
		dependsOn: []string{"local", "sandbox", "storage", "search", "webfetch", "browser"}},
	{name: "local", addrEnv: "ADDR", dataEnv: "APPROVAL_DATA_DIR", dataVolume: "local-data", published: true},
	{name: "sandbox", addrEnv: "ADDR", dataEnv: "SANDBOX_ROOT", dataVolume: "sandbox-data", debianRuntime: true},
	{name: "storage", addrEnv: "ADDR", dependsOn: []string{versitygw}},
	{name: "search", addrEnv: "ADDR"},
	{name: "webfetch", addrEnv: "ADDR"},
	{name: "browser", addrEnv: "ADDR", debianRuntime: true},
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// settingsCache holds envdoc.Service's answer per repository root and
// service: the tests here ask for the same services' settings again and
// again (TestCompose, allowedEnv and defaultPort, each suiteInputs call),
// and every envdoc.Service call parses the services' source anew.
var settingsCache sync.Map // [2]string{root, name} → func() ([]envdoc.Setting, error)

// serviceSettings is envdoc.Service(root, name), computed once per test
// binary. Callers must not modify the slice.
func serviceSettings(root, name string) ([]envdoc.Setting, error) {
	f, _ := settingsCache.LoadOrStore([2]string{root, name}, sync.OnceValues(func() ([]envdoc.Setting, error) {
		return envdoc.Service(root, name)
	}))
	return f.(func() ([]envdoc.Setting, error))()
}

// exampleEnv reads .env.example, the committed template of .env, and fills
// each empty value (the tokens a user must set) with a test token.
func exampleEnv(t *testing.T, root string) map[string]string {
	t.Helper()
	env, err := dotenv.Read(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatalf("read .env.example: %v", err)
	}
	return fillTokens(env)
}

// fillTokens gives each empty value of env (a token the user must set) a
// test token, and returns env.
func fillTokens(env map[string]string) map[string]string {
	for k, v := range env {
		if v == "" {
			env[k] = "test-" + strings.ToLower(k) + "-0123456789abcdef"
		}
	}
	return env
}

// loadCompose loads compose.yaml from root with compose-go, interpolating
// from env as `docker compose` does from .env.
func loadCompose(root string, env map[string]string) (*types.Project, error) {
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "compose.yaml")}},
		Environment: env,
	})
}

// portOf returns the port of a host:port address.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return n
}

// hostConfig is the part of deploy/brain.compose.json this test reads.
type hostConfig struct {
	APIKeys []struct {
		Env string `json:"env"`
	} `json:"api_keys"`
	Tools []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		URL      string `json:"url"`
		TokenEnv string `json:"token_env"`
	} `json:"tools"`
}

func readHostConfig(t *testing.T, root string) hostConfig {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "deploy", "brain.compose.json"))
	if err != nil {
		t.Fatal(err)
	}
	var hc hostConfig
	if err := json.Unmarshal(data, &hc); err != nil {
		t.Fatalf("deploy/brain.compose.json: %v", err)
	}
	return hc
}

// TestCompose loads compose.yaml with compose-go and checks each service
// against its Dockerfile, its Config structs (the env names it reads and the
// port of its listen address) and brain's host config for compose.
func TestCompose(t *testing.T) {
	root := repoRoot(t)
	env := exampleEnv(t, root)
	p, err := loadCompose(root, env)
	if err != nil {
		t.Fatalf("load compose.yaml: %v", err)
	}
	hc := readHostConfig(t, root)

	// Exactly our services and versitygw, no more, no fewer.
	want := []string{versitygw}
	for _, s := range stack {
		want = append(want, s.name)
	}
	slices.Sort(want)
	if got := p.ServiceNames(); !slices.Equal(got, want) {
		t.Errorf("compose services = %v, want %v", got, want)
	}
	// Every service of envdoc is in the stack table.
	for _, name := range envdoc.Names() {
		if !slices.ContainsFunc(stack, func(s stackService) bool { return s.name == name }) {
			t.Errorf("service %s (deploy/envdoc) is missing from this test's stack table and compose.yaml", name)
		}
	}

	ports := map[string]int{versitygw: 7070}
	for _, s := range stack {
		t.Run(s.name, func(t *testing.T) {
			svc, ok := p.Services[s.name]
			if !ok {
				t.Fatalf("no service %s in compose.yaml", s.name)
			}
			settings, err := serviceSettings(root, s.name)
			if err != nil {
				t.Fatalf("envdoc: %v", err)
			}
			known := map[string]string{} // name -> default
			for _, st := range settings {
				known[st.Name] = st.Default
			}
			def, ok := known[s.addrEnv]
			if !ok || def == "" {
				t.Fatalf("%s's Config has no %s with a default (envdoc: %v)", s.name, s.addrEnv, slices.Sorted(maps.Keys(known)))
			}
			port := portOf(t, def)
			ports[s.name] = port
			checkBuild(t, root, s, svc, port)
			checkEnv(t, s, svc, known, port, hc, env)
			checkPorts(t, s, svc, port)
			checkHealth(t, svc, []string{"CMD", "/usr/local/bin/" + s.name, healthArg})
			checkNetworks(t, svc)
			checkVolumes(t, s, svc, p)
			checkDependsOn(t, svc, s.dependsOn)
			checkLimits(t, svc)
			if s.name == "brain" {
				checkStopGrace(t, svc, brainStopGrace)
			} else {
				checkStopGrace(t, svc, serviceStopGrace)
			}
		})
	}

	t.Run(versitygw, func(t *testing.T) {
		svc := p.Services[versitygw]
		if svc.Build != nil {
			t.Errorf("versitygw: builds an image; want the released versity/versitygw image")
		}
		if !strings.HasPrefix(svc.Image, "versity/versitygw:v") {
			t.Errorf("versitygw: image %q, want versity/versitygw pinned to a release tag", svc.Image)
		}
		if svc.HealthCheck == nil || svc.HealthCheck.Disable || len(svc.HealthCheck.Test) < 2 {
			t.Errorf("versitygw: no health check")
		} else if !slices.Contains(svc.HealthCheck.Test, "http://127.0.0.1:7070"+envOf(svc, "VGW_HEALTH")) || envOf(svc, "VGW_HEALTH") == "" {
			t.Errorf("versitygw: health check %q does not ask VGW_HEALTH on port 7070", svc.HealthCheck.Test)
		}
		if v := envOf(svc, "VGW_PORT"); v != ":7070" {
			t.Errorf("versitygw: VGW_PORT = %q, want :7070", v)
		}
		if len(svc.Ports) != 1 {
			t.Errorf("versitygw: ports %v, want one: 127.0.0.1:${VERSITYGW_PORT}:7070 (for storage_presign's URLs)", svc.Ports)
		}
		for _, pc := range svc.Ports {
			if pc.Target != 7070 || pc.HostIP != "127.0.0.1" || pc.Published != env["VERSITYGW_PORT"] {
				t.Errorf("versitygw: port %s:%s:%d, want 127.0.0.1:%s:7070 (VERSITYGW_PORT, on this machine only)", pc.HostIP, pc.Published, pc.Target, env["VERSITYGW_PORT"])
			}
		}
		checkNetworks(t, svc)
		checkVolumes(t, stackService{name: versitygw}, svc, p)
		checkLimits(t, svc)
	})

	// The sandbox's container has room for the processes its own limit
	// allows the agent (SANDBOX_LIMIT_PROCS, for all sessions together, as
	// the image runs non-root) and the service's own.
	settings, err := serviceSettings(root, "sandbox")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range settings {
		if st.Name != "SANDBOX_LIMIT_PROCS" {
			continue
		}
		procs, err := strconv.ParseInt(st.Default, 10, 64)
		if err != nil {
			t.Fatalf("SANDBOX_LIMIT_PROCS default %q: %v", st.Default, err)
		}
		if sb := p.Services["sandbox"]; sb.PidsLimit < 2*procs {
			t.Errorf("sandbox: pids_limit %d, want at least twice SANDBOX_LIMIT_PROCS (%d): the agent's processes and the service's", sb.PidsLimit, procs)
		}
	}

	// storage reaches versitygw by name with the keys versitygw was given.
	st, vg := p.Services["storage"], p.Services[versitygw]
	if got := envOf(st, "STORAGE_ENDPOINT"); got != "http://versitygw:7070" {
		t.Errorf("storage: STORAGE_ENDPOINT = %q, want http://versitygw:7070", got)
	}
	for sk, vk := range map[string]string{"STORAGE_ACCESS_KEY_ID": "ROOT_ACCESS_KEY_ID", "STORAGE_SECRET_ACCESS_KEY": "ROOT_SECRET_ACCESS_KEY"} {
		if a, b := envOf(st, sk), envOf(vg, vk); a == "" || a != b {
			t.Errorf("storage %s = %q, versitygw %s = %q: want the same, set", sk, a, vk, b)
		}
	}

	// brain's host config names the services as compose does.
	checkHostConfig(t, hc, ports)

	// Presigned URLs work from this machine, with .env.example's values
	// and with compose.yaml's own defaults (a .env holding only the tokens),
	// and they follow VERSITYGW_PORT when only that is changed.
	withPort := tokensOnly(t, root)
	withPort["VERSITYGW_PORT"] = "17070"
	presign := []struct {
		name         string
		env          map[string]string
		wantEndpoint string
	}{
		{".env.example", env, "http://127.0.0.1:7070"},
		{"defaults", tokensOnly(t, root), "http://127.0.0.1:7070"},
		{"defaults and only VERSITYGW_PORT=17070", withPort, "http://127.0.0.1:17070"},
		{".env.example with only VERSITYGW_PORT=17070", exampleEnvWith(t, root, "VERSITYGW_PORT", "17070"), "http://127.0.0.1:17070"},
		{"STORAGE_PRESIGN_ENDPOINT set, kept as given", map[string]string{"VERSITYGW_PORT": "17070", "STORAGE_PRESIGN_ENDPOINT": "http://127.0.0.1:17070/"}, "http://127.0.0.1:17070/"},
	}
	for _, tt := range presign {
		t.Run("presign with "+tt.name, func(t *testing.T) {
			env := tokensOnly(t, root)
			maps.Copy(env, tt.env)
			p, err := loadCompose(root, env)
			if err != nil {
				t.Fatalf("load compose.yaml: %v", err)
			}
			if got := envOf(p.Services["storage"], "STORAGE_PRESIGN_ENDPOINT"); got != tt.wantEndpoint {
				t.Errorf("storage: STORAGE_PRESIGN_ENDPOINT = %q, want %q", got, tt.wantEndpoint)
			}
			for _, err := range checkPresign(p) {
				t.Error(err)
			}
		})
	}
}

// exampleEnvWith is exampleEnv after a user changed one line of
// .env.example to name=value, read as docker compose reads .env (later
// lines that name ${name} follow it).
func exampleEnvWith(t *testing.T, root, name, value string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	changed := false
	for i, line := range lines {
		if strings.HasPrefix(line, name+"=") {
			lines[i], changed = name+"="+value, true
		}
	}
	if !changed {
		t.Fatalf(".env.example has no line %s=", name)
	}
	env, err := dotenv.UnmarshalWithLookup(strings.Join(lines, "\n"), nil)
	if err != nil {
		t.Fatalf("read .env.example with %s=%s: %v", name, value, err)
	}
	return fillTokens(env)
}

// tokensOnly is a .env holding only the values .env.example leaves for the
// user to set (the tokens), so compose.yaml's defaults apply to the rest.
func tokensOnly(t *testing.T, root string) map[string]string {
	t.Helper()
	example, err := dotenv.Read(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for k, v := range example {
		if v == "" {
			env[k] = ""
		}
	}
	return fillTokens(env)
}

// checkPresign checks that storage's presigned URLs can be used outside
// the containers: STORAGE_PRESIGN_ENDPOINT must be an http URL naming a
// loopback address and a port versitygw publishes on loopback, forwarded
// to the port it listens on (VGW_PORT). Without it the URLs name
// http://versitygw:7070, which only the containers resolve; storage signs
// them for the host they name (SigV4 covers Host), so the URL must be
// exactly where the client sends the request.
func checkPresign(p *types.Project) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	st, vg := p.Services["storage"], p.Services[versitygw]
	raw := envOf(st, "STORAGE_PRESIGN_ENDPOINT")
	if raw == "" {
		fail("storage: STORAGE_PRESIGN_ENDPOINT is not set: presigned URLs would name %s, which only the containers resolve", envOf(st, "STORAGE_ENDPOINT"))
		return errs
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
		fail("storage: STORAGE_PRESIGN_ENDPOINT %q: want http://<loopback>:<port>", raw)
		return errs
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		fail("storage: STORAGE_PRESIGN_ENDPOINT %q: want a loopback address, where versitygw is published", raw)
	}
	_, vgPort, err := net.SplitHostPort(envOf(vg, "VGW_PORT"))
	if err != nil {
		fail("versitygw: VGW_PORT %q: %v", envOf(vg, "VGW_PORT"), err)
		return errs
	}
	for _, pc := range vg.Ports {
		if pc.HostIP == u.Hostname() && pc.Published == u.Port() && strconv.Itoa(int(pc.Target)) == vgPort && (pc.Protocol == "" || pc.Protocol == "tcp") {
			return errs
		}
	}
	fail("storage: STORAGE_PRESIGN_ENDPOINT %q names port %s, but versitygw publishes %v: want %s:%s:%s", raw, u.Port(), vg.Ports, u.Hostname(), u.Port(), vgPort)
	return errs
}

// TestCheckPresignCatches breaks compose.yaml's presign setup one way at a
// time and expects checkPresign to name each break.
func TestCheckPresignCatches(t *testing.T) {
	root := repoRoot(t)
	env := exampleEnv(t, root)
	setEnv := func(svc *types.ServiceConfig, name, value string) {
		if value == "" {
			delete(svc.Environment, name)
			return
		}
		svc.Environment[name] = &value
	}
	tests := []struct {
		name    string
		breakIt func(st, vg *types.ServiceConfig)
		want    string
	}{
		{"not set", func(st, vg *types.ServiceConfig) { setEnv(st, "STORAGE_PRESIGN_ENDPOINT", "") }, "STORAGE_PRESIGN_ENDPOINT is not set"},
		{"the in-network name", func(st, vg *types.ServiceConfig) {
			setEnv(st, "STORAGE_PRESIGN_ENDPOINT", "http://versitygw:7070")
		}, "want a loopback address"},
		{"https", func(st, vg *types.ServiceConfig) {
			setEnv(st, "STORAGE_PRESIGN_ENDPOINT", "https://127.0.0.1:7070")
		}, "want http://<loopback>:<port>"},
		{"versitygw not published", func(st, vg *types.ServiceConfig) { vg.Ports = nil }, "names port 7070, but versitygw publishes []"},
		{"published on every interface", func(st, vg *types.ServiceConfig) { vg.Ports[0].HostIP = "0.0.0.0" }, "names port 7070, but versitygw publishes"},
		{"another published port", func(st, vg *types.ServiceConfig) {
			vg.Ports[0].Published = "17070"
		}, "names port 7070, but versitygw publishes"},
		{"forwarded to another port", func(st, vg *types.ServiceConfig) { vg.Ports[0].Target = 9000 }, "names port 7070, but versitygw publishes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := loadCompose(root, env)
			if err != nil {
				t.Fatalf("load compose.yaml: %v", err)
			}
			if errs := checkPresign(p); len(errs) > 0 {
				t.Fatalf("the good compose.yaml fails already: %v", errors.Join(errs...))
			}
			st, vg := p.Services["storage"], p.Services[versitygw]
			tt.breakIt(&st, &vg)
			p.Services["storage"], p.Services[versitygw] = st, vg
			err = errors.Join(checkPresign(p)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("checkPresign = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// envOf is a service's environment entry, "" when unset.
func envOf(svc types.ServiceConfig, name string) string {
	if v := svc.Environment[name]; v != nil {
		return *v
	}
	return ""
}

func checkBuild(t *testing.T, root string, s stackService, svc types.ServiceConfig, port int) {
	t.Helper()
	if svc.Build == nil {
		t.Fatalf("no build section")
	}
	if svc.Build.Context != root {
		t.Errorf("build context %q, want the repository root %q (the images copy bin/images/)", svc.Build.Context, root)
	}
	if fi, err := os.Stat(svc.Build.Context); err != nil || !fi.IsDir() {
		t.Errorf("build context %q: not a directory (%v)", svc.Build.Context, err)
	}
	wantFile := filepath.Join("deploy", "docker", s.name+".Dockerfile")
	dockerfile := svc.Build.Dockerfile
	if !filepath.IsAbs(dockerfile) {
		dockerfile = filepath.Join(svc.Build.Context, dockerfile)
	}
	if rel, _ := filepath.Rel(root, dockerfile); rel != wantFile {
		t.Errorf("build dockerfile %q, want %s", svc.Build.Dockerfile, wantFile)
	}
	if svc.Image != "brain-tools/"+s.name+":latest" {
		t.Errorf("image %q, want brain-tools/%s:latest (the tag make images gives)", svc.Image, s.name)
	}
	df, err := parseDockerfile(dockerfile)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	checkDockerfile(t, s, df, port, envOf(svc, s.dataEnv))
}

func checkEnv(t *testing.T, s stackService, svc types.ServiceConfig, known map[string]string, port int, hc hostConfig, env map[string]string) {
	t.Helper()
	// brain also reads the variables its host config names.
	allowed := maps.Clone(known)
	if s.name == "brain" {
		for _, k := range hc.APIKeys {
			allowed[k.Env] = ""
		}
		for _, tool := range hc.Tools {
			if tool.TokenEnv != "" {
				allowed[tool.TokenEnv] = ""
			}
		}
	}
	for name := range svc.Environment {
		if _, ok := allowed[name]; !ok {
			t.Errorf("compose sets %s, which %s does not read (its Config reads %s)", name, s.name, strings.Join(slices.Sorted(maps.Keys(allowed)), ", "))
		}
	}
	get := func(name string) string { return envOf(svc, name) }
	if got, want := get(s.addrEnv), fmt.Sprintf("0.0.0.0:%d", port); got != want {
		t.Errorf("%s = %q, want %q (all interfaces, the port of the Config default)", s.addrEnv, got, want)
	}
	// Every service holds the one token brain sends; brain holds every key
	// its host config names.
	if got := get("BRAIN_TOOLS_KEY"); got != env["BRAIN_TOOLS_KEY"] {
		t.Errorf("BRAIN_TOOLS_KEY = %q, want ${BRAIN_TOOLS_KEY} from .env", got)
	}
	if _, ok := svc.Environment["INSECURE_NO_AUTH"]; ok {
		t.Errorf("sets INSECURE_NO_AUTH")
	}
	publicURL := "PUBLIC_URL"
	if s.name == "brain" {
		publicURL = "BRAIN_PUBLIC_URL"
		for name := range allowed {
			if _, fromConfig := known[name]; !fromConfig && get(name) == "" {
				t.Errorf("%s (named in deploy/brain.compose.json) is not set", name)
			}
		}
	}
	if got, want := get(publicURL), fmt.Sprintf("http://%s:%d", s.name, port); got != want {
		t.Errorf("%s = %q, want %q (how the others reach it in the network)", publicURL, got, want)
	}
}

func checkPorts(t *testing.T, s stackService, svc types.ServiceConfig, port int) {
	t.Helper()
	if !s.published {
		if len(svc.Ports) != 0 {
			t.Errorf("publishes %v; want it reachable only inside the network", svc.Ports)
		}
		return
	}
	if len(svc.Ports) != 1 {
		t.Fatalf("ports %v, want one: 127.0.0.1:%d:%d", svc.Ports, port, port)
	}
	pc := svc.Ports[0]
	if pc.Target != uint32(port) || pc.Published != strconv.Itoa(port) || pc.HostIP != "127.0.0.1" {
		t.Errorf("port %s:%s:%d, want 127.0.0.1:%d:%d (the Config's port, on this machine only)", pc.HostIP, pc.Published, pc.Target, port, port)
	}
}

func checkHealth(t *testing.T, svc types.ServiceConfig, want []string) {
	t.Helper()
	hc := svc.HealthCheck
	if hc == nil || hc.Disable {
		t.Errorf("no health check")
		return
	}
	if !slices.Equal(hc.Test, want) {
		t.Errorf("health check %q, want %q", hc.Test, want)
	}
	if hc.Interval == nil || hc.Timeout == nil {
		t.Errorf("health check without interval or timeout")
	}
}

func checkNetworks(t *testing.T, svc types.ServiceConfig) {
	t.Helper()
	if got := slices.Sorted(maps.Keys(svc.Networks)); !slices.Equal(got, []string{network}) {
		t.Errorf("networks %v, want [%s]", got, network)
	}
}

func checkVolumes(t *testing.T, s stackService, svc types.ServiceConfig, p *types.Project) {
	t.Helper()
	var named []string
	for _, v := range svc.Volumes {
		if v.Type != types.VolumeTypeVolume {
			continue
		}
		if v.Source == "" {
			t.Errorf("anonymous volume at %s; want named volumes only", v.Target)
			continue
		}
		if _, ok := p.Volumes[v.Source]; !ok {
			t.Errorf("volume %s is not declared under volumes:", v.Source)
		}
		named = append(named, v.Source)
		if s.dataEnv != "" && v.Source == s.dataVolume {
			dir := svc.Environment[s.dataEnv]
			if dir == nil || *dir != v.Target {
				t.Errorf("volume %s is mounted at %s but %s = %v", v.Source, v.Target, s.dataEnv, dir)
			}
		}
	}
	if s.dataVolume != "" && !slices.Contains(named, s.dataVolume) {
		t.Errorf("named volumes %v, want %s for its state (%s)", named, s.dataVolume, s.dataEnv)
	}
	if s.name == versitygw && len(named) == 0 {
		t.Errorf("versitygw: no named volume for its objects")
	}
}

// checkLimits: a memory, CPU and process limit on the container, so one
// runaway service (or the agent's commands) cannot take the machine.
func checkLimits(t *testing.T, svc types.ServiceConfig) {
	t.Helper()
	if svc.MemLimit <= 0 || svc.CPUS <= 0 || svc.PidsLimit <= 0 {
		t.Errorf("limits: mem_limit %d, cpus %g, pids_limit %d; want all three set", svc.MemLimit, svc.CPUS, svc.PidsLimit)
	}
}

func checkDependsOn(t *testing.T, svc types.ServiceConfig, want []string) {
	t.Helper()
	if got := slices.Sorted(maps.Keys(svc.DependsOn)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("depends_on %v, want %v", got, want)
	}
	for name, d := range svc.DependsOn {
		if d.Condition != types.ServiceConditionHealthy {
			t.Errorf("depends_on %s: condition %q, want %s", name, d.Condition, types.ServiceConditionHealthy)
		}
	}
}

func checkHostConfig(t *testing.T, hc hostConfig, ports map[string]int) {
	t.Helper()
	if len(hc.Tools) == 0 {
		t.Fatal("deploy/brain.compose.json: no tools")
	}
	for _, tool := range hc.Tools {
		if tool.Type == "function" {
			// The application answers it: no service, no url, no token.
			if tool.URL != "" || tool.TokenEnv != "" {
				t.Errorf("brain.compose.json %s: a function tool with url %q, token_env %q", tool.Name, tool.URL, tool.TokenEnv)
			}
			continue
		}
		u, err := url.Parse(tool.URL)
		if err != nil {
			t.Errorf("brain.compose.json %s: url %q: %v", tool.Name, tool.URL, err)
			continue
		}
		port, ok := ports[u.Hostname()]
		if !ok || u.Hostname() == versitygw {
			t.Errorf("brain.compose.json %s: url %s names no tool service of compose.yaml", tool.Name, tool.URL)
			continue
		}
		if u.Scheme != "http" || u.Port() != strconv.Itoa(port) {
			t.Errorf("brain.compose.json %s: url %s, want http://%s:%d/...", tool.Name, tool.URL, u.Hostname(), port)
		}
		if tool.TokenEnv != "BRAIN_TOOLS_KEY" {
			t.Errorf("brain.compose.json %s: token_env %q, want BRAIN_TOOLS_KEY (the token every service holds)", tool.Name, tool.TokenEnv)
		}
	}
}

// TestEnvExample checks that .env.example lists exactly the variables
// compose.yaml interpolates, and that compose refuses to load while a
// required one (a token) is empty, naming it.
func TestEnvExample(t *testing.T) {
	root := repoRoot(t)
	model, err := loader.LoadModelWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "compose.yaml")}},
	}, func(o *loader.Options) { o.SkipInterpolation = true; o.SkipValidation = true })
	if err != nil {
		t.Fatalf("load compose.yaml: %v", err)
	}
	vars := template.ExtractVariables(model, template.DefaultPattern)
	example, err := dotenv.Read(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(maps.Keys(example)), slices.Sorted(maps.Keys(vars)); !slices.Equal(got, want) {
		t.Errorf(".env.example lists %v; compose.yaml uses %v", got, want)
	}
	documented := commentedKeys(t, filepath.Join(root, ".env.example"))
	for name, v := range vars {
		if !documented[name] {
			t.Errorf(".env.example: %s has no comment above it", name)
		}
		if !v.Required {
			continue
		}
		// A token the user must set: .env.example leaves it empty, and
		// compose refuses to load without it.
		if example[name] != "" {
			t.Errorf(".env.example: %s = %q; want it empty, as compose.yaml requires the user to set it", name, example[name])
		}
		t.Run("without "+name, func(t *testing.T) {
			env := exampleEnv(t, root)
			env[name] = ""
			_, err := loadCompose(root, env)
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("load with %s empty: %v, want an error naming it", name, err)
			}
		})
	}
}

// commentedKeys returns the keys of a dotenv file that have a comment line
// in the block of lines right above them.
func commentedKeys(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]bool{}
	commented := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			commented = false
		case strings.HasPrefix(line, "#"):
			commented = true
		default:
			k, _, _ := strings.Cut(line, "=")
			out[k] = commented
		}
	}
	return out
}

// TestComposeDemo loads compose.yaml with deploy/compose.demo.yaml on top,
// as make compose-test does: the docs server is limited like the rest and
// reachable only inside the network, and web_fetch may reach exactly it,
// on its port.
func TestComposeDemo(t *testing.T) {
	root := repoRoot(t)
	env := exampleEnv(t, root)
	env["DEMO_DOCS_DIR"] = t.TempDir()
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir: root,
		ConfigFiles: []types.ConfigFile{
			{Filename: filepath.Join(root, "compose.yaml")},
			{Filename: filepath.Join(root, "deploy", "compose.demo.yaml")},
		},
		Environment: env,
	})
	if err != nil {
		t.Fatalf("load compose.yaml + deploy/compose.demo.yaml: %v", err)
	}
	docs, ok := p.Services["docs"]
	if !ok {
		t.Fatal("no docs service")
	}
	checkNetworks(t, docs)
	checkLimits(t, docs)
	if len(docs.Ports) != 0 {
		t.Errorf("docs publishes %v; want it inside the network only", docs.Ports)
	}
	i := slices.Index(docs.Command, "-addr")
	if i < 0 || i+1 >= len(docs.Command) {
		t.Fatalf("docs: command %q has no -addr", docs.Command)
	}
	_, port, err := net.SplitHostPort(docs.Command[i+1])
	if err != nil {
		t.Fatalf("docs: -addr %q: %v", docs.Command[i+1], err)
	}
	// webfetch and the browser fetch the docs server, and only it, past
	// their SSRF guards.
	fetchers := map[string]string{"webfetch": "WEBFETCH", "browser": "BROWSER"}
	for name, prefix := range fetchers {
		svc := p.Services[name]
		if got := envOf(svc, prefix+"_ALLOW"); got != "docs" {
			t.Errorf("%s: %s_ALLOW = %q, want docs (exactly the docs server)", name, prefix, got)
		}
		if ports := strings.Split(envOf(svc, prefix+"_PORTS"), ","); !slices.Contains(ports, port) {
			t.Errorf("%s: %s_PORTS %v lacks the docs server's port %s", name, prefix, ports, port)
		}
		if d, ok := svc.DependsOn["docs"]; !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s: does not wait for docs to be healthy: %v", name, svc.DependsOn)
		}
	}
	// The rest of the stack is compose.yaml's, unchanged.
	base, err := loadCompose(root, env)
	if err != nil {
		t.Fatal(err)
	}
	for name, svc := range base.Services {
		got := p.Services[name]
		if _, ok := fetchers[name]; ok {
			continue
		}
		if got.Image != svc.Image || !slices.Equal(got.Command, svc.Command) || len(got.Environment) != len(svc.Environment) {
			t.Errorf("%s: the demo override changes it", name)
		}
	}
}

// brainStopGrace is the least time brain's container is given to stop
// (compose's stop_grace_period, Kubernetes' terminationGracePeriodSeconds)
// before it is killed: brain's shutdown waits up to two grace periods
// (20 s) for the calls in flight to record their end and up to one more for
// the requests in progress, then its lease loop and pool may each take the
// database bound (BRAIN_DATABASE_TIMEOUT, 10 s) on a silent database.
// Compose's default is 10 s, Kubernetes' 30 s.
const brainStopGrace = 45 * time.Second

// serviceStopGrace is the least time a tool service's container is given
// to stop: its drain takes up to SHUTDOWN_TIMEOUT (10 s), compose's own
// default.
const serviceStopGrace = 15 * time.Second

// checkStopGrace: svc is given at least least to stop.
func checkStopGrace(t *testing.T, svc types.ServiceConfig, least time.Duration) {
	t.Helper()
	if svc.StopGracePeriod == nil || time.Duration(*svc.StopGracePeriod) < least {
		t.Errorf("%s: stop_grace_period %v, want at least %s: its shutdown may take that long, and compose kills it past the period (10 s by default)", svc.Name, svc.StopGracePeriod, least)
	}
}
