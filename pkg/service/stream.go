package service

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/brain-tools/suite/pkg/sse"
)

// A call that may stream (the host accepts text/event-stream) runs on a
// goroutine of its own while its handler waits. When the stream starts,
// the handler takes the HTTP/1.x connection over (Hijack), writes the
// status line and headers itself, hands the connection to the call and
// returns: net/http then lets go of everything it keeps per connection
// (its 4 KiB read and write buffers, the 2 KiB response buffer, the
// background reader goroutine, the handler's deep stack), which a stream
// that waits for hours (request_approval, for an operator) would
// otherwise hold all that time. What the stream keeps instead is a
// connStream: the connection, written one event per Write with the
// chunked framing net/http would have used, and a goroutine of a few
// frames blocked reading it, which sees the host hang up and cancels the
// call as net/http's background read did. The answer says Connection:
// close: after the result the connection is closed, not reused.
//
// A connection that cannot be taken over (HTTP/2, a test recorder) is
// streamed through the handler's ResponseWriter as before.

// lingerAfterEnd is how long a finished stream waits for the host to
// close its side before the connection is closed, so that the end of the
// answer is not cut off by a reset (net/http waits 500 ms).
const lingerAfterEnd = time.Second

// errNoTakeover says the connection cannot be taken over.
var errNoTakeover = errors.New("the connection cannot be taken over")

// takeOver hijacks the connection of w and writes the status line and the
// SSE headers (with w's own, X-Request-Id among them) on it. It reports
// whether the body is chunked (HTTP/1.1; an HTTP/1.0 body ends at the
// close). Bytes the host sent after its request are left unread: the
// answer closes the connection.
func takeOver(w http.ResponseWriter, r *http.Request) (net.Conn, bool, error) {
	if r.ProtoMajor != 1 {
		return nil, false, errNoTakeover
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, false, errors.Join(errNoTakeover, err)
	}
	chunked := r.ProtoAtLeast(1, 1)
	h := w.Header()
	for _, kv := range sse.Headers {
		h.Set(kv[0], kv[1])
	}
	h.Del("Content-Length")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Set("Connection", "close")
	if chunked {
		h.Set("Transfer-Encoding", "chunked")
	}
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 200 OK\r\n")
	_ = h.Write(&b)
	b.WriteString("\r\n")
	// A failed write leaves a dead connection: the stream's watch sees it
	// and cancels the call.
	_, _ = conn.Write(b.Bytes())
	return conn, chunked, nil
}

// connStream is the body of a stream on a taken-over connection.
type connStream struct {
	conn    net.Conn
	chunked bool
	// hangup cancels the call; it runs when the host closes the
	// connection or the server's shutdown gives up waiting.
	hangup func()
	set    *streamSet
}

// Write sends p as one chunk.
func (c *connStream) Write(p []byte) (int, error) {
	if !c.chunked {
		return c.conn.Write(p)
	}
	buf := make([]byte, 0, len(p)+20)
	buf = strconv.AppendInt(buf, int64(len(p)), 16)
	buf = append(buf, "\r\n"...)
	buf = append(buf, p...)
	buf = append(buf, "\r\n"...)
	if _, err := c.conn.Write(buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// end ends the body (the last chunk), closes the connection's sending
// side and gives the host lingerAfterEnd to close its own; watch then
// closes the connection.
func (c *connStream) end() {
	if c.chunked {
		_, _ = c.conn.Write([]byte("0\r\n\r\n"))
	}
	if cw, ok := c.conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(lingerAfterEnd))
}

// watch reads the connection until the host closes it (or end's linger
// passes), then cancels the call and closes the connection. It is the
// stream's one goroutine besides the call's, blocked a few frames deep,
// so its stack stays at the minimum. What the host sends is discarded.
func (c *connStream) watch() {
	b := make([]byte, 1)
	for {
		if _, err := c.conn.Read(b); err != nil {
			break
		}
	}
	c.hangup()
	_ = c.conn.Close()
	c.set.remove(c)
}

// streamSet is a Server's streams on taken-over connections, which
// net/http's Shutdown no longer sees, and the takeovers under way
// (pending): a stream is counted from before its connection leaves
// net/http's sight, so a shutdown never falls in between.
type streamSet struct {
	mu      sync.Mutex
	m       map[*connStream]struct{}
	pending int
	empty   chan struct{} // closed when nothing is left, while Serve waits
}

// reserve counts a takeover about to happen; settle must follow.
func (s *streamSet) reserve() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending++
}

// settle ends a reservation: c joins the set (nil: the takeover failed).
func (s *streamSet) settle(c *connStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending--
	if c != nil {
		if s.m == nil {
			s.m = make(map[*connStream]struct{})
		}
		s.m[c] = struct{}{}
	}
	s.signalLocked()
}

func (s *streamSet) remove(c *connStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, c)
	s.signalLocked()
}

// signalLocked wakes a waiting Serve once nothing is left. s.mu is held.
func (s *streamSet) signalLocked() {
	if len(s.m) == 0 && s.pending == 0 && s.empty != nil {
		close(s.empty)
		s.empty = nil
	}
}

// wait waits until every stream has ended or ctx ends.
func (s *streamSet) wait(ctx context.Context) error {
	s.mu.Lock()
	if len(s.m) == 0 && s.pending == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.empty == nil {
		s.empty = make(chan struct{})
	}
	empty := s.empty
	s.mu.Unlock()
	select {
	case <-empty:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// streams returns the streams now in the set.
func (s *streamSet) streams() []*connStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*connStream, 0, len(s.m))
	for c := range s.m {
		out = append(out, c)
	}
	return out
}

// cancelAll cancels every stream's call; each then writes its result and
// ends, as it would on its own.
func (s *streamSet) cancelAll() {
	for _, c := range s.streams() {
		c.hangup()
	}
}

// closeAll closes the connection of every stream still in the set.
func (s *streamSet) closeAll() {
	for _, c := range s.streams() {
		c.hangup()
		_ = c.conn.Close()
	}
}
