package chrome

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// initScript runs in every frame of a page before the page's own scripts:
// service workers cannot be registered (a worker outlives its page and
// fetches on its own), and WebRTC is gone (its UDP never goes through a
// proxy; the launch flags forbid that too).
const initScript = `(() => {
  const deny = () => Promise.reject(new DOMException("service workers are disabled in this browser", "SecurityError"));
  try {
    if (typeof ServiceWorkerContainer !== "undefined") {
      Object.defineProperty(ServiceWorkerContainer.prototype, "register", {value: deny, writable: false, configurable: false});
    }
  } catch (e) {}
  for (const k of ["RTCPeerConnection", "webkitRTCPeerConnection", "RTCDataChannel", "RTCSessionDescription", "RTCIceCandidate"]) {
    try { Object.defineProperty(window, k, {value: undefined, writable: false, configurable: false}); } catch (e) {}
  }
})();`

// Page is one tab of a browser context. Its methods are not safe for
// concurrent use: the caller serializes them (one call per page at once).
type Page struct {
	ctx    context.Context
	cancel context.CancelFunc
	id     target.ID
	width  int64
	height int64

	mu sync.Mutex
	st pageState
	// dialogs carries JavaScript dialogs to the goroutine that dismisses
	// them (an open dialog stalls the page).
	dialogs chan struct{}
}

type pageState struct {
	inflight map[network.RequestID]bool
	// lastActivity is the last request start or end.
	lastActivity time.Time
	// loader is the main frame's current loader; loaded/idle are its
	// lifecycle events seen.
	loader cdp.LoaderID
	loaded bool
	idle   bool
	// status and url are the main document's last response; attachment
	// reports that it was a file to download (Content-Disposition).
	status     int64
	url        string
	attachment bool
	dialogs    []string
}

// NewPage opens a blank page in c with a viewport of width × height CSS
// pixels. ctx bounds the opening only; the page lives until Close or until
// the context is disposed.
func (c *Context) NewPage(ctx context.Context, width, height int) (*Page, error) {
	p := &Page{width: int64(width), height: int64(height), dialogs: make(chan struct{}, 1)}
	p.st.inflight = map[network.RequestID]bool{}
	pctx, cancel := chromedp.NewContext(c.b.ctx, chromedp.WithExistingBrowserContext(c.ID), chromedp.WithListener(p.onEvent))
	p.ctx, p.cancel = pctx, cancel
	// The first Run creates the tab and binds its reader to its context,
	// so it runs on pctx itself; ctx ends the wait (and the tab).
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(pctx) }()
	select {
	case err := <-done:
		if err != nil {
			cancel()
			return nil, fmt.Errorf("open a page: %w", err)
		}
	case <-ctx.Done():
		cancel()
		return nil, fmt.Errorf("open a page: %w", context.Cause(ctx))
	}
	if t := chromedp.FromContext(pctx).Target; t != nil {
		// onEvent reads the id on the tab's reader goroutine.
		p.mu.Lock()
		p.id = t.TargetID
		p.mu.Unlock()
	}
	go p.dismissDialogs()
	sctx, scancel := p.call(ctx)
	defer scancel()
	if err := chromedp.Do(sctx,
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: initScript, RunImmediately: ptr(true)})
			return err
		}),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, network.SetBypassServiceWorker, network.SetBypassServiceWorkerParams{Bypass: true})
			return err
		}),
		chromedp.EmulateViewport(p.width, p.height),
	); err != nil {
		p.Close()
		return nil, fmt.Errorf("set the page up: %w", err)
	}
	return p, nil
}

// Close closes the tab; its renderer process ends with it.
func (p *Page) Close() { p.cancel() }

// Done is closed when the page is closed (or the browser stops).
func (p *Page) Done() <-chan struct{} { return p.ctx.Done() }

// call returns a context for one command on the page that ends when ctx
// or the page ends.
func (p *Page) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return mergeCancel(p.ctx, ctx)
}

