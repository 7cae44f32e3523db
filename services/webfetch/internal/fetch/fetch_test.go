package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/netguard"
	"github.com/brain-tools/suite/pkg/netguard/dnstest"
)

// newClient returns a client that may reach only srv (127.0.0.1 on its
// port) and fails the test if anything else is ever dialed.
func newClient(t *testing.T, srv *httptest.Server, o Options) *Client {
	t.Helper()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	o.Guard = netguard.New(netguard.Options{
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Ports:         []uint16{uint16(port), 80},
		BeforeDial: func(_ string, ap netip.AddrPort) error {
			if ap.String() != u.Host {
				t.Errorf("dialed %s, want only %s", ap, u.Host)
				return errors.New("test: dial vetoed")
			}
			return nil
		},
	})
	c := New(o)
	t.Cleanup(c.Close)
	return c
}

func TestRedirects(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/b", http.StatusFound) })
	mux.HandleFunc("/b", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/a", http.StatusMovedPermanently) })
	mux.HandleFunc("/chain/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n == 0 {
			_, _ = w.Write([]byte("end of chain"))
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/chain/%d", n-1), http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/to-private", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/to-file", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	mux.HandleFunc("/to-decimal", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://2130706434/", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := newClient(t, srv, Options{MaxRedirects: 5, CacheTTL: -1})
	ctx := context.Background()

	tests := []struct {
		path    string
		wantErr error
		want    string
	}{
		{path: "/a", wantErr: ErrRedirectLoop, want: "/a → " + srv.URL + "/b → " + srv.URL + "/a"},
		{path: "/chain/5", want: "end of chain"},
		{path: "/chain/6", wantErr: ErrTooManyRedirects, want: "more than 5"},
		{path: "/to-private", wantErr: netguard.ErrRefused, want: "169.254.169.254 is a link-local address"},
		{path: "/to-file", wantErr: netguard.ErrRefused, want: `scheme "file"`},
		{path: "/to-decimal", wantErr: netguard.ErrRefused, want: "host 2130706434 is 127.0.0.2, a loopback address"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := c.Get(ctx, srv.URL+tc.path)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Get = %v, want %v containing %q", err, tc.wantErr, tc.want)
				}
				return
			}
			if err != nil || string(resp.Body) != tc.want || len(resp.Hops) != 6 {
				t.Fatalf("Get = %v, %v", resp, err)
			}
			if resp.FinalURL != srv.URL+"/chain/0" {
				t.Fatalf("FinalURL = %s", resp.FinalURL)
			}
		})
	}
}

// gzipMember is one gzip member holding 1 MiB of zeros (about 1 KiB).
func gzipMember(t *testing.T) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := zw.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestGzipBombRefused(t *testing.T) {
	member := gzipMember(t)
	const members = 100 << 10 // 100 GiB once inflated, ~100 MiB on the wire
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		for i := 0; i < members; i++ {
			if _, err := w.Write(member); err != nil {
				return
			}
			written.Add(1)
		}
	}))
	defer srv.Close()
	c := newClient(t, srv, Options{MaxBodyBytes: 4 << 20, CacheTTL: -1})
	_, err := c.Get(context.Background(), srv.URL+"/bomb")
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Limit != 4<<20 || !strings.Contains(err.Error(), "4194304-byte limit after decoding") {
		t.Fatalf("Get = %v, want a TooLargeError at 4 MiB", err)
	}
	srv.CloseClientConnections()
	srv.Close()
	// The client stopped after ~4 members; only what sat in socket buffers
	// was sent on top. Nowhere near the whole bomb was read.
	t.Logf("server wrote %d of %d members", written.Load(), members)
	if n := written.Load(); n > members/10 {
		t.Fatalf("server wrote %d of %d members: the bomb was read", n, members)
	}
}

func TestDeclaredLengthRefusedBeforeReading(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(2<<20))
		_, _ = w.Write(make([]byte, 2<<20))
	}))
	defer srv.Close()
	c := newClient(t, srv, Options{MaxBodyBytes: 1 << 20, CacheTTL: -1})
	_, err := c.Get(context.Background(), srv.URL)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Declared != 2<<20 || !strings.Contains(err.Error(), "refused before reading") {
		t.Fatalf("Get = %v", err)
	}
}

