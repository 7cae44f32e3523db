package service

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// BodyTimeout is how long a client has to send a request's body once its
// headers are in (60 s: 4 MiB at 70 KB/s). http.Server's ReadTimeout would
// also bound the handler's wait for the client to go away, and with it
// every long stream; this bounds the body alone.
const BodyTimeout = 60 * time.Second

// DrainGrace is how long a refused request's unread body may take to
// arrive, so the connection can be answered and closed cleanly (1 s).
const DrainGrace = time.Second

// LimitBodyTime gives a request with a body d to send it: the connection's
// read deadline is set when the handler starts and cleared as soon as the
// body has been read to its end, so a handler that then works or streams
// for hours is not cut off. A body that stalls fails its Read with a
// timeout (see IsTimeout); one the handler never reads (a refusal) is
// drained by net/http within the same deadline, so a client that declares
// a body and never sends it holds a connection for d at most.
//
// An error answer (4xx, 5xx) written before the body was read to its end
// says Connection: close, so it goes out at once instead of after the
// rest of the body. When the handler returns without reading the body to
// its end (a refusal), net/http reads up to 256 KiB of the rest before it answers or
// closes, so that a client still sending sees the answer rather than a
// reset connection. The deadline then moves to DrainGrace from now: a
// client that is sending finishes in that time, one that stalls is cut
// off after it instead of after d.
func LimitBodyTime(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(d)) != nil {
			next.ServeHTTP(w, r)
			return
		}
		body := &deadlineBody{ReadCloser: r.Body, clear: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		r.Body = body
		next.ServeHTTP(&refusalWriter{ResponseWriter: w, body: body}, r)
		if !body.done {
			_ = rc.SetReadDeadline(time.Now().Add(DrainGrace))
		}
	})
}

// refusalWriter marks an error answer to a request whose body is unread
// with Connection: close.
type refusalWriter struct {
	http.ResponseWriter
	body *deadlineBody
}

func (w *refusalWriter) WriteHeader(code int) {
	if code >= 400 && !w.body.done {
		w.Header().Set("Connection", "close")
	}
	w.ResponseWriter.WriteHeader(code)
}

// Flush and Unwrap keep streaming (http.Flusher, http.ResponseController)
// working through the wrapper.
func (w *refusalWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type deadlineBody struct {
	io.ReadCloser
	clear func()
	done  bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		b.clear()
	}
	return n, err
}

// IsTimeout reports whether err is a read that ran past a deadline.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
