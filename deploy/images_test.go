package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction: its keyword in upper case and
// the rest of its (continued) line, comments dropped.
type instruction struct {
	cmd, args string
	line      int
}

// stage is one FROM and the instructions after it.
type stage struct {
	from, name string
	instrs     []instruction
}

// parseDockerfile reads the instructions of a Dockerfile: enough of the
// syntax (continuation lines, comment lines, FROM ... AS name) for the
// checks below, not a builder's parser.
func parseDockerfile(path string) ([]stage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var stages []stage
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		cont := strings.HasSuffix(line, "\\")
		cur.WriteString(strings.TrimSuffix(line, "\\"))
		if cont {
			cur.WriteString(" ")
			continue
		}
		text := strings.Join(strings.Fields(cur.String()), " ")
		cur.Reset()
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: args, line: start}
		if in.cmd == "FROM" {
			fields := strings.Fields(args)
			st := stage{from: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				st.name = fields[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.cmd == "ARG" {
				continue
			}
			return nil, fmt.Errorf("%s:%d: %s before FROM", path, start, in.cmd)
		}
		stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("%s: ends in a continued line", path)
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("%s: no FROM", path)
	}
	return stages, sc.Err()
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// last is the stage's last cmd instruction, the one in effect.
func (s stage) last(cmd string) (instruction, bool) {
	all := s.all(cmd)
	if len(all) == 0 {
		return instruction{}, false
	}
	return all[len(all)-1], true
}

// env returns the stage's ENV settings (KEY=value form).
func (s stage) env() map[string]string {
	out := map[string]string{}
	for _, in := range s.all("ENV") {
		for _, kv := range strings.Fields(in.args) {
			k, v, _ := strings.Cut(kv, "=")
			out[k] = v
		}
	}
	return out
}

// execForm decodes a JSON-array (exec form) argument list.
func execForm(args string) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(args), &out); err != nil {
		return nil, fmt.Errorf("want exec form, a JSON array: %q: %w", args, err)
	}
	return out, nil
}

