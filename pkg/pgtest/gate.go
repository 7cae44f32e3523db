package pgtest

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Gate is a relay in front of a Server's socket that a test can shut:
// while shut it carries no byte either way, and takes new connections but
// holds them unanswered, as a database that was paused (SIGSTOP) or
// partitioned away, with every connection left open. Opening it again
// lets what was held through.
type Gate struct {
	ln     net.Listener
	mu     sync.Mutex
	open   chan struct{} // closed while the gate is open
	conns  map[net.Conn]struct{}
	closed chan struct{}
}

// Gate starts a gate in front of the server of dbURL (a URL of s.URL's
// form) for t, removed when t ends, and returns it with the URL of the
// same database through it. It starts open.
func (s *Server) Gate(t testing.TB, dbURL string) (*Gate, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	upstream := filepath.Join(q.Get("host"), ".s.PGSQL."+q.Get("port"))
	dir, err := os.MkdirTemp("", "pggate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{ln: ln, open: make(chan struct{}), conns: map[net.Conn]struct{}{}, closed: make(chan struct{})}
	close(g.open)
	t.Cleanup(g.close)
	go g.serve(upstream)
	q.Set("host", dir)
	q.Set("port", strconv.Itoa(port))
	u.RawQuery = q.Encode()
	return g, u.String()
}

// Shut stops the gate carrying anything.
func (g *Gate) Shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

// Cut ends every connection the gate carries now, both ways, without a
// word from the server (as a host that vanished, or a proxy restarted,
// would); new connections go through as before.
func (g *Gate) Cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.conns {
		c.Close()
		delete(g.conns, c)
	}
}

// Open lets everything through again, what was held first.
func (g *Gate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// pass waits until the gate is open; false once it is closed for good.
func (g *Gate) pass() bool {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return true
	case <-g.closed:
		return false
	}
}

func (g *Gate) track(c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.closed:
		c.Close()
		return false
	default:
		g.conns[c] = struct{}{}
		return true
	}
}

func (g *Gate) serve(upstream string) {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			if !g.track(c) || !g.pass() {
				return
			}
			up, err := net.Dial("unix", upstream)
			if err != nil {
				c.Close()
				return
			}
			if !g.track(up) {
				c.Close()
				return
			}
			go g.relay(up, c)
			g.relay(c, up)
		}()
	}
}

// relay copies from src to dst, holding each read while the gate is shut;
// it closes both when either side ends.
func (g *Gate) relay(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !g.pass() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (g *Gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.closed:
		return
	default:
	}
	close(g.closed)
	g.ln.Close()
	for c := range g.conns {
		c.Close()
	}
}

// FailsWithin runs op, named what, while the server behind a shut Gate is
// silent, and fails t unless op fails with context.DeadlineExceeded
// within ten times bound: what a client bounded by package pgbound does.
// op gets a context of a minute, so that an unbounded op fails the test
// rather than hanging it.
func FailsWithin(t testing.TB, bound time.Duration, what string, op func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	err := op(ctx)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s while the database is silent: %v, want context.DeadlineExceeded", what, err)
	}
	if took > 10*bound {
		t.Errorf("%s took %s to fail, want about %s", what, took, bound)
	}
}
