// Package tavily is a client of the Tavily search API (POST /search with a
// Bearer key). Requests carry only the fields that are set: Tavily refuses
// some combinations (days with start_date/end_date, country outside the
// general topic) and bills options such as include_answer.
package tavily

import (
	"bytes"
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

	"golang.org/x/text/language"
	"golang.org/x/text/language/display"

	"github.com/brain-tools/suite/services/search/internal/search"
)

// DefaultBaseURL is Tavily's API base; the client appends /search.
const DefaultBaseURL = "https://api.tavily.com"

// Config is the Tavily client's environment.
type Config struct {
	// APIKey is the API key (env TAVILY_API_KEY); empty means Tavily is not
	// configured.
	APIKey string `env:"TAVILY_API_KEY"`
	// BaseURL is the API base (env TAVILY_BASE_URL), for tests and proxies.
	BaseURL string `env:"TAVILY_BASE_URL" envDefault:"https://api.tavily.com"`
	// SearchDepth is basic or advanced (env TAVILY_SEARCH_DEPTH); advanced
	// costs two credits a search.
	SearchDepth string `env:"TAVILY_SEARCH_DEPTH" envDefault:"basic"`
	// RatePerSecond spaces requests (env TAVILY_RATE_PER_SECOND; 0 = no
	// spacing). Tavily publishes per-minute limits, not headers.
	RatePerSecond float64 `env:"TAVILY_RATE_PER_SECOND" envDefault:"0"`
	// MaxWait is how long a call may wait after a 429 before answering
	// "rate limited" instead (env TAVILY_MAX_WAIT).
	MaxWait time.Duration `env:"TAVILY_MAX_WAIT" envDefault:"5s"`
	// Timeout bounds one request (env TAVILY_TIMEOUT).
	Timeout time.Duration `env:"TAVILY_TIMEOUT" envDefault:"20s"`
}

// Client searches with Tavily. It is safe for concurrent use.
type Client struct {
	timeout  time.Duration // the whole request, for error messages
	key      string
	endpoint string
	depth    string
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
		return nil, fmt.Errorf("TAVILY_BASE_URL %q: want an http(s) URL", cfg.BaseURL)
	}
	if cfg.SearchDepth != "basic" && cfg.SearchDepth != "advanced" {
		return nil, fmt.Errorf("TAVILY_SEARCH_DEPTH %q: want basic or advanced", cfg.SearchDepth)
	}
	if cfg.Timeout <= 0 || cfg.MaxWait < 0 {
		return nil, fmt.Errorf("TAVILY_TIMEOUT must be positive and TAVILY_MAX_WAIT not negative")
	}
	if httpClient == nil {
		httpClient = search.NewHTTPClient("tavily", cfg.Timeout)
	}
	return &Client{
		timeout:  cfg.Timeout,
		key:      cfg.APIKey,
		endpoint: strings.TrimRight(cfg.BaseURL, "/") + "/search",
		depth:    cfg.SearchDepth,
		http:     httpClient,
		throttle: search.NewThrottle(cfg.RatePerSecond, cfg.MaxWait),
	}, nil
}

// Name is "tavily".
func (c *Client) Name() string { return "tavily" }

var _ search.Provider = (*Client)(nil)

// request is Tavily's search body. Every optional field is omitted when
// unset, so Tavily sees only what the caller asked for.
type request struct {
	Query          string   `json:"query"`
	SearchDepth    string   `json:"search_depth,omitempty"`
	Topic          string   `json:"topic,omitempty"`
	MaxResults     int      `json:"max_results,omitempty"`
	IncludeAnswer  bool     `json:"include_answer,omitempty"`
	IncludeDomains []string `json:"include_domains,omitempty"`
	ExcludeDomains []string `json:"exclude_domains,omitempty"`
	TimeRange      string   `json:"time_range,omitempty"`
	StartDate      string   `json:"start_date,omitempty"`
	EndDate        string   `json:"end_date,omitempty"`
	Country        string   `json:"country,omitempty"`
}

// fieldNames maps Tavily's body fields to web_search's arguments, to name
// the argument in a 400.
var fieldNames = map[string]string{
	"query": "query", "max_results": "count", "topic": "topic", "include_domains": "include_domains",
	"exclude_domains": "exclude_domains", "time_range": "freshness", "start_date": "freshness",
	"end_date": "freshness", "days": "freshness", "country": "country", "include_answer": "include_answer",
}

