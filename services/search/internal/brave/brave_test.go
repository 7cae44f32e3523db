package brave

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/brain-tools/suite/services/search/internal/search"
)

// fakeBrave speaks Brave's web search wire format: GET /res/v1/web/search,
// X-Subscription-Token, JSON bodies and X-RateLimit-* headers as Brave
// sends them. answer decides each response from the request number.
type fakeBrave struct {
	mu     sync.Mutex
	reqs   []*http.Request
	times  []time.Time
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

func (f *fakeBrave) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	n := len(f.reqs)
	f.reqs = append(f.reqs, r)
	f.times = append(f.times, time.Now())
	f.mu.Unlock()
	if r.Method != http.MethodGet || r.URL.Path != "/res/v1/web/search" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if r.Header.Get("X-Subscription-Token") == "" {
		brave422(w, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.")
		return
	}
	f.answer(n, w, r)
}

func (f *fakeBrave) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func rateHeaders(w http.ResponseWriter, limit, remaining, reset string) {
	w.Header().Set("X-RateLimit-Limit", limit)
	w.Header().Set("X-RateLimit-Policy", "1;w=1, 15000;w=2592000")
	w.Header().Set("X-RateLimit-Remaining", remaining)
	w.Header().Set("X-RateLimit-Reset", reset)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

func brave422(w http.ResponseWriter, code, detail string) {
	writeJSON(w, http.StatusUnprocessableEntity, fmt.Sprintf(`{"type":"ErrorResponse","error":{"id":"c7b8","status":422,"code":%q,"detail":%q,"meta":{"component":"authentication"}},"time":1700000000}`, code, detail))
}

const fullResponse = `{
  "type": "search",
  "query": {"original": "golang generics", "show_strict_warning": false, "is_navigational": false, "country": "us", "more_results_available": true},
  "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": false}]},
  "web": {
    "type": "search",
    "results": [
      {"title": "Tutorial: Getting started with <strong>generics</strong>", "url": "https://go.dev/doc/tutorial/generics", "is_source_local": false, "is_source_both": false,
       "description": "This tutorial introduces the basics of <strong>generics</strong> in Go &amp; more.", "page_age": "2024-03-01T00:00:00", "age": "March 1, 2024",
       "profile": {"name": "Go", "url": "https://go.dev", "long_name": "go.dev", "img": "https://imgs.search.brave.com/x"},
       "language": "en", "family_friendly": true, "type": "search_result", "subtype": "generic",
       "meta_url": {"scheme": "https", "netloc": "go.dev", "hostname": "go.dev", "favicon": "https://imgs.search.brave.com/y", "path": "› doc › tutorial › generics"},
       "extra_snippets": ["Generics let you write functions that work with any of a set of types."]},
      {"title": "Same page again", "url": "https://go.dev/doc/tutorial/generics/#top", "description": "duplicate"},
      {"title": "An Introduction To Generics", "url": "https://go.dev/blog/intro-generics", "description": "", "age": "2 days ago",
       "meta_url": {"hostname": "go.dev"}, "extra_snippets": ["The Go 1.18 release adds support for generics."]}
    ],
    "family_friendly": true
  },
  "news": {"type": "news", "results": []}
}`

func newClient(t *testing.T, f *fakeBrave, cfg Config) *Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	if cfg.APIKey == "" {
		cfg.APIKey = "test-key"
	}
	cfg.BaseURL = srv.URL + "/res/v1"
	if cfg.RatePerSecond == 0 {
		cfg.RatePerSecond = 100
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFullResponse(t *testing.T) {
	f := &fakeBrave{answer: func(_ int, w http.ResponseWriter, _ *http.Request) {
		rateHeaders(w, "20, 15000", "19, 14000", "1, 1000000")
		writeJSON(w, 200, fullResponse)
	}}
	c := newClient(t, f, Config{})
	resp, err := c.Search(context.Background(), search.Query{Query: "golang generics", Count: 5})
	if err != nil {
		t.Fatal(err)
	}
	want := []search.Result{
		{Title: "Tutorial: Getting started with <strong>generics</strong>", URL: "https://go.dev/doc/tutorial/generics", Snippet: "This tutorial introduces the basics of <strong>generics</strong> in Go &amp; more.", Published: "2024-03-01T00:00:00", Source: "Go"},
		{Title: "Same page again", URL: "https://go.dev/doc/tutorial/generics/#top", Snippet: "duplicate"},
		{Title: "An Introduction To Generics", URL: "https://go.dev/blog/intro-generics", Snippet: "The Go 1.18 release adds support for generics.", Published: "2 days ago", Source: "go.dev"},
	}
	if diff := cmp.Diff(want, resp.Results); diff != "" {
		t.Fatalf("results (-want +got):\n%s", diff)
	}
	if got := f.reqs[0].Header.Get("X-Subscription-Token"); got != "test-key" {
		t.Fatalf("token header %q", got)
	}
}

func TestSparseResponses(t *testing.T) {
	for _, body := range []string{
		`{}`,
		`{"type":"search"}`,
		`{"type":"search","web":{"type":"search"}}`,
		`{"type":"search","web":{"results":[{"url":"https://example.com/"}]},"query":{"original":"x"}}`,
	} {
		f := &fakeBrave{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, body) }}
		c := newClient(t, f, Config{})
		resp, err := c.Search(context.Background(), search.Query{Query: "x", Count: 3})
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if strings.Contains(body, "example.com") != (len(resp.Results) == 1) {
			t.Fatalf("%s: %+v", body, resp.Results)
		}
	}
}

func TestQueryParameters(t *testing.T) {
	f := &fakeBrave{answer: func(_ int, w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, `{}`) }}
	c := newClient(t, f, Config{})
	tests := []struct {
		q    search.Query
		want url.Values
	}{
		{search.Query{Query: "go", Count: 10}, url.Values{"q": {"go"}, "count": {"10"}}},
		{search.Query{Query: "go", Count: 20, Offset: 9, Freshness: "2024-01-01to2024-02-01", Country: "DE", SafeSearch: "strict"},
			url.Values{"q": {"go"}, "count": {"20"}, "offset": {"9"}, "freshness": {"2024-01-01to2024-02-01"}, "country": {"DE"}, "safesearch": {"strict"}}},
		{search.Query{Query: "go", Count: 5, IncludeDomains: []string{"go.dev"}, ExcludeDomains: []string{"spam.example", "ads.example"}},
			url.Values{"q": {"go site:go.dev -site:spam.example -site:ads.example"}, "count": {"5"}}},
		{search.Query{Query: "go", Count: 5, IncludeDomains: []string{"go.dev", "pkg.go.dev"}},
			url.Values{"q": {"go (site:go.dev OR site:pkg.go.dev)"}, "count": {"5"}}},
	}
	for i, tt := range tests {
		if _, err := c.Search(context.Background(), tt.q); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, f.reqs[i].URL.Query()); diff != "" {
			t.Errorf("query %d (-want +got):\n%s", i, diff)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		body        string
		headers     [3]string // X-RateLimit-Limit, -Remaining, -Reset
		kind        search.Kind
		param       string
		retryAfter  time.Duration
		mustMention string
	}{
		{"invalid key is 422", 422, `{"type":"ErrorResponse","error":{"id":"1","status":422,"code":"SUBSCRIPTION_TOKEN_INVALID","detail":"The provided subscription token is invalid.","meta":{"component":"authentication"}},"time":1}`,
			[3]string{}, search.KindInvalidKey, "", 0, "API key was refused"},
		{"validation names the argument", 422, `{"type":"ErrorResponse","error":{"id":"2","status":422,"code":"VALIDATION","detail":"Unable to validate request parameter(s)","meta":{"errors":[{"type":"less_than_equal","loc":["query","count"],"msg":"Input should be less than or equal to 20","input":"50","ctx":{"le":20}}]}},"time":1}`,
			[3]string{}, search.KindBadParameter, "count", 0, "bad parameter count"},
		{"validation of q", 422, `{"type":"ErrorResponse","error":{"id":"3","status":422,"code":"VALIDATION","detail":"Unable to validate request parameter(s)","meta":{"errors":[{"type":"string_too_long","loc":["query","q"],"msg":"String should have at most 400 characters"}]}}}`,
			[3]string{}, search.KindBadParameter, "query", 0, "bad parameter query"},
		{"rate limited", 429, `{"type":"ErrorResponse","error":{"id":"4","status":429,"code":"RATE_LIMITED","detail":"Request rate limit exceeded for plan.","meta":{"plan":"Free","rate_limit":1,"rate_current":2,"quota_limit":2000,"quota_current":30,"component":"rate_limiter"}},"time":1}`,
			[3]string{"1, 2000", "0, 1970", "20, 2000000"}, search.KindRateLimited, "", 20 * time.Second, "retry after 20 s"},
		{"monthly quota gone", 429, `{"type":"ErrorResponse","error":{"id":"5","status":429,"code":"RATE_LIMITED","detail":"Request rate limit exceeded for plan."}}`,
			[3]string{"1, 2000", "1, 0", "1, 86400"}, search.KindRateLimited, "", 24 * time.Hour, "retry after 24 h"},
		{"option not in plan", 400, `{"type":"ErrorResponse","error":{"id":"6","status":400,"code":"OPTION_NOT_IN_PLAN","detail":"The option extra_snippets is not available in your plan."}}`,
			[3]string{}, search.KindPlanLimit, "", 0, "plan"},
		{"unauthorized", 401, `{"type":"ErrorResponse","error":{"id":"7","status":401,"code":"UNAUTHORIZED","detail":"Unauthorized"}}`,
			[3]string{}, search.KindInvalidKey, "", 0, "refused"},
		{"server error with html", 502, `<html>bad gateway</html>`, [3]string{}, search.KindUnavailable, "", 0, "unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeBrave{answer: func(_ int, w http.ResponseWriter, _ *http.Request) {
				if tt.headers[0] != "" {
					rateHeaders(w, tt.headers[0], tt.headers[1], tt.headers[2])
				}
				writeJSON(w, tt.status, tt.body)
			}}
			c := newClient(t, f, Config{MaxWait: time.Millisecond})
			_, err := c.Search(context.Background(), search.Query{Query: "x", Count: 3})
			var e *search.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *search.Error", err)
			}
			if e.Kind != tt.kind || e.Param != tt.param || e.Status != tt.status {
				t.Fatalf("error = %+v", e)
			}
			if tt.retryAfter != 0 && e.RetryAfter != tt.retryAfter {
				t.Fatalf("retry after %s, want %s", e.RetryAfter, tt.retryAfter)
			}
			if !strings.Contains(e.Error(), tt.mustMention) {
				t.Fatalf("message %q does not say %q", e.Error(), tt.mustMention)
			}
			if f.count() != 1 {
				t.Fatalf("%d requests; a long wait must not be retried", f.count())
			}
		})
	}
}

