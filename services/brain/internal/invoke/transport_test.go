package invoke

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http/httpproxy"
)

// TestTraceparent checks that a call belonging to a trace carries the W3C
// traceparent header of the caller's span, and that other calls carry none.
func TestTraceparent(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	c := New(Options{})
	tl := newTool(t, srv.URL, nil)

	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traced := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"in a trace", traced, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"no trace", context.Background(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if o := c.Call(tc.ctx, tl, testRequest(), nil); o.Status != StatusSucceeded {
				t.Fatalf("call: %+v", o)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if got := rec.headers.Get("traceparent"); got != tc.want {
				t.Errorf("traceparent = %q, want %q", got, tc.want)
			}
			if _, ok := rec.headers["Traceparent"]; ok != (tc.want != "") {
				t.Errorf("traceparent present = %v", ok)
			}
		})
	}
}

// envProxy is what http.ProxyFromEnvironment does, read from env instead
// of the process environment (which the standard library caches once).
// Like it, httpproxy never proxies requests to loopback hosts, so the
// tests name a tool host that only the proxy knows.
func envProxy(env map[string]string) func(*http.Request) (*url.URL, error) {
	f := (&httpproxy.Config{HTTPProxy: env["HTTP_PROXY"], HTTPSProxy: env["HTTPS_PROXY"], NoProxy: env["NO_PROXY"]}).ProxyFunc()
	return func(r *http.Request) (*url.URL, error) { return f(r.URL) }
}

// TestDefaultTransportProxy pins the default: the proxy comes from the
// environment.
func TestDefaultTransportProxy(t *testing.T) {
	rt := New(Options{}).client.Transport
	if u, ok := rt.(interface{ Unwrap() http.RoundTripper }); ok {
		rt = u.Unwrap() // pkg/tracing's client spans
	}
	tr, ok := rt.(*http.Transport)
	if !ok {
		t.Fatalf("default transport is %T", rt)
	}
	if reflect.ValueOf(tr.Proxy).Pointer() != reflect.ValueOf(http.ProxyFromEnvironment).Pointer() {
		t.Error("default transport does not use http.ProxyFromEnvironment")
	}
}

// TestHTTPProxy sends an http tool call through an HTTP_PROXY: the proxy
// (a real server on 127.0.0.1) receives the absolute-form request with the
// contract's headers and answers it.
func TestHTTPProxy(t *testing.T) {
	var mu sync.Mutex
	var gotURI, gotAuth string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotURI, gotAuth = r.RequestURI, r.Header.Get("Authorization")
		mu.Unlock()
		writeJSON(w, 200, okResult)
	}))
	t.Cleanup(proxy.Close)

	tr := newTransport(envProxy(map[string]string{"HTTP_PROXY": proxy.URL}))
	t.Cleanup(tr.CloseIdleConnections)
	c := New(Options{Transport: tr})
	tl := newTool(t, "http://tools.internal.test/tools/echo", nil)
	o := c.Call(context.Background(), tl, testRequest(), nil)
	if o.Status != StatusSucceeded {
		t.Fatalf("call through proxy: %+v", o)
	}
	mu.Lock()
	defer mu.Unlock()
	if gotURI != "http://tools.internal.test/tools/echo" {
		t.Errorf("proxy saw request-URI %q", gotURI)
	}
	if gotAuth != "Bearer "+testToken {
		t.Errorf("proxy saw Authorization %q", gotAuth)
	}
}

// TestHTTPSProxy sends an https tool call through HTTPS_PROXY: the proxy
// gets a CONNECT for the tool's host and tunnels it to a TLS tool server on
// 127.0.0.1 whose certificate names that host.
func TestHTTPSProxy(t *testing.T) {
	rec := &recorder{}
	tool := httptest.NewTLSServer(rec)
	t.Cleanup(tool.Close)

	var mu sync.Mutex
	var connects []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		mu.Lock()
		connects = append(connects, r.Host)
		mu.Unlock()
		upstream, err := net.Dial("tcp", tool.Listener.Addr().String())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer upstream.Close()
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
		done := make(chan struct{}, 2)
		go func() { io.Copy(upstream, bufio.NewReader(buf)); done <- struct{}{} }()
		go func() { io.Copy(conn, upstream); done <- struct{}{} }()
		<-done
	}))
	t.Cleanup(proxy.Close)

	tr := newTransport(envProxy(map[string]string{"HTTPS_PROXY": proxy.URL}))
	// httptest's certificate is valid for example.com; trust it.
	tr.TLSClientConfig = tool.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tr.TLSClientConfig.MinVersion = tls.VersionTLS12
	t.Cleanup(tr.CloseIdleConnections)
	c := New(Options{Transport: tr})
	tl := newTool(t, "https://example.com/tools/echo", nil)
	o := c.Call(context.Background(), tl, testRequest(), nil)
	if o.Status != StatusSucceeded {
		t.Fatalf("call through https proxy: %+v", o)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(connects) != 1 || connects[0] != "example.com:443" {
		t.Errorf("proxy saw CONNECT %v, want [example.com:443]", connects)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.count != 1 || rec.headers.Get("Authorization") != "Bearer "+testToken {
		t.Errorf("tool saw %d requests, Authorization %q", rec.count, rec.headers.Get("Authorization"))
	}
}

// TestProxyRefusesToConnect shows a proxy's refusal is a non-2xx outcome
// of connecting, reported as connection_failed with an unknown outcome.
func TestProxyRefusesToConnect(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	t.Cleanup(proxy.Close)
	tr := newTransport(envProxy(map[string]string{"HTTPS_PROXY": proxy.URL}))
	t.Cleanup(tr.CloseIdleConnections)
	c := New(Options{Transport: tr})
	o := c.Call(context.Background(), newTool(t, "https://example.com/tools/echo", nil), testRequest(), nil)
	if o.ErrorCode != CodeConnectionFailed || !o.Result.UnknownOutcome {
		t.Errorf("outcome %+v", o)
	}
}