// body maps a Query to Tavily's request. Tavily has no paging: offset N
// asks for (N+1)·count results (at most 20) and keeps the last page.
func (c *Client) body(q search.Query) (request, int, error) {
	r := request{Query: q.Query, Topic: q.Topic, IncludeAnswer: q.IncludeAnswer, IncludeDomains: q.IncludeDomains, ExcludeDomains: q.ExcludeDomains}
	if c.depth != "basic" {
		r.SearchDepth = c.depth
	}
	want := (q.Offset + 1) * q.Count
	if want > search.MaxCount {
		return r, 0, &search.Error{Provider: "tavily", Kind: search.KindBadParameter, Param: "offset",
			Detail: fmt.Sprintf("tavily returns at most %d results, so offset %d with count %d is out of reach", search.MaxCount, q.Offset, q.Count)}
	}
	r.MaxResults = want
	switch q.Freshness {
	case "":
	case "pd":
		r.TimeRange = "day"
	case "pw":
		r.TimeRange = "week"
	case "pm":
		r.TimeRange = "month"
	case "py":
		r.TimeRange = "year"
	default:
		r.StartDate, r.EndDate, _ = strings.Cut(q.Freshness, "to")
	}
	if q.Country != "" {
		if q.Topic != "" && q.Topic != "general" {
			return r, 0, &search.Error{Provider: "tavily", Kind: search.KindBadParameter, Param: "country", Detail: "tavily takes country only with topic general"}
		}
		name, err := countryName(q.Country)
		if err != nil {
			return r, 0, &search.Error{Provider: "tavily", Kind: search.KindBadParameter, Param: "country", Detail: err.Error()}
		}
		r.Country = name
	}
	return r, q.Offset * q.Count, nil
}

// countryName turns an ISO 3166 code into the lower-case English name
// Tavily's country field takes ("US" → "united states").
func countryName(code string) (string, error) {
	region, err := language.ParseRegion(code)
	if err != nil || !region.IsCountry() {
		return "", fmt.Errorf("%q is not a country code", code)
	}
	name := display.English.Regions().Name(region)
	if name == "" {
		return "", fmt.Errorf("%q has no English name", code)
	}
	return strings.ToLower(name), nil
}

// Search runs q: one POST, retried once after a 429 whose wait is within
// MaxWait.
func (c *Client) Search(ctx context.Context, q search.Query) (*search.Response, error) {
	body, skip, err := c.body(q)
	if err != nil {
		return nil, err
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("tavily request: %w", err)
	}
	for attempt := 0; ; attempt++ {
		resp, err := c.do(ctx, q.Tenant, payload)
		var e *search.Error
		if attempt == 0 && errors.As(err, &e) && e.Kind == search.KindRateLimited && e.Status == http.StatusTooManyRequests && e.RetryAfter <= c.throttle.MaxWait() {
			continue
		}
		if err != nil {
			return nil, err
		}
		if skip >= len(resp.Results) {
			resp.Results = nil
		} else {
			resp.Results = resp.Results[skip:]
		}
		return resp, nil
	}
}

func (c *Client) do(ctx context.Context, tenant string, payload []byte) (*search.Response, error) {
	done, err := c.throttle.Acquire(ctx, tenant, c.timeout)
	if err != nil {
		return nil, search.RateLimited("tavily", err)
	}
	defer done()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("tavily request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.key)
	res, err := c.http.Do(req)
	if err != nil {
		return nil, search.RequestError("tavily", err, c.timeout, "TAVILY_TIMEOUT")
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return nil, &search.Error{Provider: "tavily", Kind: search.KindUnavailable, Status: res.StatusCode, Detail: "reading the response failed", Err: err}
	}
	if res.StatusCode >= 300 && res.StatusCode < 400 {
		return nil, search.RedirectError("tavily", res, "TAVILY_BASE_URL")
	}
	if res.StatusCode != http.StatusOK {
		e := classify(res.StatusCode, body, res.Header)
		e.Detail = search.Redact(e.Detail, c.key)
		if e.Kind == search.KindRateLimited {
			c.throttle.Block(e.RetryAfter)
		}
		return nil, e
	}
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, &search.Error{Provider: "tavily", Kind: search.KindUpstream, Status: res.StatusCode, Detail: "response is not the documented JSON", Err: err}
	}
	return r.normalize(), nil
}

// retryAfter reads a Retry-After header in seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
