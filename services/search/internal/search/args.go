package search

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/strictjson"
)

// Limits of web_search's arguments. The query length, count, offset,
// freshness and safe search values are Brave's documented ranges; Tavily's
// max_results shares the 20.
const (
	MaxQueryChars   = 400
	MaxCount        = 20
	DefaultCount    = 10
	MaxOffset       = 9
	MaxDomains      = 20
	MaxSnippetChars = 1000
	MaxTitleChars   = 300
)

// Args are web_search's arguments; its input_schema is inferred from
// them, with the limits above in the tags (TestSchemaLimits).
type Args struct {
	Query          string   `json:"query" jsonschema:"What to search for." schema:"minLength=1,maxLength=400"`
	Count          *int     `json:"count,omitempty" jsonschema:"Results to return; default 10." schema:"minimum=1,maximum=20,default=10"`
	Offset         int      `json:"offset,omitempty" jsonschema:"Page of count results to start at; default 0." schema:"minimum=0,maximum=9"`
	Freshness      string   `json:"freshness,omitempty" jsonschema:"pd, pw, pm, py (past day/week/month/year) or a date range YYYY-MM-DDtoYYYY-MM-DD." schema:"pattern=^(pd|pw|pm|py|\\d{4}-\\d{2}-\\d{2}to\\d{4}-\\d{2}-\\d{2})$"`
	Country        string   `json:"country,omitempty" jsonschema:"Two-letter country code to favour, e.g. US." schema:"pattern=^[A-Za-z]{2}$"`
	SafeSearch     string   `json:"safe_search,omitempty" schema:"enum=off|moderate|strict"`
	IncludeDomains []string `json:"include_domains,omitempty" jsonschema:"Only results from these domains (and their subdomains)." schema:"maxItems=20,maxLength=253"`
	ExcludeDomains []string `json:"exclude_domains,omitempty" jsonschema:"No results from these domains." schema:"maxItems=20,maxLength=253"`
	Topic          string   `json:"topic,omitempty" schema:"enum=general|news|finance"`
	IncludeAnswer  bool     `json:"include_answer,omitempty" jsonschema:"Also return a short generated answer (Tavily only)."`
	// Provider picks a configured provider instead of the default.
	Provider string `json:"provider,omitempty" jsonschema:"Use this provider instead of the service's default, when configured." schema:"enum=brave|tavily"`
}

var domainRE = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$`)

// Validate holds what the schema cannot say, naming the argument at
// fault: a query that is not only spaces, a freshness range of real dates
// with the start first, domain names.
func (a *Args) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &strictjson.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if strings.TrimSpace(a.Query) == "" {
		return bad("query", "required")
	}
	if from, to, ok := strings.Cut(a.Freshness, "to"); ok {
		f, err1 := time.Parse(time.DateOnly, from)
		t, err2 := time.Parse(time.DateOnly, to)
		if err1 != nil || err2 != nil || t.Before(f) {
			return bad("freshness", "%q is not a date range YYYY-MM-DDtoYYYY-MM-DD with the start first", a.Freshness)
		}
	}
	for _, list := range []struct {
		field   string
		domains []string
	}{{"include_domains", a.IncludeDomains}, {"exclude_domains", a.ExcludeDomains}} {
		for i, d := range list.domains {
			if !domainRE.MatchString(d) {
				return bad(fmt.Sprintf("%s[%d]", list.field, i), "%q is not a domain name such as example.com", d)
			}
		}
	}
	return nil
}

// Query returns the validated arguments as a Query with defaults applied.
func (a *Args) toQuery() Query {
	q := Query{
		Query:         strings.TrimSpace(a.Query),
		Count:         DefaultCount,
		Offset:        a.Offset,
		Freshness:     a.Freshness,
		Country:       strings.ToUpper(a.Country),
		SafeSearch:    a.SafeSearch,
		Topic:         a.Topic,
		IncludeAnswer: a.IncludeAnswer,
	}
	if a.Count != nil {
		q.Count = *a.Count
	}
	for _, d := range a.IncludeDomains {
		q.IncludeDomains = append(q.IncludeDomains, strings.ToLower(d))
	}
	for _, d := range a.ExcludeDomains {
		q.ExcludeDomains = append(q.ExcludeDomains, strings.ToLower(d))
	}
	return q
}
