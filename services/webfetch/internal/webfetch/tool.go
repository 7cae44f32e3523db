// Package webfetch is the web_fetch tool: its binding (schemas,
// description), argument checks, the handler that fetches through the
// guarded client and extracts text, and the service that serves it.
package webfetch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brain-tools/suite/pkg/extract"
	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/pkg/netguard"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/webfetch/internal/fetch"
	"github.com/brain-tools/suite/services/webfetch/internal/render"
)

// Limits of the arguments.
const (
	// DefaultMaxLength is max_length when unset, in characters (the MCP
	// reference fetch server's default).
	DefaultMaxLength = 5000
	// MaxMaxLength is the largest max_length: 100,000 characters are at most
	// 400 KB of UTF-8, 600 KB once JSON-escaped, inside the host's default
	// 1 MiB max_output_bytes.
	MaxMaxLength = 100000
	// MaxURLLength caps url.
	MaxURLLength = 8192
	// MaxSelectorLength caps selector.
	MaxSelectorLength = 1024
	// excerptLength is how much of an error page is quoted.
	excerptLength = 1000
)

// Args are the arguments of web_fetch.
type Args struct {
	URL         string `json:"url"`
	Format      string `json:"format,omitempty"`
	MaxLength   *int   `json:"max_length,omitempty"`
	StartIndex  *int   `json:"start_index,omitempty"`
	MainContent *bool  `json:"main_content,omitempty"`
	Selector    string `json:"selector,omitempty"`
	// Render is auto (default), always or never: whether the page is read
	// as the browser service renders it (scripts run).
	Render string `json:"render,omitempty"`
}

// Render modes.
const (
	RenderAuto   = "auto"
	RenderAlways = "always"
	RenderNever  = "never"
)

