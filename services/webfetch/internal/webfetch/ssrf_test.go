package webfetch

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestSSRFRefusals sends web_fetch every address and trick in the table.
// Each must come back as is_error with the reason, and nothing may be
// dialed: the guard refuses before connecting (beforeDial fails the test
// on any dial but the test's own page server).
func TestSSRFRefusals(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	pages := httptest.NewServer(mux)
	defer pages.Close()
	pu, _ := url.Parse(pages.URL)
	h := newHarness(t, map[string]string{"WEBFETCH_ROBOTS": "false"}, pages)

	const (
		loopback  = "a loopback address (RFC 1122)"
		private   = "a private-use address (RFC 1918)"
		linkLocal = "a link-local address (RFC 3927"
	)
	tests := []struct {
		url, why string
	}{
		// Loopback that the allow-list (127.0.0.1 only) does not name.
		{"http://127.0.0.2/", "127.0.0.2 is " + loopback},
		{"http://127.255.255.254/", "127.255.255.254 is " + loopback},
		{"http://localhost/", "host localhost is a loopback name (RFC 6761)"},
		{"http://LOCALHOST./", "host LOCALHOST. is a loopback name"},
		{"http://api.localhost/", "host api.localhost is a loopback name"},
		{"http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/", "is a loopback name"},
		// "This network", however written.
		{"http://0.0.0.0/", `0.0.0.0 is a "this network" address`},
		{"http://0/", `host 0 is 0.0.0.0, a "this network" address`},
		{"http://[::]/", "the unspecified IPv6 address"},
		// Numeric spellings of IPv4.
		{"http://2130706434/", "host 2130706434 is 127.0.0.2, " + loopback},
		{"http://0177.0.0.2/", "host 0177.0.0.2 is 127.0.0.2, " + loopback},
		{"http://0x7f.0.0.2/", "host 0x7f.0.0.2 is 127.0.0.2, " + loopback},
		{"http://0x7f000002/", "host 0x7f000002 is 127.0.0.2, " + loopback},
		{"http://127.2/", "host 127.2 is 127.0.0.2, " + loopback},
		{"http://10.1/", "host 10.1 is 10.0.0.1, " + private},
		{"http://0xa9.0376.43518/", "host 0xa9.0376.43518 is 169.254.169.254, " + linkLocal},
		{"http://１２７.０.０.２/", "is 127.0.0.2, " + loopback},
		{"http://127。0。0。2/", "is 127.0.0.2, " + loopback},
		// Private, shared, link-local, multicast, reserved, documentation.
		{"http://10.0.0.1/", "10.0.0.1 is " + private},
		{"http://172.16.0.1/", "172.16.0.1 is " + private},
		{"http://192.168.1.1/", "192.168.1.1 is " + private},
		{"http://169.254.169.254/latest/meta-data/", "169.254.169.254 is " + linkLocal},
		{"http://100.64.0.1/", "100.64.0.1 is a carrier-grade NAT shared address (RFC 6598)"},
		{"http://224.0.0.1/", "224.0.0.1 is a multicast address"},
		{"http://239.255.255.250/", "239.255.255.250 is a multicast address"},
		{"http://240.0.0.1/", "240.0.0.1 is a reserved address"},
		{"http://255.255.255.255/", "the limited broadcast address"},
		{"http://192.0.2.1/", "documentation address (TEST-NET-1"},
		{"http://198.51.100.7/", "documentation address (TEST-NET-2"},
		{"http://203.0.113.9/", "documentation address (TEST-NET-3"},
		{"http://198.18.0.1/", "a benchmarking address (RFC 2544)"},
		{"http://192.0.0.8/", "an IETF protocol assignment address"},
		// IPv6 and its IPv4 transition forms.
		{"http://[::1]/", "::1 is the IPv6 loopback address"},
		{"http://[::ffff:127.0.0.2]/", "is 127.0.0.2, " + loopback},
		{"http://[::ffff:10.0.0.1]/", "is 10.0.0.1, " + private},
		{"http://[::ffff:a9fe:a9fe]/", "is 169.254.169.254, " + linkLocal},
		{"http://[::127.0.0.1]/", "an IPv4-compatible IPv6 address (deprecated, RFC 4291) embedding 127.0.0.1"},
		{"http://[64:ff9b::a9fe:a9fe]/", "a NAT64 address (RFC 6052) embedding 169.254.169.254"},
		{"http://[64:ff9b::127.0.0.1]/", "a NAT64 address (RFC 6052) embedding 127.0.0.1"},
		{"http://[64:ff9b:1::a00:1]/", "a local-use NAT64 address (RFC 8215)"},
		{"http://[2002:7f00:1::1]/", "a 6to4 address (RFC 3056) embedding 127.0.0.1"},
		{"http://[2002:a00:1::]/", "a 6to4 address (RFC 3056) embedding 10.0.0.1"},
		{"http://[2001::1]/", "a Teredo address (RFC 4380)"},
		{"http://[fe80::1]/", "a link-local address (RFC 4291)"},
		{"http://[fe80::1%25eth0]/", "IPv6 zone identifiers are refused"},
		{"http://[fc00::1]/", "a unique local address (RFC 4193)"},
		{"http://[fd12:3456::1]/", "a unique local address (RFC 4193)"},
		{"http://[fec0::1]/", "a site-local address"},
		{"http://[ff02::1]/", "a multicast address (RFC 4291)"},
		{"http://[2001:db8::1]/", "a documentation address (RFC 3849)"},
		{"http://[100::1]/", "a discard-only address (RFC 6666)"},
		// Names whose DNS answers are internal (our own DNS server).
		{"http://private.test/", "host private.test resolves to 10.0.0.1, " + private},
		{"http://metadata.test/", "host metadata.test resolves to 169.254.169.254"},
		{"http://cgnat.test/", "resolves to 100.100.100.100, a carrier-grade NAT"},
		{"http://mixed.test/", "host mixed.test resolves to 10.9.9.9, " + private},
		{"http://mixed6.test/", "host mixed6.test resolves to fd00::1, a unique local address"},
		{"http://loopback-mixed.test/", "host loopback-mixed.test resolves to 127.0.0.3, " + loopback},
		{"http://mapped.test/", "host mapped.test resolves to 127.0.0.2, " + loopback},
		{"http://nat64.test/", "resolves to 64:ff9b::a00:1, a NAT64 address (RFC 6052) embedding 10.0.0.1"},
		{"http://bücher.test/", "host xn--bcher-kva.test resolves to 10.0.0.7"},
		// Schemes, credentials, ports.
		{"file:///etc/passwd", `must be an absolute http:// or https:// URL`},
		{"gopher://127.0.0.1:70/", `must be an absolute http:// or https:// URL`},
		{"ftp://example.test/", `must be an absolute http:// or https:// URL`},
		{"http://example.test:22/", "port 22 is not allowed"},
		{"https://example.test:8443/", "port 8443 is not allowed"},
		{"http://user:secret@example.test/", "URLs with credentials are not fetched"},
		{"http://127.0.0.1:" + pu.Port() + "@10.0.0.1/", "URLs with credentials are not fetched"},
		{"http://[::ffff:127.0.0.1]:22/", "port 22 is not allowed"},
		// Redirect hops are checked again.
		{pages.URL + "/redirect?to=http://169.254.169.254/", "redirect from " + pages.URL + "/redirect?to=http://169.254.169.254/: refused: 169.254.169.254 is " + linkLocal},
		{pages.URL + "/redirect?to=http://0x0a000001/", "host 0x0a000001 is 10.0.0.1"},
		{pages.URL + "/redirect?to=http://mixed.test/", "host mixed.test resolves to 10.9.9.9"},
		{pages.URL + "/redirect?to=file:///etc/passwd", `scheme "file" is not fetched`},
		{pages.URL + "/redirect?to=http://[::1]:" + pu.Port() + "/", "::1 is the IPv6 loopback address"},
	}
	if len(tests) < 40 {
		t.Fatalf("the table has %d cases, the issue asks for at least 40", len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			before := len(h.dials())
			r := h.call(map[string]any{"url": tc.url})
			if !r.IsError || !strings.Contains(text(r), tc.why) {
				t.Fatalf("result is_error=%v %q, want a refusal saying %q", r.IsError, text(r), tc.why)
			}
			for _, d := range h.dials()[before:] {
				if d != pu.Host {
					t.Fatalf("dialed %s", d)
				}
			}
		})
	}
	t.Logf("%d addresses and tricks refused", len(tests))
}

