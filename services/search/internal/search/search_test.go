package search

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/brain-tools/suite/pkg/servicetest"
	"github.com/brain-tools/suite/pkg/tool"
)

// stub is a Provider with canned answers (the real clients are tested
// against wire-format fakes in their own packages).
type stub struct {
	name string
	resp *Response
	err  error
	got  []Query
}

func (s *stub) Name() string { return s.name }
func (s *stub) Search(_ context.Context, q Query) (*Response, error) {
	s.got = append(s.got, q)
	return s.resp, s.err
}

// call calls web_search on svc through the service runtime, as brain does
// (the arguments checked against the input schema, the result against the
// output schema).
func call(t *testing.T, svc *Service, args string) *tool.Result {
	t.Helper()
	srv := servicetest.Start(t, svc.Tool())
	srv.Tenant = "t"
	r := srv.Call(t, "web_search", json.RawMessage(args))
	if r.Result == nil {
		t.Fatalf("web_search refused: %d %s", r.Status, r.Error)
	}
	return r.Result
}

func text(r *tool.Result) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func TestArgs(t *testing.T) {
	long := strings.Repeat("é", MaxQueryChars)
	tests := []struct {
		args  string
		field string // "" = valid
	}{
		{`{"query":"go"}`, ""},
		{`{"query":"` + long + `"}`, ""},
		{`{"query":"` + long + `a"}`, "query"},
		{`{"query":"  "}`, "query"},
		{`{}`, "query"},
		{`{"query":"go","count":0}`, "count"},
		{`{"query":"go","count":20}`, ""},
		{`{"query":"go","count":21}`, "count"},
		{`{"query":"go","offset":9}`, ""},
		{`{"query":"go","offset":10}`, "offset"},
		{`{"query":"go","offset":-1}`, "offset"},
		{`{"query":"go","freshness":"pd"}`, ""},
		{`{"query":"go","freshness":"2024-01-01to2024-12-31"}`, ""},
		{`{"query":"go","freshness":"2024-12-31to2024-01-01"}`, "freshness"},
		{`{"query":"go","freshness":"2024-02-30to2024-03-01"}`, "freshness"},
		{`{"query":"go","freshness":"today"}`, "freshness"},
		{`{"query":"go","country":"us"}`, ""},
		{`{"query":"go","country":"USA"}`, "country"},
		{`{"query":"go","safe_search":"strict"}`, ""},
		{`{"query":"go","safe_search":"on"}`, "safe_search"},
		{`{"query":"go","topic":"finance"}`, ""},
		{`{"query":"go","topic":"sports"}`, "topic"},
		{`{"query":"go","include_domains":["go.dev","sub.example.co.uk"]}`, ""},
		{`{"query":"go","include_domains":["https://go.dev"]}`, "include_domains[0]"},
		{`{"query":"go","exclude_domains":["ok.com","bad domain"]}`, "exclude_domains[1]"},
		{`{"query":"go","exclude_domains":[` + strings.Repeat(`"a.com",`, 20) + `"b.com"]}`, "exclude_domains"},
		{`{"query":"go","provider":"google"}`, "provider"},
		{`{"query":"go","tenant_id":"other"}`, "tenant_id"},
		{`{"query":"go","count":"5"}`, "count"},
	}
	svc, _ := NewService("", 1<<20, &stub{name: "brave", resp: &Response{}})
	for _, tt := range tests {
		name := tt.args
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			r := call(t, svc, tt.args)
			if tt.field == "" {
				if r.IsError {
					t.Fatalf("want success: %s", text(r))
				}
				return
			}
			// The schema check names a field by its JSON pointer, or 'name'
			// for one it does not know; Validate as field: ...
			named := false
			for _, form := range []string{tt.field + ":", `"` + tt.field + `"`, `"/` + tt.field + `"`, "'" + tt.field + "'", `"/` + strings.NewReplacer("[", "/", "]", "").Replace(tt.field) + `"`} {
				named = named || strings.Contains(text(r), form)
			}
			if !r.IsError || !named {
				t.Fatalf("want an error naming %s, got %s", tt.field, text(r))
			}
		})
	}
}

