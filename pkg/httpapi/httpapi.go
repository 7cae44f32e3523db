// Package httpapi is the suite's one HTTP toolkit, shared by brain, the
// tool-service runtime (pkg/service), its MCP endpoint and the operator
// page: an error type that carries a status, a message safe for the client
// and a private cause; handlers that return such errors; one request-ID
// format; one strict body reader; one JSON writer; one JSON error body.
//
// The error body every JSON API of the suite answers with is
//
//	{"error":{"code":"invalid_request","message":"text: required","request_id":"req_…"}}
//
// where request_id repeats the response's X-Request-Id header (RequestID
// middleware) and is left out when the response has none.
//
// The shape follows tailscale's tsweb (an error with a status, a public
// message and a private cause that is only logged) and
// exposure-notifications-server (encode before the status is written, cap
// and strictly decode every body); see shared/design/STYLE.md points 7-9.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/brain-tools/suite/pkg/strictjson"
)

// The error codes of the JSON error body. A refusal with another status
// than these codes' usual ones picks the closest code.
const (
	CodeInvalidRequest   = "invalid_request"        // 400
	CodeUnauthorized     = "unauthorized"           // 401
	CodeForbidden        = "forbidden"              // 403
	CodeNotFound         = "not_found"              // 404
	CodeMethodNotAllowed = "method_not_allowed"     // 405
	CodeRequestTimeout   = "request_timeout"        // 408
	CodeConflict         = "conflict"               // 409
	CodeTooLarge         = "request_too_large"      // 413
	CodeUnsupportedMedia = "unsupported_media_type" // 415
	CodeClientClosed     = "client_closed_request"  // 499
	CodeInternal         = "internal_error"         // 500
	CodeUnavailable      = "unavailable"            // 503
)

// StatusClientClosedRequest is the status logged and written for a request
// whose client went away before the answer (nginx's 499): nobody reads it,
// but access logs and metrics then tell a cancel from a server fault.
const StatusClientClosedRequest = 499

// MaxEcho is the most bytes of one string or error argument that Errorf
// repeats in a message, so that a client sending a huge ID, header or
// field name does not get it back whole.
const MaxEcho = 512

// Error is an HTTP error answer: Status and Code go on the wire, Message is
// safe to show the client (it names the field or parameter at fault), and
// Cause, when set, is logged and never sent.
type Error struct {
	Status  int
	Code    string
	Message string
	Cause   error
}

// Error returns the public message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the private cause.
func (e *Error) Unwrap() error { return e.Cause }

// Errorf builds an error answer with the message fmt.Sprintf(format,
// args...). A string or error among args longer than MaxEcho bytes is cut
// there, with "…".
func Errorf(status int, code, format string, args ...any) *Error {
	for i, a := range args {
		switch v := a.(type) {
		case string:
			args[i] = strictjson.Clip(v, MaxEcho)
		case error:
			if m := v.Error(); len(m) > MaxEcho {
				args[i] = strictjson.Clip(m, MaxEcho)
			}
		}
	}
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is Errorf with 400 invalid_request.
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, CodeInvalidRequest, format, args...)
}

// NotFound is Errorf with 404 not_found.
func NotFound(format string, args ...any) *Error {
	return Errorf(http.StatusNotFound, CodeNotFound, format, args...)
}

// Conflict is Errorf with 409 conflict: the request is well-formed but
// the resource's state refuses it (a closed session, an answered call).
func Conflict(format string, args ...any) *Error {
	return Errorf(http.StatusConflict, CodeConflict, format, args...)
}

// Unavailable is Errorf with 503 unavailable: the server cannot take the
// request now (shutting down, a dependency down); the client may retry.
func Unavailable(format string, args ...any) *Error {
	return Errorf(http.StatusServiceUnavailable, CodeUnavailable, format, args...)
}

// Internal is the answer for an unexpected failure: 500 "internal error",
// with cause kept for the log only.
func Internal(cause error) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", Cause: cause}
}

// HandlerFunc is a handler that returns its failure instead of writing it;
// Responder.Handle writes it.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Responder answers the errors handlers return, the same way on every
// route of a server. Its zero value writes JSON error bodies and logs
// nothing.
type Responder struct {
	// Logger receives 5xx errors with their cause (503 as WARN: a state
	// to wait out; the others as ERROR), and nothing for refusals or
	// client cancels. nil discards.
	Logger *slog.Logger
	// Render writes an error answer in the server's own format (an HTML
	// page); nil writes the JSON error body with WriteError.
	Render func(w http.ResponseWriter, r *http.Request, e *Error)
}

