package mcpcall

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/pkg/tracing"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
)

// defaultBodyCap caps a response body that belongs to no call (initialize,
// tools/list): 2 MiB, the largest max_output_bytes, plus framing.
const defaultBodyCap = tool.MaxOutputBytesLimit + FramingSlack

// pool keeps one MCP client session per server: url plus a digest of the
// token, so bindings with different credentials never share a session.
type pool struct {
	caller *Caller
	// ctx parents every connection attempt; closeAll cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	conns  map[string]*conn
}

// conn is one pooled MCP client session. ready is closed once the
// connection attempt ended; then exactly one of session and err is set.
type conn struct {
	key     string
	url     string
	ready   chan struct{}
	session *mcp.ClientSession
	err     error
	closed  chan struct{} // closed when the session ended (server gone, stream failure)
}

func (c *conn) broken() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// Endpoint is an MCP server as brain connects to it: its URL, the bearer
// token sent as Authorization (a binding's token_env value, a session
// server's authorization), and any other headers sent with every request
// (a session server's headers). Token and header values are secrets.
type Endpoint struct {
	URL     string
	Token   string
	Headers http.Header
}

func endpointOf(t *config.Tool) Endpoint {
	return Endpoint{URL: t.URL, Token: t.Token, Headers: t.Headers}
}

// key is the pool key of e: its URL and a digest of its credentials, so
// that bindings with different credentials never share a session.
func (e Endpoint) key() string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s", len(e.Token), e.Token)
	names := make([]string, 0, len(e.Headers))
	for k := range e.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range e.Headers[k] {
			fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(v), v)
		}
	}
	return e.URL + "\x00" + string(h.Sum(nil))
}

// get returns the live session for url and token, connecting when there is
// none. The connection attempt runs on its own deadline (the header limit)
// so that one call's cancellation does not fail others waiting on it; ctx
// bounds only this caller's wait. A failed attempt is not kept: the next
// call tries again.
func (p *pool) get(ctx context.Context, e Endpoint) (*conn, error) {
	key := e.key()
	p.mu.Lock()
	if p.conns == nil {
		p.conns = map[string]*conn{}
	}
	c := p.conns[key]
	if c != nil && c.isReady() && (c.err != nil || c.broken()) {
		delete(p.conns, key)
		c = nil
	}
	if c == nil {
		c = &conn{key: key, url: e.URL, ready: make(chan struct{}), closed: make(chan struct{})}
		p.conns[key] = c
		go p.connect(c, e)
	}
	p.mu.Unlock()
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if c.err != nil {
		p.drop(c)
		return nil, c.err
	}
	return c, nil
}

func (c *conn) isReady() bool {
	select {
	case <-c.ready:
		return true
	default:
		return false
	}
}

func (p *pool) connect(c *conn, e Endpoint) {
	defer close(c.ready)
	o := p.caller.opts
	ctx, cancel := context.WithTimeout(p.ctx, o.headerTimeout)
	defer cancel()
	rt := &roundTripper{next: tracing.Transport(o.Transport, "mcp"), token: e.Token, headers: e.Headers, headerTimeout: o.headerTimeout}
	transport := &mcp.StreamableClientTransport{
		Endpoint: c.url,
		HTTPClient: &http.Client{
			// A client span per request ("mcp POST"), with traceparent.
			Transport: rt,
			// The contract: brain doesn't follow redirects from tools.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		// Only responses to brain's own requests matter: no standalone
		// stream for server-initiated messages.
		DisableStandaloneSSE: true,
		// A 2025-11-25 stream that carries event IDs may be resumed a
		// couple of times before the call counts as dropped.
		MaxRetries:   2,
		MaxEventSize: defaultBodyCap,
	}
	var opts *mcp.ClientSessionOptions
	if o.ProtocolVersion != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: o.ProtocolVersion}
	}
	cs, err := p.caller.client.Connect(ctx, transport, opts)
	if err != nil {
		switch st := int(rt.status.Load()); {
		case ctx.Err() != nil:
			err = fmt.Errorf("no answer to initialize within %s: %w", o.headerTimeout, err)
		case st != 0:
			err = &statusError{status: st, err: err}
		}
		c.err = err
		close(c.closed)
		return
	}
	c.session = cs
	go func() {
		_ = cs.Wait()
		close(c.closed)
		p.drop(c)
	}()
}

// drop removes c from the pool (when it is still there) and closes its
// session in the background.
func (p *pool) drop(c *conn) {
	p.mu.Lock()
	if p.conns[c.key] == c {
		delete(p.conns, c.key)
	}
	p.mu.Unlock()
	if c.isReady() && c.session != nil {
		go func() { _ = c.session.Close() }()
	}
}

func (p *pool) closeAll() error {
	p.cancel() // connection attempts in flight end now
	p.mu.Lock()
	conns := make([]*conn, 0, len(p.conns))
	for _, c := range p.conns {
		conns = append(conns, c)
	}
	p.conns = nil
	p.mu.Unlock()
	var errs []error
	for _, c := range conns {
		<-c.ready
		if c.session != nil {
			if err := c.session.Close(); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
				errs = append(errs, fmt.Errorf("close MCP session with %s: %w", c.url, err))
			}
		}
	}
	return errors.Join(errs...)
}