func TestBodyAtTheCap(t *testing.T) {
	const limit = 1000
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "text/plain")
		w.(http.Flusher).Flush() // no Content-Length: the cap is hit while reading
		_, _ = w.Write(bytes.Repeat([]byte("x"), n))
	}))
	defer srv.Close()
	c := newClient(t, srv, Options{MaxBodyBytes: limit, CacheTTL: -1})
	if r, err := c.Get(context.Background(), srv.URL+"/?n=1000"); err != nil || len(r.Body) != limit {
		t.Fatalf("at the cap: %v", err)
	}
	var tl *TooLargeError
	if _, err := c.Get(context.Background(), srv.URL+"/?n=1001"); !errors.As(err, &tl) {
		t.Fatalf("one byte over the cap: %v", err)
	}
}

func TestUnaskedContentEncoding(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "br")
		_, _ = w.Write([]byte{0x1b, 0x02})
	}))
	defer srv.Close()
	c := newClient(t, srv, Options{CacheTTL: -1})
	if _, err := c.Get(context.Background(), srv.URL); err == nil || !strings.Contains(err.Error(), `unsupported content encoding "br"`) {
		t.Fatalf("Get = %v", err)
	}
}

func TestHopTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c := newClient(t, srv, Options{HopTimeout: 200 * time.Millisecond, CacheTTL: -1})
	_, err := c.Get(context.Background(), srv.URL+"/slow")
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "did not answer within 200ms") {
		t.Fatalf("Get = %v", err)
	}
	c = newClient(t, srv, Options{Timeout: 200 * time.Millisecond, CacheTTL: -1})
	_, err = c.Get(context.Background(), srv.URL+"/slow")
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "whole fetch took longer than 200ms") {
		t.Fatalf("Get = %v", err)
	}
}

func TestRobots(t *testing.T) {
	release := make(chan struct{})
	var pageHits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("User-agent: brain-webfetch\nDisallow: /private\n\nUser-agent: *\nDisallow: /\n"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		pageHits.Add(1)
		_, _ = w.Write([]byte("page"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	mux5xx := http.NewServeMux()
	mux5xx.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "oops", http.StatusServiceUnavailable) })
	mux5xx.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { pageHits.Add(1) })
	srv5xx := httptest.NewServer(mux5xx)
	defer srv5xx.Close()

	muxHang := http.NewServeMux()
	muxHang.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	muxHang.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { pageHits.Add(1) })
	srvHang := httptest.NewServer(muxHang)
	defer srvHang.Close()
	defer close(release)

	mux404 := http.NewServeMux()
	mux404.HandleFunc("/robots.txt", http.NotFound)
	mux404.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("no robots")) })
	srv404 := httptest.NewServer(mux404)
	defer srv404.Close()

	tests := []struct {
		name    string
		srv     *httptest.Server
		path    string
		robots  bool
		wantErr string
	}{
		{"allowed path", srv, "/public", true, ""},
		{"disallowed path", srv, "/private/x", true, `disallows /private/x for user agent "brain-webfetch"`},
		{"robots off", srv, "/private/x", false, ""},
		{"5xx means disallow", srv5xx, "/", true, "answered 503 Service Unavailable; treated as disallow all"},
		{"hang means disallow", srvHang, "/", true, "did not answer within 300ms; treated as disallow all"},
		{"404 means allow", srv404, "/", true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := pageHits.Load()
			c := newClient(t, tc.srv, Options{Robots: tc.robots, RobotsTimeout: 300 * time.Millisecond, CacheTTL: -1})
			_, err := c.Get(context.Background(), tc.srv.URL+tc.path)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Get = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrRobots) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Get = %v, want robots refusal containing %q", err, tc.wantErr)
			}
			if pageHits.Load() != before {
				t.Fatal("the page was fetched although robots.txt disallowed it")
			}
		})
	}
}

