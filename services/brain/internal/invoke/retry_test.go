package invoke

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestRefusedStreamRetried: an HTTP/2 tool server refuses the first
// stream with REFUSED_STREAM (RFC 9113 section 8.7: the request was not
// processed, safe to retry). The transport retries such a request only
// when it can rewind the body (GetBody); the call must succeed, not end
// with an unknown outcome. (Found by a fresh tester.)
func TestRefusedStreamRetried(t *testing.T) {
	ts := httptest.NewUnstartedServer(nil)
	ts.StartTLS()
	cert := ts.TLS.Certificates[0]
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	ts.Close()

	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var streams, served atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveH2(c, &streams, &served)
		}
	}()
	tr := newTransport(nil)
	tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	c := New(Options{Transport: tr})
	tl := newTool(t, "https://"+ln.Addr().String()+"/tools/echo", nil)
	o := c.Call(context.Background(), tl, testRequest(), nil)
	if o.Status != StatusSucceeded {
		t.Errorf("a stream the server refused unprocessed was not retried: %s %s", o.ErrorCode, o.ErrorMessage)
	}
}

func serveH2(c net.Conn, streams, served *atomic.Int64) {
	defer c.Close()
	if err := c.(*tls.Conn).Handshake(); err != nil {
		return
	}
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.WriteSettings()
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	refused := map[uint32]bool{}
	respond := func(id uint32) {
		hbuf.Reset()
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/json"})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndHeaders: true})
		fr.WriteData(id, true, []byte(okResult))
		served.Add(1)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			if streams.Add(1) == 1 {
				refused[f.StreamID] = true
				fr.WriteRSTStream(f.StreamID, http2.ErrCodeRefusedStream)
				continue
			}
			if f.StreamEnded() {
				respond(f.StreamID)
			}
		case *http2.DataFrame:
			if f.StreamEnded() && !refused[f.StreamID] {
				respond(f.StreamID)
			}
		}
	}
}

// failConn fails its first Write once armed, writing nothing: a reused
// keep-alive connection the peer has reset.
type failConn struct {
	net.Conn
	armed *atomic.Bool
}

func (c failConn) Write(p []byte) (int, error) {
	if c.armed.CompareAndSwap(true, false) {
		return 0, errors.New("write: connection reset by peer (simulated)")
	}
	return c.Conn.Write(p)
}

// TestNothingWrittenRetried: a call on a reused HTTP/1.1
// connection whose first write fails having written nothing is retried by
// the transport on a new connection when the body can be rewound.
func TestNothingWrittenRetried(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		writeJSON(w, 200, okResult)
	}))
	defer srv.Close()
	var conns []*atomic.Bool
	tr := newTransport(nil)
	d := &net.Dialer{}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		a := new(atomic.Bool)
		mu.Lock()
		conns = append(conns, a)
		mu.Unlock()
		return failConn{c, a}, nil
	}
	c := New(Options{Transport: tr})
	tl := newTool(t, srv.URL+"/tools/echo", nil)
	if o := c.Call(context.Background(), tl, testRequest(), nil); o.Status != StatusSucceeded {
		t.Fatalf("first call: %+v", o)
	}
	mu.Lock()
	conns[0].Store(true) // the idle connection is dead
	mu.Unlock()
	o := c.Call(context.Background(), tl, testRequest(), nil)
	if o.Status != StatusSucceeded {
		t.Errorf("a request that was never written was not retried: %s: %s", o.ErrorCode, o.ErrorMessage)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 || !bytes.Equal(bodies[0], bodies[1]) {
		t.Errorf("the tool got %d bodies, want the two calls' bodies, equal", len(bodies))
	}
}