func bad(field, format string, args ...any) error {
	return &strictjson.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Validate checks what input_schema cannot say (the runtime has checked
// the schema first: url's presence and length, format's and render's
// values, the
// ranges of max_length and start_index, selector's length): that url is an
// absolute http(s) URL with a host and selector a CSS selector, naming the
// argument at fault.
func (a *Args) Validate() error {
	u, err := url.Parse(a.URL)
	if err != nil {
		return bad("url", "not a valid URL: %v", errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("url", "must be an absolute http:// or https:// URL, got %q", a.URL)
	}
	if u.Host == "" {
		return bad("url", "has no host")
	}
	if a.Selector != "" {
		if err := extract.CheckSelector(a.Selector); err != nil {
			return bad("selector", "not a valid CSS selector: %v", err)
		}
	}
	return nil
}

// Output is the structured_content of a successful call.
type Output struct {
	URL         string `json:"url"`
	FinalURL    string `json:"final_url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Title       string `json:"title"`
	TotalLength int    `json:"total_length"`
	// NextStartIndex is set when the content was cut: call again with
	// start_index set to it.
	NextStartIndex *int `json:"next_start_index,omitempty"`
	// Rendered reports that the text is of the page as the browser
	// rendered it, scripts run.
	Rendered bool `json:"rendered,omitempty"`
}

// Fetcher is the tool's state: the guarded client, the extractor, and the
// extracted documents of cached bodies, so that reading a long page part
// by part extracts it once.
type Fetcher struct {
	client  *fetch.Client
	extract *extract.Extractor
	// reads are the pages read recently (nil with the cache off).
	reads *reads
	// render is the browser service, nil when none is configured.
	render   *render.Client
	outcomes *prometheus.CounterVec
	// slots bounds the extractions running at once: a page's DOM takes
	// several times its size, and bodies may be 10 MiB.
	slots chan struct{}
	// extractTimeout bounds PDF extraction (HTML extraction is bounded by
	// the body cap).
	extractTimeout time.Duration
}

// NewFetcher builds the tool from a checked Config.
func NewFetcher(cfg Config, deps Deps, logger *slog.Logger) (*Fetcher, error) {
	prefixes, hosts, err := netguard.ParseAllowList(cfg.Allow)
	if err != nil {
		return nil, fmt.Errorf("WEBFETCH_ALLOW: %w", err)
	}
	ports, err := netguard.ParsePorts(cfg.Ports)
	if err != nil {
		return nil, fmt.Errorf("WEBFETCH_PORTS: %w", err)
	}
	g := netguard.New(netguard.Options{AllowPrefixes: prefixes, AllowHosts: hosts, Ports: ports, Resolver: deps.Resolver, BeforeDial: deps.BeforeDial})
	o := cfg.fetchOptions(g)
	o.Logger = logger
	var rd *reads
	if cfg.CacheTTL > 0 {
		rd = newReads(cfg.CacheTTL, cfg.CacheMaxBytes)
	}
	var rc *render.Client
	if cfg.BrowserURL != "" {
		token := cfg.BrowserToken
		if token == "" {
			token = cfg.Token
		}
		rc = render.New(cfg.BrowserURL, token, cfg.BrowserTimeout)
	}
	return &Fetcher{
		render:  rc,
		client:  fetch.New(o),
		extract: extract.New(),
		reads:   rd,
		slots:   make(chan struct{}, 2*runtime.GOMAXPROCS(0)),
		// The same limit as a whole fetch.
		extractTimeout: cfg.Timeout,
		// Unregistered until NewServer puts it on the service's metrics.
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metrics.WebFetches.Name, Help: metrics.WebFetches.Help}, metrics.WebFetches.Labels),
	}, nil
}

// Close drops idle connections.
func (f *Fetcher) Close() { f.client.Close() }

// Tool returns web_fetch, declared with its hand-written schemas (the
// runtime checks the arguments against input_schema on every transport,
// then Args.Validate the rules a schema cannot say: a URL's scheme and
// host, a CSS selector).
func (f *Fetcher) Tool() service.Tool {
	return service.NewTool(Binding(), func(ctx context.Context, call *service.Call, a Args) (*tool.Result, error) {
		return f.handle(ctx, call, a), nil
	})
}

func (f *Fetcher) count(outcome string) { f.outcomes.WithLabelValues(outcome).Inc() }

func (f *Fetcher) handle(ctx context.Context, call *service.Call, a Args) *tool.Result {
	format := extract.Format(a.Format)
	if format == "" {
		format = extract.Markdown
	}
	maxLen, start, main := DefaultMaxLength, 0, true
	if a.MaxLength != nil {
		maxLen = *a.MaxLength
	}
	if a.StartIndex != nil {
		start = *a.StartIndex
	}
	if a.MainContent != nil {
		main = *a.MainContent
	}

	o := extract.Options{Format: format, MainContent: main, Selector: a.Selector}
	mode := a.Render
	if mode == "" {
		mode = RenderAuto
	}
	if mode == RenderAlways && f.render == nil {
		return tool.Errorf("invalid arguments: render: always needs a browser service, and this web_fetch has none configured (WEBFETCH_BROWSER_URL); use auto or never")
	}
	pg, res := f.read(ctx, call, a.URL, o, mode)
	if res != nil {
		return res
	}
	doc := pg.Doc
	body := doc.Text
	if strings.TrimSpace(body) == "" {
		body = "" // blank is no text: total_length 0
	}
	part, total, next, err := extract.Paginate(body, start, maxLen)
	if err != nil {
		f.count("error")
		return tool.Errorf("invalid arguments: %v", err)
	}
	out := Output{URL: pg.URL, FinalURL: pg.FinalURL, Status: pg.Status, ContentType: doc.ContentType, Title: doc.Title, TotalLength: total, Rendered: pg.Rendered}
	content := []tool.Content{tool.Text(part)}
	if total == 0 {
		content = []tool.Content{tool.Text(emptyNote(pg, a.Selector))}
	}
	if pg.Note != "" && start == 0 {
		content = append(content, tool.Text(pg.Note))
	}
	if next > 0 {
		out.NextStartIndex = &next
		content = append(content, tool.Text(fmt.Sprintf(
			"[Content cut at character %d of %d. Call web_fetch again with start_index=%d to read more.]", next, total, next)))
	}
	data, err := json.Marshal(out)
	if err != nil {
		return tool.Errorf("encode result: %v", err)
	}
	if total == 0 {
		f.count("empty")
	} else {
		f.count("ok")
	}
	return &tool.Result{Content: content, StructuredContent: data}
}

// emptyNote is the one text block of a fetch that worked but found no
// readable text (an empty body, a page of scripts, a PDF of scanned
// images). It is a success, not is_error: the call did what was asked and
// this is a fact about the page, so the model should look elsewhere
// rather than retry. It names the status and type so the model can judge.
func emptyNote(pg *page, selector string) string {
	doc := pg.Doc
	what := "the page"
	if selector != "" {
		what = fmt.Sprintf("the elements matching %q", selector)
	}
	note := fmt.Sprintf("[No readable text: %s at %s (HTTP %d %s, %s", what, pg.FinalURL, pg.Status, http.StatusText(pg.Status), doc.ContentType)
	if doc.Title != "" {
		note += fmt.Sprintf(", titled %q", doc.Title)
	}
	note += ") has no text after extraction."
	switch {
	case doc.Kind == extract.HTML && pg.Scripts && !pg.Rendered:
		note += " It has scripts, which web_fetch does not run: its text is probably built by JavaScript."
	case doc.Kind == extract.HTML && pg.Rendered:
		note += " It was rendered in a browser, scripts run, and still shows no text."
	case doc.Kind == extract.PDF:
		note += " A PDF of scanned pages holds images of text, which web_fetch does not read."
	}
	return note + "]"
}

// read returns the page at rawURL extracted with o: from the recent reads
// when it is there, else fetched and extracted (and kept when storable).
// A failure is the result to answer with.
func (f *Fetcher) read(ctx context.Context, call *service.Call, rawURL string, o extract.Options, mode string) (*page, *tool.Result) {
	key, err := f.client.Key(rawURL)
	if err != nil {
		f.count(fetchOutcome(err))
		return nil, tool.Errorf("fetch %s: %v", rawURL, err)
	}
	key = fmt.Sprintf("%s\x00%s\x00%v\x00%s\x00%s", key, o.Format, o.MainContent, o.Selector, mode)
	if f.reads != nil {
		if pg, ok := f.reads.get(key); ok {
			return pg, nil
		}
	}
	resp, err := f.client.Get(ctx, rawURL)
	if err != nil {
		f.count(fetchOutcome(err))
		return nil, tool.Errorf("fetch %s: %v", rawURL, err)
	}
	call.Logger.Debug("fetched", "final_url", resp.FinalURL, "status", resp.Status, "bytes", len(resp.Body), "cached", resp.Cached, "hops", len(resp.Hops))
	doc, err := f.extractBody(ctx, resp, o)
	if resp.Status >= 400 {
		f.count("http_status")
		msg := fmt.Sprintf("fetch %s: HTTP %d %s", rawURL, resp.Status, http.StatusText(resp.Status))
		if err == nil && strings.TrimSpace(doc.Text) != "" {
			excerpt, _, next, _ := extract.Paginate(doc.Text, 0, excerptLength)
			if next > 0 {
				excerpt += "…"
			}
			msg += "\n\n" + excerpt
		}
		return nil, tool.Errorf("%s", msg)
	}
	if err != nil {
		var ut *extract.UnsupportedTypeError
		if errors.As(err, &ut) {
			f.count("unsupported_type")
		} else {
			f.count("error")
		}
		return nil, tool.Errorf("read %s: %v", resp.FinalURL, err)
	}
	pg := &page{URL: resp.URL, FinalURL: resp.FinalURL, Status: resp.Status, Doc: doc,
		Scripts: doc.Kind == extract.HTML && bytes.Contains(bytes.ToLower(resp.Body), []byte("<script"))}
	switch {
	case mode == RenderAlways && doc.Kind == extract.HTML, mode == RenderAuto && f.render != nil && needsRender(pg):
		rp, err := f.rendered(ctx, pg, o)
		switch {
		case err != nil && mode == RenderAlways:
			f.count("error")
			return nil, tool.Errorf("fetch %s: %v", rawURL, err)
		case err != nil:
			call.Logger.Info("render failed; the static read stands", "url", rawURL, "err", err)
			pg.Note = fmt.Sprintf("[The page relies on scripts and rendering it in the browser failed: %v. This is the page without its scripts.]", err)
		case mode == RenderAlways || nonSpace(rp.Doc.Text) > nonSpace(pg.Doc.Text):
			pg = rp
		}
	}
	if f.reads != nil && fetch.Storable(resp) {
		f.reads.add(key, pg)
	}
	return pg, nil
}

// nearlyEmpty is the static text size under which a page that has
// scripts is rendered in the browser (render=auto): fewer non-space
// characters than this, as pkg/extract judges readability's misses.
const nearlyEmpty = 200

// needsRender reports a static read that is near empty while the page
// relies on scripts.
func needsRender(pg *page) bool {
	return pg.Doc.Kind == extract.HTML && pg.Scripts && nonSpace(pg.Doc.Text) < nearlyEmpty
}

// rendered reads the page as the browser service renders it, with the
// same extraction options.
func (f *Fetcher) rendered(ctx context.Context, static *page, o extract.Options) (*page, error) {
	rp, err := f.render.Render(ctx, static.FinalURL)
	if err != nil {
		return nil, err
	}
	final, _ := url.Parse(rp.FinalURL)
	doc, err := f.extract.Extract(ctx, extract.Input{URL: final, ContentType: "text/html; charset=utf-8", Body: []byte(rp.HTML)}, o)
	if err != nil {
		return nil, fmt.Errorf("read the rendered page: %w", err)
	}
	if doc.Title == "" {
		doc.Title = rp.Title
	}
	pg := &page{URL: static.URL, FinalURL: rp.FinalURL, Status: rp.Status, Doc: doc, Scripts: true, Rendered: true}
	if rp.Loading {
		pg.Note = "[The page was still loading in the browser when it was read.]"
	}
	return pg, nil
}

func nonSpace(s string) int {
	n := 0
	for _, r := range s {
		if !unicode.IsSpace(r) {
			n++
		}
	}
	return n
}

// extractBody extracts resp's body, at most 2 × GOMAXPROCS at once.
func (f *Fetcher) extractBody(ctx context.Context, resp *fetch.Response, o extract.Options) (*extract.Document, error) {
	select {
	case f.slots <- struct{}{}:
		defer func() { <-f.slots }()
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for an extraction slot: %w", context.Cause(ctx))
	}
	ctx, cancel := context.WithTimeoutCause(ctx, f.extractTimeout, fmt.Errorf("extraction took longer than %s", f.extractTimeout))
	defer cancel()
	final, _ := url.Parse(resp.FinalURL)
	return f.extract.Extract(ctx, extract.Input{URL: final, ContentType: resp.Header.Get("Content-Type"), Body: resp.Body}, o)
}

// fetchOutcome names the metric label of a fetch error.
func fetchOutcome(err error) string {
	var tl *fetch.TooLargeError
	var ue *netguard.UnreachableError
	switch {
	case errors.Is(err, netguard.ErrRefused):
		return "refused"
	case errors.As(err, &ue):
		return "unreachable"
	case errors.Is(err, fetch.ErrRobots):
		return "robots"
	case errors.As(err, &tl):
		return "too_large"
	case errors.Is(err, fetch.ErrTimeout):
		return "timeout"
	}
	return "error"
}