// Handle adapts h to http.HandlerFunc: a non-nil error h returns is
// written with Error.
func (rs Responder) Handle(h HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			rs.Error(w, r, err)
		}
	}
}

// Error answers err for r:
//
//   - the client went away (r's context is cancelled and err is, or wraps,
//     context.Canceled): StatusClientClosedRequest, and nothing logged;
//   - an *Error anywhere in err's chain: its status, code and message; a
//     5xx one is logged with its cause (a 503 as a warning);
//   - a dependency that did not answer (a connection refused or cut, a
//     deadline exceeded while the client is there): 503, logged as a
//     warning, the cause never sent;
//   - anything else: 500 "internal error", the error logged, never sent.
func (rs Responder) Error(w http.ResponseWriter, r *http.Request, err error) {
	e := Classify(r, err)
	if e.Status >= 500 {
		logger := rs.Logger
		if logger == nil {
			logger = discard
		}
		cause := e.Cause
		if cause == nil {
			cause = errors.New(e.Message)
		}
		// A 503 is a state the client is told to wait out (shutting
		// down, a dependency not answering), a warning; any other 5xx is
		// an error. request_id comes from the context (WithRequestID).
		level := slog.LevelError
		if e.Status == http.StatusServiceUnavailable {
			level = slog.LevelWarn
		}
		logger.Log(r.Context(), level, "request failed", "method", r.Method, "path", r.URL.Path,
			"status", e.Status, "err", cause)
	}
	if rs.Render != nil {
		rs.Render(w, r, e)
		return
	}
	WriteError(w, e)
}

// Classify is Responder.Error's decision without the writing: the *Error
// that answers err for r.
func Classify(r *http.Request, err error) *Error {
	if r != nil && r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		// The server itself may end a request, saying why with an *Error
		// as its context's cause (brain at the end of its shutdown grace).
		var e *Error
		if errors.As(context.Cause(r.Context()), &e) {
			return e
		}
		return &Error{Status: StatusClientClosedRequest, Code: CodeClientClosed, Message: "the client closed the request", Cause: err}
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if r != nil && !errors.Is(r.Context().Err(), context.DeadlineExceeded) && Unreachable(err) {
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable,
			Message: "a database or service this one depends on did not answer; retry shortly", Cause: err}
	}
	return Internal(err)
}

// Unreachable tells a dependency that could not be reached — any net.Error
// (a connection refused or cut, a name that did not resolve), a
// connection closed in the middle of the dependency's answer
// (io.ErrUnexpectedEOF: what pgx returns when PostgreSQL's connection ends
// without a word, its server killed or a proxy between cut), a statement
// past its deadline (package pgbound), a database that refused or ended
// the connection (an error with an SQLSTATE of class 08, connection
// exception, or 57, operator intervention: shutting down, starting up), a
// statement its driver says never reached the server (pgconn's
// SafeToRetry: a connection the driver had already closed, its server
// restarted, or one that could not be made) —
// from one that failed: the first is a 503 the client waits out, the
// second a 500. Classify counts a deadline as the dependency's only while
// the request's own has not passed: that one is this server's failure.
func Unreachable(err error) bool {
	var netErr net.Error
	var coded interface{ SQLState() string }
	if errors.As(err, &coded) {
		if c := coded.SQLState(); strings.HasPrefix(c, "08") || strings.HasPrefix(c, "57") {
			return true
		}
	}
	var unsent interface{ SafeToRetry() bool }
	if errors.As(err, &unsent) && unsent.SafeToRetry() {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr)
}

// FailureLevel is the level to log err at when a dependency failed work
// outside a request's answer (a background loop, a tool's result): a
// warning when it did not answer (Unreachable: a state to wait out, as a
// request's 503 is), an error otherwise.
func FailureLevel(err error) slog.Level {
	if Unreachable(err) {
		return slog.LevelWarn
	}
	return slog.LevelError
}

var discard = slog.New(slog.DiscardHandler)

// PanicHandler wraps a router's panic handler (httprouter.Router's) so
// that http.ErrAbortHandler, the panic a handler breaks its response off
// with, reaches net/http, which closes the connection without logging,
// instead of being answered as a 500 on a response already under way.
// Every other panic goes to answer.
func PanicHandler(answer func(w http.ResponseWriter, r *http.Request, v any)) func(http.ResponseWriter, *http.Request, any) {
	return func(w http.ResponseWriter, r *http.Request, v any) {
		if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
			panic(v)
		}
		answer(w, r, v)
	}
}
