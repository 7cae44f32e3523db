package netguard

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/brain-tools/suite/pkg/netguard/dnstest"
)

func TestNormalizeHost(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  string
	}{
		{in: "Example.COM.", want: "example.com"},
		{in: "2130706433", want: "127.0.0.1"},
		{in: "0177.0.0.1", want: "127.0.0.1"},
		{in: "0x7f.0.0.1", want: "127.0.0.1"},
		{in: "0x7f000001", want: "127.0.0.1"},
		{in: "127.1", want: "127.0.0.1"},
		{in: "10.1", want: "10.0.0.1"},
		{in: "192.168.257", want: "192.168.1.1"},
		{in: "0", want: "0.0.0.0"},
		{in: "127.0.0.1.", want: "127.0.0.1"},
		{in: "１２７.０.０.１", want: "127.0.0.1"},
		{in: "127。0。0。1", want: "127.0.0.1"},
		{in: "ＬＯＣＡＬＨＯＳＴ", want: "localhost"},
		{in: "bücher.example", want: "xn--bcher-kva.example"},
		{in: "::ffff:127.0.0.1", want: "127.0.0.1"},
		{in: "::FFFF:7f00:1", want: "127.0.0.1"},
		{in: "2606:4700::1111", want: "2606:4700::1111"},
		{in: "fe80::1%eth0", wantErr: "zone"},
		{in: "256.0.0.1", wantErr: "not a valid IPv4"},
		{in: "1.2.3.4.5", wantErr: "not a valid IPv4"},
		{in: "08.0.0.1", wantErr: "not a valid IPv4"},
		{in: "4294967296", wantErr: "not a valid IPv4"},
		{in: "a b.example", wantErr: "character"},
		{in: "", wantErr: "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			h, err := NormalizeHost(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NormalizeHost(%q) = %v, %v; want error containing %q", tc.in, h, err, tc.wantErr)
				}
				return
			}
			if err != nil || h.String() != tc.want {
				t.Fatalf("NormalizeHost(%q) = %q, %v; want %q", tc.in, h.String(), err, tc.want)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	tests := map[string]string{
		"127.0.0.1":                            "loopback",
		"169.254.169.254":                      "link-local",
		"100.64.0.1":                           "carrier-grade NAT",
		"64:ff9b::a00:1":                       "NAT64 address (RFC 6052) embedding 10.0.0.1, a private-use",
		"2002:7f00:1::":                        "6to4 address (RFC 3056) embedding 127.0.0.1, a loopback",
		"2001:0:4136:e378:8000:63bf:f5ff:fffe": "Teredo address (RFC 4380) embedding 10.0.0.1",
		"ff02::1":                              "multicast",
		"8.8.8.8":                              "a public address",
		"255.255.255.255":                      "broadcast",
	}
	for in, want := range tests {
		if got := Describe(netip.MustParseAddr(in)); !strings.Contains(got, want) {
			t.Errorf("Describe(%s) = %q, want it to contain %q", in, got, want)
		}
	}
}

func TestParseAllowList(t *testing.T) {
	p, h, err := ParseAllowList(" 127.0.0.1 , 10.1.0.0/16, ::1, Intranet.Example., fd00::/8 ,")
	if err != nil {
		t.Fatal(err)
	}
	want := "127.0.0.1/32 10.1.0.0/16 ::1/128 fd00::/8"
	var got []string
	for _, x := range p {
		got = append(got, x.String())
	}
	if strings.Join(got, " ") != want || len(h) != 1 || h[0] != "intranet.example" {
		t.Fatalf("got %v %v", got, h)
	}
	for _, bad := range []string{"10.0.0.0/33", "fe80::1%eth0", "bad host!", "::ffff:10.0.0.0/104"} {
		if _, _, err := ParseAllowList(bad); err == nil || !strings.Contains(err.Error(), "allow-list entry 1") {
			t.Errorf("ParseAllowList(%q) = %v, want an error naming entry 1", bad, err)
		}
	}
	if p, h, err := ParseAllowList(""); err != nil || len(p)+len(h) != 0 {
		t.Errorf("empty allow-list = %v %v %v", p, h, err)
	}
}