func TestNormalizeAndRender(t *testing.T) {
	p := &stub{name: "brave", resp: &Response{Results: []Result{
		{Title: "Go <strong>generics</strong>", URL: "https://go.dev/doc/tutorial/generics", Snippet: "Learn <b>generics</b> &amp; more\n\n  today", Published: "2024-03-01T00:00:00", Source: "Go"},
		{Title: "dup", URL: "http://GO.dev:80/doc/tutorial/generics/#intro", Snippet: "same page"},
		{Title: "bad url", URL: "javascript:alert(1)"},
		{Title: "excluded", URL: "https://ads.spam.example/x"},
		{Title: "other", URL: "https://pkg.go.dev/slices", Snippet: strings.Repeat("long ", 400)},
		{Title: "third", URL: "https://go.dev/blog"},
	}}}
	svc, err := NewService("", 1<<20, p)
	if err != nil {
		t.Fatal(err)
	}
	r := call(t, svc, `{"query":"go generics","count":2,"exclude_domains":["spam.example"],"include_answer":true,"topic":"news"}`)
	if r.IsError {
		t.Fatal(text(r))
	}
	var out Output
	if err := json.Unmarshal(r.StructuredContent, &out); err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Title: "Go generics", URL: "https://go.dev/doc/tutorial/generics", Snippet: "Learn generics & more today", Published: "2024-03-01T00:00:00", Source: "Go"},
		{Title: "other", URL: "https://pkg.go.dev/slices", Snippet: strings.TrimSpace(strings.Repeat("long ", 200)[:MaxSnippetChars-1]) + "…", Source: "pkg.go.dev"},
	}
	if diff := cmp.Diff(want, out.Results); diff != "" {
		t.Fatalf("results (-want +got):\n%s", diff)
	}
	if out.Provider != "brave" || len(out.Notes) != 2 {
		t.Fatalf("output %+v", out)
	}
	txt := text(r)
	for _, s := range []string{"2 results from brave", "1. Go generics", "https://go.dev/doc/tutorial/generics", "Go · 2024-03-01", "Note: include_answer"} {
		if !strings.Contains(txt, s) {
			t.Errorf("text lacks %q:\n%s", s, txt)
		}
	}
	// The provider got the query as validated, with defaults.
	if q := p.got[0]; q.Count != 2 || q.Offset != 0 || q.ExcludeDomains[0] != "spam.example" {
		t.Fatalf("query %+v", q)
	}
}

func TestIncludeDomainsFilter(t *testing.T) {
	p := &stub{name: "tavily", resp: &Response{Answer: "42", Results: []Result{
		{Title: "a", URL: "https://www.go.dev/a"},
		{Title: "b", URL: "https://blog.go.dev/b"},
		{Title: "c", URL: "https://notgo.dev/c"},
		{Title: "d", URL: "https://example.com/d"},
	}}}
	svc, _ := NewService("tavily", 1<<20, p)
	r := call(t, svc, `{"query":"q","include_domains":["go.dev"],"include_answer":true}`)
	var out Output
	json.Unmarshal(r.StructuredContent, &out)
	if len(out.Results) != 2 || out.Results[1].Title != "b" || out.Answer != "42" {
		t.Fatalf("%+v", out)
	}
	if !strings.Contains(text(r), "Answer: 42") {
		t.Fatalf("text: %s", text(r))
	}
}

func TestProviderErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&Error{Provider: "brave", Kind: KindRateLimited, Status: 429, RetryAfter: 1500 * time.Millisecond}, "web search brave: rate limited, retry after 2 s (HTTP 429)"},
		{&Error{Provider: "brave", Kind: KindInvalidKey, Status: 422, Detail: "The provided subscription token is invalid."}, "API key was refused"},
		{&Error{Provider: "tavily", Kind: KindPlanLimit, Status: 432}, "plan's usage or credit limit"},
		{&Error{Provider: "tavily", Kind: KindBadParameter, Param: "freshness", Status: 400}, "bad parameter freshness"},
		{errors.New("boom"), "web search: brave: boom"},
		// A secret of the service never reaches the result.
		{&Error{Provider: "brave", Kind: KindInvalidKey, Status: 422, Detail: "token brave-key-0123456789 is invalid"}, "token [redacted] is invalid"},
		{errors.New("dial with tools-key-0123456789"), "dial with [redacted]"},
	} {
		svc, _ := NewService("", 1<<20, &stub{name: "brave", err: tc.err})
		svc.SetSecrets("brave-key-0123456789", "", "tools-key-0123456789")
		r := call(t, svc, `{"query":"q"}`)
		if !r.IsError || r.UnknownOutcome || !strings.Contains(text(r), tc.want) || strings.Contains(text(r), "0123456789") {
			t.Errorf("%v: %s", tc.err, text(r))
		}
	}
}

