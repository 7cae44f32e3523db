package tavily

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/brain-tools/suite/services/search/internal/search"
)

// fakeTavily speaks Tavily's wire format: POST /search, Bearer key, JSON
// body in, JSON out, errors as {"detail":{"error":"…"}} with Tavily's
// status codes (400, 401, 429, 432, 433, 5xx).
type fakeTavily struct {
	mu     sync.Mutex
	bodies []map[string]any
	auth   []string
	answer func(n int, w http.ResponseWriter)
}

func (f *fakeTavily) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/search" || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "wrong request", http.StatusNotFound)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		writeJSON(w, 400, `{"detail":{"error":"Invalid JSON body"}}`)
		return
	}
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, body)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer tvly-") {
		writeJSON(w, 401, `{"detail":{"error":"Unauthorized: missing or invalid API key."}}`)
		return
	}
	f.answer(n, w)
}

func (f *fakeTavily) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

const fullResponse = `{
  "query": "Who is Leo Messi?",
  "follow_up_questions": null,
  "answer": "Lionel Messi is an Argentine footballer.",
  "images": [],
  "results": [
    {"title": "Lionel Messi Facts | Britannica", "url": "https://www.britannica.com/facts/Lionel-Messi", "content": "Lionel Messi, Argentine-born soccer player.", "score": 0.81025416, "raw_content": null},
    {"title": "Messi news", "url": "https://news.example.com/messi", "content": "Messi scored again.", "score": 0.7, "raw_content": null, "published_date": "Sun, 10 Nov 2024 12:00:00 GMT"},
    {"title": "Lionel Messi Facts", "url": "http://www.britannica.com/facts/Lionel-Messi/", "content": "duplicate", "score": 0.5}
  ],
  "response_time": 1.67,
  "request_id": "123e4567-e89b-12d3-a456-426614174111"
}`

