package search

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

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

// Args are web_search's arguments.
type Args struct {
	Query          string   `json:"query"`
	Count          *int     `json:"count"`
	Offset         int      `json:"offset"`
	Freshness      string   `json:"freshness"`
	Country        string   `json:"country"`
	SafeSearch     string   `json:"safe_search"`
	IncludeDomains []string `json:"include_domains"`
	ExcludeDomains []string `json:"exclude_domains"`
	Topic          string   `json:"topic"`
	IncludeAnswer  bool     `json:"include_answer"`
	// Provider picks a configured provider instead of the default.
	Provider string `json:"provider"`
}

var (
	freshnessRE = regexp.MustCompile(`^(pd|pw|pm|py|\d{4}-\d{2}-\d{2}to\d{4}-\d{2}-\d{2})$`)
	countryRE   = regexp.MustCompile(`^[A-Za-z]{2}$`)
	domainRE    = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$`)
)

// Validate checks every argument against the documented ranges, naming the
// argument at fault.
func (a *Args) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &strictjson.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	q := strings.TrimSpace(a.Query)
	switch {
	case q == "":
		return bad("query", "required")
	case !utf8.ValidString(a.Query):
		return bad("query", "not valid UTF-8")
	case utf8.RuneCountInString(a.Query) > MaxQueryChars:
		return bad("query", "%d characters, more than %d", utf8.RuneCountInString(a.Query), MaxQueryChars)
	case a.Count != nil && (*a.Count < 1 || *a.Count > MaxCount):
		return bad("count", "must be from 1 to %d, got %d", MaxCount, *a.Count)
	case a.Offset < 0 || a.Offset > MaxOffset:
		return bad("offset", "must be from 0 to %d (pages of count results), got %d", MaxOffset, a.Offset)
	case a.Freshness != "" && !freshnessRE.MatchString(a.Freshness):
		return bad("freshness", "want pd, pw, pm, py or YYYY-MM-DDtoYYYY-MM-DD, got %q", a.Freshness)
	case a.Country != "" && !countryRE.MatchString(a.Country):
		return bad("country", "want a two-letter ISO 3166 code such as US, got %q", a.Country)
	case a.SafeSearch != "" && a.SafeSearch != "off" && a.SafeSearch != "moderate" && a.SafeSearch != "strict":
		return bad("safe_search", "want off, moderate or strict, got %q", a.SafeSearch)
	case a.Topic != "" && a.Topic != "general" && a.Topic != "news" && a.Topic != "finance":
		return bad("topic", "want general, news or finance, got %q", a.Topic)
	case a.Provider != "" && a.Provider != "brave" && a.Provider != "tavily":
		return bad("provider", "want brave or tavily, got %q", a.Provider)
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
		if len(list.domains) > MaxDomains {
			return bad(list.field, "%d domains, more than %d", len(list.domains), MaxDomains)
		}
		for i, d := range list.domains {
			if !domainRE.MatchString(d) || len(d) > 253 {
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
