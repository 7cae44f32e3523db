package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/schema"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

// Service answers web_search with the configured providers.
type Service struct {
	providers map[string]Provider
	def       string
	maxOutput int
	secrets   []string
}

// TimeoutSeconds is web_search's binding timeout. A call ends before it
// (callMargin earlier), so the host never cuts one off: a call whose turn
// at the provider would come too late is answered "rate limited" instead.
const TimeoutSeconds = 60

// callMargin is how long before TimeoutSeconds a call gives up, for the
// answer to travel back to the host.
const callMargin = 2 * time.Second

// SetSecrets names the service's secrets (provider API keys, the bearer
// token brain sends): every provider message is redacted of them (Redact)
// before it reaches a result.
func (s *Service) SetSecrets(secrets ...string) { s.secrets = secrets }

// NewService serves providers (any may be nil: not configured), with def
// the default ("" = the first configured of brave, tavily). maxOutput is
// the binding's max_output_bytes. With no provider the service still
// serves, answering every call with an is_error that says how to
// configure it.
func NewService(def string, maxOutput int, providers ...Provider) (*Service, error) {
	s := &Service{providers: map[string]Provider{}, maxOutput: maxOutput}
	for _, p := range providers {
		if p != nil {
			s.providers[p.Name()] = p
		}
	}
	if len(s.providers) == 0 {
		return s, nil
	}
	if def == "" {
		for _, name := range []string{"brave", "tavily"} {
			if s.providers[name] != nil {
				def = name
				break
			}
		}
	}
	if s.providers[def] == nil {
		return nil, fmt.Errorf("SEARCH_PROVIDER %q has no API key; configured: %s", def, strings.Join(s.Configured(), ", "))
	}
	s.def = def
	return s, nil
}

// Configured lists the configured providers' names, sorted.
func (s *Service) Configured() []string {
	names := make([]string, 0, len(s.providers))
	for n := range s.providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Default returns the default provider's name, "" when unconfigured.
func (s *Service) Default() string { return s.def }

// Health is the /healthz detail: status "unconfigured" (still 200: the
// service runs and explains itself) or the providers it serves.
func (s *Service) Health(context.Context) (map[string]any, error) {
	if len(s.providers) == 0 {
		return map[string]any{"status": "unconfigured", "detail": NotConfigured}, nil
	}
	return map[string]any{"providers": s.Configured(), "default": s.def}, nil
}

// NotConfigured is the message of a call to a service without a key.
const NotConfigured = "web search is not configured: set BRAVE_API_KEY or TAVILY_API_KEY on the search service"

// Tool returns web_search's binding and handler.
func (s *Service) Tool() service.Tool {
	return service.NewTool(tool.Binding{
		Name:           "web_search",
		Title:          "Web search",
		Description:    description,
		OutputSchema:   outputSchema,
		TimeoutSeconds: TimeoutSeconds,
		MaxOutputBytes: int64(s.maxOutput),
		// A search reads the open web and changes nothing.
		Annotations: &tool.Annotations{ReadOnlyHint: true},
	}, s.handle)
}

// outputSchema is web_search's output_schema: Output's.
var outputSchema = schema.MustFor[Output]()

// Output is web_search's structured_content.
type Output struct {
	Provider string   `json:"provider"`
	Query    string   `json:"query"`
	Results  []Result `json:"results"`
	Answer   string   `json:"answer,omitempty"`
	// Notes say which arguments the provider could not honour.
	Notes []string `json:"notes,omitempty"`
}

func (s *Service) handle(ctx context.Context, call *service.Call, a Args) (*tool.Result, error) {
	if len(s.providers) == 0 {
		return tool.Errorf("%s", NotConfigured), nil
	}
	name := a.Provider
	if name == "" {
		name = s.def
	}
	p := s.providers[name]
	if p == nil {
		return tool.Errorf("invalid arguments: provider: %s is not configured on this search service (configured: %s)", name, strings.Join(s.Configured(), ", ")), nil
	}
	q := a.toQuery()
	q.Tenant = call.TenantID
	ctx, cancel := context.WithTimeout(ctx, TimeoutSeconds*time.Second-callMargin)
	defer cancel()
	resp, err := p.Search(ctx, q)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return tool.Errorf("web search %s", Redact(e.Error(), s.secrets...)), nil
		}
		return tool.Errorf("web search: %s: %s", name, Redact(err.Error(), s.secrets...)), nil
	}
	out := Output{Provider: name, Query: q.Query, Results: normalize(resp.Results, q), Answer: strings.TrimSpace(resp.Answer), Notes: notes(name, q)}
	if q.IncludeAnswer && out.Answer == "" && name == "tavily" {
		out.Notes = append(out.Notes, "tavily gave no answer")
	}
	return s.render(out), nil
}

