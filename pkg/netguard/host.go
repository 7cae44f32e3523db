package netguard

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// maxHostLength is the longest DNS name, RFC 1035 section 2.3.4.
const maxHostLength = 253

// Host is a URL host after normalization: either an IP address (Addr valid)
// or a lower-case ASCII DNS name (Name set, no trailing dot).
type Host struct {
	Name string
	Addr netip.Addr
}

// String is the host in the form to put back into a URL: a dotted IPv4,
// a bracket-less IPv6 or the ASCII name.
func (h Host) String() string {
	if h.Addr.IsValid() {
		return h.Addr.String()
	}
	return h.Name
}

// IsIP reports whether the host is an address literal.
func (h Host) IsIP() bool { return h.Addr.IsValid() }

// NormalizeHost turns a URL host (without port or brackets) into the one
// form the guard checks and dials, so that no spelling of an address slips
// past the checks:
//
//   - IDN hosts are mapped with UTS #46 (golang.org/x/net/idna, the Lookup
//     profile, as net/http does): fullwidth digits, ideographic full stops
//     and the like become ASCII before anything else is decided;
//   - a host whose last label is numeric is an IPv4 address in any of the
//     forms inet_aton and the WHATWG URL standard accept: 1 to 4 parts, each
//     decimal, octal (leading 0) or hex (0x), the last part filling the
//     remaining bytes (2130706433, 0177.0.0.1, 0x7f.1, 127.1);
//   - IPv6 literals lose IPv4 mapping (::ffff:a.b.c.d is a.b.c.d) and must
//     not carry a zone;
//   - names are lower-cased and lose one trailing dot.
//
// The error says what is wrong with the host.
func NormalizeHost(raw string) (Host, error) {
	h := raw
	if h == "" {
		return Host{}, errors.New("empty host")
	}
	if !utf8.ValidString(h) {
		return Host{}, fmt.Errorf("host %q is not valid UTF-8", raw)
	}
	if strings.Contains(h, ":") {
		if strings.Contains(h, "%") {
			return Host{}, fmt.Errorf("host %q: IPv6 zone identifiers are refused", raw)
		}
		a, err := netip.ParseAddr(h)
		if err != nil {
			return Host{}, fmt.Errorf("host %q is not a valid IPv6 address", raw)
		}
		return Host{Addr: a.Unmap()}, nil
	}
	if !isASCII(h) {
		a, err := idna.Lookup.ToASCII(h)
		if err != nil {
			return Host{}, fmt.Errorf("host %q is not a valid internationalized domain name: %w", raw, err)
		}
		h = a
	}
	h = strings.ToLower(h)
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return Host{}, fmt.Errorf("host %q is empty", raw)
	}
	if len(h) > maxHostLength {
		return Host{}, fmt.Errorf("host is longer than %d characters", maxHostLength)
	}
	labels := strings.Split(h, ".")
	if looksNumeric(labels[len(labels)-1]) {
		a, err := parseIPv4(labels)
		if err != nil {
			return Host{}, fmt.Errorf("host %q ends in a number but is not a valid IPv4 address: %w", raw, err)
		}
		return Host{Addr: a}, nil
	}
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return Host{}, fmt.Errorf("host %q: %w", raw, err)
		}
	}
	return Host{Name: h}, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// checkLabel accepts LDH labels plus the underscore that real names carry
// (_dmarc, service records), up to 63 characters (RFC 1035).
func checkLabel(l string) error {
	if l == "" {
		return errors.New("empty label")
	}
	if len(l) > 63 {
		return fmt.Errorf("label %q is longer than 63 characters", l)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return fmt.Errorf("label %q has the character %q", l, c)
		}
	}
	return nil
}

// looksNumeric is the WHATWG "ends in a number" test for one label: all
// decimal digits, or 0x followed by hex digits.
func looksNumeric(l string) bool {
	if l == "" {
		return false
	}
	if allIn(l, "0123456789") {
		return true
	}
	if len(l) >= 2 && (l[:2] == "0x") {
		return allIn(l[2:], "0123456789abcdef")
	}
	return false
}

func allIn(s, set string) bool {
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(set, rune(s[i])) {
			return false
		}
	}
	return true
}

// parseIPv4 reads 1 to 4 numeric parts as inet_aton does.
func parseIPv4(parts []string) (netip.Addr, error) {
	if len(parts) > 4 {
		return netip.Addr{}, fmt.Errorf("%d parts", len(parts))
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, err := parseIPv4Part(p)
		if err != nil {
			return netip.Addr{}, err
		}
		nums[i] = n
	}
	for _, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, fmt.Errorf("part %d is larger than 255", n)
		}
	}
	last := nums[len(nums)-1]
	if rest := 5 - len(nums); last >= 1<<(8*rest) {
		return netip.Addr{}, fmt.Errorf("last part %d is larger than %d bytes", last, rest)
	}
	var v uint64
	for _, n := range nums[:len(nums)-1] {
		v = v<<8 | n
	}
	v = v<<(8*(5-len(nums))) | last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}

func parseIPv4Part(p string) (uint64, error) {
	base := 10
	digits := p
	switch {
	case p == "":
		return 0, errors.New("empty part")
	case strings.HasPrefix(p, "0x"):
		base, digits = 16, p[2:]
		if digits == "" {
			return 0, nil
		}
	case len(p) > 1 && p[0] == '0':
		base, digits = 8, p[1:]
	}
	n, err := strconv.ParseUint(digits, base, 64)
	if err != nil || n > 0xffffffff {
		return 0, fmt.Errorf("part %q is not a number below 2^32", p)
	}
	return n, nil
}
