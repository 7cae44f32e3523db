package netguard

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ParseAllowList reads the operator allow-list: comma-separated entries,
// each a CIDR prefix ("10.1.0.0/16", "fd00::/8"), a single address
// ("127.0.0.1", "::1") or a host name ("intranet.example", exact match,
// no wildcards). An empty string is an empty list: nothing internal is
// reachable. The error names the entry at fault.
func ParseAllowList(s string) (prefixes []netip.Prefix, hosts []string, err error) {
	for i, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if strings.Contains(e, "/") {
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, nil, fmt.Errorf("allow-list entry %d %q: not a CIDR prefix: %w", i+1, e, err)
			}
			if p.Addr().Is4In6() {
				return nil, nil, fmt.Errorf("allow-list entry %d %q: write IPv4 prefixes in IPv4 form", i+1, e)
			}
			prefixes = append(prefixes, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			if a.Zone() != "" {
				return nil, nil, fmt.Errorf("allow-list entry %d %q: zones are not allowed", i+1, e)
			}
			a = a.Unmap()
			prefixes = append(prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		h, err := NormalizeHost(e)
		if err != nil {
			return nil, nil, fmt.Errorf("allow-list entry %d %q: %w", i+1, e, err)
		}
		if h.IsIP() {
			// A numeric spelling such as 2130706433: take the address it means.
			prefixes = append(prefixes, netip.PrefixFrom(h.Addr, h.Addr.BitLen()))
			continue
		}
		hosts = append(hosts, h.Name)
	}
	return prefixes, hosts, nil
}

// ParsePorts reads a comma-separated list of ports (1-65535). An empty
// string means DefaultPorts (80, 443).
func ParsePorts(s string) ([]uint16, error) {
	var ports []uint16
	for e := range strings.SplitSeq(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		n, err := strconv.ParseUint(e, 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("port %q: must be a number from 1 to 65535", e)
		}
		ports = append(ports, uint16(n))
	}
	if len(ports) == 0 {
		return append([]uint16(nil), DefaultPorts...), nil
	}
	return ports, nil
}
