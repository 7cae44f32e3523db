package operator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/pgtest"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/sse"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/local/internal/approval"
)

const operatorToken = "op-token-0123456789abcdef"

// stack is a local service with the approval tools and the operator page,
// served on 127.0.0.1 as in production.
type stack struct {
	t    testing.TB
	svc  *approval.Service
	page *Page
	url  string
	srv  *httptest.Server
}

func newStack(t testing.TB, cfg Config) *stack {
	t.Helper()
	return newStackSweeping(t, cfg, 100*time.Millisecond)
}

// newStackSweeping is newStack with the expiry sweeper at interval sweep.
func newStackSweeping(t testing.TB, cfg Config, sweep time.Duration) *stack {
	t.Helper()
	return newStackOn(t, cfg, approval.Config{DataDir: t.TempDir(), SweepInterval: sweep})
}

// pg is the PostgreSQL server of this test binary (pkg/pgtest), for the
// tests that run on both approval stores (stores).
var pg *pgtest.Server

func TestMain(m *testing.M) { pgtest.Main(m, "operator", &pg) }

// stores are the approval stores a page test runs on when the two must
// answer alike: SQLite in a temporary directory, as newStack's, and a
// database of its own on pg.
var stores = []struct {
	name   string
	config func(t testing.TB) approval.Config
}{
	{"sqlite", func(t testing.TB) approval.Config { return approval.Config{DataDir: t.TempDir()} }},
	{"postgres", func(t testing.TB) approval.Config { return approval.Config{DatabaseURL: pg.NewDatabase(t)} }},
}

// newStackOn is newStack on the approval store acfg names (its PageURL is
// the stack's own; SweepInterval defaults to 100 ms).
func newStackOn(t testing.TB, cfg Config, acfg approval.Config) *stack {
	t.Helper()
	if cfg.Token == "" && cfg.Operators == nil {
		cfg.Token = operatorToken
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = time.Hour
	}
	if cfg.SigninAttempts == 0 {
		cfg.SigninAttempts, cfg.SigninWindow = 5, time.Minute
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	acfg.PageURL = base
	if acfg.SweepInterval == 0 {
		acfg.SweepInterval = 100 * time.Millisecond
	}
	svc, err := approval.New(context.Background(), acfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	page, err := New(ctx, cfg, svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := &service.Server{Name: "local", Config: service.Config{Token: "tools-key", Heartbeat: time.Second, StreamAfter: 5 * time.Second, MaxRequestBytes: 1 << 20},
		Tools: svc.Tools(), Routes: page.Routes}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(func() {
		cancel()
		ts.CloseClientConnections()
		ts.Close()
		svc.Close()
	})
	return &stack{t: t, svc: svc, page: page, url: base, srv: ts}
}

// pending is one request_approval call in flight, as brain would hold it.
type pending struct {
	ID       string
	URL      string
	result   chan *tool.Result
	cancel   context.CancelFunc
	progress approval.Progress
}

// requestApproval starts a request_approval call of tenant acme and
// returns once its progress event has arrived.
func (s *stack) requestApproval(call string, args map[string]any) *pending {
	s.t.Helper()
	return s.requestApprovalIn("acme", call, args)
}

// requestApprovalIn is requestApproval for another tenant.
func (s *stack) requestApprovalIn(tenant, call string, args map[string]any) *pending {
	s.t.Helper()
	a, _ := json.Marshal(args)
	body, _ := json.Marshal(tool.Request{TenantID: tenant, SessionID: "sess-1", CallID: call, Arguments: a})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/tools/request_approval", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer tools-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		s.t.Fatal(err)
	}
	p := &pending{result: make(chan *tool.Result, 1), cancel: cancel}
	got := make(chan approval.Progress, 1)
	go func() {
		defer resp.Body.Close()
		for ev, err := range sse.Read(resp.Body, 1<<20) {
			if err != nil {
				break
			}
			switch ev.Name {
			case "progress":
				var pr approval.Progress
				json.Unmarshal([]byte(ev.Data), &pr)
				got <- pr
			case "result":
				r, _ := tool.DecodeResult([]byte(ev.Data))
				p.result <- r
				return
			}
		}
		p.result <- nil
	}()
	select {
	case pr := <-got:
		p.progress, p.ID, p.URL = pr, pr.ApprovalID, pr.URL
	case <-time.After(10 * time.Second):
		s.t.Fatal("no progress event")
	}
	s.t.Cleanup(cancel)
	return p
}

func (p *pending) wait(t *testing.T) *tool.Result {
	t.Helper()
	select {
	case r := <-p.result:
		if r == nil {
			t.Fatal("stream ended without a result")
		}
		return r
	case <-time.After(15 * time.Second):
		t.Fatal("no result")
	}
	return nil
}

// client is a browser-like HTTP client: a cookie jar, redirects not
// followed so tests see every status.
type client struct {
	t    testing.TB
	base string
	http *http.Client
}

func (s *stack) client() *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: s.t, base: s.url, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (c *client) get(path string) answer {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	return c.do(req)
}

func (c *client) head(path string) answer {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodHead, c.base+path, nil)
	return c.do(req)
}

func (c *client) post(path string, form url.Values, header ...string) answer {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return c.do(req)
}

// do sends req and reads the whole answer.
func (c *client) do(req *http.Request) answer {
	c.t.Helper()
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t testing.TB, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no csrf field in %s", body)
	}
	return m[1]
}

// signIn signs c in as name and returns the session's CSRF token.
func (c *client) signIn(name, token string) string {
	c.t.Helper()
	form := c.get("/operator/signin")
	p := c.post("/operator/signin", url.Values{"csrf": {csrfOf(c.t, form.body)}, "name": {name}, "token": {token}, "next": {"/approvals"}})
	if p.status != http.StatusSeeOther {
		c.t.Fatalf("sign-in: status %d: %s", p.status, p.body)
	}
	list := c.get("/approvals")
	if list.status != 200 {
		c.t.Fatalf("list after sign-in: %d", list.status)
	}
	return csrfOf(c.t, list.body)
}
