// Package fetch gets one web resource safely: every hop goes through the
// SSRF guard (the URL checked, the dialed address checked), redirects are
// followed by hand so each Location is judged again and loops are caught,
// the decoded body is capped while it is read (a gzip bomb is refused
// after the cap, never inflated whole), the whole fetch and each hop have a
// time limit, robots.txt is honoured through the same guard, and recent
// answers come from a small TTL cache.
package fetch

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/brain-tools/suite/pkg/netguard"
	"github.com/brain-tools/suite/pkg/tracing"
)

// Defaults for Options fields left zero.
const (
	DefaultUserAgent          = "brain-webfetch/1.0 (+https://github.com/brain-tools/suite)"
	DefaultMaxBodyBytes       = 10 << 20
	DefaultTimeout            = 30 * time.Second
	DefaultHopTimeout         = 15 * time.Second
	DefaultMaxRedirects       = 5
	DefaultRobotsTimeout      = 5 * time.Second
	DefaultCacheTTL           = 5 * time.Minute
	DefaultCacheEntries       = 64
	DefaultCacheMaxEntryBytes = 2 << 20
	// robotsMaxBytes is the part of a robots.txt that is read: RFC 9309
	// section 2.5 asks parsers to handle at least 500 KiB.
	robotsMaxBytes = 500 << 10
)

// Options configures a Client. Zero fields take the defaults above;
// CacheTTL < 0 turns the cache off.
type Options struct {
	Guard     *netguard.Guard
	UserAgent string
	// MaxBodyBytes caps the body after content decoding; a larger body is
	// refused with a *TooLargeError.
	MaxBodyBytes int64
	// Timeout limits the whole fetch (robots.txt, every hop, the body).
	Timeout time.Duration
	// HopTimeout limits one request: connect, headers and, on the last
	// hop, the body.
	HopTimeout time.Duration
	// MaxRedirects is how many redirects are followed.
	MaxRedirects int
	// Robots makes the client honour robots.txt.
	Robots bool
	// RobotsTimeout limits the robots.txt fetch; no answer in time is
	// treated as "disallow all" (RFC 9309 section 2.3.1.4, unreachable).
	RobotsTimeout time.Duration
	// CacheTTL is how long a 200 answer is served from memory.
	CacheTTL time.Duration
	// CacheEntries caps the cache's entries.
	CacheEntries int
	// CacheMaxEntryBytes is the largest body the cache keeps.
	CacheMaxEntryBytes int64
	Logger             *slog.Logger
}

// Response is a fetched resource.
type Response struct {
	// URL is the URL asked for, in normal form; FinalURL the one that
	// answered after redirects.
	URL, FinalURL string
	// Hops lists every URL requested, in order (URL first, FinalURL last).
	Hops   []string
	Status int
	Header http.Header
	// Body is the decoded body (content coding removed, charset untouched).
	Body []byte
	// Cached reports that the answer came from the cache.
	Cached bool
	// Fetched is when the body was read; a cached answer keeps the time of
	// the fetch it came from, so (URL, Fetched) names one body.
	Fetched time.Time
}

// TooLargeError is a body over the cap, declared or read.
type TooLargeError struct {
	Limit int64
	// Declared is set when Content-Length announced the size up front.
	Declared int64
}

func (e *TooLargeError) Error() string {
	if e.Declared > 0 {
		return fmt.Sprintf("body of %d bytes is larger than the %d-byte limit; refused before reading", e.Declared, e.Limit)
	}
	return fmt.Sprintf("body is larger than the %d-byte limit after decoding; refused, read no further", e.Limit)
}

// Errors callers may test with errors.Is.
var (
	ErrRedirectLoop     = errors.New("redirect loop")
	ErrTooManyRedirects = errors.New("too many redirects")
	ErrRobots           = errors.New("disallowed by robots.txt")
	ErrTimeout          = errors.New("time limit exceeded")
)

// Client fetches URLs. It is safe for concurrent use.
type Client struct {
	o      Options
	http   *http.Client
	cache  *expirable.LRU[string, *Response]
	robots *expirable.LRU[string, robotsEntry]
	agent  string
}