// notes lists what a provider does not support, so the model is not
// misled into thinking a filter applied.
func notes(provider string, q Query) []string {
	var n []string
	switch provider {
	case "brave":
		if q.IncludeAnswer {
			n = append(n, "include_answer: brave gives no generated answer")
		}
		if q.Topic != "" && q.Topic != "general" {
			n = append(n, "topic: brave web search has no topics; the query ran as general")
		}
	case "tavily":
		if q.SafeSearch != "" {
			n = append(n, "safe_search: tavily has no safe search setting")
		}
	}
	return n
}

// normalize cleans results, drops the ones outside the domain filters
// (providers apply them too, but not always exactly), deduplicates by URL
// and keeps at most q.Count.
func normalize(in []Result, q Query) []Result {
	out := make([]Result, 0, len(in))
	seen := map[string]bool{}
	for _, r := range in {
		r.URL = strings.TrimSpace(r.URL)
		key, host, ok := urlKey(r.URL)
		if !ok || seen[key] {
			continue
		}
		if len(q.IncludeDomains) > 0 && !matchesAny(host, q.IncludeDomains) {
			continue
		}
		if matchesAny(host, q.ExcludeDomains) {
			continue
		}
		seen[key] = true
		r.Title = truncate(PlainText(r.Title), MaxTitleChars)
		r.Snippet = truncate(PlainText(r.Snippet), MaxSnippetChars)
		r.Published = strings.TrimSpace(r.Published)
		if r.Source == "" {
			r.Source = host
		}
		out = append(out, r)
		if len(out) == q.Count {
			break
		}
	}
	return out
}

// render builds the result, dropping results from the end if the output
// limit would be exceeded (it never is with 20 results and capped
// snippets, but the limit is the contract's).
func (s *Service) render(out Output) *tool.Result {
	for {
		data, err := json.Marshal(out)
		if err != nil {
			return tool.Errorf("web search: encode result: %v", err)
		}
		r := &tool.Result{Content: []tool.Content{tool.Text(readable(out))}, StructuredContent: data}
		if enc, _ := json.Marshal(r); len(enc)+64 <= s.maxOutput || len(out.Results) == 0 {
			return r
		}
		out.Results = out.Results[:len(out.Results)-1]
	}
}

func readable(out Output) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d results from %s for %q\n", len(out.Results), out.Provider, out.Query)
	if out.Answer != "" {
		fmt.Fprintf(&b, "\nAnswer: %s\n", out.Answer)
	}
	for i, r := range out.Results {
		fmt.Fprintf(&b, "\n%d. %s\n   %s\n", i+1, r.Title, r.URL)
		var meta []string
		if r.Source != "" {
			meta = append(meta, r.Source)
		}
		if r.Published != "" {
			meta = append(meta, r.Published)
		}
		if len(meta) > 0 {
			fmt.Fprintf(&b, "   %s\n", strings.Join(meta, " · "))
		}
		if r.Snippet != "" {
			fmt.Fprintf(&b, "   %s\n", r.Snippet)
		}
	}
	for _, n := range out.Notes {
		fmt.Fprintf(&b, "\nNote: %s", n)
	}
	return strings.TrimRight(b.String(), "\n")
}