func newClient(t *testing.T, f *fakeTavily, cfg Config) *Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	if cfg.APIKey == "" {
		cfg.APIKey = "tvly-test"
	}
	cfg.BaseURL = srv.URL
	if cfg.SearchDepth == "" {
		cfg.SearchDepth = "basic"
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
	f := &fakeTavily{answer: func(int, http.ResponseWriter) {}}
	f.answer = func(_ int, w http.ResponseWriter) { writeJSON(w, 200, fullResponse) }
	c := newClient(t, f, Config{})
	resp, err := c.Search(context.Background(), search.Query{Query: "Who is Leo Messi?", Count: 5, IncludeAnswer: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Answer != "Lionel Messi is an Argentine footballer." {
		t.Fatalf("answer %q", resp.Answer)
	}
	want := []search.Result{
		{Title: "Lionel Messi Facts | Britannica", URL: "https://www.britannica.com/facts/Lionel-Messi", Snippet: "Lionel Messi, Argentine-born soccer player.", Source: "britannica.com"},
		{Title: "Messi news", URL: "https://news.example.com/messi", Snippet: "Messi scored again.", Published: "Sun, 10 Nov 2024 12:00:00 GMT", Source: "news.example.com"},
		{Title: "Lionel Messi Facts", URL: "http://www.britannica.com/facts/Lionel-Messi/", Snippet: "duplicate", Source: "britannica.com"},
	}
	if diff := cmp.Diff(want, resp.Results); diff != "" {
		t.Fatalf("results (-want +got):\n%s", diff)
	}
	if f.auth[0] != "Bearer tvly-test" {
		t.Fatalf("Authorization %q", f.auth[0])
	}
}

func TestSparseResponses(t *testing.T) {
	for _, body := range []string{
		`{"query":"x","results":[],"response_time":"0.52"}`,
		`{"query":"x","answer":null,"results":[{"url":"https://example.com"}],"response_time":"1.2"}`,
		`{"results":[]}`,
		`{"query":"x","results":[],"response_time":null,"images":[{"url":"https://img"}]}`,
		`{"query":"x","results":[],"response_time":""}`,
	} {
		f := &fakeTavily{}
		f.answer = func(_ int, w http.ResponseWriter) { writeJSON(w, 200, body) }
		c := newClient(t, f, Config{})
		resp, err := c.Search(context.Background(), search.Query{Query: "x", Count: 3})
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if strings.Contains(body, "example.com") != (len(resp.Results) == 1) || resp.Answer != "" {
			t.Fatalf("%s: %+v", body, resp)
		}
	}
}

func TestResponseTimeForms(t *testing.T) {
	for in, want := range map[string]float64{`1.67`: 1.67, `"1.67"`: 1.67, `"0"`: 0, `null`: 0, `3`: 3} {
		var rt responseTime
		if err := json.Unmarshal([]byte(in), &rt); err != nil || float64(rt) != want {
			t.Errorf("%s: %v, %v", in, rt, err)
		}
	}
	var rt responseTime
	if err := json.Unmarshal([]byte(`"fast"`), &rt); err == nil {
		t.Error(`"fast" accepted`)
	}
}

// Tavily is sent only the fields that are set.
func TestOnlySetFieldsAreSent(t *testing.T) {
	f := &fakeTavily{}
	f.answer = func(_ int, w http.ResponseWriter) { writeJSON(w, 200, `{"results":[]}`) }
	c := newClient(t, f, Config{})
	tests := []struct {
		q    search.Query
		want map[string]any
	}{
		{search.Query{Query: "go", Count: 5}, map[string]any{"query": "go", "max_results": 5.0}},
		{search.Query{Query: "go", Count: 5, Freshness: "pw", IncludeAnswer: true, Topic: "news"},
			map[string]any{"query": "go", "max_results": 5.0, "time_range": "week", "include_answer": true, "topic": "news"}},
		{search.Query{Query: "go", Count: 3, Offset: 2, Freshness: "2024-01-01to2024-02-01", Country: "US", IncludeDomains: []string{"go.dev"}, ExcludeDomains: []string{"x.com"}, SafeSearch: "strict"},
			map[string]any{"query": "go", "max_results": 9.0, "start_date": "2024-01-01", "end_date": "2024-02-01", "country": "united states",
				"include_domains": []any{"go.dev"}, "exclude_domains": []any{"x.com"}}},
	}
	for i, tt := range tests {
		if _, err := c.Search(context.Background(), tt.q); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, f.bodies[i]); diff != "" {
			t.Errorf("body %d (-want +got):\n%s", i, diff)
		}
	}
	adv := newClient(t, f, Config{SearchDepth: "advanced"})
	if _, err := adv.Search(context.Background(), search.Query{Query: "go", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if f.bodies[len(f.bodies)-1]["search_depth"] != "advanced" {
		t.Fatalf("advanced depth not sent: %v", f.bodies[len(f.bodies)-1])
	}
}

// Tavily has no paging: offset asks for more and keeps the last page.
func TestOffset(t *testing.T) {
	f := &fakeTavily{}
	f.answer = func(_ int, w http.ResponseWriter) {
		var rs []string
		for i := range 6 {
			rs = append(rs, fmt.Sprintf(`{"title":"r%d","url":"https://e.com/%d","content":"c"}`, i, i))
		}
		writeJSON(w, 200, `{"results":[`+strings.Join(rs, ",")+`]}`)
	}
	c := newClient(t, f, Config{})
	resp, err := c.Search(context.Background(), search.Query{Query: "x", Count: 3, Offset: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != 3 || resp.Results[0].Title != "r3" {
		t.Fatalf("page 2: %+v", resp.Results)
	}
	_, err = c.Search(context.Background(), search.Query{Query: "x", Count: 10, Offset: 2})
	var e *search.Error
	if !errors.As(err, &e) || e.Param != "offset" {
		t.Fatalf("offset beyond 20 results: %v", err)
	}
	_, err = c.Search(context.Background(), search.Query{Query: "x", Count: 3, Country: "US", Topic: "news"})
	if !errors.As(err, &e) || e.Param != "country" {
		t.Fatalf("country with news: %v", err)
	}
	_, err = c.Search(context.Background(), search.Query{Query: "x", Count: 3, Country: "ZZ"})
	if !errors.As(err, &e) || e.Param != "country" {
		t.Fatalf("unknown country: %v", err)
	}
	if f.count() != 1 {
		t.Fatalf("refused queries reached Tavily: %d requests", f.count())
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		body        string
		retryAfter  string
		kind        search.Kind
		param       string
		wait        time.Duration
		mustMention string
	}{
		{"bad parameter", 400, `{"detail":{"error":"Invalid time_range. Must be one of day, week, month, year."}}`, "", search.KindBadParameter, "freshness", 0, "bad parameter freshness"},
		{"bad query", 400, `{"detail":{"error":"Query is too long. Max query length is 400 characters."}}`, "", search.KindBadParameter, "query", 0, "bad parameter query"},
		{"invalid key", 401, `{"detail":{"error":"Unauthorized: missing or invalid API key."}}`, "", search.KindInvalidKey, "", 0, "API key was refused"},
		{"forbidden", 403, `{"detail":{"error":"Forbidden"}}`, "", search.KindInvalidKey, "", 0, "refused"},
		{"rate limited", 429, `{"detail":{"error":"Your request has been blocked due to excessive requests. Please reduce rate of requests."}}`, "30", search.KindRateLimited, "", 30 * time.Second, "retry after 30 s"},
		{"plan limit", 432, `{"detail":{"error":"This request exceeds your plan's set usage limit. Please upgrade your plan or contact support@tavily.com"}}`, "", search.KindPlanLimit, "", 0, "exceeds your plan"},
		{"pay-as-you-go limit", 433, `{"detail":{"error":"This request exceeds the pay-as-you-go limit. You can increase your limit on the Tavily dashboard."}}`, "", search.KindPlanLimit, "", 0, "pay-as-you-go"},
		{"string detail", 400, `{"detail":"country is not supported"}`, "", search.KindBadParameter, "country", 0, "country is not supported"},
		{"server error", 500, `{"detail":{"error":"Internal Server Error"}}`, "", search.KindUnavailable, "", 0, "unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTavily{}
			f.answer = func(_ int, w http.ResponseWriter) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				writeJSON(w, tt.status, tt.body)
			}
			c := newClient(t, f, Config{MaxWait: time.Millisecond})
			_, err := c.Search(context.Background(), search.Query{Query: "x", Count: 3})
			var e *search.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v", err)
			}
			if e.Kind != tt.kind || e.Param != tt.param || e.Status != tt.status || (tt.wait != 0 && e.RetryAfter != tt.wait) {
				t.Fatalf("error = %+v", e)
			}
			if !strings.Contains(e.Error(), tt.mustMention) {
				t.Fatalf("message %q does not say %q", e.Error(), tt.mustMention)
			}
			if f.count() != 1 {
				t.Fatalf("%d requests", f.count())
			}
		})
	}
}

// After a 429 with a long Retry-After, a burst of calls answers from the
// throttle: Tavily sees only what the token bucket let out before the 429
// came back (its burst, 2 at 2 requests a second).
func TestBurstAfter429(t *testing.T) {
	f := &fakeTavily{}
	f.answer = func(_ int, w http.ResponseWriter) {
		w.Header().Set("Retry-After", "60")
		writeJSON(w, 429, `{"detail":{"error":"Your request has been blocked due to excessive requests."}}`)
	}
	c := newClient(t, f, Config{RatePerSecond: 2, MaxWait: 2 * time.Second})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := c.Search(context.Background(), search.Query{Query: "x", Count: 1})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		var e *search.Error
		// Calls queued when the 429 came are answered with its wait; the
		// ones whose turn was already past MaxWait at once, with theirs.
		if !errors.As(err, &e) || e.Kind != search.KindRateLimited || e.RetryAfter < time.Second {
			t.Fatalf("call: %v", err)
		}
	}
	if f.count() > 2 {
		t.Fatalf("Tavily saw %d requests for 8 calls; want at most 2", f.count())
	}
}

// A 429 with a short Retry-After is waited out and retried once.
func TestShort429Retried(t *testing.T) {
	f := &fakeTavily{}
	f.answer = func(n int, w http.ResponseWriter) {
		if n == 0 {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, 429, `{"detail":{"error":"slow down"}}`)
			return
		}
		writeJSON(w, 200, fullResponse)
	}
	c := newClient(t, f, Config{MaxWait: 3 * time.Second})
	start := time.Now()
	if _, err := c.Search(context.Background(), search.Query{Query: "x", Count: 3}); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 900*time.Millisecond || f.count() != 2 {
		t.Fatalf("retried after %s with %d requests", time.Since(start), f.count())
	}
}

func TestNew(t *testing.T) {
	if c, err := New(Config{}, nil); c != nil || err != nil {
		t.Fatalf("no key: %v %v", c, err)
	}
	if _, err := New(Config{APIKey: "k", BaseURL: DefaultBaseURL, SearchDepth: "deep", Timeout: time.Second}, nil); err == nil {
		t.Fatal("bad depth accepted")
	}
}

// TestRedirectNotFollowed: a redirect from the API is an error naming the
// setting to check, and its target gets nothing.
func TestRedirectNotFollowed(t *testing.T) {
	hits := make(chan struct{}, 10)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits <- struct{}{} }))
	defer target.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/log", http.StatusTemporaryRedirect)
	}))
	defer api.Close()
	c, err := New(Config{APIKey: "secret-key", BaseURL: api.URL, SearchDepth: "basic", RatePerSecond: 10, Timeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Search(context.Background(), search.Query{Query: "x", Count: 1})
	var e *search.Error
	if !errors.As(err, &e) || e.Status != http.StatusTemporaryRedirect || !strings.Contains(e.Detail, "TAVILY_BASE_URL") {
		t.Fatalf("error %v", err)
	}
	if len(hits) != 0 {
		t.Fatalf("the redirect target got %d requests", len(hits))
	}
}