// A burst of calls after Brave said the monthly quota is gone reaches
// Brave once: the rest answer at once from the throttle.
func TestExhaustedQuotaIsNotHammered(t *testing.T) {
	f := &fakeBrave{answer: func(_ int, w http.ResponseWriter, _ *http.Request) {
		rateHeaders(w, "1, 2000", "0, 0", "1, 3600")
		writeJSON(w, 429, `{"type":"ErrorResponse","error":{"status":429,"code":"RATE_LIMITED","detail":"Request rate limit exceeded for plan."}}`)
	}}
	c := newClient(t, f, Config{RatePerSecond: 1, MaxWait: 2 * time.Second})
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Go(func() {
			_, err := c.Search(context.Background(), search.Query{Query: "x", Count: 1})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var e *search.Error
		// Queued when the 429 came: answered at once with its wait; the
		// ones whose turn was already past MaxWait, at once with theirs.
		if !errors.As(err, &e) || e.Kind != search.KindRateLimited || e.RetryAfter < 2*time.Second {
			t.Fatalf("call: %v", err)
		}
	}
	if n := f.count(); n != 1 {
		t.Fatalf("Brave saw %d requests for 10 calls; want 1", n)
	}
}

// A 429 of the per-second window is waited out and retried once; the
// calls queued behind it go out at the rate Brave's headers allow.
func TestPerSecondBurst(t *testing.T) {
	f := &fakeBrave{answer: func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 0 {
			rateHeaders(w, "2, 15000", "0, 14000", "1, 1000000")
			writeJSON(w, 429, `{"type":"ErrorResponse","error":{"status":429,"code":"RATE_LIMITED","detail":"Request rate limit exceeded for plan."}}`)
			return
		}
		rateHeaders(w, "2, 15000", "1, 14000", "1, 1000000")
		writeJSON(w, 200, fullResponse)
	}}
	c := newClient(t, f, Config{RatePerSecond: 50, MaxWait: 5 * time.Second})
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for i := range 5 {
		wg.Go(func() {
			_, err := c.Search(context.Background(), search.Query{Query: "x", Count: 1})
			errs <- err
		})
		if i == 0 {
			// The others start once the client has seen the 429: a request
			// sent before that cannot know of it (on a loaded machine the
			// first answer may take longer than the spacing below).
			for deadline := time.Now().Add(5 * time.Second); c.throttle.Blocked() <= 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the client never saw the 429")
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("call failed: %v", err)
		}
	}
	f.mu.Lock()
	times := append([]time.Time(nil), f.times...)
	f.mu.Unlock()
	if len(times) != 6 {
		t.Fatalf("Brave saw %d requests for 5 calls and one 429; want 6", len(times))
	}
	if gap := times[1].Sub(times[0]); gap < 900*time.Millisecond {
		t.Fatalf("next request %s after the 429; Reset said 1s", gap)
	}
	// After the 429 the rate is Brave's 2 a second: no three requests
	// within one second.
	for i := 3; i < len(times); i++ {
		if times[i].Sub(times[i-2]) < 450*time.Millisecond {
			t.Fatalf("requests %d-%d within %s: over 2/s", i-2, i, times[i].Sub(times[i-2]))
		}
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	c, err := New(Config{APIKey: "k", BaseURL: base, RatePerSecond: 10, Timeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Search(context.Background(), search.Query{Query: "x", Count: 1})
	var e *search.Error
	if !errors.As(err, &e) || e.Kind != search.KindUnavailable {
		t.Fatalf("error %v", err)
	}
}

func TestNew(t *testing.T) {
	if c, err := New(Config{}, nil); c != nil || err != nil {
		t.Fatalf("no key: %v, %v", c, err)
	}
	if _, err := New(Config{APIKey: "k", BaseURL: "ftp://x", Timeout: time.Second}, nil); err == nil {
		t.Fatal("bad base URL accepted")
	}
}

// TestRedirectNotFollowed: a redirect from the API is not followed, so the
// X-Subscription-Token (which Go would carry to another host) never leaves,
// and the error says what happened and what to check.
func TestRedirectNotFollowed(t *testing.T) {
	var leaked []string
	var mu sync.Mutex
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("X-Subscription-Token"))
		mu.Unlock()
	}))
	defer target.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(target.URL, "127.0.0.1", "localhost", 1)+"/log", http.StatusFound)
	}))
	defer api.Close()
	c, err := New(Config{APIKey: "secret-key", BaseURL: api.URL, RatePerSecond: 10, Timeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Search(context.Background(), search.Query{Query: "x", Count: 1})
	var e *search.Error
	if !errors.As(err, &e) || e.Status != http.StatusFound || !strings.Contains(e.Detail, "redirects are not followed") || !strings.Contains(e.Detail, "BRAVE_BASE_URL") {
		t.Fatalf("error %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) != 0 {
		t.Fatalf("the redirect target got %d requests (tokens %q)", len(leaked), leaked)
	}
}

// TestTimeoutNamed: a provider that does not answer in time gives an error
// that says so and names the setting.
func TestTimeoutNamed(t *testing.T) {
	release := make(chan struct{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer api.Close()
	defer close(release)
	c, err := New(Config{APIKey: "k", BaseURL: api.URL, RatePerSecond: 10, Timeout: 200 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Search(context.Background(), search.Query{Query: "x", Count: 1})
	var e *search.Error
	if !errors.As(err, &e) || e.Kind != search.KindUnavailable || !strings.Contains(e.Detail, "no complete answer within 200ms (BRAVE_TIMEOUT)") {
		t.Fatalf("error %v", err)
	}
}
