package service

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
)

// rawPost sends headers that promise a body of size bytes, then only sent
// of them, and reads the status line that comes back (or "" after wait).
func rawPost(t *testing.T, addr, path, auth string, size, sent int, wait time.Duration) (status string, took time.Duration) {
	t.Helper()
	status, took, _ = rawPostClosed(t, addr, path, auth, size, sent, wait)
	return status, took
}

// rawPostClosed is rawPost that also reports whether the server closed
// the connection within wait after answering.
func rawPostClosed(t *testing.T, addr, path, auth string, size, sent int, wait time.Duration) (status string, took time.Duration, closed bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: %s\r\nContent-Length: %d\r\n\r\n%s", path, auth, size, strings.Repeat(" ", sent))
	conn.SetReadDeadline(time.Now().Add(wait))
	rd := bufio.NewReader(conn)
	line, _ := rd.ReadString('\n')
	took = time.Since(start)
	_, err = io.Copy(io.Discard, rd) // until the server closes, or wait
	return strings.TrimSpace(line), took, err == nil && time.Since(start) < httpapi.DrainGrace+2*time.Second
}

// TestStalledBody: a client that declares a body and never sends it holds
// a connection for the body timeout at most, and one with a wrong token is
// refused at once; a handler that reads its body and then works longer
// than the timeout, or a stream without a body, is not cut off.
func TestStalledBody(t *testing.T) {
	defer func(d time.Duration) { bodyTimeout = d }(bodyTimeout)
	bodyTimeout = 300 * time.Millisecond
	srv, _ := testServer(t, nil)
	addr := strings.TrimPrefix(srv.URL, "http://")

	status, took := rawPost(t, addr, "/tools/echo", "Bearer tok", 1000, 10, 5*time.Second)
	if !strings.Contains(status, "408") || took > 3*time.Second {
		t.Errorf("stalled body with the right token: %q after %s, want 408 after about %s", status, took, bodyTimeout)
	}
	// Refusals come within httpapi.DrainGrace, well before a long body timeout.
	bodyTimeout = 10 * time.Second
	srv, _ = testServer(t, nil)
	addr = strings.TrimPrefix(srv.URL, "http://")
	for _, tc := range []struct{ name, path, auth, want string }{
		{"wrong token", "/tools/echo", "Bearer wrong", "401"},
		{"unknown tool", "/tools/nope", "Bearer tok", "404"},
		{"wrong method", "/healthz", "Bearer tok", "405"},
	} {
		// A small declared body, most of it never sent: net/http would
		// wait for it (up to 256 KiB) before answering or closing.
		status, took, closed := rawPostClosed(t, addr, tc.path, tc.auth, 100, 10, 5*time.Second)
		if !strings.Contains(status, tc.want) || took > httpapi.DrainGrace+2*time.Second || !closed {
			t.Errorf("%s with a stalled body: %q after %s (closed %v), want %s within the drain grace and the connection closed", tc.name, status, took, closed, tc.want)
		}
	}

	// The deadline ends with the body: long work after it is not cut off.
	done := make(chan error, 1)
	h := httpapi.LimitBodyTime(100*time.Millisecond, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-time.After(400 * time.Millisecond):
			done <- nil
		case <-r.Context().Done():
			done <- r.Context().Err()
		}
		w.Write([]byte("ok"))
	}))
	ts := httptest.NewServer(h)
	defer ts.Close()
	for _, body := range []io.Reader{strings.NewReader(`{"a":1}`), nil} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, ts.URL, body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if err := <-done; err != nil {
			t.Errorf("body %v: the handler's context ended after the body was read: %v", body != nil, err)
		}
	}
}