// onEvent runs on the tab's reader goroutine: it only records.
func (p *Page) onEvent(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	main := cdp.FrameID(p.id)
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		p.st.inflight[e.RequestID] = true
		p.st.lastActivity = time.Now()
		if e.Type == network.ResourceTypeDocument && e.FrameID == main && e.RedirectResponse == nil && e.LoaderID != p.st.loader {
			p.st.loader, p.st.loaded, p.st.idle = e.LoaderID, false, false
		}
	case *network.EventLoadingFinished:
		delete(p.st.inflight, e.RequestID)
		p.st.lastActivity = time.Now()
	case *network.EventLoadingFailed:
		delete(p.st.inflight, e.RequestID)
		p.st.lastActivity = time.Now()
	case *network.EventResponseReceived:
		if e.Type == network.ResourceTypeDocument && e.FrameID == main && e.Response != nil {
			p.st.status, p.st.url = e.Response.Status, e.Response.URL
			p.st.attachment = false
			for k, v := range e.Response.Headers {
				if strings.EqualFold(k, "Content-Disposition") {
					sv, _ := v.(string)
					p.st.attachment = strings.HasPrefix(strings.ToLower(strings.TrimSpace(sv)), "attachment")
				}
			}
		}
	case *page.EventLifecycleEvent:
		if e.FrameID != main {
			return
		}
		if e.Name == "init" && e.LoaderID != p.st.loader {
			p.st.loader, p.st.loaded, p.st.idle = e.LoaderID, false, false
		}
		if e.LoaderID == p.st.loader {
			switch e.Name {
			case "load":
				p.st.loaded = true
			case "networkIdle":
				p.st.idle = true
			}
		}
	case *page.EventJavascriptDialogOpening:
		if len(p.st.dialogs) < 8 {
			p.st.dialogs = append(p.st.dialogs, fmt.Sprintf("%s: %s", e.Type, e.Message))
		}
		select {
		case p.dialogs <- struct{}{}:
		default:
		}
	}
}

// dismissDialogs answers each JavaScript dialog (alert, confirm, prompt,
// beforeunload): accepting lets navigation and scripts go on; what the
// dialog said is reported with the next result.
func (p *Page) dismissDialogs() {
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.dialogs:
			ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
			_ = chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
				_, err := cdp.Call(ctx, t, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
				return err
			}))
			cancel()
		}
	}
}

// Dialogs returns the dialogs dismissed since the last call.
func (p *Page) Dialogs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.st.dialogs
	p.st.dialogs = nil
	return d
}

// Load is the state of the page after a navigation or an action.
type Load struct {
	// Status is the HTTP status of the main document (0 when none came).
	Status int
	// URL is the page's address now, Title its title.
	URL, Title string
	// Loading reports that the page had not finished loading when the
	// wait ended (its load event, or a quiet network, did not come in
	// time); what rendered so far is what is read.
	Loading bool
}

// Wait says how long to wait for a page to be ready.
type Wait struct {
	// Load limits the wait for the load event.
	Load time.Duration
	// Settle limits the wait, after load, for the network to be quiet
	// (no request for Quiet), so content that scripts fetch is there.
	Settle time.Duration
	Quiet  time.Duration
}

// ErrNavigation wraps Chromium's reason a navigation failed
// (net::ERR_TUNNEL_CONNECTION_FAILED when the proxy refused).
var ErrNavigation = errors.New("navigation failed")

// Navigate loads url in the page and waits as w says.
func (p *Page) Navigate(ctx context.Context, url string, w Wait) (Load, error) {
	cctx, cancel := p.call(ctx)
	defer cancel()
	res, err := chromedp.Run(cctx, func(ctx context.Context, t *chromedp.Target) (page.NavigateResult, error) {
		return cdp.Call(ctx, t, page.Navigate, page.NavigateParams{URL: url})
	})
	if err != nil {
		return Load{}, fmt.Errorf("navigate to %s: %w", url, err)
	}
	p.mu.Lock()
	download := p.st.attachment && p.st.url == url
	p.mu.Unlock()
	if res.IsDownload || (res.ErrorText != "" && download) {
		return Load{}, fmt.Errorf("%w: %s is a download, and downloads are refused", ErrNavigation, url)
	}
	if res.ErrorText != "" {
		return Load{}, fmt.Errorf("%w: %s: %s", ErrNavigation, url, res.ErrorText)
	}
	if res.LoaderID != "" {
		p.mu.Lock()
		if p.st.loader != res.LoaderID {
			p.st.loader, p.st.loaded, p.st.idle = res.LoaderID, false, false
		}
		p.mu.Unlock()
	}
	return p.settle(ctx, w, true)
}

