package brave

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/brain-tools/suite/services/search/internal/search"
)

// webResponse is the part of Brave's web search response we use. Every
// top-level block may be missing; unknown fields are ignored.
type webResponse struct {
	Web *struct {
		Results []webResult `json:"results"`
	} `json:"web"`
}

type webResult struct {
	Title         string   `json:"title"`
	URL           string   `json:"url"`
	Description   string   `json:"description"`
	Age           string   `json:"age"`
	PageAge       string   `json:"page_age"`
	ExtraSnippets []string `json:"extra_snippets"`
	Profile       *struct {
		Name string `json:"name"`
	} `json:"profile"`
	MetaURL *struct {
		Hostname string `json:"hostname"`
	} `json:"meta_url"`
}

func (r *webResponse) normalize() *search.Response {
	out := &search.Response{}
	if r.Web == nil {
		return out
	}
	for _, w := range r.Web.Results {
		res := search.Result{Title: w.Title, URL: w.URL, Snippet: w.Description, Published: w.PageAge}
		if res.Published == "" {
			res.Published = w.Age
		}
		if res.Snippet == "" && len(w.ExtraSnippets) > 0 {
			res.Snippet = w.ExtraSnippets[0]
		}
		switch {
		case w.Profile != nil && w.Profile.Name != "":
			res.Source = w.Profile.Name
		case w.MetaURL != nil:
			res.Source = w.MetaURL.Hostname
		}
		out.Results = append(out.Results, res)
	}
	return out
}

// errorResponse is Brave's error body:
// {"type":"ErrorResponse","error":{"code","detail","status","meta":{"errors":[{"loc","msg"}]}}}.
type errorResponse struct {
	Type  string `json:"type"`
	Error *struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
		Status int    `json:"status"`
		Meta   *struct {
			Errors []struct {
				Loc  []any  `json:"loc"`
				Msg  string `json:"msg"`
				Type string `json:"type"`
			} `json:"errors"`
		} `json:"meta"`
	} `json:"error"`
}

// paramNames maps Brave's parameter names to web_search's arguments.
var paramNames = map[string]string{
	"q": "query", "count": "count", "offset": "offset", "freshness": "freshness",
	"country": "country", "safesearch": "safe_search",
}

// classify turns a non-200 response into a search.Error: 429 is rate
// limited (wait from the headers), 422 is an invalid key
// (SUBSCRIPTION_TOKEN_INVALID: Brave answers a bad key with 422, not 401)
// or a bad parameter (VALIDATION, naming it), 401/403 a refused key,
// OPTION_NOT_IN_PLAN and 402 a plan limit, 5xx unavailable.
func classify(status int, body []byte, l rateLimits) *search.Error {
	e := &search.Error{Provider: "brave", Status: status, Kind: search.KindUpstream}
	var er errorResponse
	code := ""
	if json.Unmarshal(body, &er) == nil && er.Error != nil {
		code = er.Error.Code
		e.Detail = er.Error.Detail
		if er.Error.Meta != nil {
			for _, fe := range er.Error.Meta.Errors {
				if name := locName(fe.Loc); name != "" && e.Param == "" {
					e.Param = name
					if fe.Msg != "" {
						e.Detail = strings.TrimSpace(e.Detail + " " + name + ": " + fe.Msg)
					}
				}
			}
		}
	} else if s := strings.TrimSpace(string(body)); s != "" && len(s) < 300 {
		e.Detail = s
	}
	switch {
	case status == http.StatusTooManyRequests || code == "RATE_LIMITED":
		e.Kind = search.KindRateLimited
		e.RetryAfter = l.retryAfter()
		if wait, ok := l.exhausted(); ok && wait > e.RetryAfter {
			e.RetryAfter = wait
		}
	case code == "SUBSCRIPTION_TOKEN_INVALID" || status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Kind = search.KindInvalidKey
	case code == "OPTION_NOT_IN_PLAN" || code == "SUBSCRIPTION_NOT_FOUND" || status == http.StatusPaymentRequired:
		e.Kind = search.KindPlanLimit
	case code == "VALIDATION" || status == http.StatusUnprocessableEntity || status == http.StatusBadRequest:
		e.Kind = search.KindBadParameter
	case status >= 500:
		e.Kind = search.KindUnavailable
	}
	return e
}

// locName is the argument named by a validation error's loc, e.g.
// ["query", "count"] → count.
func locName(loc []any) string {
	if len(loc) == 0 {
		return ""
	}
	last, _ := loc[len(loc)-1].(string)
	if n, ok := paramNames[last]; ok {
		return n
	}
	return last
}

// rateLimits holds the X-RateLimit-* headers, one value per window.
type rateLimits struct {
	limit, remaining, reset []int64
	retryAfterHeader        time.Duration
}

func parseRateHeaders(h http.Header) rateLimits {
	l := rateLimits{
		limit:     parseList(h.Get("X-RateLimit-Limit")),
		remaining: parseList(h.Get("X-RateLimit-Remaining")),
		reset:     parseList(h.Get("X-RateLimit-Reset")),
	}
	if s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil && s > 0 {
		l.retryAfterHeader = time.Duration(s) * time.Second
	}
	return l
}

func parseList(v string) []int64 {
	if v == "" {
		return nil
	}
	var out []int64
	for _, part := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
		if err != nil {
			return nil
		}
		out = append(out, n)
	}
	return out
}

// exhausted reports the longest reset among windows with nothing left.
func (l rateLimits) exhausted() (time.Duration, bool) {
	var wait time.Duration
	found := false
	for i, rem := range l.remaining {
		if rem <= 0 && i < len(l.reset) {
			found = true
			if d := time.Duration(l.reset[i]) * time.Second; d > wait {
				wait = d
			}
		}
	}
	if found && wait <= 0 {
		wait = time.Second
	}
	return wait, found
}

// retryAfter is a 429's wait: Retry-After, else the first window's reset,
// else one second.
func (l rateLimits) retryAfter() time.Duration {
	if l.retryAfterHeader > 0 {
		return l.retryAfterHeader
	}
	if len(l.reset) > 0 && l.reset[0] > 0 {
		return time.Duration(l.reset[0]) * time.Second
	}
	return time.Second
}