func TestRobotsGoesThroughTheGuard(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://10.0.0.1/robots.txt", http.StatusFound)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("page")) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := newClient(t, srv, Options{Robots: true, CacheTTL: -1})
	_, err := c.Get(context.Background(), srv.URL+"/")
	if !errors.Is(err, ErrRobots) || !strings.Contains(err.Error(), "10.0.0.1 is a private-use address") {
		t.Fatalf("Get = %v", err)
	}
}

// closedPort returns a 127.0.0.1 address nothing listens on (a listener
// opened and closed), so a connection to it is refused.
func closedPort(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	return ap
}

// TestRobotsOfAnUnreachableHost: when the host itself cannot be reached
// (its name does not resolve, its port refuses the connection, the guard
// refuses its addresses), asking for robots.txt fails the way the page
// would, and the error says so: not ErrRobots. A robots.txt that answers
// 5xx or hangs stays "disallow" (TestRobots), and so does a robots.txt
// redirecting to another origin that cannot be reached.
func TestRobotsOfAnUnreachableHost(t *testing.T) {
	dns, err := dnstest.Start(map[string][]netip.Addr{"private.test": {netip.MustParseAddr("10.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	closed := closedPort(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+closed.String()+"/robots.txt", http.StatusFound)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("page")) })
	redirecting := httptest.NewServer(mux)
	defer redirecting.Close()
	ru, _ := url.Parse(redirecting.URL)
	rport, _ := strconv.Atoi(ru.Port())

	g := netguard.New(netguard.Options{
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Ports:         []uint16{80, closed.Port(), uint16(rport)},
		Resolver:      dns.Resolver(),
		BeforeDial: func(_ string, ap netip.AddrPort) error {
			if ap != closed && ap.String() != ru.Host {
				t.Errorf("dialed %s", ap)
				return errors.New("test: dial vetoed")
			}
			return nil
		},
	})
	tests := []struct {
		name, url   string
		unreachable bool   // a *netguard.UnreachableError, not ErrRobots
		refused     bool   // a guard refusal, not ErrRobots
		want        string // in the message
	}{
		{"name does not resolve", "http://nowhere.test/page", true, false, "host nowhere.test:80 is unreachable: resolve nowhere.test: lookup nowhere.test"},
		{"connection refused", "http://" + closed.String() + "/page", true, false, "host " + closed.String() + " is unreachable: dial tcp " + closed.String() + ": connect: connection refused"},
		{"host refused by the guard", "http://private.test/page", false, true, "refused: host private.test resolves to 10.0.0.1, a private-use address (RFC 1918)"},
		{"redirect target unreachable", redirecting.URL + "/page", false, false, "disallowed by robots.txt: " + redirecting.URL + "/robots.txt is unreachable: get http://" + closed.String() + "/robots.txt: host " + closed.String() + " is unreachable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Options{Guard: g, Robots: true, RobotsTimeout: 2 * time.Second})
			defer c.Close()
			_, err := c.Get(context.Background(), tc.url)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Get = %v, want an error containing %q", err, tc.want)
			}
			var ue *netguard.UnreachableError
			if errors.As(err, &ue) != tc.unreachable || errors.Is(err, netguard.ErrRefused) != tc.refused {
				t.Fatalf("Get = %v: unreachable %v, refused %v; want %v, %v", err, errors.As(err, &ue), errors.Is(err, netguard.ErrRefused), tc.unreachable, tc.refused)
			}
			if robots := !tc.unreachable && !tc.refused; errors.Is(err, ErrRobots) != robots {
				t.Fatalf("Get = %v: errors.Is(ErrRobots) = %v, want %v", err, !robots, robots)
			}
			// A host failure is no fact about robots.txt: not cached as one.
			if _, again := c.Get(context.Background(), tc.url); again == nil || again.Error() != err.Error() {
				t.Fatalf("second Get = %v, want the same error again", again)
			}
		})
	}
	if dns.Queries() == 0 {
		t.Fatal("the names were never asked of the test DNS server")
	}
}

func TestCache(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/nostore" {
			w.Header().Set("Cache-Control", "no-store")
		}
		fmt.Fprintf(w, "hit %d", hits.Load())
	}))
	defer srv.Close()
	c := newClient(t, srv, Options{CacheTTL: 200 * time.Millisecond})
	ctx := context.Background()
	r1, err := c.Get(ctx, srv.URL+"/x#frag")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Get(ctx, srv.URL+"/x")
	if err != nil || !r2.Cached || string(r2.Body) != string(r1.Body) || hits.Load() != 1 {
		t.Fatalf("second Get: cached=%v body=%q hits=%d err=%v", r2.Cached, r2.Body, hits.Load(), err)
	}
	time.Sleep(300 * time.Millisecond)
	if r3, err := c.Get(ctx, srv.URL+"/x"); err != nil || r3.Cached || hits.Load() != 2 {
		t.Fatalf("after the TTL: cached=%v hits=%d err=%v", r3.Cached, hits.Load(), err)
	}
	for range 2 {
		if r, err := c.Get(ctx, srv.URL+"/nostore"); err != nil || r.Cached {
			t.Fatalf("no-store: %v %v", r, err)
		}
	}
}

