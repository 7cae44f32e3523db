package e2b

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/backendtest"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/e2b/e2btest"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

func setup(t *testing.T) (*Backend, *e2btest.Server, func(t *testing.T) *workspace.Workspace) {
	t.Helper()
	srv := e2btest.New("e2b_test_key")
	t.Cleanup(srv.Close)
	b, err := New(Config{APIKey: "e2b_test_key", APIURL: srv.URL, EnvdURL: srv.EnvdURL(), Workdir: "/home/user/workspace"}, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := workspace.New(workspace.Options{Root: t.TempDir(), Quota: 1 << 30, Idle: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ws := func(t *testing.T) *workspace.Workspace {
		w, release, err := m.Acquire("tenant", "s-"+backendtest.RandomName())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
		return w
	}
	return b, srv, ws
}

func TestBehaviourSuite(t *testing.T) {
	b, _, ws := setup(t)
	backendtest.Run(t, backendtest.Env{Backend: b, Workspace: ws})
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
		if strings.HasPrefix(call, "POST /sandboxes ") {
			creates++
		}
	}
	if creates != 2 || len(srv.Sandboxes()) != 2 {
		t.Fatalf("%d creates and %d sandboxes for 2 sessions; calls %v", creates, len(srv.Sandboxes()), srv.Calls())
	}
	// A session's workspace expiring deletes its sandbox.
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

func TestTimeoutSendsSIGKILL(t *testing.T) {
	t.Parallel()
	b, srv, newWS := setup(t)
	ws := newWS(t)
	res, _, _ := backendtest.Exec(t, b, ws, backend.ExecRequest{Command: "sleep 30", Timeout: time.Second})
	if !res.Killed {
		t.Fatalf("result %+v, want killed", res)
	}
	if !slices.Contains(srv.Calls(), "SendSignal SIGNAL_SIGKILL") {
		t.Errorf("no SendSignal SIGKILL in %v", srv.Calls())
	}
}

func TestExpiredSandboxIsReplaced(t *testing.T) {
	t.Parallel()
	b, srv, newWS := setup(t)
	b.renew = 0 // renew on every use
	ws := newWS(t)
	backendtest.Exec(t, b, ws, backend.ExecRequest{Command: "true"})
	old := srv.Sandboxes()
	srv.Expire(old[0])
	res, stdout, _ := backendtest.Exec(t, b, ws, backend.ExecRequest{Command: "echo again"})
	if res.ExitCode != 0 || stdout != "again\n" {
		t.Fatalf("after expiry: %+v %q", res, stdout)
	}
	if now := srv.Sandboxes(); len(now) != 1 || now[0] == old[0] {
		t.Errorf("sandboxes %v, want one new one", now)
	}
}

func TestStreamErrors(t *testing.T) {
	t.Parallel()
	b, srv, newWS := setup(t)
	ws := newWS(t)
	backendtest.Exec(t, b, ws, backend.ExecRequest{Command: "true"})
	srv.BreakNextStream()
	var o backendtest.Output
	_, err := b.Exec(context.Background(), ws, backend.ExecRequest{Command: "sleep 5", Timeout: 10 * time.Second}, o.Func())
	var ce *ConnectError
	if !errors.As(err, &ce) || ce.Code != "unavailable" || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("end-of-stream error: %v", err)
	}
	// A file over the sandbox's disk is the quota error.
	srv.DiskLimit = 10
	if err := b.WriteFile(context.Background(), ws, "big", make([]byte, 100)); !errors.Is(err, backend.ErrQuota) {
		t.Errorf("507: %v, want ErrQuota", err)
	}
}

func TestCheckAndConfig(t *testing.T) {
	t.Parallel()
	srv := e2btest.New("right")
	defer srv.Close()
	b, _ := New(Config{APIKey: "wrong", APIURL: srv.URL, Workdir: "/w"}, time.Hour, nil)
	err := b.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "Invalid API key") {
		t.Errorf("Check with a bad key: %v", err)
	}
	good, _ := New(Config{APIKey: "right", APIURL: srv.URL, Workdir: "/w"}, time.Hour, nil)
	if err := good.Check(context.Background()); err != nil {
		t.Errorf("Check: %v", err)
	}
	if _, err := New(Config{}, time.Hour, nil); err == nil || !strings.Contains(err.Error(), "E2B_API_KEY") {
		t.Errorf("no key: %v", err)
	}
	if _, err := New(Config{APIKey: "k", Workdir: "rel"}, time.Hour, nil); err == nil {
		t.Error("relative workdir accepted")
	}
	def, _ := New(Config{APIKey: "k", Workdir: "/w"}, time.Hour, nil)
	if def.apiURL != "https://api.e2b.app" {
		t.Errorf("default API URL %q", def.apiURL)
	}
}

func TestEnvelopes(t *testing.T) {
	msg := []byte(`{"event":{"keepalive":{}}}`)
	framed := envelope(flagEndStream, msg)
	if framed[0] != 2 || !bytes.Equal(framed[1:5], []byte{0, 0, 0, byte(len(msg))}) {
		t.Fatalf("header % x", framed[:5])
	}
	flags, got, err := readEnvelope(bytes.NewReader(framed))
	if err != nil || flags != 2 || !bytes.Equal(got, msg) {
		t.Errorf("round trip: %d %q %v", flags, got, err)
	}
	if _, _, err := readEnvelope(bytes.NewReader(nil)); !errors.Is(err, io.EOF) {
		t.Errorf("empty stream: %v, want io.EOF", err)
	}
	if _, _, err := readEnvelope(bytes.NewReader(framed[:8])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut envelope: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, _, err := readEnvelope(bytes.NewReader([]byte{0, 0xff, 0, 0, 0})); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("huge envelope: %v", err)
	}
	if _, _, err := readEnvelope(bytes.NewReader(envelope(flagCompressed, msg))); err == nil {
		t.Error("compressed envelope accepted")
	}
	for body, want := range map[string]string{
		`{"code":"not_found","message":"process not found"}`: "HTTP 404: not_found: process not found",
		`{"code":404,"message":"path 'x' does not exist"}`:   "HTTP 404: path 'x' does not exist",
		`upstream gone`: "HTTP 404: upstream gone",
	} {
		if got := errorFromBody(404, []byte(body)).Error(); got != want {
			t.Errorf("errorFromBody(%s) = %q, want %q", body, got, want)
		}
	}
}
