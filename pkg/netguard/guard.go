// Package netguard keeps outgoing connections away from internal networks
// (SSRF): it checks URLs (scheme, port, every spelling of a host), resolves
// names itself and refuses a name when any of its addresses is not public,
// and dials only the addresses it checked, with code.dny.dev/ssrf as the
// net.Dialer Control so that the IP actually dialed is checked once more.
//
// Only an operator allow-list (CIDRs and host names, empty by default)
// reaches addresses the IANA special-purpose registries set aside:
// loopback, private-use, link-local, CGNAT, multicast, reserved,
// documentation and the rest.
//
// One Guard serves every kind of client the same way:
//
//   - a fetcher checks each URL (CheckURL, again for every redirect it
//     follows) and sends it over Transport(), whose every dial is guarded;
//   - a client of tool services a tenant registers (custom tools) checks
//     the tool's URL once with CheckURL and calls it over Transport(),
//     with AnyPort when tool services may listen on any port;
//   - a proxy (the browser service's) checks absolute-form request URLs
//     with CheckURL and dials CONNECT targets with DialContext.
//
// Proxies are off in Transport(): a proxy would dial past the guard.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// ErrRefused is wrapped by every refusal, so callers can tell a refused
// destination from a network failure.
var ErrRefused = errors.New("refused")

// RefusedError is a destination the guard will not fetch or dial. Reason
// says why in words ("127.0.0.1 is a loopback address (RFC 1122)").
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string { return "refused: " + e.Reason }

// Unwrap makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// UnreachableError is a destination the guard allowed but could not
// reach: its name did not resolve (or resolved to nothing), or no address
// accepted the connection (refused, unreachable network, connect timeout).
// It says nothing about the page or its robots.txt: any request to the
// host fails the same way.
type UnreachableError struct {
	// Address is the host:port asked for.
	Address string
	// Err is the resolver's or the dialer's error.
	Err error
}

func (e *UnreachableError) Error() string {
	return "host " + e.Address + " is unreachable: " + e.Err.Error()
}

// Unwrap returns the resolver's or dialer's error.
func (e *UnreachableError) Unwrap() error { return e.Err }

func refuse(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// DefaultPorts are the ports fetched when the operator names none.
var DefaultPorts = []uint16{80, 443}

// Resolver looks up a host's addresses. *net.Resolver implements it; tests
// give a net.Resolver whose Dial reaches a DNS server they run on loopback.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configures a Guard. The zero value refuses every non-public
// address and allows ports 80 and 443.
type Options struct {
	// Allow is the operator allow-list (see ParseAllowList): addresses in
	// AllowPrefixes and names in AllowHosts are fetched even when they are
	// not public. Empty by default.
	AllowPrefixes []netip.Prefix
	AllowHosts    []string
	// Ports are the destination ports allowed; empty means DefaultPorts.
	// They apply to allow-listed destinations too.
	Ports []uint16
	// AnyPort allows every destination port (Ports is then ignored): for
	// a client whose destinations name their own ports, such as tool
	// services on 8081. The address rules still apply.
	AnyPort bool
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
	// DialTimeout caps one TCP connect; zero means 10 s.
	DialTimeout time.Duration
	// BeforeDial, when set, is called with each checked address right
	// before it is dialed; an error vetoes the dial. For logging and for
	// tests that prove a refusal happened before any packet was sent.
	BeforeDial func(network string, addr netip.AddrPort) error
}

// Guard checks destinations and dials them. It is safe for concurrent use.
type Guard struct {
	anyPort    bool
	prefixes   []netip.Prefix
	hosts      map[string]bool
	ports      []uint16
	resolver   Resolver
	beforeDial func(string, netip.AddrPort) error
	strict     net.Dialer // Control: public addresses + allow-listed prefixes
	trusted    net.Dialer // Control: any address; for allow-listed host names
	strictSSRF *ssrf.Guardian
}

// New builds a Guard.
func New(o Options) *Guard {
	g := &Guard{
		anyPort:    o.AnyPort,
		prefixes:   slices.Clone(o.AllowPrefixes),
		hosts:      make(map[string]bool, len(o.AllowHosts)),
		ports:      slices.Clone(o.Ports),
		resolver:   o.Resolver,
		beforeDial: o.BeforeDial,
	}
	if len(g.ports) == 0 {
		g.ports = slices.Clone(DefaultPorts)
	}
	for _, h := range o.AllowHosts {
		g.hosts[h] = true
	}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	var v4, v6 []netip.Prefix
	for _, p := range g.prefixes {
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	portOpt := ssrf.WithPorts(g.ports...)
	if g.anyPort {
		portOpt = ssrf.WithAnyPort()
	}
	g.strictSSRF = ssrf.New(portOpt, ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...))
	open := ssrf.New(portOpt,
		ssrf.WithAllowedV4Prefixes(netip.MustParsePrefix("0.0.0.0/0")),
		ssrf.WithAllowedV6Prefixes(netip.MustParsePrefix("::/0")))
	timeout := o.DialTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	g.strict = net.Dialer{Timeout: timeout, Control: g.strictSSRF.Safe}
	g.trusted = net.Dialer{Timeout: timeout, Control: open.Safe}
	return g
}

// Ports returns the allowed destination ports (meaningless with AnyPort).
func (g *Guard) Ports() []uint16 { return slices.Clone(g.ports) }

// Transport returns a new *http.Transport whose every connection is dialed
// by DialContext, with proxies off and net/http's default pool and
// handshake settings; the caller may tune those, but must leave Proxy,
// DialContext and DialTLSContext alone. TLS runs over the guarded
// connection, so the certificate is checked against the URL's host.
func (g *Guard) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           g.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}
}