func TestUnconfigured(t *testing.T) {
	svc, err := NewService("brave", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	r := call(t, svc, `{"query":"q"}`)
	if !r.IsError || !strings.Contains(text(r), "BRAVE_API_KEY or TAVILY_API_KEY") {
		t.Fatalf("%s", text(r))
	}
	detail, err := svc.Health(context.Background())
	if err != nil || detail["status"] != "unconfigured" {
		t.Fatalf("health %v %v", detail, err)
	}
}

func TestProviderChoice(t *testing.T) {
	b := &stub{name: "brave", resp: &Response{}}
	tv := &stub{name: "tavily", resp: &Response{}}
	svc, err := NewService("", 1<<20, b, tv)
	if err != nil || svc.Default() != "brave" {
		t.Fatalf("default %q, %v", svc.Default(), err)
	}
	call(t, svc, `{"query":"q","provider":"tavily"}`)
	if len(tv.got) != 1 || len(b.got) != 0 {
		t.Fatal("provider argument ignored")
	}
	only, _ := NewService("", 1<<20, tv)
	if only.Default() != "tavily" {
		t.Fatalf("default %q", only.Default())
	}
	r := call(t, only, `{"query":"q","provider":"brave"}`)
	if !r.IsError || !strings.Contains(text(r), "provider: brave is not configured") {
		t.Fatalf("%s", text(r))
	}
	if _, err := NewService("brave", 1<<20, tv); err == nil || !strings.Contains(err.Error(), "SEARCH_PROVIDER") {
		t.Fatalf("default without key: %v", err)
	}
	if d, _ := only.Health(context.Background()); d["default"] != "tavily" {
		t.Fatalf("health %v", d)
	}
}

// The result stays under max_output_bytes even with a provider that sends
// huge titles.
func TestOutputLimit(t *testing.T) {
	var rs []Result
	for i := range 20 {
		rs = append(rs, Result{Title: strings.Repeat("<&>", 3000), URL: "https://e.com/" + strings.Repeat("x", i+1), Snippet: strings.Repeat("s", 2000)})
	}
	svc, _ := NewService("", 16<<10, &stub{name: "brave", resp: &Response{Results: rs}})
	r := call(t, svc, `{"query":"q","count":20}`)
	data, _ := json.Marshal(r)
	if r.IsError || len(data) > 16<<10 {
		t.Fatalf("%d bytes, error=%v", len(data), r.IsError)
	}
	var out Output
	json.Unmarshal(r.StructuredContent, &out)
	if len(out.Results) == 0 || len(out.Results) == 20 {
		t.Fatalf("kept %d results", len(out.Results))
	}
}

func TestPlainText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                           "plain",
		"a <strong>b</strong> c":          "a b c",
		"x &amp; y &lt;z&gt; &#39;q&#39;": "x & y <z> 'q'",
		"line<br>break":                   "line break",
		"  spaced \n\t out ":              "spaced out",
		"<script>x</script>":              "x",
	} {
		if got := PlainText(in); got != want {
			t.Errorf("PlainText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestThrottle(t *testing.T) {
	ctx := context.Background()
	th := NewThrottle(0, 100*time.Millisecond)
	done, err := th.Acquire(ctx, "a", 0)
	if err != nil {
		t.Fatal("unthrottled acquire refused")
	}
	done()
	// A block longer than maxWait is answered at once with its length.
	th.Block(time.Hour)
	start := time.Now()
	var we *WaitError
	if _, err := th.Acquire(ctx, "a", 0); !errors.As(err, &we) || we.RetryAfter < 59*time.Minute || time.Since(start) > 50*time.Millisecond {
		t.Fatalf("long block: %v after %s", err, time.Since(start))
	}
	// A short one is waited out.
	th = NewThrottle(0, time.Second)
	th.Block(150 * time.Millisecond)
	start = time.Now()
	if done, err := th.Acquire(ctx, "a", 0); err != nil || time.Since(start) < 140*time.Millisecond {
		t.Fatalf("short block not waited out: %v %s", err, time.Since(start))
	} else {
		done()
	}
	// The call's own deadline is its budget too: answered at once, not
	// after waiting until the deadline.
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	th.Block(500 * time.Millisecond)
	start = time.Now()
	if _, err := th.Acquire(dctx, "a", 0); !errors.As(err, &we) || time.Since(start) > 50*time.Millisecond || we.Budget > 300*time.Millisecond {
		t.Fatalf("a wait past the deadline: %v after %s", err, time.Since(start))
	}
	// So is the time the request itself needs (reserve).
	th = NewThrottle(1, 10*time.Second)
	done, _ = th.Acquire(ctx, "a", 0)
	done()
	rctx, rcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer rcancel()
	if _, err := th.Acquire(rctx, "a", time.Second); !errors.As(err, &we) {
		t.Fatalf("next slot 1 s away, 0.5 s budget after a 1 s reserve: %v", err)
	}
}

// TestThrottleSpacesAndAnswersAtOnce: at 1 a second with a 1.5 s budget,
// a burst of 10 gets the turns that fit (one slot apart) and the rest are
// told at once how long they would have waited.
func TestThrottleSpacesAndAnswersAtOnce(t *testing.T) {
	th := NewThrottle(1, 1500*time.Millisecond)
	type outcome struct {
		at    time.Duration
		retry time.Duration
	}
	start := time.Now()
	out := make(chan outcome, 10)
	for range 10 {
		go func() {
			done, err := th.Acquire(context.Background(), "a", 0)
			var we *WaitError
			if errors.As(err, &we) {
				out <- outcome{time.Since(start), we.RetryAfter}
				return
			}
			at := time.Since(start)
			done()
			out <- outcome{at: at}
		}()
	}
	var served, refused []outcome
	for range 10 {
		o := <-out
		if o.retry > 0 {
			refused = append(refused, o)
		} else {
			served = append(served, o)
		}
	}
	if len(served) != 2 || len(refused) != 8 {
		t.Fatalf("served %d, refused %d", len(served), len(refused))
	}
	for _, o := range served {
		if o.at > 1600*time.Millisecond {
			t.Errorf("served after %s, past the budget", o.at)
		}
	}
	for _, o := range refused {
		if o.at > 500*time.Millisecond || o.retry <= 1500*time.Millisecond {
			t.Errorf("refused after %s with retry %s; want at once, with a wait over the budget", o.at, o.retry)
		}
	}
}

// TestThrottleFairAcrossTenants: tenant b's one call, made after tenant
// a queued five, gets the turn after a's first, not after all five.
func TestThrottleFairAcrossTenants(t *testing.T) {
	th := NewThrottle(1, 10*time.Second)
	first, _ := th.Acquire(context.Background(), "a", 0) // the one turn in flight
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	order := make(chan string, 6)
	acquire := func(tenant string) {
		done, err := th.Acquire(ctx, tenant, 0)
		if err == nil {
			order <- tenant
			done()
		}
	}
	queued := func(tenant string, n int) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
			th.mu.Lock()
			got := len(th.queues[tenant])
			th.mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s has %d calls queued, want %d", tenant, got, n)
			}
		}
	}
	for range 5 {
		go acquire("a")
	}
	queued("a", 5)
	go acquire("b")
	queued("b", 1)
	first()
	got := []string{<-order, <-order}
	if got[1] != "b" {
		t.Fatalf("turns %v: b waited behind a's burst", got)
	}
}

