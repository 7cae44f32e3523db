package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/extract"
	"github.com/brain-tools/suite/pkg/netguard"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/browser/internal/chrome"
	"github.com/brain-tools/suite/services/browser/internal/session"
)

func bad(field, format string, args ...any) error {
	return &strictjson.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// ReadArgs say how a page is read: the arguments browser_open and
// browser_act share.
type ReadArgs struct {
	MaxLength   *int   `json:"max_length,omitempty"`
	Format      string `json:"format,omitempty"`
	MainContent *bool  `json:"main_content,omitempty"`
	Selector    string `json:"selector,omitempty"`
}

func (a *ReadArgs) validate() error {
	switch extract.Format(a.Format) {
	case "", extract.Markdown, extract.TextFormat, extract.HTMLFormat:
	default:
		return bad("format", "must be markdown, text or html, got %q", a.Format)
	}
	if a.MaxLength != nil && (*a.MaxLength < 1 || *a.MaxLength > MaxMaxLength) {
		return bad("max_length", "must be from 1 to %d characters, got %d", MaxMaxLength, *a.MaxLength)
	}
	return checkSelector("selector", a.Selector)
}

func checkSelector(field, s string) error {
	if s == "" {
		return nil
	}
	if len(s) > MaxSelectorLength {
		return bad(field, "longer than %d bytes", MaxSelectorLength)
	}
	if err := extract.CheckSelector(s); err != nil {
		return bad(field, "not a valid CSS selector: %v", err)
	}
	return nil
}

func checkURL(field, raw string) error {
	switch {
	case raw == "":
		return bad(field, "required")
	case len(raw) > MaxURLLength:
		return bad(field, "longer than %d bytes", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad(field, "not a valid URL: %v", errors.Unwrap(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad(field, "must be an absolute http:// or https:// URL (file:, chrome:, data:, javascript: and other schemes are refused), got %q", raw)
	}
	if u.Host == "" {
		return bad(field, "has no host")
	}
	return nil
}

func (a *ReadArgs) options() (extract.Options, int) {
	o := extract.Options{Format: extract.Format(a.Format), Selector: a.Selector}
	if o.Format == "" {
		o.Format = extract.Markdown
	}
	if a.MainContent != nil {
		o.MainContent = *a.MainContent
	}
	n := DefaultMaxLength
	if a.MaxLength != nil {
		n = *a.MaxLength
	}
	return o, n
}

// OpenArgs are browser_open's arguments.
type OpenArgs struct {
	URL        string `json:"url,omitempty"`
	PageID     string `json:"page_id,omitempty"`
	StartIndex *int   `json:"start_index,omitempty"`
	WaitFor    string `json:"wait_for,omitempty"`
	ReadArgs
}

// Validate checks every argument and names the one at fault.
func (a *OpenArgs) Validate() error {
	if a.URL == "" && a.PageID == "" {
		return bad("url", "required (or page_id, to read an open page again)")
	}
	if a.URL != "" {
		if err := checkURL("url", a.URL); err != nil {
			return err
		}
	}
	if a.StartIndex != nil && *a.StartIndex < 0 {
		return bad("start_index", "must be 0 or more, got %d", *a.StartIndex)
	}
	if err := checkSelector("wait_for", a.WaitFor); err != nil {
		return err
	}
	return a.validate()
}

// Step is one action of browser_act.
type Step struct {
	Action   string `json:"action"`
	Selector string `json:"selector,omitempty"`
	Text     string `json:"text,omitempty"`
	Value    string `json:"value,omitempty"`
	Key      string `json:"key,omitempty"`
	URL      string `json:"url,omitempty"`
	Pixels   *int   `json:"pixels,omitempty"`
}

// ActArgs are browser_act's arguments.
type ActArgs struct {
	PageID  string `json:"page_id"`
	Actions []Step `json:"actions"`
	ReadArgs
}

// Validate checks every step and names the field at fault
// ("actions[2].selector: required for click").
func (a *ActArgs) Validate() error {
	if a.PageID == "" {
		return bad("page_id", "required")
	}
	if len(a.Actions) == 0 {
		return bad("actions", "required: at least one step")
	}
	if len(a.Actions) > MaxActions {
		return bad("actions", "at most %d steps, got %d", MaxActions, len(a.Actions))
	}
	for i, s := range a.Actions {
		f := func(name string) string { return fmt.Sprintf("actions[%d].%s", i, name) }
		need := map[string]bool{}
		switch s.Action {
		case "click", "type", "select":
			need["selector"] = true
		case "press":
			need["key"] = true
		case "navigate":
			need["url"] = true
		case "wait":
			if s.Selector == "" && s.Text == "" {
				return bad(f("selector"), "wait needs a selector or a text")
			}
		case "scroll", "back", "forward", "reload":
		case "":
			return bad(f("action"), "required")
		default:
			return bad(f("action"), "must be click, type, select, press, scroll, back, forward, reload, navigate or wait, got %q", s.Action)
		}
		if need["selector"] && s.Selector == "" {
			return bad(f("selector"), "required for %s", s.Action)
		}
		if err := checkSelector(f("selector"), s.Selector); err != nil {
			return err
		}
		if need["key"] && !chrome.ValidKey(s.Key) {
			return bad(f("key"), "must be one character or one of %s, got %q", strings.Join(chrome.KeyNames(), ", "), s.Key)
		}
		if s.Action == "navigate" {
			if err := checkURL(f("url"), s.URL); err != nil {
				return err
			}
		}
		if len(s.Text) > MaxTextLength || len(s.Value) > MaxTextLength {
			return bad(f("text"), "longer than %d bytes", MaxTextLength)
		}
		if s.Action == "select" && s.Value == "" {
			return bad(f("value"), "required for select")
		}
		if s.Pixels != nil && (*s.Pixels < -MaxScroll || *s.Pixels > MaxScroll) {
			return bad(f("pixels"), "must be from %d to %d, got %d", -MaxScroll, MaxScroll, *s.Pixels)
		}
	}
	return a.validate()
}

// ShotArgs are browser_screenshot's arguments.
type ShotArgs struct {
	PageID   string `json:"page_id"`
	FullPage bool   `json:"full_page,omitempty"`
	Width    *int   `json:"width,omitempty"`
	Height   *int   `json:"height,omitempty"`
}

// Validate checks the size.
func (a *ShotArgs) Validate() error {
	if a.PageID == "" {
		return bad("page_id", "required")
	}
	for _, d := range []struct {
		name string
		v    *int
	}{{"width", a.Width}, {"height", a.Height}} {
		if d.v != nil && (*d.v < minViewport || *d.v > maxViewport) {
			return bad(d.name, "must be from %d to %d pixels, got %d", minViewport, maxViewport, *d.v)
		}
	}
	return nil
}

// PagesArgs are browser_pages' arguments.
type PagesArgs struct {
	Action string `json:"action,omitempty"`
	PageID string `json:"page_id,omitempty"`
}

// Validate checks the action.
func (a *PagesArgs) Validate() error {
	switch a.Action {
	case "", "list", "close_all":
	case "close":
		if a.PageID == "" {
			return bad("page_id", "required for close")
		}
	default:
		return bad("action", "must be list, close or close_all, got %q", a.Action)
	}
	return nil
}

// PageOutput is the structured_content of browser_open and browser_act.
type PageOutput struct {
	PageID         string   `json:"page_id"`
	URL            string   `json:"url"`
	Status         int      `json:"status"`
	Title          string   `json:"title"`
	TotalLength    int      `json:"total_length"`
	NextStartIndex *int     `json:"next_start_index,omitempty"`
	Loading        bool     `json:"loading,omitempty"`
	Blocked        []string `json:"blocked,omitempty"`
	Dialogs        []string `json:"dialogs,omitempty"`
	WeightLimited  bool     `json:"weight_limited,omitempty"`
}

// snapshot is what a read extracted from a page: later reads with
// start_index page through it, so the parts join back with nothing lost
// even when the live page changes.
type snapshot struct {
	out      PageOutput
	text     string
	elements string
	opts     extract.Options
}

// Tools is the service's tool set over the session manager.
type Tools struct {
	cfg      Config
	m        *session.Manager
	guard    *netguard.Guard
	ex       *extract.Extractor
	w, h     int
	wait     chrome.Wait
	maxElems int
}

func (t *Tools) key(call *service.Call) session.Key {
	return session.Key{Tenant: call.TenantID, Session: call.SessionID}
}

// checkDestination refuses, before anything is opened, a URL the guard
// would refuse, with the guard's words (the proxy would refuse it too, but
// Chromium then only says "tunnel connection failed").
func (t *Tools) checkDestination(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	u, err = t.guard.CheckURL(u)
	if err != nil {
		return err
	}
	if _, err := t.guard.Resolve(ctx, u.Hostname()); err != nil {
		return err
	}
	return nil
}

func (t *Tools) open(ctx context.Context, call *service.Call, a OpenArgs) *tool.Result {
	opts, maxLen := a.options()
	start := 0
	if a.StartIndex != nil {
		start = *a.StartIndex
	}
	if a.URL != "" {
		if err := t.checkDestination(ctx, a.URL); err != nil {
			return tool.Errorf("open %s: %v", a.URL, err)
		}
	}
	s, err := t.m.Acquire(ctx, t.key(call))
	if err != nil {
		return tool.Errorf("open %s: %v", orPage(a.URL, a.PageID), err)
	}
	defer s.Release()
	var p *session.Page
	created := false
	if a.PageID != "" {
		if p, err = s.Page(a.PageID); err != nil {
			return tool.Errorf("%v", err)
		}
	} else {
		if p, err = s.NewPage(ctx, t.w, t.h); err != nil {
			return tool.Errorf("open %s: %v", a.URL, err)
		}
		created = true
	}
	// A new page whose opening failed or was cancelled is closed: nothing
	// of a failed call stays behind.
	ok := false
	defer func() {
		if created && !ok {
			_ = s.ClosePage(p.ID)
		}
	}()
	if a.URL == "" && start > 0 {
		snap, _ := p.Snapshot.(*snapshot)
		if snap == nil || snap.opts != opts {
			return tool.Errorf("start_index %d: page %s has no earlier read with these options; read it with start_index 0 first", start, p.ID)
		}
		ok = true
		return t.page(p, snap, start, maxLen, "")
	}
	var load chrome.Load
	if a.URL != "" {
		load, err = p.Page.Navigate(ctx, a.URL, t.wait)
	} else {
		load, err = p.Page.State(ctx)
	}
	if err != nil {
		return t.failure(ctx, s, fmt.Sprintf("open %s", orPage(a.URL, a.PageID)), err)
	}
	if reason, refused := s.Egress.RefusedURL(load.URL); refused {
		// The page's own document was refused (a redirect to an address
		// the guard does not allow): what shows is the proxy's refusal,
		// not a page of that address.
		op := "open " + orPage(a.URL, a.PageID)
		if load.URL != a.URL {
			op += ": redirect to " + load.URL
		}
		return t.failure(ctx, s, op, errors.New(reason))
	}
	if a.WaitFor != "" {
		if load, err = p.Page.Act(ctx, chrome.Action{Kind: "wait", Selector: a.WaitFor}, t.cfg.ActionTimeout, t.wait); err != nil {
			return t.failure(ctx, s, fmt.Sprintf("wait for %q on %s", a.WaitFor, load.URL), err)
		}
	}
	snap, err := t.read(ctx, s, p, load, opts)
	if err != nil {
		return t.failure(ctx, s, fmt.Sprintf("read %s", orPage(a.URL, a.PageID)), err)
	}
	ok = true
	return t.page(p, snap, start, maxLen, snap.elements)
}

func orPage(u, id string) string {
	if u != "" {
		return u
	}
	return "page " + id
}

// failure words a failed call, adding what the guard refused.
func (t *Tools) failure(ctx context.Context, s *session.Session, op string, err error) *tool.Result {
	if ctx.Err() != nil {
		return tool.Errorf("%s: %v", op, context.Cause(ctx))
	}
	msg := fmt.Sprintf("%s: %v", op, err)
	if r := s.Egress.Refusals(); len(r) > 0 {
		msg += "\nRefused by the SSRF guard: " + strings.Join(r, "; ")
	}
	if used, over := s.Egress.Used(); over {
		msg += fmt.Sprintf("\nThe page downloaded more than the %d-byte page-weight limit (%d bytes); its connections were cut.", s.Egress.Budget(), used)
	}
	return tool.Errorf("%s", msg)
}

// read extracts the page's rendered DOM and keeps it as the page's snapshot.
func (t *Tools) read(ctx context.Context, s *session.Session, p *session.Page, load chrome.Load, opts extract.Options) (*snapshot, error) {
	html, cut, err := p.Page.HTML(ctx, t.cfg.MaxHTMLBytes)
	if err != nil {
		return nil, err
	}
	final, _ := url.Parse(load.URL)
	doc, err := t.ex.Extract(ctx, extract.Input{URL: final, ContentType: "text/html; charset=utf-8", Body: []byte(html)}, opts)
	if err != nil {
		return nil, err
	}
	elems, err := elements(ctx, p.Page, t.maxElems)
	if err != nil {
		elems = ""
	}
	title := load.Title
	if title == "" {
		title = doc.Title
	}
	text := doc.Text
	if strings.TrimSpace(text) == "" {
		text = ""
	}
	if cut {
		text += fmt.Sprintf("\n\n[The rendered page is larger than %d bytes: only that much was read.]", t.cfg.MaxHTMLBytes)
	}
	used, over := s.Egress.Used()
	_ = used
	snap := &snapshot{
		out: PageOutput{PageID: p.ID, URL: load.URL, Status: load.Status, Title: title, Loading: load.Loading,
			Blocked: s.Egress.Refusals(), Dialogs: p.Page.Dialogs(), WeightLimited: over},
		text: text, elements: elems, opts: opts,
	}
	p.Snapshot = snap
	return snap, nil
}

// page answers one part of a snapshot.
func (t *Tools) page(p *session.Page, snap *snapshot, start, maxLen int, elems string) *tool.Result {
	part, total, next, err := extract.Paginate(snap.text, start, maxLen)
	if err != nil {
		return tool.Errorf("invalid arguments: %v", err)
	}
	out := snap.out
	out.TotalLength = total
	if next > 0 {
		out.NextStartIndex = &next
	}
	if start > 0 {
		out.Blocked, out.Dialogs = nil, nil
	}
	var content []tool.Content
	if total == 0 {
		content = append(content, tool.Text(fmt.Sprintf("[No readable text: page %s (%s, HTTP %d, titled %q) rendered no text.]", p.ID, out.URL, out.Status, out.Title)))
	} else {
		content = append(content, tool.Text(part))
	}
	var notes []string
	if next > 0 {
		notes = append(notes, fmt.Sprintf("[Content cut at character %d of %d. Call browser_open with page_id=%q and start_index=%d to read more.]", next, total, p.ID, next))
	}
	if out.Loading {
		notes = append(notes, "[The page was still loading when it was read.]")
	}
	if len(out.Blocked) > 0 {
		notes = append(notes, "[Requests refused by the SSRF guard: "+strings.Join(out.Blocked, "; ")+"]")
	}
	if out.WeightLimited {
		notes = append(notes, fmt.Sprintf("[The page downloaded more than the page-weight limit of %d bytes; its connections were cut.]", t.cfg.MaxPageBytes))
	}
	if len(out.Dialogs) > 0 {
		notes = append(notes, "[Dialogs the page opened (accepted): "+strings.Join(out.Dialogs, "; ")+"]")
	}
	if elems != "" {
		notes = append(notes, "Elements you can act on (browser_act selector, kind, label):\n"+elems)
	}
	if len(notes) > 0 {
		content = append(content, tool.Text(strings.Join(notes, "\n\n")))
	}
	data, err := json.Marshal(out)
	if err != nil {
		return tool.Errorf("encode result: %v", err)
	}
	return &tool.Result{Content: content, StructuredContent: data}
}

func (t *Tools) act(ctx context.Context, call *service.Call, a ActArgs) *tool.Result {
	opts, maxLen := a.options()
	for i, st := range a.Actions {
		if st.Action == "navigate" {
			if err := t.checkDestination(ctx, st.URL); err != nil {
				return tool.Errorf("actions[%d] navigate %s: %v", i, st.URL, err)
			}
		}
	}
	if !t.m.Existing(t.key(call)) {
		return tool.Errorf("no page %q: this session has no pages; open one with browser_open", a.PageID)
	}
	s, err := t.m.Acquire(ctx, t.key(call))
	if err != nil {
		return tool.Errorf("act on page %s: %v", a.PageID, err)
	}
	defer s.Release()
	p, err := s.Page(a.PageID)
	if err != nil {
		return tool.Errorf("%v", err)
	}
	var load chrome.Load
	for i, st := range a.Actions {
		ca := chrome.Action{Kind: st.Action, Selector: st.Selector, Text: st.Text, Value: st.Value, Key: st.Key, URL: st.URL}
		if st.Action == "scroll" && st.Selector == "" {
			ca.Pixels = t.h
			if st.Pixels != nil {
				ca.Pixels = *st.Pixels
			}
		}
		load, err = p.Page.Act(ctx, ca, t.cfg.ActionTimeout, t.wait)
		if err != nil {
			what := st.Action
			if st.Selector != "" {
				what += fmt.Sprintf(" %q", st.Selector)
			}
			done := ""
			if i > 0 {
				done = fmt.Sprintf(" (steps 0 to %d were done)", i-1)
			}
			return t.failure(ctx, s, fmt.Sprintf("actions[%d] %s%s", i, what, done), err)
		}
	}
	snap, err := t.read(ctx, s, p, load, opts)
	if err != nil {
		return t.failure(ctx, s, fmt.Sprintf("read page %s", p.ID), err)
	}
	return t.page(p, snap, 0, maxLen, snap.elements)
}

// ShotOutput is browser_screenshot's structured_content.
type ShotOutput struct {
	PageID string  `json:"page_id"`
	URL    string  `json:"url"`
	Width  int     `json:"width"`
	Height int     `json:"height"`
	Scale  float64 `json:"scale"`
}

func (t *Tools) screenshot(ctx context.Context, call *service.Call, a ShotArgs) *tool.Result {
	if !t.m.Existing(t.key(call)) {
		return tool.Errorf("no page %q: this session has no pages; open one with browser_open", a.PageID)
	}
	s, err := t.m.Acquire(ctx, t.key(call))
	if err != nil {
		return tool.Errorf("screenshot page %s: %v", a.PageID, err)
	}
	defer s.Release()
	p, err := s.Page(a.PageID)
	if err != nil {
		return tool.Errorf("%v", err)
	}
	shot := chrome.Shot{FullPage: a.FullPage, MaxHeight: MaxShotHeight, Scale: 1}
	if a.Width != nil {
		shot.Width = *a.Width
	}
	if a.Height != nil {
		shot.Height = *a.Height
	}
	var png []byte
	var w, h int
	// A capture over the byte limit is taken again, smaller: PNG size grows
	// with the area, so the scale is the square root of the ratio, with a
	// margin.
	for try := 0; try < 4; try++ {
		png, w, h, err = p.Page.Screenshot(ctx, shot)
		if err != nil {
			return t.failure(ctx, s, fmt.Sprintf("screenshot page %s", p.ID), err)
		}
		if len(png) <= MaxShotBytes {
			break
		}
		shot.Scale *= min(0.9, 0.9*math.Sqrt(float64(MaxShotBytes)/float64(len(png))))
	}
	if len(png) > MaxShotBytes {
		return tool.Errorf("screenshot page %s: the PNG is %d bytes even at scale %.2f, over the %d-byte limit; capture the viewport, or a smaller one", p.ID, len(png), shot.Scale, MaxShotBytes)
	}
	st, _ := p.Page.State(ctx)
	out := ShotOutput{PageID: p.ID, URL: st.URL, Width: w, Height: h, Scale: shot.Scale}
	data, err := json.Marshal(out)
	if err != nil {
		return tool.Errorf("encode result: %v", err)
	}
	note := fmt.Sprintf("Screenshot of page %s (%s): %d×%d PNG", p.ID, st.URL, w, h)
	if shot.Scale < 1 {
		note += fmt.Sprintf(", shrunk to scale %.2f to fit %d bytes", shot.Scale, MaxShotBytes)
	}
	return &tool.Result{Content: []tool.Content{tool.Image(png, "image/png"), tool.Text(note + ".")}, StructuredContent: data}
}

// PagesOutput is browser_pages' structured_content.
type PagesOutput struct {
	Pages []PageInfo `json:"pages"`
}

// PageInfo is one open page.
type PageInfo struct {
	PageID string `json:"page_id"`
	URL    string `json:"url"`
	Title  string `json:"title"`
}

func (t *Tools) pages(ctx context.Context, call *service.Call, a PagesArgs) *tool.Result {
	out := PagesOutput{Pages: []PageInfo{}}
	if !t.m.Existing(t.key(call)) {
		if a.Action == "close" {
			return tool.Errorf("no page %q: this session has no pages", a.PageID)
		}
		data, _ := json.Marshal(out)
		return &tool.Result{Content: []tool.Content{tool.Text("This session has no open pages.")}, StructuredContent: data}
	}
	s, err := t.m.Acquire(ctx, t.key(call))
	if err != nil {
		return tool.Errorf("browser pages: %v", err)
	}
	defer s.Release()
	var text string
	switch a.Action {
	case "close":
		if err := s.ClosePage(a.PageID); err != nil {
			return tool.Errorf("%v", err)
		}
		text = fmt.Sprintf("Closed page %s.", a.PageID)
	case "close_all":
		n := len(s.Pages())
		s.End()
		data, _ := json.Marshal(out)
		return &tool.Result{Content: []tool.Content{tool.Text(fmt.Sprintf("Closed %d pages and ended the browsing session (cookies and storage are gone).", n))}, StructuredContent: data}
	}
	var lines []string
	for _, p := range s.Pages() {
		st, err := p.Page.State(ctx)
		if err != nil {
			continue
		}
		out.Pages = append(out.Pages, PageInfo{PageID: p.ID, URL: st.URL, Title: st.Title})
		lines = append(lines, fmt.Sprintf("- %s: %s (%q)", p.ID, st.URL, st.Title))
	}
	if len(lines) == 0 {
		lines = append(lines, "This session has no open pages.")
	}
	if text != "" {
		lines = append([]string{text}, lines...)
	}
	data, err := json.Marshal(out)
	if err != nil {
		return tool.Errorf("encode result: %v", err)
	}
	return &tool.Result{Content: []tool.Content{tool.Text(strings.Join(lines, "\n"))}, StructuredContent: data}
}

// list builds the service tools.
func (t *Tools) list() []service.Tool {
	b := Bindings()
	return []service.Tool{
		service.NewTool(b[0], answer(t.open)),
		service.NewTool(b[1], answer(t.act)),
		service.NewTool(b[2], answer(t.screenshot)),
		service.NewTool(b[3], answer(t.pages)),
	}
}

// answer declares a handler that answers its own result (the page's text
// and images) as NewTool's: the runtime checks its written schemas on every
// transport first.
func answer[In any](fn func(context.Context, *service.Call, In) *tool.Result) service.TypedHandler[In, *tool.Result] {
	return func(ctx context.Context, call *service.Call, in In) (*tool.Result, error) {
		return fn(ctx, call, in), nil
	}
}

// elementsJS lists up to %d visible elements a person could act on, each
// with a CSS selector that finds it (an id, a unique name, else a path of
// :nth-of-type steps), its kind and its label.
const elementsJS = `(() => {
  const limit = %d, out = [];
  const ident = /^[A-Za-z][\w-]*$/;
  const unique = s => { try { return document.querySelectorAll(s).length === 1; } catch (e) { return false; } };
  const sel = e => {
    if (e.id && ident.test(e.id) && unique("#" + e.id)) return "#" + e.id;
    const tag = e.tagName.toLowerCase(), name = e.getAttribute("name");
    if (name && /^[\w.-]+$/.test(name) && unique(tag + "[name=\"" + name + "\"]")) return tag + "[name=\"" + name + "\"]";
    const parts = [];
    for (let n = e; n && n.nodeType === 1 && n !== document.documentElement; n = n.parentElement) {
      if (n !== e && n.id && ident.test(n.id) && unique("#" + n.id)) { parts.unshift("#" + n.id); break; }
      let i = 1;
      for (let s = n.previousElementSibling; s; s = s.previousElementSibling) if (s.tagName === n.tagName) i++;
      parts.unshift(n.tagName.toLowerCase() + ":nth-of-type(" + i + ")");
    }
    return parts.join(" > ");
  };
  for (const e of document.querySelectorAll("a[href], button, input, select, textarea, [role=button], [role=link], [onclick], [contenteditable=true], [contenteditable='']")) {
    if (out.length >= limit) break;
    if (e.type === "hidden" || e.disabled) continue;
    const r = e.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    let kind = e.tagName.toLowerCase();
    if (kind === "input") kind += "[" + (e.getAttribute("type") || "text") + "]";
    const label = (e.getAttribute("aria-label") || (e.labels && e.labels[0] && e.labels[0].innerText) || e.innerText || e.value || e.placeholder || e.title || e.getAttribute("alt") || "").trim().replace(/\s+/g, " ").slice(0, 80);
    out.push(["- " + JSON.stringify(sel(e)), kind, JSON.stringify(label)].join(" "));
  }
  return out.join("\n");
})()`

func elements(ctx context.Context, p *chrome.Page, limit int) (string, error) {
	return p.Eval(ctx, fmt.Sprintf(elementsJS, limit))
}

// timeout of a render request when the caller sets none.
const renderTimeout = 45 * time.Second