// checkDockerfile checks a service's image: static binary from make images
// as the only file from the build context, non-root numeric user, its own
// health check, listen address and port, state directory.
func checkDockerfile(t *testing.T, s stackService, stages []stage, port int, dataDir string) {
	t.Helper()
	final := stages[len(stages)-1]
	binary := "/usr/local/bin/" + s.name
	if s.debianRuntime {
		if !strings.HasPrefix(final.from, "debian:") || !strings.HasSuffix(final.from, "-slim") {
			t.Errorf("Dockerfile: runs on %s, want Debian slim", final.from)
		}
	} else {
		if len(stages) < 2 {
			t.Errorf("Dockerfile: %d stage(s), want a multi-stage build", len(stages))
		}
		if final.from != "scratch" {
			t.Errorf("Dockerfile: final stage FROM %s, want scratch (a static binary needs no base)", final.from)
		}
	}
	// From the build context: exactly the binary make images builds.
	var fromContext []string
	for _, st := range stages {
		for _, in := range append(st.all("COPY"), st.all("ADD")...) {
			if !strings.Contains(in.args, "--from=") {
				fromContext = append(fromContext, in.cmd+" "+in.args)
			}
		}
	}
	if want := []string{"COPY bin/images/" + s.name + " " + binary}; !slices.Equal(fromContext, want) {
		t.Errorf("Dockerfile copies %q from the build context, want %q (the binary make images builds)", fromContext, want)
	}
	if u, ok := final.last("USER"); !ok || u.args != imageUser {
		t.Errorf("Dockerfile: USER %q, want %s (non-root, numeric so Kubernetes can check runAsNonRoot)", u.args, imageUser)
	}
	if in, ok := final.last("ENTRYPOINT"); !ok {
		t.Errorf("Dockerfile: no ENTRYPOINT")
	} else if argv, err := execForm(in.args); err != nil || !slices.Equal(argv, []string{binary}) {
		t.Errorf("Dockerfile: ENTRYPOINT %s (%v), want [%q]", in.args, err, binary)
	}
	if in, ok := final.last("HEALTHCHECK"); !ok {
		t.Errorf("Dockerfile: no HEALTHCHECK")
	} else {
		_, cmd, found := strings.Cut(in.args, "CMD ")
		argv, err := execForm(cmd)
		if !found || err != nil || !slices.Equal(argv, []string{binary, healthArg}) {
			t.Errorf("Dockerfile: HEALTHCHECK %s (%v), want CMD [%q, %q]", in.args, err, binary, healthArg)
		}
		for _, opt := range []string{"--interval=", "--timeout="} {
			if !strings.Contains(in.args, opt) {
				t.Errorf("Dockerfile: HEALTHCHECK without %s", opt)
			}
		}
	}
	env := final.env()
	if got, want := env[s.addrEnv], fmt.Sprintf("0.0.0.0:%d", port); got != want {
		t.Errorf("Dockerfile: ENV %s=%q, want %q (the health check reads it)", s.addrEnv, got, want)
	}
	if in, ok := final.last("EXPOSE"); !ok || in.args != strconv.Itoa(port) {
		t.Errorf("Dockerfile: EXPOSE %q, want %d", in.args, port)
	}
	if s.dataEnv != "" && env[s.dataEnv] != dataDir {
		t.Errorf("Dockerfile: ENV %s=%q, compose.yaml mounts its volume at %q", s.dataEnv, env[s.dataEnv], dataDir)
	}
	// The build's version in the OCI labels, from the build arguments
	// make images passes.
	args := map[string]bool{}
	for _, in := range final.all("ARG") {
		args[strings.Fields(in.args)[0]] = true
	}
	var labels strings.Builder
	for _, in := range final.all("LABEL") {
		labels.WriteString(in.args + " ")
	}
	for label, arg := range map[string]string{"org.opencontainers.image.version": "VERSION", "org.opencontainers.image.revision": "REVISION"} {
		if !args[arg] {
			t.Errorf("Dockerfile: final stage has no ARG %s (make images passes --build-arg %s)", arg, arg)
		}
		if want := label + `="$` + arg + `"`; !strings.Contains(labels.String(), want) {
			t.Errorf("Dockerfile: no LABEL %s", want)
		}
	}
	// Only the base image make compose-test provides offline (no registry
	// is reachable there).
	for _, st := range stages {
		if st.from != "scratch" && st.from != "debian:bookworm-slim" {
			t.Errorf("Dockerfile: FROM %s: want debian:bookworm-slim or scratch", st.from)
		}
	}
}

// TestMakeImages checks that `make images` builds, for every service of
// the stack, the static binary its Dockerfile copies (bin/images/<name>)
// with VERSION and REVISION linked in, and tags the image compose.yaml
// runs and :VERSION, passing the version to the labels and
// DOCKER_BUILD_FLAGS to docker build. It reads the commands with make -n
// (nothing is built); make compose-test runs `make images` for real.
func TestMakeImages(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed for this test: %v", err)
	}
	root := repoRoot(t)
	cmd := exec.Command("make", "--no-print-directory", "-n", "images", "VERSION=v9.8.7-test.1", "REVISION=0123abcd", "DOCKER_BUILD_FLAGS=--network host")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n images: %v\n%s", err, out)
	}
	var build string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, " build ") && strings.Contains(line, "./services/") {
			build = line
		}
	}
	if build == "" {
		t.Fatalf("make -n images runs no go build of ./services/...:\n%s", out)
	}
	for _, want := range []string{"CGO_ENABLED=0", "GOOS=linux", "-trimpath", "-o " + filepath.Join(root, "bin", "images") + "/",
		"-X github.com/brain-tools/suite/pkg/version.version=v9.8.7-test.1", "-X github.com/brain-tools/suite/pkg/version.revision=0123abcd"} {
		if !strings.Contains(build, want) {
			t.Errorf("make images: %q lacks %q", build, want)
		}
	}
	for _, s := range stack {
		if !slices.Contains(strings.Fields(build), "./services/"+s.name) {
			t.Errorf("make images does not build ./services/%s: %s", s.name, build)
		}
		for _, want := range []string{"deploy/docker/$s.Dockerfile", "-t brain-tools/$s:latest", "-t brain-tools/$s:v9.8.7-test.1",
			"--build-arg VERSION=v9.8.7-test.1", "--build-arg REVISION=0123abcd", "--network host"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("make images: no docker build with %s", want)
			}
		}
	}
}
