package daytona

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/backendtest"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/daytona/daytonatest"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

func setup(t *testing.T) (*Backend, *daytonatest.Server, func(t *testing.T) *workspace.Workspace) {
	t.Helper()
	srv := daytonatest.New("dtn_test_key")
	t.Cleanup(srv.Close)
	b, err := New(Config{APIKey: "dtn_test_key", APIURL: srv.URL + "/api"}, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := workspace.New(workspace.Options{Root: t.TempDir(), Quota: 1 << 30, Idle: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return b, srv, func(t *testing.T) *workspace.Workspace {
		w, release, err := m.Acquire("tenant", "s-"+backendtest.RandomName())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
		return w
	}
}

// The protocol merges stdout and stderr in one log, so the suite checks
// the two together.
func TestBehaviourSuite(t *testing.T) {
	b, _, ws := setup(t)
	backendtest.Run(t, backendtest.Env{Backend: b, Workspace: ws, MergedOutput: true})
}

func TestSandboxPerSession(t *testing.T) {
	t.Parallel()
	b, srv, newWS := setup(t)
	a, c := newWS(t), newWS(t)
	for range 3 {
		backendtest.Exec(t, b, a, backend.ExecRequest{Command: "true"})
	}
	backendtest.Exec(t, b, c, backend.ExecRequest{Command: "true"})
	creates := 0
	for _, call := range srv.Calls() {
		if call == "POST /api/sandbox" {
			creates++
		}
	}
	if creates != 2 || len(srv.Sandboxes()) != 2 {
		t.Fatalf("%d creates, %d sandboxes for 2 sessions", creates, len(srv.Sandboxes()))
	}
	if err := b.Release(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if got := len(srv.Sandboxes()); got != 1 {
		t.Errorf("%d sandboxes after releasing one of 2", got)
	}
	if err := b.Release(context.Background(), a); err != nil {
		t.Errorf("second release: %v", err)
	}
}

func TestTimeoutKillsThroughExecute(t *testing.T) {
	t.Parallel()
	b, srv, newWS := setup(t)
	ws := newWS(t)
	res, _, _ := backendtest.Exec(t, b, ws, backend.ExecRequest{Command: "sleep 30", Timeout: time.Second})
	if !res.Killed {
		t.Fatalf("result %+v, want killed", res)
	}
	if !slices.Contains(srv.Calls(), "execute bash") || !slices.Contains(srv.Calls(), "DELETE session") {
		t.Errorf("calls %v, want the kill through execute and the session deleted", srv.Calls())
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	srv := daytonatest.New("right")
	defer srv.Close()
	b, _ := New(Config{APIKey: "wrong", APIURL: srv.URL + "/api"}, time.Hour, nil)
	err := b.Check(context.Background())
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 401 || !strings.Contains(err.Error(), "Invalid API key") {
		t.Errorf("Check with a bad key: %v", err)
	}
	good, _ := New(Config{APIKey: "right", APIURL: srv.URL + "/api"}, time.Hour, nil)
	if err := good.Check(context.Background()); err != nil {
		t.Errorf("Check: %v", err)
	}
	if _, err := New(Config{}, time.Hour, nil); err == nil || !strings.Contains(err.Error(), "DAYTONA_API_KEY") {
		t.Errorf("no key: %v", err)
	}
	if _, err := New(Config{APIKey: "k", Workdir: "rel"}, time.Hour, nil); err == nil {
		t.Error("relative workdir accepted")
	}
	for body, want := range map[string]string{
		`{"statusCode":404,"message":"Sandbox not found","error":"Not Found"}`:                          "HTTP 404: Sandbox not found",
		`{"statusCode":400,"message":["snapshot must be a string"],"error":"Bad Request"}`:              `HTTP 404: ["snapshot must be a string"]`,
		`{"statusCode":404,"message":"session not found","code":"NOT_FOUND","source":"DAYTONA_DAEMON"}`: "HTTP 404: session not found",
		`gateway timeout`: "HTTP 404: gateway timeout",
	} {
		if got := apiError(404, []byte(body)).Error(); got != want {
			t.Errorf("apiError(%s) = %q, want %q", body, got, want)
		}
	}
	for in, want := range map[string]string{"-rw-r--r--": "0644", "drwxr-x---": "0750", "755": "0755", "?": ""} {
		if got := modeOctal(in); got != want {
			t.Errorf("modeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestScriptQuotesEverything(t *testing.T) {
	s := script(backend.ExecRequest{Command: `echo "it's $HOME"`, Env: map[string]string{"B": "x'y", "A": "1"}}, "/w/it's", "brainabc", "")
	want := "export BRAIN_SANDBOX_RUN=brainabc\nexport A='1'\nexport B='x'\\''y'\ncd '/w/it'\\''s' || exit 1\nexec 0</dev/null\nexec bash -c 'echo \"it'\\''s $HOME\"'\n"
	if s != want {
		t.Errorf("script =\n%s\nwant\n%s", s, want)
	}
}