// TestThrottleBlockShedsTheQueue: calls queued when a long block arrives
// are answered at once with its wait, not after waiting out their budget.
func TestThrottleBlockShedsTheQueue(t *testing.T) {
	th := NewThrottle(1, 3*time.Second)
	first, _ := th.Acquire(context.Background(), "a", 0)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := th.Acquire(context.Background(), "a", 0)
			errs <- err
		}()
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	th.Block(time.Minute)
	first()
	for range 2 {
		var we *WaitError
		if err := <-errs; !errors.As(err, &we) || we.RetryAfter < 59*time.Second || time.Since(start) > 500*time.Millisecond {
			t.Fatalf("queued call: %v after %s", err, time.Since(start))
		}
	}
}

func TestRedact(t *testing.T) {
	const key = "BSAk3x9QpL2mN7vR4tY8"
	for _, tc := range []struct{ in, want string }{
		{"invalid token " + key + " for plan", "invalid token [redacted] for plan"},
		{"token BSAk3x9Q... is not valid", "token [redacted]... is not valid"},
		{"echo: q=x&key=" + key + "&y", "echo: q=x&key=[redacted]&y"},
		{"nothing secret here", "nothing secret here"},
		{"short BSAk3x9 piece kept", "short BSAk3x9 piece kept"},
		{"tools key dev-tools-key-0123456789 too", "tools key [redacted] too"},
	} {
		if got := Redact(tc.in, key, "dev-tools-key-0123456789", "", "ab"); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSchemaLimits: the limits the inferred input schema states are the
// package's constants.
func TestSchemaLimits(t *testing.T) {
	svc, _ := NewService("", 1<<20, &stub{name: "brave", resp: &Response{}})
	var in struct {
		Properties map[string]struct {
			MinLength, MaxLength, Minimum, Maximum, Default, MaxItems int
			Items                                                     struct{ MaxLength int }
		} `json:"properties"`
	}
	if err := json.Unmarshal(svc.Tool().Binding.InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	p := in.Properties
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"query maxLength", p["query"].MaxLength, MaxQueryChars},
		{"count maximum", p["count"].Maximum, MaxCount},
		{"count default", p["count"].Default, DefaultCount},
		{"offset maximum", p["offset"].Maximum, MaxOffset},
		{"include_domains maxItems", p["include_domains"].MaxItems, MaxDomains},
		{"exclude_domains maxItems", p["exclude_domains"].MaxItems, MaxDomains},
		{"include_domains items maxLength", p["include_domains"].Items.MaxLength, 253},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.what, c.got, c.want)
		}
	}
}