// CheckAddr reports whether a may be dialed: it is public, or the
// allow-list names a prefix holding it. IPv4-mapped IPv6 addresses are
// judged as the IPv4 address they carry.
func (g *Guard) CheckAddr(a netip.Addr) error {
	a = a.Unmap()
	for _, p := range g.prefixes {
		if p.Contains(a) {
			return nil
		}
	}
	if err := g.strictSSRF.SafeAddr(a); err != nil {
		return refuse("%s is %s", a, Describe(a))
	}
	return nil
}

// CheckPort reports whether port is allowed.
func (g *Guard) CheckPort(port uint16) error {
	if g.anyPort || slices.Contains(g.ports, port) {
		return nil
	}
	return refuse("port %d is not allowed (allowed: %s)", port, joinPorts(g.ports))
}

func joinPorts(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ", ")
}

// CheckURL checks what can be checked without the network and returns a
// copy of u whose host is in normal form (see NormalizeHost), so that the
// host the transport dials is the host that was checked:
//
//   - the scheme is http or https;
//   - there are no credentials;
//   - the port (explicit or the scheme's) is allowed;
//   - an address literal, however spelled, is public or allow-listed;
//   - localhost and *.localhost (RFC 6761) are refused unless allow-listed.
//
// Names are resolved and checked when dialed (DialContext).
func (g *Guard) CheckURL(u *url.URL) (*url.URL, error) {
	switch u.Scheme {
	case "http", "https":
	case "":
		return nil, refuse("URL %q has no scheme (only http and https are fetched)", u.String())
	default:
		return nil, refuse("scheme %q is not fetched (only http and https)", u.Scheme)
	}
	if u.User != nil {
		return nil, refuse("URLs with credentials are not fetched")
	}
	if u.Host == "" {
		return nil, refuse("URL %q has no host", u.String())
	}
	port, err := urlPort(u)
	if err != nil {
		return nil, err
	}
	if err := g.CheckPort(port); err != nil {
		return nil, err
	}
	h, err := NormalizeHost(u.Hostname())
	if err != nil {
		return nil, refuse("%v", err)
	}
	if err := g.checkHost(u.Hostname(), h); err != nil {
		return nil, err
	}
	out := *u
	hs := h.String()
	if h.Addr.Is6() {
		hs = "[" + hs + "]"
	}
	if u.Port() != "" {
		hs += ":" + strconv.Itoa(int(port))
	}
	out.Host = hs
	return &out, nil
}

// checkHost applies the address and localhost rules to a normalized host.
// raw is the host as written, for the message.
func (g *Guard) checkHost(raw string, h Host) error {
	if h.IsIP() {
		if err := g.CheckAddr(h.Addr); err != nil {
			if raw != h.Addr.String() {
				return refuse("host %s is %s, %s", raw, h.Addr, Describe(h.Addr))
			}
			return err
		}
		return nil
	}
	if g.hosts[h.Name] {
		return nil
	}
	if h.Name == "localhost" || strings.HasSuffix(h.Name, ".localhost") {
		return refuse("host %s is a loopback name (RFC 6761)", raw)
	}
	return nil
}

func urlPort(u *url.URL) (uint16, error) {
	p := u.Port()
	if p == "" {
		if u.Scheme == "https" {
			return 443, nil
		}
		return 80, nil
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return 0, refuse("port %q is not a valid port", p)
	}
	return uint16(n), nil
}

// Resolve returns the addresses to dial for host, all of them checked: an
// address literal must pass CheckAddr; a name allow-listed by the operator
// may resolve to anything; any other name is refused when even one of its
// addresses is not public, so that a DNS answer mixing public and private
// addresses (a rebinding trick) reaches nothing.
func (g *Guard) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	h, err := NormalizeHost(host)
	if err != nil {
		return nil, refuse("%v", err)
	}
	if err := g.checkHost(host, h); err != nil {
		return nil, err
	}
	if h.IsIP() {
		return []netip.Addr{h.Addr}, nil
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", h.Name)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", h.Name, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", h.Name)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if !g.hosts[h.Name] {
			if err := g.CheckAddr(a); err != nil {
				return nil, refuse("host %s resolves to %s, %s", h.Name, a, Describe(a))
			}
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// DialContext dials address (host:port) for an http.Transport: the port
// must be allowed, the host resolves through Resolve, and each checked
// address is dialed in turn with the ssrf Control checking the IP actually
// dialed. It never dials a name, so the resolver cannot be asked twice and
// answer differently. Errors: a *RefusedError (port, host or address
// refused), a *UnreachableError (no DNS answer, no address connected;
// ctx's own error is inside it when ctx ended first), or BeforeDial's.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, refuse("address %q: %v", address, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, refuse("address %q has no valid port", address)
	}
	if err := g.CheckPort(uint16(port)); err != nil {
		return nil, err
	}
	addrs, err := g.Resolve(ctx, host)
	if err != nil {
		if errors.Is(err, ErrRefused) {
			return nil, err
		}
		return nil, &UnreachableError{Address: address, Err: err}
	}
	d := &g.strict
	if h, _ := NormalizeHost(host); h.Name != "" && g.hosts[h.Name] {
		d = &g.trusted
	}
	var errs []error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, uint16(port))
		if g.beforeDial != nil {
			if err := g.beforeDial(network, ap); err != nil {
				return nil, err
			}
		}
		conn, err := d.DialContext(ctx, network, ap.String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, &UnreachableError{Address: address, Err: errors.Join(errs...)}
}

// Control is the ssrf check DialContext installs as net.Dialer.Control for
// names that are not allow-listed, exposed for tests of the last line of
// defence.
func (g *Guard) Control(network, address string, c syscall.RawConn) error {
	return g.strictSSRF.Safe(network, address, c)
}