// trace is what the HTTP layer saw of one call's requests. The MCP SDK
// sends a call's POST with the call's context, which carries the trace.
type trace struct {
	limit        int64       // response body cap in bytes
	attempted    atomic.Bool // a POST of the call reached the transport
	gotConn      atomic.Bool
	wroteHeaders atomic.Bool
	status       atomic.Int32               // first non-2xx status, 0 when none
	retry        atomic.Pointer[retryAfter] // that status's Retry-After, when it asks to come back
	tripped      atomic.Bool                // the body went past limit
}

// sent reports whether the call's request may have reached the server: it
// was handed to the transport, and its headers were written or the
// transport reported no connection at all (not an http.Transport), which
// counts as sent.
func (t *trace) sent() bool {
	return t.attempted.Load() && (t.wroteHeaders.Load() || !t.gotConn.Load())
}

// retryAfter is what invoke.RetryAfter read of a 429 or 503: the value as
// said, and the wait it asks for.
type retryAfter struct {
	said string
	wait time.Duration
}

type traceKey struct{}

func withTrace(ctx context.Context, t *trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

func traceFrom(ctx context.Context) *trace {
	t, _ := ctx.Value(traceKey{}).(*trace)
	return t
}

// roundTripper adds the bearer token, enforces the
// response-header limit on requests that are not a tool call, caps response
// bodies and reports to the call's trace.
type roundTripper struct {
	next          http.RoundTripper
	token         string
	headers       http.Header // sent first; the token and the SDK's own headers win
	headerTimeout time.Duration
	// status is the first non-2xx status of a request that is not a tool
	// call (the handshake's): the SDK's error says only its text.
	status atomic.Int32
}

// statusError is a handshake the server refused with a non-2xx status.
type statusError struct {
	status int
	err    error // the SDK's
}

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d %s", e.status, http.StatusText(e.status))
}

func (e *statusError) Unwrap() error { return e.err }

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	tr := traceFrom(req.Context())
	ctx, cancel := context.WithCancelCause(req.Context())
	if tr != nil && req.Method == http.MethodPost {
		tr.attempted.Store(true)
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GetConn:      func(string) { tr.gotConn.Store(true) },
			WroteHeaders: func() { tr.wroteHeaders.Store(true) },
		})
	}
	out := req.Clone(ctx)
	for k, vs := range rt.headers {
		if out.Header.Get(k) == "" {
			out.Header[k] = vs
		}
	}
	if rt.token != "" {
		out.Header.Set("Authorization", "Bearer "+rt.token)
	}

	// The contract's response-header limit holds for the handshake and
	// listing requests. A tools/call is bounded by timeout_seconds alone:
	// MCP servers commonly send no headers until the first message of the
	// call, so a tool that works for a minute without progress is healthy.
	var timer *time.Timer
	if tr == nil {
		timer = time.AfterFunc(rt.headerTimeout, func() { cancel(invoke.ErrHeaderTimeout) })
	}
	resp, err := rt.next.RoundTrip(out)
	if timer != nil && !timer.Stop() && err == nil {
		resp.Body.Close()
		err = invoke.ErrHeaderTimeout
	}
	if err != nil {
		if timer != nil && errors.Is(context.Cause(ctx), invoke.ErrHeaderTimeout) {
			err = fmt.Errorf("%w (%s)", invoke.ErrHeaderTimeout, rt.headerTimeout)
		}
		cancel(nil)
		return nil, err
	}
	limit := int64(defaultBodyCap)
	if tr == nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
		rt.status.CompareAndSwap(0, int32(resp.StatusCode))
	}
	if tr != nil {
		limit = tr.limit
		if (resp.StatusCode < 200 || resp.StatusCode > 299) && tr.status.CompareAndSwap(0, int32(resp.StatusCode)) {
			if said, wait, ok := invoke.RetryAfter(resp, time.Now()); ok {
				tr.retry.Store(&retryAfter{said: said, wait: wait})
			}
		}
	}
	resp.Body = &cappedBody{cap: invoke.NewCapReader(resp.Body, limit), rc: resp.Body, tr: tr, cancel: cancel}
	return resp, nil
}

// cappedBody is a response body under invoke's cap, which also marks the
// call's trace when it trips (the MCP SDK reports the read error its own
// way) and ends the request's context when closed.
type cappedBody struct {
	cap    *invoke.CapReader
	rc     io.ReadCloser
	tr     *trace
	cancel context.CancelCauseFunc
}

func (b *cappedBody) Read(p []byte) (int, error) {
	n, err := b.cap.Read(p)
	if b.tr != nil && errors.Is(err, invoke.ErrOutputTooLarge) {
		b.tr.tripped.Store(true)
	}
	return n, err
}

func (b *cappedBody) Close() error {
	err := b.rc.Close()
	b.cancel(nil)
	return err
}
