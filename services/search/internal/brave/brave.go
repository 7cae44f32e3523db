// Package brave is a client of the Brave Search web search API
// (GET /res/v1/web/search with an X-Subscription-Token header).
//
// It throttles itself from Brave's rate-limit headers: X-RateLimit-Limit,
// -Remaining and -Reset carry one comma-separated value per window
// ("1, 15000": per second, per month; Reset in seconds). The per-second
// limit sets the request rate, an exhausted window holds requests back
// until it resets, and a 429 is retried once when its wait is short.
package brave

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/brain-tools/suite/services/search/internal/search"
)

// DefaultBaseURL is Brave's API base; the client appends /web/search.
const DefaultBaseURL = "https://api.search.brave.com/res/v1"

// Config is the Brave client's environment.
type Config struct {
	// APIKey is the subscription token (env BRAVE_API_KEY); empty means
	// Brave is not configured.
	APIKey string `env:"BRAVE_API_KEY"`
	// BaseURL is the API base (env BRAVE_BASE_URL), for tests and proxies.
	BaseURL string `env:"BRAVE_BASE_URL" envDefault:"https://api.search.brave.com/res/v1"`
	// RatePerSecond is the request rate until Brave's headers say otherwise
	// (env BRAVE_RATE_PER_SECOND; the free plan's 1).
	RatePerSecond float64 `env:"BRAVE_RATE_PER_SECOND" envDefault:"1"`
	// MaxWait is how long a call may wait for a rate-limit window to reopen
	// before it answers "rate limited" instead (env BRAVE_MAX_WAIT).
	MaxWait time.Duration `env:"BRAVE_MAX_WAIT" envDefault:"5s"`
	// Timeout bounds one request (env BRAVE_TIMEOUT).
	Timeout time.Duration `env:"BRAVE_TIMEOUT" envDefault:"20s"`
}

// Client searches with Brave. It is safe for concurrent use.
type Client struct {
	timeout  time.Duration // the whole request, for error messages
	key      string
	endpoint string
	http     *http.Client
	throttle *search.Throttle
}

// New returns a client, or nil when cfg has no API key. httpClient may be
// nil (a client with cfg.Timeout).
func New(cfg Config, httpClient *http.Client) (*Client, error) {
	if cfg.APIKey == "" {
		return nil, nil
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("BRAVE_BASE_URL %q: want an http(s) URL", cfg.BaseURL)
	}
	if cfg.Timeout <= 0 || cfg.MaxWait < 0 {
		return nil, fmt.Errorf("BRAVE_TIMEOUT must be positive and BRAVE_MAX_WAIT not negative")
	}
	if httpClient == nil {
		httpClient = search.NewHTTPClient("brave", cfg.Timeout)
	}
	return &Client{
		timeout:  cfg.Timeout,
		key:      cfg.APIKey,
		endpoint: strings.TrimRight(cfg.BaseURL, "/") + "/web/search",
		http:     httpClient,
		throttle: search.NewThrottle(cfg.RatePerSecond, cfg.MaxWait),
	}, nil
}

// Name is "brave".
func (c *Client) Name() string { return "brave" }

var _ search.Provider = (*Client)(nil)

// Search runs q: one GET, retried once after a 429 whose wait is within
// MaxWait.
func (c *Client) Search(ctx context.Context, q search.Query) (*search.Response, error) {
	params := c.params(q)
	for attempt := 0; ; attempt++ {
		resp, err := c.do(ctx, q.Tenant, params)
		var e *search.Error
		if attempt == 0 && errors.As(err, &e) && e.Kind == search.KindRateLimited && e.Status == http.StatusTooManyRequests && e.RetryAfter <= c.throttle.MaxWait() {
			continue // the throttle now holds the retry back, or refuses it
		}
		return resp, err
	}
}

// params maps a Query to Brave's query parameters. Domain filters become
// site: operators in q (Brave has no parameter for them); the search
// package also filters the results.
func (c *Client) params(q search.Query) url.Values {
	v := url.Values{}
	text := q.Query
	switch len(q.IncludeDomains) {
	case 0:
	case 1:
		text += " site:" + q.IncludeDomains[0]
	default:
		text += " (site:" + strings.Join(q.IncludeDomains, " OR site:") + ")"
	}
	for _, d := range q.ExcludeDomains {
		text += " -site:" + d
	}
	v.Set("q", text)
	v.Set("count", strconv.Itoa(q.Count))
	if q.Offset > 0 {
		v.Set("offset", strconv.Itoa(q.Offset))
	}
	if q.Freshness != "" {
		v.Set("freshness", q.Freshness)
	}
	if q.Country != "" {
		v.Set("country", q.Country)
	}
	if q.SafeSearch != "" {
		v.Set("safesearch", q.SafeSearch)
	}
	return v
}

func (c *Client) do(ctx context.Context, tenant string, params url.Values) (*search.Response, error) {
	done, err := c.throttle.Acquire(ctx, tenant, c.timeout)
	if err != nil {
		return nil, search.RateLimited("brave", err)
	}
	// The turn ends once the answer's rate-limit headers are applied.
	defer done()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint+"?"+params.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("brave request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Subscription-Token", c.key)
	res, err := c.http.Do(req)
	if err != nil {
		return nil, search.RequestError("brave", err, c.timeout, "BRAVE_TIMEOUT")
	}
	defer res.Body.Close()
	limits := parseRateHeaders(res.Header)
	c.observe(limits)
	body, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return nil, &search.Error{Provider: "brave", Kind: search.KindUnavailable, Status: res.StatusCode, Detail: "reading the response failed", Err: err}
	}
	if res.StatusCode >= 300 && res.StatusCode < 400 {
		return nil, search.RedirectError("brave", res, "BRAVE_BASE_URL")
	}
	if res.StatusCode != http.StatusOK {
		e := classify(res.StatusCode, body, limits)
		e.Detail = search.Redact(e.Detail, c.key)
		if e.Kind == search.KindRateLimited {
			c.throttle.Block(e.RetryAfter)
		}
		return nil, e
	}
	var r webResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, &search.Error{Provider: "brave", Kind: search.KindUpstream, Status: res.StatusCode, Detail: "response is not the documented JSON", Err: err}
	}
	return r.normalize(), nil
}

// observe applies the rate-limit headers of any response: the first
// window's limit is the request rate; an exhausted window blocks until it
// resets.
func (c *Client) observe(l rateLimits) {
	if len(l.limit) > 0 && l.limit[0] > 0 {
		c.throttle.SetRate(float64(l.limit[0]))
	}
	if wait, exhausted := l.exhausted(); exhausted {
		c.throttle.Block(wait)
	}
}
