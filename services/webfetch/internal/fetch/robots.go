package fetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/temoto/robotstxt"

	"github.com/brain-tools/suite/pkg/netguard"
)

// robotsEntry is one origin's robots.txt as parsed, or why it counts as
// "disallow all".
type robotsEntry struct {
	data   *robotstxt.RobotsData
	denied string // non-empty: everything is disallowed, for this reason
	source string
	// hostErr, when set, is no verdict at all: the origin itself could not
	// be reached or was refused, so the page cannot be fetched either and
	// the fetch fails with this error.
	hostErr error
	// transient marks an answer that says nothing lasting about the site
	// (no answer in time, unreachable): it is not cached.
	transient bool
}

// allowed asks u's origin's robots.txt whether our agent may fetch u. The
// rules of RFC 9309: 2xx is parsed; 4xx means no rules; 5xx, a network
// failure or no answer within RobotsTimeout mean "disallow all"; redirects
// are followed (five at most, each through the guard); a refused or
// unreachable redirect target counts as unreachable robots.txt.
//
// When the origin itself cannot be reached (its name does not resolve,
// the connection is refused, the guard refuses its addresses) the error
// is that failure (*netguard.UnreachableError or a guard refusal), not
// ErrRobots: the page would fail the same way, and blaming robots.txt
// would hide why.
func (c *Client) allowed(ctx context.Context, u *url.URL) error {
	origin := u.Scheme + "://" + u.Host
	var e robotsEntry
	var ok bool
	if c.robots != nil {
		e, ok = c.robots.Get(origin)
	}
	if !ok {
		e = c.loadRobots(ctx, origin)
		if ctx.Err() != nil && e.data == nil {
			// The whole fetch ran out of time: not a fact about the site.
			return fmt.Errorf("robots.txt of %s: %w", origin, context.Cause(ctx))
		}
		if c.robots != nil && !e.transient {
			c.robots.Add(origin, e)
		}
	}
	if e.hostErr != nil {
		return e.hostErr
	}
	if e.denied != "" {
		return fmt.Errorf("%w: %s; treated as disallow all (RFC 9309)", ErrRobots, e.denied)
	}
	if !e.data.TestAgent(u.RequestURI(), c.agent) {
		return fmt.Errorf("%w: %s disallows %s for user agent %q", ErrRobots, e.source, u.RequestURI(), c.agent)
	}
	return nil
}

func (c *Client) loadRobots(ctx context.Context, origin string) robotsEntry {
	src := origin + "/robots.txt"
	ru, _ := url.Parse(src)
	ctx, cancel := context.WithTimeoutCause(ctx, c.o.RobotsTimeout, fmt.Errorf("%w: no answer within %s", ErrTimeout, c.o.RobotsTimeout))
	defer cancel()
	sub := *c
	sub.o.MaxBodyBytes = robotsMaxBytes
	sub.o.HopTimeout = c.o.RobotsTimeout
	sub.o.MaxRedirects = 5
	resp, err := sub.follow(ctx, ru, false)
	if err != nil {
		var tl *TooLargeError
		switch {
		case errors.As(err, &tl):
			// RFC 9309 2.5: parse at least the first 500 KiB; we refuse the
			// rest instead, which is stricter.
			return robotsEntry{denied: src + " is larger than 500 KiB", source: src}
		case errors.Is(err, ErrTooManyRedirects), errors.Is(err, ErrRedirectLoop):
			// RFC 9309 2.3.1.2: more than five redirects may be taken as
			// "unavailable", which means no rules.
			return robotsEntry{data: allowAll, source: src}
		case errors.Is(err, ErrTimeout):
			return robotsEntry{denied: src + " did not answer within " + c.o.RobotsTimeout.String(), source: src, transient: true}
		case originFailed(err, ru):
			return robotsEntry{hostErr: err, source: src, transient: true}
		}
		return robotsEntry{denied: src + " is unreachable: " + err.Error(), source: src, transient: true}
	}
	switch {
	case resp.Status >= 500:
		return robotsEntry{denied: fmt.Sprintf("%s answered %d %s", src, resp.Status, http.StatusText(resp.Status)), source: src}
	case resp.Status >= 400:
		return robotsEntry{data: allowAll, source: src}
	case resp.Status < 200 || resp.Status >= 300:
		return robotsEntry{denied: fmt.Sprintf("%s answered %d", src, resp.Status), source: src}
	}
	data, err := robotstxt.FromBytes(resp.Body)
	if err != nil {
		return robotsEntry{denied: fmt.Sprintf("%s does not parse: %v", src, err), source: src}
	}
	return robotsEntry{data: data, source: src}
}

// originFailed reports whether err is ru's own origin (not a redirect
// target) being unreachable or refused by the guard at connect time.
func originFailed(err error, ru *url.URL) bool {
	var he *hopError
	if !errors.As(err, &he) || he.url.Scheme != ru.Scheme || he.url.Host != ru.Host {
		return false
	}
	var ue *netguard.UnreachableError
	return errors.As(err, &ue) || errors.Is(err, netguard.ErrRefused)
}

var allowAll, _ = robotstxt.FromStatusAndBytes(http.StatusNotFound, nil)

// productToken is the name robots.txt groups match: the user agent's first
// product ("brain-webfetch" of "brain-webfetch/1.0 (+...)").
func productToken(ua string) string {
	tok, _, _ := strings.Cut(strings.TrimSpace(ua), " ")
	tok, _, _ = strings.Cut(tok, "/")
	if tok == "" {
		return "*"
	}
	return strings.ToLower(tok)
}
