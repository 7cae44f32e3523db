// Package egress is the browser's only way out: an HTTP proxy inside the
// service that Chromium is told to use for every request, and that opens
// every connection through the SSRF guard (pkg/netguard). Chromium resolves
// no name and dials no address itself (see package chrome for the flags),
// so subresources, redirects, fetch()/XHR, WebSockets and workers all come
// here: a CONNECT (https:, wss:, and ws: too, which Chromium tunnels) is
// dialed with the guard's DialContext, which checks the port, resolves the
// name itself, refuses a name with any non-public address and checks the
// IP of the socket; an absolute-form request (plain http:) is checked with
// CheckURL and sent over the guard's Transport without following redirects,
// so Chromium asks again, through here, for every Location.
//
// Each browsing session gets its own Endpoint (a listener on 127.0.0.1:0),
// so the proxy knows whose traffic it carries: it counts the bytes a
// session receives against a budget (the page-weight limit), records what
// it refused, and closes every connection of the session when the session
// ends.
package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brain-tools/suite/pkg/netguard"
)

// ErrWeight is wrapped by the error a connection ends with when a session
// has received more than its budget.
var ErrWeight = errors.New("page weight limit reached")

// maxRefusals is how many refused destinations an Endpoint remembers.
const maxRefusals = 32

// Proxy dials for every Endpoint through one guard. It is safe for
// concurrent use.
type Proxy struct {
	guard     *netguard.Guard
	transport *http.Transport
	logger    *slog.Logger
}

// New returns a Proxy whose every connection goes through g. A nil logger
// discards.
func New(g *netguard.Guard, logger *slog.Logger) *Proxy {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tr := g.Transport()
	tr.MaxIdleConnsPerHost = 8
	tr.IdleConnTimeout = 30 * time.Second
	tr.MaxResponseHeaderBytes = 1 << 20
	// Chromium decodes content itself: pass the body as it came.
	tr.DisableCompression = true
	return &Proxy{guard: g, transport: tr, logger: logger}
}

// Close drops the idle upstream connections of plain-http requests.
func (p *Proxy) Close() { p.transport.CloseIdleConnections() }

// Endpoint is one session's proxy listener. Its zero budget means no limit.
type Endpoint struct {
	p      *Proxy
	ln     net.Listener
	srv    *http.Server
	logger *slog.Logger

	// budget is the most bytes the session may receive between two Resets;
	// 0 is no limit. used counts them.
	budget atomic.Int64
	used   atomic.Int64
	over   atomic.Bool
	// denyAll refuses every request (the default browser context's proxy,
	// which no page of ours uses).
	denyAll bool

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	refusals []string
	// refusedURLs are the absolute URLs of plain-HTTP requests the guard
	// refused since the last Refusals, with the reason: a page whose own
	// document (after a redirect, say) is one of them was never loaded.
	refusedURLs map[string]string
	closed      bool
}

// Listen opens an Endpoint on 127.0.0.1:0. budget caps the bytes received
// between Resets (0: no cap). With denyAll every request is refused: the
// proxy of the browser's default context, which no session uses, so that
// anything opened there by mistake reaches nothing.
func (p *Proxy) Listen(budget int64, denyAll bool) (*Endpoint, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the browser proxy: %w", err)
	}
	e := &Endpoint{p: p, ln: ln, logger: p.logger, denyAll: denyAll, conns: map[net.Conn]struct{}{}}
	e.budget.Store(budget)
	e.srv = &http.Server{
		Handler:           e,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(p.logger.Handler(), slog.LevelDebug),
		ConnState: func(c net.Conn, s http.ConnState) {
			e.mu.Lock()
			defer e.mu.Unlock()
			switch s {
			case http.StateNew:
				e.conns[c] = struct{}{}
			case http.StateClosed, http.StateHijacked:
				delete(e.conns, c)
			}
		},
	}
	go func() { _ = e.srv.Serve(ln) }()
	return e, nil
}

// URL is the proxy address to give Chromium: http://127.0.0.1:PORT.
func (e *Endpoint) URL() string { return "http://" + e.ln.Addr().String() }

// Reset starts a new budget window (a new page load or action).
func (e *Endpoint) Reset() {
	e.used.Store(0)
	e.over.Store(false)
}

// Used is the bytes received since the last Reset, and whether the budget
// was exceeded (connections were then cut).
func (e *Endpoint) Used() (int64, bool) { return e.used.Load(), e.over.Load() }

// Budget is the byte budget per window (0: none).
func (e *Endpoint) Budget() int64 { return e.budget.Load() }

// Refusals returns the destinations refused since the last call, each with
// the guard's reason, and forgets them.
func (e *Endpoint) Refusals() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.refusals
	e.refusals, e.refusedURLs = nil, nil
	return r
}

// RefusedURL reports whether a request for u was refused since the last
// Refusals, and why.
func (e *Endpoint) RefusedURL(u string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	reason, ok := e.refusedURLs[u]
	return reason, ok
}

