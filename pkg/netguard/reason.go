package netguard

import (
	"fmt"
	"net/netip"
)

// special names the special-purpose ranges of the IANA IPv4 and IPv6
// special-purpose address registries (the ranges code.dny.dev/ssrf denies)
// plus the IPv6 ranges outside 2000::/3 it denies wholesale, so that a
// refusal can say what an address is. Order matters: the first match wins,
// so narrower prefixes come before the ranges that contain them.
var special = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `a "this network" address (RFC 791)`},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private-use address (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT shared address (RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address (RFC 1122)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (RFC 3927; cloud metadata services live here)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private-use address (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment address (RFC 6890)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address (TEST-NET-1, RFC 5737)"},
	{netip.MustParsePrefix("192.31.196.0/24"), "an AS112 address (RFC 7535)"},
	{netip.MustParsePrefix("192.52.193.0/24"), "an AMT address (RFC 7450)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a 6to4 relay anycast address (RFC 7526)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private-use address (RFC 1918)"},
	{netip.MustParsePrefix("192.175.48.0/24"), "an AS112 address (RFC 7534)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address (RFC 2544)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address (TEST-NET-2, RFC 5737)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address (TEST-NET-3, RFC 5737)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address (RFC 5771)"},
	{netip.MustParsePrefix("255.255.255.255/32"), "the limited broadcast address (RFC 919)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address (RFC 1112)"},

	{netip.MustParsePrefix("::/128"), "the unspecified IPv6 address (RFC 4291)"},
	{netip.MustParsePrefix("::1/128"), "the IPv6 loopback address (RFC 4291)"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible IPv6 address (deprecated, RFC 4291)"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address (RFC 6052)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address (RFC 8215)"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address (RFC 6666)"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address (RFC 4380)"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address (RFC 3849)"},
	{netip.MustParsePrefix("2001::/23"), "an IETF protocol assignment address (RFC 2928)"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address (RFC 3056)"},
	{netip.MustParsePrefix("2620:4f:8000::/48"), "an AS112 address (RFC 7534)"},
	{netip.MustParsePrefix("3fff::/20"), "a documentation address (RFC 9637)"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local address (RFC 4193)"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address (RFC 4291)"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address (deprecated, RFC 3879)"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address (RFC 4291)"},
}

var (
	nat64         = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour     = netip.MustParsePrefix("2002::/16")
	teredo        = netip.MustParsePrefix("2001::/32")
	v4compat      = netip.MustParsePrefix("::/96")
	globalUnicast = netip.MustParsePrefix("2000::/3")
)

// Describe says what kind of address a is, in words for a refusal message:
// "a loopback address (RFC 1122)". For IPv6 forms that embed an IPv4 address
// (NAT64, 6to4, Teredo, IPv4-compatible) it names the embedded address too.
// An ordinary public address is "a public address".
func Describe(a netip.Addr) string {
	a = a.Unmap()
	for _, s := range special {
		if s.prefix.Contains(a) {
			if v4, ok := embeddedIPv4(a); ok {
				return fmt.Sprintf("%s embedding %s, %s", s.what, v4, Describe(v4))
			}
			return s.what
		}
	}
	if a.Is6() && !globalUnicast.Contains(a) {
		return "an address outside the IPv6 global unicast range 2000::/3"
	}
	return "a public address"
}

// embeddedIPv4 returns the IPv4 address an IPv6 transition form carries.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || a.Is4In6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64.Contains(a), v4compat.Contains(a) && !a.IsUnspecified() && !a.IsLoopback():
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	case teredo.Contains(a):
		// The client address is stored inverted in the last 32 bits (RFC 4380).
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}), true
	}
	return netip.Addr{}, false
}
