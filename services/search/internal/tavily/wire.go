package tavily

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/brain-tools/suite/services/search/internal/search"
)

// response is Tavily's search response; unknown fields are ignored.
type response struct {
	Query        string       `json:"query"`
	Answer       *string      `json:"answer"`
	Results      []result     `json:"results"`
	ResponseTime responseTime `json:"response_time"`
	RequestID    string       `json:"request_id"`
}

type result struct {
	Title         string  `json:"title"`
	URL           string  `json:"url"`
	Content       string  `json:"content"`
	Score         float64 `json:"score"`
	PublishedDate string  `json:"published_date"`
}

// responseTime is Tavily's response_time, sent as a number (1.23) or a
// string ("1.23") depending on the endpoint's version.
type responseTime float64

func (t *responseTime) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			return nil
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return err
		}
		*t = responseTime(f)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*t = responseTime(f)
	return nil
}

func (r *response) normalize() *search.Response {
	out := &search.Response{}
	if r.Answer != nil {
		out.Answer = *r.Answer
	}
	for _, x := range r.Results {
		res := search.Result{Title: x.Title, URL: x.URL, Snippet: x.Content, Published: x.PublishedDate}
		if u, err := url.Parse(x.URL); err == nil {
			res.Source = strings.TrimPrefix(strings.ToLower(u.Hostname()), "www.")
		}
		out.Results = append(out.Results, res)
	}
	return out
}

// errorBody is Tavily's error body, {"detail":{"error":"…"}}; some
// gateways answer {"detail":"…"} or {"error":"…"}.
type errorBody struct {
	Detail json.RawMessage `json:"detail"`
	Error  string          `json:"error"`
}

func (e errorBody) message() string {
	var d struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(e.Detail, &d) == nil && d.Error != "" {
		return d.Error
	}
	var s string
	if json.Unmarshal(e.Detail, &s) == nil && s != "" {
		return s
	}
	return e.Error
}

// classify turns a non-200 response into a search.Error: 400 a bad
// parameter (named when the message mentions a field), 401 and 403 a
// refused key, 429 rate limited (Retry-After when sent), 432 the plan's
// limit and 433 the pay-as-you-go limit, 5xx unavailable.
func classify(status int, body []byte, h http.Header) *search.Error {
	e := &search.Error{Provider: "tavily", Status: status, Kind: search.KindUpstream}
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil {
		e.Detail = eb.message()
	}
	if e.Detail == "" {
		if s := strings.TrimSpace(string(body)); len(s) < 300 {
			e.Detail = s
		}
	}
	switch {
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		e.Kind = search.KindBadParameter
		e.Param = paramIn(e.Detail)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Kind = search.KindInvalidKey
	case status == http.StatusTooManyRequests:
		e.Kind = search.KindRateLimited
		e.RetryAfter = retryAfter(h, time.Now())
		if e.RetryAfter == 0 {
			e.RetryAfter = time.Second
		}
	case status == 432:
		e.Kind = search.KindPlanLimit
		if e.Detail == "" {
			e.Detail = "plan limit exceeded"
		}
	case status == 433:
		e.Kind = search.KindPlanLimit
		if e.Detail == "" {
			e.Detail = "pay-as-you-go limit exceeded"
		}
	case status >= 500:
		e.Kind = search.KindUnavailable
	}
	return e
}

// paramIn finds the web_search argument a Tavily message is about, from
// the body field names it mentions.
func paramIn(msg string) string {
	lower := strings.ToLower(msg)
	best, at := "", len(lower)+1
	for field, arg := range fieldNames {
		if i := strings.Index(lower, field); i >= 0 && (i < at || (i == at && len(arg) > len(best))) {
			best, at = arg, i
		}
	}
	return best
}