func TestParsePorts(t *testing.T) {
	if p, err := ParsePorts(""); err != nil || len(p) != 2 || p[0] != 80 || p[1] != 443 {
		t.Fatalf("default ports = %v, %v", p, err)
	}
	if p, err := ParsePorts("80, 8080"); err != nil || len(p) != 2 || p[1] != 8080 {
		t.Fatalf("ports = %v, %v", p, err)
	}
	for _, bad := range []string{"0", "65536", "http", "-1"} {
		if _, err := ParsePorts(bad); err == nil {
			t.Errorf("ParsePorts(%q) accepted", bad)
		}
	}
}

// TestAllowListExactness checks that the allow-list lets through exactly
// what it names, without dialing anything but loopback.
func TestAllowListExactness(t *testing.T) {
	dns, err := dnstest.Start(map[string][]netip.Addr{
		"intranet.test": {netip.MustParseAddr("10.1.2.3")},
		"other.test":    {netip.MustParseAddr("10.1.2.3")},
		"mixed.test":    {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.9.9.9")},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	prefixes, hosts, err := ParseAllowList("10.1.2.0/24,127.0.0.1,intranet.test")
	if err != nil {
		t.Fatal(err)
	}
	g := New(Options{AllowPrefixes: prefixes, AllowHosts: hosts, Resolver: dns.Resolver()})
	ctx := context.Background()
	tests := []struct {
		host string
		ok   bool
	}{
		{"10.1.2.3", true},
		{"10.1.2.255", true},
		{"10.1.3.1", false},
		{"127.0.0.1", true},
		{"127.0.0.2", false},
		{"::ffff:127.0.0.1", true}, // the same address as 127.0.0.1
		{"::1", false},
		{"intranet.test", true},
		{"other.test", true}, // resolves into the allowed prefix
		{"mixed.test", false},
		{"localhost", false}, // a name is not an address: not named
		{"169.254.169.254", false},
	}
	for _, tc := range tests {
		_, err := g.Resolve(ctx, tc.host)
		if tc.ok != (err == nil) {
			t.Errorf("Resolve(%s) = %v, want ok=%v", tc.host, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("Resolve(%s) error %v is not a refusal", tc.host, err)
		}
	}
}

// TestDialChecksTheDialedIP shows the last line of defence: the ssrf
// Control refuses a loopback IP even when called directly.
func TestDialChecksTheDialedIP(t *testing.T) {
	g := New(Options{Ports: []uint16{80}})
	if err := g.Control("tcp4", "127.0.0.1:80", nil); err == nil {
		t.Fatal("Control allowed 127.0.0.1")
	}
	if err := g.Control("tcp4", "8.8.8.8:80", nil); err != nil {
		t.Fatalf("Control refused a public address: %v", err)
	}
	if err := g.Control("tcp4", "8.8.8.8:22", nil); err == nil {
		t.Fatal("Control allowed port 22")
	}
}

// TestDialLoopbackWhenAllowed dials a real loopback server through the
// guard, and shows that a second loopback address stays refused.
func TestDialLoopbackWhenAllowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	var dialed []string
	g := New(Options{
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Ports:         []uint16{uint16(port)},
		BeforeDial: func(_ string, ap netip.AddrPort) error {
			dialed = append(dialed, ap.String())
			return nil
		},
	})
	client := &http.Client{Transport: &http.Transport{DialContext: g.DialContext, Proxy: nil}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_, err = client.Get("http://127.0.0.2:" + u.Port() + "/")
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("127.0.0.2: got %v, want a refusal", err)
	}
	if len(dialed) != 1 || dialed[0] != u.Host {
		t.Fatalf("dialed %v, want only %s", dialed, u.Host)
	}
}

// TestAnyPortAndTransport: AnyPort lets a tool client reach any port of an
// allowed address while the address rules still hold, and Transport dials
// only through the guard (no proxy from the environment).
func TestAnyPortAndTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	tests := []struct {
		name    string
		opts    Options
		url     string
		refused bool
	}{
		{"any port, allowed address", Options{AnyPort: true, AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, srv.URL, false},
		{"any port, loopback not allowed", Options{AnyPort: true}, srv.URL, true},
		{"default ports", Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, srv.URL, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := New(tc.opts)
			tr := g.Transport()
			if tr.Proxy != nil {
				t.Fatal("Transport has a proxy")
			}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Get(tc.url)
			if tc.refused {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("got %v, want a refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		})
	}
}
