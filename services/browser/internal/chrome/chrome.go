// Package chrome runs Debian's Chromium under github.com/chromedp/chromedp
// with no network of its own: every request goes to a proxy (package
// egress) that dials through the SSRF guard.
//
// The launch flags make that so:
//
//   - --proxy-server names a proxy that refuses everything, for the
//     browser's default context; each session's context gets its own
//     proxy (Target.createBrowserContext proxyServer), so the proxy knows
//     whose bytes it carries;
//   - --proxy-bypass-list=<-loopback> takes back Chromium's implicit
//     bypass of loopback addresses, so 127.0.0.1 and [::1] go to the
//     proxy too;
//   - --host-resolver-rules maps every name to ~NOTFOUND (but the proxy's
//     own 127.0.0.1), so Chromium resolves nothing: names travel to the
//     proxy, whose guard resolves and judges them;
//   - QUIC off; WebRTC may not use UDP outside the proxy
//     (disable_non_proxied_udp); no background networking, component
//     updates, sync, domain reliability, pings or DNS prefetch.
//
// Each session runs in a browser context of its own (cookies, storage and
// cache never shared) with downloads denied; each page refuses service
// workers before its scripts run. The browser is talked to over a pipe
// (--remote-debugging-pipe), so no debugging port listens anywhere.
package chrome

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// ExecPath finds Chromium: path when set, else chromium or
// chromium-browser on PATH.
func ExecPath(path string) (string, error) {
	if path != "" {
		p, err := exec.LookPath(path)
		if err != nil {
			return "", fmt.Errorf("chromium at %q: %w", path, err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("chromium is not installed: apt-get install -y chromium (make deps does)")
}

// Options configures a Browser.
type Options struct {
	// ExecPath is the Chromium binary (see ExecPath).
	ExecPath string
	// DenyProxy is the URL of a proxy that refuses everything: the proxy of
	// the default browser context, which no session uses.
	DenyProxy string
	// HeapMB caps each renderer's JavaScript heap (V8
	// --max-old-space-size), so a runaway script kills its own tab rather
	// than the machine. 0 leaves V8's default.
	HeapMB int
	// Window is the default viewport, in CSS pixels.
	Width, Height int
	// TempDir holds the fresh profile directory (default os.TempDir()).
	TempDir string
	Logger  *slog.Logger
}

// Browser is one running Chromium. Sessions are its browser contexts.
type Browser struct {
	ctx     context.Context // the browser's chromedp context
	cancel  context.CancelFunc
	alloc   context.CancelFunc
	pid     int
	dataDir string
	logger  *slog.Logger
	o       Options

	mu     sync.Mutex
	closed bool
}

// Flags returns the Chromium switches for o (without the profile
// directory and the debugging pipe, which the allocator adds).
func Flags(o Options) []chromedp.ExecAllocatorOption {
	flags := []chromedp.ExecAllocatorOption{
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(o.Width, o.Height),
		chromedp.Flag("disable-dev-shm-usage", true),
		// No traffic of Chromium's own.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("dns-prefetch-disable", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.Flag("mute-audio", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions,PrivacySandboxSettings4,HttpsUpgrades,SpareRendererForSitePerProcess"),
		chromedp.Flag("disable-popup-blocking", false),
		chromedp.Flag("disable-hang-monitor", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		// The network: a proxy for everything, loopback included, and no
		// name resolved by Chromium (only the proxy's address literal).
		chromedp.ProxyServer(o.DenyProxy),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		chromedp.Flag("webrtc-ip-handling-policy", "disable_non_proxied_udp"),
	}
	if o.HeapMB > 0 {
		flags = append(flags, chromedp.Flag("js-flags", "--max-old-space-size="+strconv.Itoa(o.HeapMB)))
	}
	if o.ExecPath != "" {
		flags = append(flags, chromedp.ExecPath(o.ExecPath))
	}
	return flags
}

// Start launches Chromium with a fresh profile directory, removed when the
// browser closes. The browser lives until Close (or until ctx ends).
func Start(ctx context.Context, o Options) (*Browser, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Width <= 0 || o.Height <= 0 {
		o.Width, o.Height = 1280, 800
	}
	dir, err := os.MkdirTemp(o.TempDir, "brain-browser-")
	if err != nil {
		return nil, fmt.Errorf("start chromium: profile directory: %w", err)
	}
	opts := append(Flags(o), chromedp.UserDataDir(dir))
	actx, acancel := chromedp.NewExecAllocator(context.WithoutCancel(ctx), opts...)
	bctx, bcancel := chromedp.NewContext(actx,
		chromedp.WithLogf(func(f string, a ...any) { o.Logger.Debug("chromium", "msg", fmt.Sprintf(f, a...)) }),
		chromedp.WithErrorf(func(f string, a ...any) { o.Logger.Debug("chromium error", "msg", fmt.Sprintf(f, a...)) }))
	// The first Run starts the browser and binds its life to its context,
	// so it gets bctx itself; the start-up limit is a timer beside it.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(bctx) }()
	var err2 error
	select {
	case err2 = <-started:
	case <-time.After(60 * time.Second):
		err2 = errors.New("no answer within 60s")
	case <-ctx.Done():
		err2 = ctx.Err()
	}
	if err2 != nil {
		bcancel()
		acancel()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start chromium: %w", err2)
	}
	b := &Browser{ctx: bctx, cancel: bcancel, alloc: acancel, dataDir: dir, logger: o.Logger, o: o}
	if c := chromedp.FromContext(bctx); c != nil && c.Browser != nil && c.Browser.Process() != nil {
		b.pid = c.Browser.Process().Pid
	}
	return b, nil
}

// PID is the browser process's id (0 when unknown).
func (b *Browser) PID() int { return b.pid }

// DataDir is the profile directory: every Chromium process of this browser
// carries it in its command line.
func (b *Browser) DataDir() string { return b.dataDir }

// Done is closed when the browser stops (closed, crashed or killed).
func (b *Browser) Done() <-chan struct{} { return b.ctx.Done() }

// Close stops Chromium and every process it started, and removes the
// profile directory.
func (b *Browser) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.alloc()
	_ = os.RemoveAll(b.dataDir)
}

// Context is one isolated browser context (a session's): its own cookies,
// storage and cache, its own proxy, downloads denied.
type Context struct {
	b  *Browser
	ID cdp.BrowserContextID
}

// NewContext creates a browser context whose every request goes to proxy.
func (b *Browser) NewContext(ctx context.Context, proxy string) (*Context, error) {
	ctx, cancel := mergeCancel(b.ctx, ctx)
	defer cancel()
	res, err := chromedp.CallBrowser(ctx, target.CreateBrowserContext, target.CreateBrowserContextParams{
		DisposeOnDetach: ptr(true),
		ProxyServer:     proxy,
		ProxyBypassList: "<-loopback>",
	})
	if err != nil {
		return nil, fmt.Errorf("create browser context: %w", err)
	}
	c := &Context{b: b, ID: res.BrowserContextID}
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorDeny, BrowserContextID: c.ID,
	}); err != nil {
		c.Close()
		return nil, fmt.Errorf("deny downloads: %w", err)
	}
	return c, nil
}

// Close disposes of the context: its pages close and their renderer
// processes end.
func (c *Context) Close() {
	ctx, cancel := context.WithTimeout(c.b.ctx, 10*time.Second)
	defer cancel()
	_, err := chromedp.CallBrowser(ctx, target.DisposeBrowserContext, target.DisposeBrowserContextParams{BrowserContextID: c.ID})
	if err != nil && c.b.ctx.Err() == nil {
		c.b.logger.Debug("dispose browser context", "err", err)
	}
}

// mergeCancel returns a context carrying base's values (the chromedp
// browser) that ends when either base or extra ends.
func mergeCancel(base, extra context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(base)
	stop := context.AfterFunc(extra, func() { cancel(context.Cause(extra)) })
	if dl, ok := extra.Deadline(); ok {
		var c2 context.CancelFunc
		ctx, c2 = context.WithDeadline(ctx, dl)
		return ctx, func() { stop(); c2(); cancel(nil) }
	}
	return ctx, func() { stop(); cancel(nil) }
}

func ptr[T any](v T) *T { return &v }

// Process is one process of the browser's tree.
type Process struct {
	PID int
	// Type is Chromium's --type (renderer, zygote, gpu-process, utility…),
	// "browser" for the main process.
	Type string
	// PSS is the proportional set size, in bytes: the process's private
	// memory plus its share of what it shares, so the PSS of a tree adds up
	// to what the tree really takes (RSS would count shared pages once per
	// process).
	PSS int64
}

// Processes lists every live process of this browser: those whose command
// line names its profile directory (Chromium passes --user-data-dir to
// every child), found in /proc.
func (b *Browser) Processes() ([]Process, error) {
	return ProcessesOf(b.dataDir)
}

// ProcessesOf lists the live processes whose command line carries
// --user-data-dir=dir.
func ProcessesOf(dir string) ([]Process, error) {
	want := "--user-data-dir=" + dir
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		// Processes the zygote forks (renderers among them) rewrite their
		// command line into one string of space-separated words.
		args := strings.FieldsFunc(string(cmdline), func(r rune) bool { return r == 0 || r == ' ' })
		match, typ := false, "browser"
		for _, a := range args {
			if a == want {
				match = true
			}
			if t, ok := strings.CutPrefix(a, "--type="); ok {
				typ = t
			}
		}
		if !match || zombie(pid) {
			continue
		}
		out = append(out, Process{PID: pid, Type: typ, PSS: pss(pid)})
	}
	return out, nil
}

func zombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

// pss reads Pss from /proc/PID/smaps_rollup, in bytes (VmRSS where the
// kernel has no smaps_rollup).
func pss(pid int) int64 {
	if v := procField("/proc/"+strconv.Itoa(pid)+"/smaps_rollup", "Pss:"); v >= 0 {
		return v
	}
	return max(procField("/proc/"+strconv.Itoa(pid)+"/status", "VmRSS:"), 0)
}

// procField reads a "Name:   123 kB" line of a /proc file, in bytes, or -1.
func procField(path, name string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil {
					return n << 10
				}
			}
		}
	}
	return -1
}

// Memory is the PSS of every process of the browser, in bytes.
func (b *Browser) Memory() int64 {
	ps, _ := b.Processes()
	var n int64
	for _, p := range ps {
		n += p.PSS
	}
	return n
}