// settle waits for load (when a navigation is under way or wantLoad) and
// a quiet network, each within its limit, then reads the page's state.
func (p *Page) settle(ctx context.Context, w Wait, wantLoad bool) (Load, error) {
	loading := false
	deadline := time.Now().Add(w.Load)
	for {
		p.mu.Lock()
		loaded := p.st.loaded
		p.mu.Unlock()
		if loaded || !wantLoad {
			break
		}
		if time.Now().After(deadline) {
			loading = true
			break
		}
		if err := sleep(ctx, p.ctx, 20*time.Millisecond); err != nil {
			return Load{}, err
		}
	}
	if !loading {
		quietUntil := time.Now().Add(w.Settle)
		for {
			p.mu.Lock()
			idle := p.st.idle
			n := len(p.st.inflight)
			last := p.st.lastActivity
			p.mu.Unlock()
			if idle || (n == 0 && time.Since(last) >= w.Quiet) {
				break
			}
			if time.Now().After(quietUntil) {
				break
			}
			if err := sleep(ctx, p.ctx, 20*time.Millisecond); err != nil {
				return Load{}, err
			}
		}
	}
	l, err := p.State(ctx)
	l.Loading = loading
	return l, err
}

func sleep(ctx, page context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-page.Done():
		return errors.New("the page was closed")
	}
}

// State reads the page's URL, title and main-document status.
func (p *Page) State(ctx context.Context) (Load, error) {
	cctx, cancel := p.call(ctx)
	defer cancel()
	v, err := chromedp.Run(cctx, chromedp.Evaluate[[]string](`[location.href, document.title]`))
	if err != nil {
		return Load{}, fmt.Errorf("read the page: %w", err)
	}
	p.mu.Lock()
	status := p.st.status
	p.mu.Unlock()
	l := Load{Status: int(status)}
	if len(v) == 2 {
		l.URL, l.Title = v[0], v[1]
	}
	return l, nil
}

// HTML serializes the rendered DOM (doctype and document element), at most
// limit bytes of it; cut reports that it was longer.
func (p *Page) HTML(ctx context.Context, limit int) (html string, cut bool, err error) {
	cctx, cancel := p.call(ctx)
	defer cancel()
	expr := fmt.Sprintf(`(() => {
  const d = document.doctype ? "<!DOCTYPE " + document.doctype.name + ">" : "";
  const h = d + (document.documentElement ? document.documentElement.outerHTML : "");
  return h.length > %d ? [h.slice(0, %d), "cut"] : [h, ""];
})()`, limit, limit)
	v, err := chromedp.Run(cctx, chromedp.Evaluate[[]string](expr))
	if err != nil {
		return "", false, fmt.Errorf("read the rendered page: %w", err)
	}
	if len(v) != 2 {
		return "", false, errors.New("read the rendered page: unexpected answer")
	}
	return v[0], v[1] != "", nil
}

// ErrNoElement is wrapped when a selector matches nothing in time.
var ErrNoElement = errors.New("no element matches")

// waitNode waits until sel matches a node, within ctx.
func (p *Page) waitNode(ctx context.Context, sel string, visible bool) error {
	opt := chromedp.NodeReady
	if visible {
		opt = chromedp.NodeVisible
	}
	err := chromedp.Do(ctx, chromedp.Query(chromedp.CSS(sel), opt))
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w %q", ErrNoElement, sel)
	}
	return err
}

// Action is one step of browser_act, already checked.
type Action struct {
	// Kind is click, type, select, press, scroll, back, forward, reload,
	// navigate or wait.
	Kind     string
	Selector string
	Text     string
	Value    string
	Key      string
	URL      string
	// Pixels scrolls by that many CSS pixels (negative: up).
	Pixels int
}