// refusedURL records that the request for absolute URL u was refused.
func (e *Endpoint) refusedURL(u string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refusedURLs == nil {
		e.refusedURLs = map[string]string{}
	}
	if len(e.refusedURLs) < maxRefusals {
		e.refusedURLs[u] = err.Error()
	}
}

// Close stops the listener and closes every connection of the session,
// tunnels included.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	e.closed = true
	conns := make([]net.Conn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c)
	}
	e.conns = map[net.Conn]struct{}{}
	e.mu.Unlock()
	err := e.srv.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	return err
}

func (e *Endpoint) refused(dest string, err error) {
	e.logger.Debug("browser egress refused", "destination", dest, "reason", err)
	e.mu.Lock()
	defer e.mu.Unlock()
	// The same destination refused for the same reason is listed once: a
	// page that aims a dozen requests at one address must not crowd the
	// others out of the list.
	r := dest + ": " + err.Error()
	if len(e.refusals) < maxRefusals && !slices.Contains(e.refusals, r) {
		e.refusals = append(e.refusals, r)
	}
}

// add counts n received bytes and reports whether the budget still holds.
func (e *Endpoint) add(n int) bool {
	used := e.used.Add(int64(n))
	if b := e.budget.Load(); b > 0 && used > b {
		e.over.Store(true)
		return false
	}
	return true
}

func (e *Endpoint) track(c net.Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.conns[c] = struct{}{}
	return true
}

func (e *Endpoint) untrack(c net.Conn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.conns, c)
}

// ServeHTTP answers one proxy request: CONNECT is tunnelled, an
// absolute-form http: request is forwarded, anything else is refused.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e.denyAll {
		e.refused(r.Host, errors.New("refused: the default browser context has no network"))
		http.Error(w, "refused", http.StatusForbidden)
		return
	}
	if e.over.Load() {
		http.Error(w, ErrWeight.Error(), http.StatusForbidden)
		return
	}
	switch {
	case r.Method == http.MethodConnect:
		e.tunnel(w, r)
	case r.URL.IsAbs():
		e.forward(w, r)
	default:
		http.Error(w, "this is a proxy: send absolute-form requests or CONNECT", http.StatusBadRequest)
	}
}

// tunnel dials r.Host through the guard and copies bytes both ways.
func (e *Endpoint) tunnel(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	up, err := e.p.guard.DialContext(ctx, "tcp", r.Host)
	cancel()
	if err != nil {
		e.refused(r.Host, err)
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, rw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !e.track(down) || !e.track(up) {
		down.Close()
		up.Close()
		return
	}
	defer func() {
		e.untrack(down)
		e.untrack(up)
		down.Close()
		up.Close()
	}()
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		// Bytes Chromium had sent after the CONNECT line are in rw's buffer.
		_, _ = io.Copy(up, readerOf(rw.Reader, down))
		if tc, ok := up.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(down, &counted{r: up, e: e})
		done <- struct{}{}
	}()
	<-done
}

func readerOf(br *bufio.Reader, c net.Conn) io.Reader {
	if br.Buffered() > 0 {
		return io.MultiReader(io.LimitReader(br, int64(br.Buffered())), c)
	}
	return c
}

// counted counts what is read against the endpoint's budget and fails
// once it is spent.
type counted struct {
	r io.Reader
	e *Endpoint
}

func (c *counted) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 && !c.e.add(n) {
		return 0, fmt.Errorf("%w: more than %d bytes", ErrWeight, c.e.budget.Load())
	}
	return n, err
}

func (c *counted) Close() error {
	if cl, ok := c.r.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

// forward sends an absolute-form request upstream through the guard.
func (e *Endpoint) forward(w http.ResponseWriter, r *http.Request) {
	u, err := e.p.guard.CheckURL(r.URL)
	if err != nil {
		e.refused(r.URL.Host, err)
		e.refusedURL(r.URL.String(), err)
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	// Service workers are refused: a worker that outlives its page could
	// keep fetching in the session's name. Chromium marks their script
	// requests (Service Workers, "Service-Worker: script").
	if strings.EqualFold(r.Header.Get("Service-Worker"), "script") {
		err := errors.New("refused: service workers are not allowed")
		e.refused(r.URL.Host, err)
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = u
			pr.Out.Host = u.Host
			pr.Out.RequestURI = ""
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Header.Del("Proxy-Connection")
		},
		Transport: e.p.transport,
		ModifyResponse: func(resp *http.Response) error {
			resp.Body = &countedBody{counted{r: resp.Body, e: e}}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, netguard.ErrRefused) {
				e.refused(r.URL.Host, err)
				e.refusedURL(r.URL.String(), err)
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
			http.Error(w, err.Error(), http.StatusBadGateway)
		},
		ErrorLog: slog.NewLogLogger(e.logger.Handler(), slog.LevelDebug),
	}
	rp.ServeHTTP(w, r)
}

type countedBody struct{ counted }

func (b *countedBody) Close() error { return b.counted.Close() }