// New builds a Client whose transport dials only through o.Guard, with
// proxies off (a proxy would dial for us, past the guard).
func New(o Options) *Client {
	if o.Guard == nil {
		o.Guard = netguard.New(netguard.Options{})
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.HopTimeout <= 0 {
		o.HopTimeout = DefaultHopTimeout
	}
	if o.MaxRedirects < 0 {
		o.MaxRedirects = 0
	} else if o.MaxRedirects == 0 {
		o.MaxRedirects = DefaultMaxRedirects
	}
	if o.RobotsTimeout <= 0 {
		o.RobotsTimeout = DefaultRobotsTimeout
	}
	if o.CacheEntries <= 0 {
		o.CacheEntries = DefaultCacheEntries
	}
	if o.CacheMaxEntryBytes <= 0 {
		o.CacheMaxEntryBytes = DefaultCacheMaxEntryBytes
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = DefaultCacheTTL
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	tr := o.Guard.Transport()
	tr.MaxIdleConns = 32
	tr.MaxIdleConnsPerHost = 4
	tr.IdleConnTimeout = 60 * time.Second
	tr.MaxResponseHeaderBytes = 1 << 20
	c := &Client{
		o: o,
		http: &http.Client{
			// A client span per request ("fetch GET"), every redirect hop
			// its own; the guard still dials each one.
			Transport: tracing.Transport(tr, "fetch"),
			// Redirects are followed by hand so every hop is checked.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		agent: productToken(o.UserAgent),
	}
	if o.CacheTTL > 0 {
		c.cache = expirable.NewLRU[string, *Response](o.CacheEntries, nil, o.CacheTTL)
		c.robots = expirable.NewLRU[string, robotsEntry](o.CacheEntries, nil, o.CacheTTL)
	}
	return c
}

// Close drops idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Get fetches rawURL: checks it, honours robots.txt when configured,
// follows up to MaxRedirects redirects (each hop checked again), and reads
// the body under the cap. A status of 4xx or 5xx is not an error here: the
// Response carries it. Errors name what went wrong: a refusal
// (netguard.ErrRefused), a host that cannot be reached
// (*netguard.UnreachableError, also when found while asking for robots.txt),
// ErrRobots, ErrRedirectLoop, ErrTooManyRedirects, a *TooLargeError,
// ErrTimeout, or another network failure.
func (c *Client) Get(ctx context.Context, rawURL string) (*Response, error) {
	u, err := c.normalize(rawURL)
	if err != nil {
		return nil, err
	}
	key := u.String()
	if c.cache != nil {
		if r, ok := c.cache.Get(key); ok {
			cp := *r
			cp.Cached = true
			return &cp, nil
		}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, c.o.Timeout, fmt.Errorf("%w: the whole fetch took longer than %s", ErrTimeout, c.o.Timeout))
	defer cancel()

	resp, err := c.follow(ctx, u, true)
	if err != nil {
		return nil, err
	}
	if c.cache != nil && Storable(resp) && int64(len(resp.Body)) <= c.o.CacheMaxEntryBytes {
		c.cache.Add(key, resp)
	}
	return resp, nil
}

// Key returns rawURL as Get asks for it (fragment dropped, host in the
// guard's normal form), the key of its cached answers; its errors are
// Get's for a URL the guard refuses without the network.
func (c *Client) Key(rawURL string) (string, error) {
	u, err := c.normalize(rawURL)
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

func (c *Client) normalize(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse URL: %w", err)
	}
	if !u.IsAbs() {
		return nil, fmt.Errorf("URL %q is not absolute (it needs http:// or https://)", rawURL)
	}
	u.Fragment, u.RawFragment = "", ""
	return c.o.Guard.CheckURL(u)
}

// Storable reports whether a response may be kept for reuse: a 200
// without Cache-Control: no-store.
func Storable(r *Response) bool {
	return r.Status == http.StatusOK && !strings.Contains(strings.ToLower(r.Header.Get("Cache-Control")), "no-store")
}

// follow runs the hops. With robots set, each hop's origin is asked first.
func (c *Client) follow(ctx context.Context, u *url.URL, robots bool) (*Response, error) {
	start := u.String()
	hops := []string{start}
	seen := map[string]bool{start: true}
	for redirects := 0; ; redirects++ {
		if robots && c.o.Robots {
			if err := c.allowed(ctx, u); err != nil {
				return nil, err
			}
		}
		hopCtx, cancel := context.WithTimeoutCause(ctx, c.o.HopTimeout, fmt.Errorf("%w: %s did not answer within %s", ErrTimeout, u.Redacted(), c.o.HopTimeout))
		resp, err := c.hop(hopCtx, u)
		if err != nil {
			cancel()
			return nil, &hopError{url: u, err: err}
		}
		loc := resp.Header.Get("Location")
		if !isRedirect(resp.StatusCode) || loc == "" {
			body, err := c.readBody(hopCtx, resp, c.o.MaxBodyBytes)
			cancel()
			if err != nil {
				return nil, err
			}
			return &Response{URL: start, FinalURL: u.String(), Hops: hops, Status: resp.StatusCode, Header: resp.Header, Body: body, Fetched: time.Now()}, nil
		}
		resp.Body.Close()
		cancel()
		next, err := u.Parse(loc)
		if err != nil {
			return nil, fmt.Errorf("redirect from %s: bad Location %q: %w", u.Redacted(), loc, err)
		}
		next.Fragment, next.RawFragment = "", ""
		if next, err = c.o.Guard.CheckURL(next); err != nil {
			return nil, fmt.Errorf("redirect from %s: %w", u.Redacted(), err)
		}
		s := next.String()
		hops = append(hops, s)
		if seen[s] {
			return nil, fmt.Errorf("%w: %s", ErrRedirectLoop, strings.Join(hops, " → "))
		}
		if redirects >= c.o.MaxRedirects {
			return nil, fmt.Errorf("%w: more than %d (%s)", ErrTooManyRedirects, c.o.MaxRedirects, strings.Join(hops, " → "))
		}
		seen[s] = true
		u = next
	}
}

// hopError is a request that got no answer, with the URL it was sent to,
// so that robots.txt can tell its own origin failing from a redirect
// target failing. It reads as the error it wraps.
type hopError struct {
	url *url.URL
	err error
}

func (e *hopError) Error() string { return e.err.Error() }
func (e *hopError) Unwrap() error { return e.err }

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// hop sends one GET.
func (c *Client) hop(ctx context.Context, u *url.URL) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", u.Redacted(), err)
	}
	req.Header.Set("User-Agent", c.o.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/pdf,application/json,text/plain;q=0.9,*/*;q=0.5")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.explain(ctx, fmt.Sprintf("get %s", u.Redacted()), err)
	}
	return resp, nil
}

// explain turns an error into one that says which limit ran out, and
// keeps guard refusals recognisable.
func (c *Client) explain(ctx context.Context, op string, err error) error {
	var refused *netguard.RefusedError
	if errors.As(err, &refused) {
		return fmt.Errorf("%s: %w", op, refused)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, context.Cause(ctx))
	}
	// net/http repeats the method and URL the caller already named.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%s: %w", op, err)
}

// readBody reads at most limit decoded bytes and refuses more.
func (c *Client) readBody(ctx context.Context, resp *http.Response, limit int64) ([]byte, error) {
	defer resp.Body.Close()
	var r io.Reader = resp.Body
	decoded := resp.Uncompressed
	switch ce := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); ce {
	case "", "identity":
	case "gzip", "x-gzip":
		// The transport decodes "gzip" it asked for and removes the header;
		// what is left is gzip it did not recognise: "x-gzip", which RFC
		// 9110 section 8.4.1.3 says to treat as gzip, or gzip sent unasked.
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("read body: %s content encoding: %w", ce, err)
		}
		defer zr.Close()
		r, decoded = zr, true
	default:
		return nil, fmt.Errorf("read body: unsupported content encoding %q", ce)
	}
	if !decoded && resp.ContentLength > limit {
		return nil, &TooLargeError{Limit: limit, Declared: resp.ContentLength}
	}
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, c.explain(ctx, "read body", err)
	}
	if int64(len(body)) > limit {
		return nil, &TooLargeError{Limit: limit}
	}
	return body, nil
}