// Act runs a and waits for what it set off (a navigation, requests) as w
// says. timeout bounds finding the element.
func (p *Page) Act(ctx context.Context, a Action, timeout time.Duration, w Wait) (Load, error) {
	if a.Kind == "navigate" {
		return p.Navigate(ctx, a.URL, w)
	}
	cctx, cancel := p.call(ctx)
	defer cancel()
	p.mu.Lock()
	before := p.st.loader
	p.mu.Unlock()
	find, fcancel := context.WithTimeout(cctx, timeout)
	defer fcancel()
	var err error
	switch a.Kind {
	case "click":
		if err = p.waitNode(find, a.Selector, true); err == nil {
			err = chromedp.Do(cctx, chromedp.Click(chromedp.CSS(a.Selector), chromedp.NodeVisible))
		}
	case "type":
		if err = p.waitNode(find, a.Selector, true); err == nil {
			err = chromedp.Do(cctx,
				chromedp.Focus(chromedp.CSS(a.Selector)),
				run(fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (e && "value" in e) { e.value = ""; } return true; })()`, jsString(a.Selector))),
				chromedp.SendKeys(chromedp.CSS(a.Selector), a.Text))
		}
	case "select":
		if err = p.waitNode(find, a.Selector, false); err == nil {
			var got string
			got, err = chromedp.Run(cctx, chromedp.Evaluate[string](fmt.Sprintf(selectJS, jsString(a.Selector), jsString(a.Value))))
			if err == nil && got != "" {
				err = errors.New(got)
			}
		}
	case "press":
		if a.Selector != "" {
			if err = p.waitNode(find, a.Selector, true); err == nil {
				err = chromedp.Do(cctx, chromedp.Focus(chromedp.CSS(a.Selector)))
			}
		}
		if err == nil {
			err = chromedp.Do(cctx, chromedp.KeyEvent(keyOf(a.Key)))
		}
	case "scroll":
		if a.Selector != "" {
			if err = p.waitNode(find, a.Selector, false); err == nil {
				err = chromedp.Do(cctx, chromedp.ScrollIntoView(chromedp.CSS(a.Selector)))
			}
		} else {
			err = chromedp.Do(cctx, run(fmt.Sprintf(`(window.scrollBy(0, %d), true)`, a.Pixels)))
		}
	case "back", "forward":
		err = p.history(cctx, a.Kind == "back")
	case "reload":
		_, err = chromedp.Run(cctx, func(ctx context.Context, t *chromedp.Target) (cdp.Empty, error) {
			return cdp.Call(ctx, t, page.Reload, page.ReloadParams{})
		})
	case "wait":
		if a.Selector != "" {
			err = p.waitNode(find, a.Selector, true)
		} else {
			_, err = chromedp.Run(find, chromedp.Poll[bool](fmt.Sprintf(`document.body && document.body.innerText.includes(%s)`, jsString(a.Text)), chromedp.WithPollingInterval(100*time.Millisecond)))
			if err != nil && find.Err() != nil {
				err = fmt.Errorf("the text %q did not appear within %s", a.Text, timeout)
			}
		}
	default:
		err = fmt.Errorf("unknown action %q", a.Kind)
	}
	if err != nil {
		if ctx.Err() != nil {
			return Load{}, context.Cause(ctx)
		}
		return Load{}, err
	}
	// A navigation the action started (a link, a submit) is waited for;
	// a page that stays gets its quiet-network wait only.
	time.Sleep(50 * time.Millisecond)
	p.mu.Lock()
	navigated := p.st.loader != before
	p.mu.Unlock()
	return p.settle(ctx, w, navigated)
}

const selectJS = `(() => {
  const e = document.querySelector(%s), v = %s;
  if (!e) return "no element matches";
  if (e.tagName !== "SELECT") return "the element is a " + e.tagName.toLowerCase() + ", not a select";
  const o = Array.from(e.options).find(o => o.value === v) || Array.from(e.options).find(o => o.text.trim() === v);
  if (!o) return "no option has the value or text " + JSON.stringify(v) + " (options: " + Array.from(e.options).map(o => JSON.stringify(o.value)).join(", ") + ")";
  e.value = o.value;
  e.dispatchEvent(new Event("input", {bubbles: true}));
  e.dispatchEvent(new Event("change", {bubbles: true}));
  return "";
})()`

func (p *Page) history(ctx context.Context, back bool) error {
	h, err := chromedp.Run(ctx, chromedp.NavigationEntries())
	if err != nil {
		return err
	}
	i := h.CurrentIndex + 1
	if back {
		i = h.CurrentIndex - 1
	}
	if i < 0 || i >= int64(len(h.Entries)) {
		if back {
			return errors.New("there is no page to go back to")
		}
		return errors.New("there is no page to go forward to")
	}
	_, err = chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (cdp.Empty, error) {
		return cdp.Call(ctx, t, page.NavigateToHistoryEntry, page.NavigateToHistoryEntryParams{EntryID: h.Entries[i].ID})
	})
	return err
}

// keyNames are the keys press accepts by name (else one character).
var keyNames = map[string]string{
	"enter": kb.Enter, "tab": kb.Tab, "escape": kb.Escape, "backspace": kb.Backspace,
	"delete": kb.Delete, "arrowup": kb.ArrowUp, "arrowdown": kb.ArrowDown,
	"arrowleft": kb.ArrowLeft, "arrowright": kb.ArrowRight, "home": kb.Home,
	"end": kb.End, "pageup": kb.PageUp, "pagedown": kb.PageDown, "space": " ",
}

// KeyNames lists the named keys, for the binding's description.
func KeyNames() []string {
	return []string{"Enter", "Tab", "Escape", "Backspace", "Delete", "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "Home", "End", "PageUp", "PageDown", "Space"}
}

// ValidKey reports whether press accepts k: a named key or one character.
func ValidKey(k string) bool {
	if _, ok := keyNames[strings.ToLower(k)]; ok {
		return true
	}
	return len([]rune(k)) == 1
}

func keyOf(k string) string {
	if v, ok := keyNames[strings.ToLower(k)]; ok {
		return v
	}
	return k
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Shot says what to capture.
type Shot struct {
	// Width and Height set the viewport for the capture, in CSS pixels
	// (0: the page's viewport). The PNG has exactly that size (device
	// scale 1), or the page's full height with FullPage.
	Width, Height int
	FullPage      bool
	// MaxHeight caps a full-page capture's height, in CSS pixels.
	MaxHeight int
	// Scale shrinks the image (0 < Scale <= 1), to fit a byte limit.
	Scale float64
}

// Screenshot captures the page as a PNG and returns it with its size in
// pixels. The page's viewport is set back afterwards.
func (p *Page) Screenshot(ctx context.Context, s Shot) (png []byte, w, h int, err error) {
	cctx, cancel := p.call(ctx)
	defer cancel()
	width, height := p.width, p.height
	if s.Width > 0 {
		width = int64(s.Width)
	}
	if s.Height > 0 {
		height = int64(s.Height)
	}
	if s.Scale <= 0 || s.Scale > 1 {
		s.Scale = 1
	}
	if err := chromedp.Do(cctx, chromedp.EmulateViewport(width, height)); err != nil {
		return nil, 0, 0, fmt.Errorf("set the viewport: %w", err)
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(p.ctx, 5*time.Second)
		defer rcancel()
		_ = chromedp.Do(rctx, chromedp.EmulateViewport(p.width, p.height))
	}()
	capH := float64(height)
	if s.FullPage {
		m, err := chromedp.Run(cctx, func(ctx context.Context, t *chromedp.Target) (page.GetLayoutMetricsResult, error) {
			return cdp.Call(ctx, t, page.GetLayoutMetrics, cdp.Empty{})
		})
		if err != nil {
			return nil, 0, 0, fmt.Errorf("measure the page: %w", err)
		}
		if m.CSSContentSize != nil && m.CSSContentSize.Height > capH {
			capH = m.CSSContentSize.Height
		}
		if s.MaxHeight > 0 && capH > float64(s.MaxHeight) {
			capH = float64(s.MaxHeight)
		}
	}
	clip := &page.Viewport{X: 0, Y: 0, Width: float64(width), Height: capH, Scale: s.Scale}
	data, err := chromedp.Run(cctx, func(ctx context.Context, t *chromedp.Target) (page.CaptureScreenshotResult, error) {
		return cdp.Call(ctx, t, page.CaptureScreenshot, page.CaptureScreenshotParams{
			Format: page.CaptureScreenshotFormatPng, Clip: clip, FromSurface: ptr(true), CaptureBeyondViewport: ptr(s.FullPage),
		})
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("capture: %w", err)
	}
	return data.Data, int(float64(width) * s.Scale), int(capH * s.Scale), nil
}

// Metrics reads the page's JavaScript heap use, in bytes.
func (p *Page) Metrics(ctx context.Context) (int64, error) {
	cctx, cancel := p.call(ctx)
	defer cancel()
	v, err := chromedp.Run(cctx, func(ctx context.Context, t *chromedp.Target) (runtime.GetHeapUsageResult, error) {
		return cdp.Call(ctx, t, runtime.GetHeapUsage, cdp.Empty{})
	})
	if err != nil {
		return 0, err
	}
	return int64(v.UsedSize), nil
}

// run evaluates expr (which must return a value) for its effect.
func run(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](expr)(ctx, t)
		return err
	})
}

// Eval evaluates expr, which must give a string, in the page.
func (p *Page) Eval(ctx context.Context, expr string) (string, error) {
	cctx, cancel := p.call(ctx)
	defer cancel()
	return chromedp.Run(cctx, chromedp.Evaluate[string](expr))
}
