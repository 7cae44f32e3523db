package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/netguard/dnstest"
	"github.com/brain-tools/suite/pkg/tool"
)

// netnsEnv marks the test binary re-run inside its own network namespace.
const netnsEnv = "BROWSER_TEST_NETNS"

// TestMain runs the package's tests in a network namespace of their own
// (unshare --net, as root): only a loopback interface, with 169.254.169.254
// added to it, so a victim can listen on the metadata address and no packet
// a test provokes can leave the machine, whatever the browser did. Where
// that is impossible (not root, no unshare or ip) the tests run as they
// are, and the ones that need the namespace say so and skip.
func TestMain(m *testing.M) {
	if os.Getenv(netnsEnv) == "" && os.Getuid() == 0 {
		unshare, err1 := exec.LookPath("unshare")
		ip, err2 := exec.LookPath("ip")
		if err1 == nil && err2 == nil {
			script := ip + " link set lo up && " + ip + " addr add 169.254.169.254/32 dev lo && exec \"$@\""
			args := append([]string{"--net", "--", "sh", "-c", script, "sh"}, os.Args...)
			cmd := exec.Command(unshare, args...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
			cmd.Env = append(os.Environ(), netnsEnv+"=1")
			if err := cmd.Run(); err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					os.Exit(ee.ExitCode())
				}
				fmt.Fprintln(os.Stderr, "run the tests in a network namespace:", err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// needNetns skips a test that must run in the namespace TestMain makes.
func needNetns(t *testing.T) {
	t.Helper()
	if os.Getenv(netnsEnv) == "" {
		t.Skip("needs a network namespace of its own: run as root with unshare (util-linux) and ip (iproute2)")
	}
}

// pageHost is the operator-allowed loopback address the test pages are
// served on; every other loopback address stays refused.
const pageHost = "127.0.0.2"

// harness is a browser service on loopback with a page server on
// 127.0.0.2 that the allow-list names, a DNS server for test names, and a
// record of every address the proxy dialed.
type harness struct {
	t     testing.TB
	svc   *Service
	srv   *httptest.Server
	pages *http.ServeMux
	page  string // http://127.0.0.2:PORT
	port  int
	dns   *dnstest.Server

	mu     sync.Mutex
	dialed []string
}

// newHarness starts the service; env overrides the defaults, and
// extraPorts are allowed besides the page server's.
func newHarness(t testing.TB, env map[string]string, extraPorts ...int) *harness {
	t.Helper()
	h := &harness{t: t, pages: http.NewServeMux()}
	ln, err := net.Listen("tcp", pageHost+":0")
	if err != nil {
		t.Skipf("needs the loopback address %s: %v", pageHost, err)
	}
	ps := &http.Server{Handler: h.pages, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = ps.Serve(ln) }()
	t.Cleanup(func() { ps.Close() })
	h.port = ln.Addr().(*net.TCPAddr).Port
	h.page = "http://" + ln.Addr().String()

	h.dns, err = dnstest.Start(map[string][]netip.Addr{
		"loopback.test": {netip.MustParseAddr("127.0.0.1")},
		"pages.test":    {netip.MustParseAddr(pageHost)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.dns.Close() })

	ports := []string{strconv.Itoa(h.port)}
	for _, p := range extraPorts {
		ports = append(ports, strconv.Itoa(p))
	}
	environ := map[string]string{
		"INSECURE_NO_AUTH":       "true",
		"ADDR":                   "127.0.0.1:0",
		"BROWSER_ALLOW":          pageHost,
		"BROWSER_PORTS":          strings.Join(ports, ","),
		"BROWSER_LOAD_TIMEOUT":   "10s",
		"BROWSER_SETTLE_TIMEOUT": "2s",
		"BROWSER_ACTION_TIMEOUT": "5s",
	}
	for k, v := range env {
		environ[k] = v
	}
	cfg, err := ParseConfig(environ)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(cfg, Deps{Resolver: h.dns.Resolver(), BeforeDial: func(_ string, ap netip.AddrPort) error {
		h.mu.Lock()
		h.dialed = append(h.dialed, ap.String())
		h.mu.Unlock()
		// Only the page server is ever dialed. Outside a namespace of its
		// own, anything else is refused here before a packet is sent; inside
		// one nothing can leave, so the dial goes on and the victim listener
		// is the judge.
		if ap.Addr().String() != pageHost && os.Getenv(netnsEnv) == "" {
			return fmt.Errorf("test harness: dial of %s vetoed", ap)
		}
		return nil
	}}, failureLog(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Manager.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	h.svc = svc
	h.srv = httptest.NewServer(svc.Server.Handler())
	t.Cleanup(h.srv.Close)
	return h
}

// handle serves body (HTML) at path on the page server.
func (h *harness) handle(path, body string) {
	h.pages.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, body)
	})
}

// dials returns the addresses the proxy dialed.
func (h *harness) dials() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.dialed...)
}

// call invokes a tool as brain would, for tenant "t" and session.
func (h *harness) call(ctx context.Context, session, name string, args any) (*tool.Result, error) {
	a, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(tool.Request{TenantID: "t", SessionID: session, CallID: "c", Arguments: a})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+"/tools/"+name, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, data)
	}
	return tool.DecodeResult(data)
}

// must calls a tool and fails the test on a transport error or an
// is_error result.
func (h *harness) must(session, name string, args any) *tool.Result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := h.call(ctx, session, name, args)
	if err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	if r.IsError {
		h.t.Fatalf("%s: is_error: %s", name, text(r))
	}
	return r
}

func text(r *tool.Result) string {
	var b strings.Builder
	for _, c := range r.Content {
		if c.Type == tool.TypeText {
			b.WriteString(c.Text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

func pageOut(t testing.TB, r *tool.Result) PageOutput {
	t.Helper()
	var o PageOutput
	if err := json.Unmarshal(r.StructuredContent, &o); err != nil {
		t.Fatalf("structured_content: %v", err)
	}
	return o
}

// failureLog is a logger for the service under test whose lines are shown
// when the test fails (why a session was reclaimed, say), and dropped
// otherwise.
func failureLog(t testing.TB) *slog.Logger {
	var mu sync.Mutex
	var buf bytes.Buffer
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if t.Failed() {
			t.Logf("the service's log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
