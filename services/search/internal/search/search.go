// Package search is web search as a tool: the web_search arguments, the
// normalized results every provider maps to, the errors providers report,
// and the tool handler that picks a provider, deduplicates results by URL
// and renders them as structured content and readable text.
//
// Providers (Brave, Tavily) live in their own packages and implement
// Provider; this package imports none of them.
package search

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/tracing"
)

// Query is one web search, already validated (see Args.Validate).
type Query struct {
	// Tenant is the calling tenant (the request body's tenant_id), never
	// sent to the provider: throttles share their waiting fairly by it.
	Tenant string
	// Query is the search text, 1 to MaxQueryChars characters.
	Query string
	// Count is how many results to return, 1 to MaxCount.
	Count int
	// Offset is the page of Count results to start at, 0 to MaxOffset
	// (Brave's paging).
	Offset int
	// Freshness is pd, pw, pm, py or YYYY-MM-DDtoYYYY-MM-DD; "" for any.
	Freshness string
	// Country is an ISO 3166-1 alpha-2 code, upper case; "" for any.
	Country string
	// SafeSearch is off, moderate or strict; "" for the provider's default.
	SafeSearch string
	// IncludeDomains and ExcludeDomains restrict results by host name
	// (a domain matches itself and its subdomains).
	IncludeDomains, ExcludeDomains []string
	// Topic is general, news or finance; "" for general.
	Topic string
	// IncludeAnswer asks for a generated answer (Tavily only).
	IncludeAnswer bool
}

// Result is one normalized search result.
type Result struct {
	// Title is plain text, at most MaxTitleChars characters.
	Title string `json:"title"`
	URL   string `json:"url"`
	// Snippet is plain text (provider markup removed), at most
	// MaxSnippetChars characters.
	Snippet string `json:"snippet"`
	// Published is the page's date as the provider gave it (ISO 8601 or a
	// phrase such as "2 days ago"); "" when unknown.
	Published string `json:"published,omitempty"`
	// Source names the site: the provider's site name or the URL's host.
	Source string `json:"source,omitempty"`
}

// Response is what a provider returns for a Query.
type Response struct {
	Results []Result
	// Answer is the provider's generated answer, when asked and given.
	Answer string
}

// Provider is a web search API.
type Provider interface {
	// Name is the provider's name as the provider argument takes it.
	Name() string
	// Search runs q. Failures the provider reported are *Error.
	Search(ctx context.Context, q Query) (*Response, error)
}

// Kind classifies a provider failure.
type Kind string

// The kinds of provider failure.
const (
	KindRateLimited  Kind = "rate_limited"  // too many requests; RetryAfter says when to try again
	KindInvalidKey   Kind = "invalid_key"   // the service's API key was refused
	KindPlanLimit    Kind = "plan_limit"    // the plan's or account's quota or credits are used up
	KindBadParameter Kind = "bad_parameter" // the provider refused an argument; Param names it
	KindUnavailable  Kind = "unavailable"   // network failure, timeout or 5xx
	KindUpstream     Kind = "upstream"      // anything else the provider said
)

// Error is a provider failure, phrased for the model: Error() says what
// happened and what to do.
type Error struct {
	Provider string
	Kind     Kind
	// Status is the HTTP status, 0 when no response arrived.
	Status int
	// Param is the web_search argument at fault, for KindBadParameter.
	Param string
	// RetryAfter is how long to wait, for KindRateLimited (0 = unknown).
	RetryAfter time.Duration
	// Detail is the provider's own message.
	Detail string
	Err    error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	b.WriteString(": ")
	switch e.Kind {
	case KindRateLimited:
		b.WriteString("rate limited")
		if e.RetryAfter > 0 {
			fmt.Fprintf(&b, ", retry after %s", retryText(e.RetryAfter))
		} else {
			b.WriteString(", retry later")
		}
	case KindInvalidKey:
		b.WriteString("the search service's API key was refused (operator: check the key)")
	case KindPlanLimit:
		b.WriteString("the search plan's usage or credit limit is reached (operator: upgrade the plan or wait for it to renew)")
	case KindBadParameter:
		if e.Param != "" {
			fmt.Fprintf(&b, "bad parameter %s", e.Param)
		} else {
			b.WriteString("bad parameter")
		}
	case KindUnavailable:
		b.WriteString("search provider unavailable; try again later")
	default:
		b.WriteString("search failed")
	}
	if e.Status != 0 {
		fmt.Fprintf(&b, " (HTTP %d)", e.Status)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// retryText writes a wait as the model reads it: "6 s", "24 h" for whole
// hours of a day or more.
func retryText(d time.Duration) string {
	s := int64(roundUp(d) / time.Second)
	if s >= 86400 && s%3600 == 0 {
		return fmt.Sprintf("%d h", s/3600)
	}
	return fmt.Sprintf("%d s", s)
}

// roundUp shows a wait in whole seconds, never "0s".
func roundUp(d time.Duration) time.Duration {
	s := (d + time.Second - 1) / time.Second
	if s < 1 {
		s = 1
	}
	return s * time.Second
}

// NewHTTPClient returns the client a provider uses: whole-request timeout,
// and redirects never followed. Go strips only Authorization and Cookie
// when a redirect leaves the host, so a key in another header (Brave's
// X-Subscription-Token) would travel to wherever a redirect points.
//
// Each request gets a client span named after provider ("brave GET") and
// carries traceparent (pkg/tracing).
func NewHTTPClient(provider string, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:       timeout,
		Transport:     tracing.Transport(nil, provider),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// RedirectError is the error for a provider that answered with a redirect,
// which is not followed; baseEnv names the setting to check.
func RedirectError(provider string, res *http.Response, baseEnv string) *Error {
	return &Error{Provider: provider, Kind: KindUpstream, Status: res.StatusCode,
		Detail: fmt.Sprintf("answered %d redirecting to %q; redirects are not followed, so the API key stays with the configured host: check %s", res.StatusCode, res.Header.Get("Location"), baseEnv)}
}

// RequestError is the error for a request that got no answer: "no answer
// within the timeout" when the client's time ran out.
func RequestError(provider string, err error, timeout time.Duration, timeoutEnv string) *Error {
	detail := "request failed"
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		detail = fmt.Sprintf("no complete answer within %s (%s)", timeout, timeoutEnv)
	}
	return &Error{Provider: provider, Kind: KindUnavailable, Detail: detail, Err: err}
}