// TestAllowListExactly shows that the allow-list lets through exactly
// what it names: an address is not its neighbours, a name is not its
// address, and the port must be allowed too.
func TestAllowListExactly(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("reached " + r.Host))
	})
	one := listenOn(t, "127.0.0.1", ok)
	two := listenOn(t, "127.0.0.2", ok)
	u1, _ := url.Parse(one.URL)
	u2, _ := url.Parse(two.URL)
	p1, p2 := u1.Port(), u2.Port()
	tests := []struct {
		name, allow, ports, url string
		reached                 bool
		why                     string
	}{
		{"default refuses loopback", "", p1, one.URL, false, "127.0.0.1 is a loopback address"},
		{"address named", "127.0.0.1", p1, one.URL, true, ""},
		{"neighbour not named", "127.0.0.1", p1 + "," + p2, two.URL, false, "127.0.0.2 is a loopback address"},
		{"other address named", "127.0.0.2", p1 + "," + p2, two.URL, true, ""},
		{"other address named, first not", "127.0.0.2", p1 + "," + p2, one.URL, false, "127.0.0.1 is a loopback address"},
		{"prefix named", "127.0.0.0/30", p1 + "," + p2, two.URL, true, ""},
		{"port not allowed", "127.0.0.1", "80,443", one.URL, false, "port " + p1 + " is not allowed"},
		{"address named, name not", "127.0.0.1", p1, "http://intranet.test:" + p1 + "/", true, ""}, // resolves into the named address
		{"name named", "intranet.test", p1, "http://intranet.test:" + p1 + "/", true, ""},
		{"name named, address not", "intranet.test", p1, one.URL, false, "127.0.0.1 is a loopback address"},
		{"name named, other name not", "intranet.test", p1, "http://private.test:" + p1 + "/", false, "resolves to 10.0.0.1"},
		{"localhost named", "localhost", p1, "http://localhost:" + p1 + "/", true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, map[string]string{"WEBFETCH_ALLOW": tc.allow, "WEBFETCH_PORTS": tc.ports, "WEBFETCH_ROBOTS": "false"})
			h.allowDial(u1.Host)
			h.allowDial(u2.Host)
			r := h.call(map[string]any{"url": tc.url})
			if tc.reached {
				if r.IsError || !strings.HasPrefix(text(r), "reached ") {
					t.Fatalf("not reached: %q", text(r))
				}
				return
			}
			if !r.IsError || !strings.Contains(text(r), tc.why) {
				t.Fatalf("result %q, want a refusal saying %q", text(r), tc.why)
			}
			if d := h.dials(); len(d) != 0 {
				t.Fatalf("dialed %v before refusing", d)
			}
		})
	}
}
