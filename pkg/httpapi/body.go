package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/strictjson"
)

// BodyTimeout is how long a client has to send a request's body once its
// headers are in (60 s: 4 MiB at 70 KB/s). http.Server's ReadTimeout would
// also bound the handler's wait for the client to go away, and with it
// every long stream; LimitBodyTime bounds the body alone.
const BodyTimeout = 60 * time.Second

// DrainGrace is how long a refused request's unread body may take to
// arrive, so the connection can be answered and closed cleanly (1 s).
const DrainGrace = time.Second

// ReadBody reads r's whole body, at most limit bytes (limit <= 0: no
// cap). A body that declares a length within limit is read in one
// allocation of that size (net/http ends the body there); any other is read
// up to limit+1 bytes. A body over limit is read that far, not refused on
// its declared length alone: a client still sending when the connection
// closes may lose the 413 to a reset; the limit+1 bytes read come back
// with that 413. Errors are *Error: 413
// request_too_large naming the limit, 408 request_timeout for a body that
// stalled past LimitBodyTime's deadline, 400 for any other read failure.
func ReadBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	n := r.ContentLength
	if n > 0 && (limit <= 0 || n <= limit) {
		data := make([]byte, n)
		if _, err := io.ReadFull(r.Body, data); err != nil {
			return nil, readError(r, err)
		}
		return data, nil
	}
	body := io.Reader(r.Body)
	if limit > 0 {
		body = io.LimitReader(r.Body, limit+1)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, readError(r, err)
	}
	if limit > 0 && int64(len(data)) > limit {
		// The limit+1 bytes read come back with the 413, for a caller
		// that answers an oversized body itself (service.Tool.TooLarge).
		return data, TooLarge(limit)
	}
	return data, nil
}

// TooLarge is the 413 answer for a body over limit bytes.
func TooLarge(limit int64) *Error {
	return Errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "request body is larger than the limit of %d bytes", limit)
}

func readError(r *http.Request, err error) *Error {
	var ended *Error
	if errors.As(context.Cause(r.Context()), &ended) {
		// Its server ended the request while the body came, saying why
		// (brain at the end of its shutdown grace): not a bad request.
		return ended
	}
	if IsTimeout(err) {
		return &Error{Status: http.StatusRequestTimeout, Code: CodeRequestTimeout, Cause: err,
			Message: fmt.Sprintf("request body did not arrive within %ds", int(BodyTimeout/time.Second))}
	}
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return TooLarge(mb.Limit)
	}
	e := BadRequest("request body: read: %v", err)
	e.Cause = err
	return e
}

// IsJSON reports whether a Content-Type names application/json, with no
// charset or charset utf-8 (JSON text is UTF-8, RFC 8259 section 8.1).
func IsJSON(contentType string) bool {
	if contentType == "application/json" { // the usual case, without parsing
		return true
	}
	mt, params, err := mime.ParseMediaType(contentType)
	cs, named := params["charset"]
	return err == nil && mt == "application/json" && (!named || strings.EqualFold(cs, "utf-8"))
}

// CheckJSON is the 415 answer for a request whose Content-Type IsJSON
// refuses, or nil.
func CheckJSON(r *http.Request) *Error {
	if ct := r.Header.Get("Content-Type"); !IsJSON(ct) {
		return Errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "Content-Type must be application/json, got %q", ct)
	}
	return nil
}

// DecodeJSON reads r's body strictly into v: Content-Type application/json
// (415), at most limit bytes (413), a JSON object (not null, an array or a
// scalar), no unknown fields, no duplicate names, no trailing data, types as
// declared (400 naming the field). Every error is an *Error.
func DecodeJSON(r *http.Request, limit int64, v any) error {
	if e := CheckJSON(r); e != nil {
		return e
	}
	data, err := ReadBody(r, limit)
	if err != nil {
		return err
	}
	return DecodeObject(data, v)
}

// DecodeOptionalJSON is DecodeJSON for an endpoint whose body may be
// absent: an empty body leaves v as it is, whatever the Content-Type.
func DecodeOptionalJSON(r *http.Request, limit int64, v any) error {
	data, err := ReadBody(r, limit)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if e := CheckJSON(r); e != nil {
		return e
	}
	return DecodeObject(data, v)
}

// DecodeObject decodes the body data strictly into v (strictjson) and
// answers a problem as a 400 *Error naming the field: "text: required",
// "request body is empty". Anything but an object is refused first, since
// a JSON null would otherwise read as "nothing to set".
func DecodeObject(data []byte, v any) error {
	// Only a document that is JSON is named by its kind: "nope" is
	// malformed JSON, as the decoder then says, not a null.
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] != '{' && json.Valid(t) {
		return BadRequest("request body: must be a JSON object, got %s", JSONKind(t[0]))
	}
	return BodyError(strictjson.Unmarshal(data, v))
}

// BodyError words a strictjson error about a request body as a 400 *Error
// ("request body: text: required", "request body is empty: …"), a
// *strictjson.TooLargeError as 413; nil stays nil. The 400's Cause is err,
// so a caller can still read the *strictjson.FieldError's field.
func BodyError(err error) error {
	if err == nil {
		return nil
	}
	var tl *strictjson.TooLargeError
	if errors.As(err, &tl) {
		return TooLarge(tl.Limit)
	}
	if msg := err.Error(); strings.HasPrefix(msg, "body ") {
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: "request " + msg, Cause: err}
	}
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: "request body: " + err.Error(), Cause: err}
}

// JSONKind names the kind of JSON value whose first byte is b, for a
// refusal: "null", "an object", "an array", "a string", "a boolean", "a
// number", or "malformed JSON".
func JSONKind(b byte) string {
	switch {
	case b == '{':
		return "an object"
	case b == 'n':
		return "null"
	case b == '[':
		return "an array"
	case b == '"':
		return "a string"
	case b == 't' || b == 'f':
		return "a boolean"
	case b == '-' || b >= '0' && b <= '9':
		return "a number"
	}
	return "malformed JSON"
}

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
// its end (a refusal), net/http reads up to 256 KiB of the rest before it
// answers or closes, so that a client still sending sees the answer rather
// than a reset connection. The deadline then moves to DrainGrace from now:
// a client that is sending finishes in that time, one that stalls is cut
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
		// One allocation is the body and the writer both.
		cw := &closeOnRefusal{ResponseWriter: w, body: deadlineBody{ReadCloser: r.Body, rc: rc}}
		r.Body = &cw.body
		next.ServeHTTP(cw, r)
		if !cw.body.done {
			_ = rc.SetReadDeadline(time.Now().Add(DrainGrace))
		}
	})
}

// closeOnRefusal marks an error answer to a request whose body is unread
// with Connection: close.
type closeOnRefusal struct {
	http.ResponseWriter
	body deadlineBody
}

func (w *closeOnRefusal) WriteHeader(code int) {
	if code >= 400 && !w.body.done {
		w.Header().Set("Connection", "close")
	}
	w.ResponseWriter.WriteHeader(code)
}

// Flush and Unwrap keep streaming (http.Flusher, http.ResponseController)
// working through the wrapper.
func (w *closeOnRefusal) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *closeOnRefusal) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// deadlineBody clears the connection's read deadline (rc's) once the body
// has been read to its end.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// IsTimeout reports whether err is a read that ran past a deadline.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
