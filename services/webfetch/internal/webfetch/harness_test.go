package webfetch

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/brain-tools/suite/pkg/netguard/dnstest"
	"github.com/brain-tools/suite/pkg/servicetest"
	"github.com/brain-tools/suite/pkg/tool"
)

const testToken = "test-token"

// harness is a web fetch service on loopback plus the servers it fetches.
type harness struct {
	t    testing.TB
	svc  *servicetest.Server
	dns  *dnstest.Server
	mu   sync.Mutex
	dial []string // every address dialed
	// reachable are the host:port pairs the guard may dial.
	reachable map[string]bool
}

// dnsRecords are the names the harness's DNS server answers, used by the
// SSRF table; nothing is ever dialed for them.
var dnsRecords = map[string][]netip.Addr{
	"private.test":        {netip.MustParseAddr("10.0.0.1")},
	"metadata.test":       {netip.MustParseAddr("169.254.169.254")},
	"mixed.test":          {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.9.9.9")},
	"mixed6.test":         {netip.MustParseAddr("2606:4700::1111"), netip.MustParseAddr("fd00::1")},
	"mapped.test":         {netip.AddrFrom16(netip.MustParseAddr("::ffff:127.0.0.2").As16())},
	"nat64.test":          {netip.MustParseAddr("64:ff9b::a00:1")},
	"xn--bcher-kva.test":  {netip.MustParseAddr("10.0.0.7")},
	"cgnat.test":          {netip.MustParseAddr("100.100.100.100")},
	"loopback-mixed.test": {netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("127.0.0.3")},
	"intranet.test":       {netip.MustParseAddr("127.0.0.1")},
}

// newHarness starts the service with env on top of test defaults (token,
// allow-list 127.0.0.1, the ports of the given servers, cache off).
func newHarness(t testing.TB, env map[string]string, servers ...*httptest.Server) *harness {
	t.Helper()
	dns, err := dnstest.Start(dnsRecords)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	h := &harness{t: t, dns: dns, reachable: map[string]bool{}}
	ports := []string{"80", "443"}
	for _, s := range servers {
		u, _ := url.Parse(s.URL)
		h.reachable[u.Host] = true
		ports = append(ports, u.Port())
	}
	full := map[string]string{
		"ADDR":                    "127.0.0.1:0",
		"BRAIN_TOOLS_KEY":         testToken,
		"WEBFETCH_ALLOW":          "127.0.0.1",
		"WEBFETCH_PORTS":          strings.Join(ports, ","),
		"WEBFETCH_CACHE_TTL":      "0",
		"WEBFETCH_ROBOTS_TIMEOUT": "2s",
	}
	for k, v := range env {
		full[k] = v
	}
	cfg, err := ParseConfig(full)
	if err != nil {
		t.Fatal(err)
	}
	srv, f, err := NewServer(cfg, Deps{Resolver: dns.Resolver(), BeforeDial: h.beforeDial}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	h.svc = servicetest.StartServer(t, srv)
	h.svc.Session = "s1"
	return h
}

// beforeDial records every dial and vetoes any address but the test's own
// servers: no test may send a packet anywhere else.
func (h *harness) beforeDial(_ string, ap netip.AddrPort) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dial = append(h.dial, ap.String())
	if !h.reachable[ap.String()] {
		h.t.Errorf("dial of %s attempted: only the test's servers may be dialed", ap)
		return errors.New("test: dial vetoed")
	}
	return nil
}

// allowDial lets the guard dial addr (for servers on other loopback
// addresses).
func (h *harness) allowDial(addr string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reachable[addr] = true
}

func (h *harness) dials() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.dial...)
}

// post sends a raw request to path with the token (when token is not "").
func (h *harness) post(path, contentType, token string, body []byte) (*http.Response, []byte) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.svc.URL+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

// call runs web_fetch with args, as brain calls it (servicetest), and
// returns the result, which the kit decodes strictly.
func (h *harness) call(args any) *tool.Result {
	h.t.Helper()
	r := h.svc.Call(h.t, Name, args)
	if r.Status != http.StatusOK || r.Result == nil {
		h.t.Fatalf("status %d: %s", r.Status, r.Error)
	}
	return r.Result
}

// text joins the text blocks of r.
func text(r *tool.Result) string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

func structured(t *testing.T, r *tool.Result) Output {
	t.Helper()
	var o Output
	if err := json.Unmarshal(r.StructuredContent, &o); err != nil {
		t.Fatalf("structured_content %s: %v", r.StructuredContent, err)
	}
	return o
}

// listenOn starts srv on a given loopback address (127.0.0.2 and so on).
func listenOn(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v (Linux routes all of 127.0.0.0/8 to loopback)", addr, err)
	}
	s := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	s.Start()
	t.Cleanup(s.Close)
	return s
}