func TestProductToken(t *testing.T) {
	for ua, want := range map[string]string{
		DefaultUserAgent:              "brain-webfetch",
		"MyBot":                       "mybot",
		"Mozilla/5.0 (compatible; X)": "mozilla",
		"":                            "*",
	} {
		if got := productToken(ua); got != want {
			t.Errorf("productToken(%q) = %q, want %q", ua, got, want)
		}
	}
}

func TestNetworkErrorNamesTheHop(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close() // nothing listens there any more
	c := newClient(t, srv, Options{CacheTTL: -1})
	_, err := c.Get(context.Background(), u+"/gone")
	if err == nil || !strings.HasPrefix(err.Error(), "get "+u+"/gone: host "+strings.TrimPrefix(u, "http://")+" is unreachable: dial tcp ") || strings.Contains(err.Error(), `Get "`) {
		t.Fatalf("Get = %v", err)
	}
}

// TestRobotsSizeEdge: a robots.txt of exactly 500 KiB is read; one byte
// more is refused (treated as disallow all).
func TestRobotsSizeEdge(t *testing.T) {
	for _, tc := range []struct {
		size    int
		wantErr bool
	}{{robotsMaxBytes, false}, {robotsMaxBytes + 1, true}} {
		mux := http.NewServeMux()
		mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
			head := "User-agent: *\nAllow: /\n"
			_, _ = w.Write([]byte(head + strings.Repeat("#", tc.size-len(head))))
		})
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("page")) })
		srv := httptest.NewServer(mux)
		c := newClient(t, srv, Options{Robots: true, CacheTTL: -1})
		_, err := c.Get(context.Background(), srv.URL+"/")
		srv.Close()
		if tc.wantErr != (err != nil) || (err != nil && !strings.Contains(err.Error(), "larger than 500 KiB")) {
			t.Errorf("robots.txt of %d bytes: %v", tc.size, err)
		}
	}
}

// TestXGzipIsGzip: "x-gzip" is gzip (RFC 9110 section 8.4.1.3); its body is
// decoded under the same cap, so an x-gzip bomb is refused as a gzip one.
func TestXGzipIsGzip(t *testing.T) {
	page := strings.Repeat("<p>An old server names its coding x-gzip.</p>", 100)
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write([]byte(page))
	_ = zw.Close()
	member := gzipMember(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", r.URL.Query().Get("ce"))
		if r.URL.Path == "/bomb" {
			for range 64 {
				if _, err := w.Write(member); err != nil {
					return
				}
			}
			return
		}
		_, _ = w.Write(zb.Bytes())
	}))
	defer srv.Close()
	c := newClient(t, srv, Options{MaxBodyBytes: 4 << 20, CacheTTL: -1})
	for _, ce := range []string{"x-gzip", "X-GZIP", "gzip"} {
		r, err := c.Get(context.Background(), srv.URL+"/?ce="+ce)
		if err != nil {
			t.Fatalf("%s: %v", ce, err)
		}
		if string(r.Body) != page {
			t.Fatalf("%s: %d bytes, want the %d of the page", ce, len(r.Body), len(page))
		}
	}
	var tl *TooLargeError
	if _, err := c.Get(context.Background(), srv.URL+"/bomb?ce=x-gzip"); !errors.As(err, &tl) {
		t.Fatalf("x-gzip bomb: %v", err)
	}
}
