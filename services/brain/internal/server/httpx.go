package server

import (
	"bytes"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/julienschmidt/httprouter"
)

// MaxBodyBytes is the default cap on every request body brain reads (1 MiB,
// Options.MaxRequestBytes changes it); a larger body is
// refused with 413 naming the limit.
const MaxBodyBytes = 1 << 20

// Error codes of the {"error":{"code",...}} body.
const (
	codeInvalidRequest   = "invalid_request"
	codeUnauthorized     = "unauthorized"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeConflict         = "conflict"
	codeTooLarge         = "request_too_large"
	codeTimeout          = "request_timeout"
	codeUnsupportedMedia = "unsupported_media_type"
	codeInternal         = "internal_error"
	codeUnavailable      = "unavailable"
)

// apiError is a refusal: an HTTP status, a code and a message that is safe to
// show the client and names the field at fault. cause, when set, is logged
// and never sent.
type apiError struct {
	status  int
	code    string
	message string
	cause   error
}

func (e *apiError) Error() string { return e.message }

// errorf builds a refusal. A string or error among args longer than
// maxEcho bytes is cut there (with "…"), so that a client sending a huge
// ID, header or field name does not get it back whole.
func errorf(status int, code, format string, args ...any) *apiError {
	for i, a := range args {
		switch v := a.(type) {
		case string:
			args[i] = strictjson.Clip(v, maxEcho)
		case error:
			if m := v.Error(); len(m) > maxEcho {
				args[i] = strictjson.Clip(m, maxEcho)
			}
		}
	}
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// maxEcho is the most bytes of one value a refusal repeats.
const maxEcho = 512

func badRequest(format string, args ...any) *apiError {
	return errorf(http.StatusBadRequest, codeInvalidRequest, format, args...)
}

func notFound(format string, args ...any) *apiError {
	return errorf(http.StatusNotFound, codeNotFound, format, args...)
}

func conflict(format string, args ...any) *apiError {
	return errorf(http.StatusConflict, codeConflict, format, args...)
}

func unavailable(format string, args ...any) *apiError {
	return errorf(http.StatusServiceUnavailable, codeUnavailable, format, args...)
}

// idEncoding is lower-case base32 with its alphabet in byte order, so that
// IDs sort as the bytes they encode.
var idEncoding = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// newID returns prefix_ and 26 base32 characters: 48 bits of the Unix time
// in milliseconds, then 80 random bits. IDs made later sort later, so the
// rows a busy brain inserts and updates share the newest pages of the
// tables keyed by ID instead of dirtying a random page each (fewer pages
// written per commit). The random bits keep IDs unguessable.
func newID(prefix string) string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	rand.Read(b[6:])
	return prefix + "_" + idEncoding.EncodeToString(b[:])
}

// handle adapts a handler that returns an error: *apiError is written as is,
// anything else becomes a 500 "internal error" with the cause only logged.
func (s *Server) handle(h func(w http.ResponseWriter, r *http.Request, p httprouter.Params) error) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		if err := h(w, r, p); err != nil {
			s.writeError(w, r, err)
		}
	}
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{status: http.StatusInternalServerError, code: codeInternal, message: "internal error", cause: err}
	}
	if ae.status >= 500 {
		// request_id comes from the context (httpapi.WithRequestID).
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path,
			"status", ae.status, "err", ae.cause)
	}
	if ae.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="brain"`)
	}
	type body struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	}
	writeJSON(w, ae.status, map[string]body{"error": {ae.code, ae.message, httpapi.RequestID(w)}})
}

// writeJSON encodes v before writing the status, so an encoding failure is
// still a clean 500.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		data, status = []byte(`{"error":{"code":"internal_error","message":"internal error: encode response"}}`), http.StatusInternalServerError
	}
	data = append(data, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// decodeBody decodes a JSON request body strictly into v: Content-Type must be
// application/json (415 otherwise), at most Options.MaxRequestBytes (413), a JSON object
// (not null, an array or a scalar), no unknown fields, no trailing data,
// types as declared (400 naming the field).
func (s *Server) decodeBody(r *http.Request, v any) error {
	if err := checkJSONContentType(r); err != nil {
		return err
	}
	data, err := readBody(r, s.maxBody)
	if err != nil {
		return err
	}
	return decodeObject(data, v)
}

// decodeOptionalBody is decodeBody for endpoints whose body may be absent: an
// empty body leaves v as it is.
func (s *Server) decodeOptionalBody(r *http.Request, v any) error {
	data, err := readBody(r, s.maxBody)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := checkJSONContentType(r); err != nil {
		return err
	}
	return decodeObject(data, v)
}

// readBody reads r's body, at most limit bytes (413 past it).
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if service.IsTimeout(err) {
		return nil, errorf(http.StatusRequestTimeout, codeTimeout, "body: did not arrive within %ds", int(service.BodyTimeout/time.Second))
	}
	if err != nil {
		return nil, badRequest("body: read: %v", err)
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(limit)
	}
	return data, nil
}

// decodeObject decodes data strictly into v. Every request body brain takes
// is a JSON object; encoding/json would read null as "nothing to set" and
// accept it, so anything but an object is refused here first. An empty body
// is left to strictjson, which names it.
func decodeObject(data []byte, v any) error {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] != '{' {
		return badRequest("body: must be a JSON object, got %s", jsonKind(t[0]))
	}
	// strictjson matches names case-sensitively: "Tool" is the unknown
	// field it is, with a hint naming "tool".
	return decodeErr(strictjson.Unmarshal(data, v))
}

// jsonKind names the kind of JSON value that starts with b.
func jsonKind(b byte) string {
	switch {
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

func tooLarge(limit int64) *apiError {
	return errorf(http.StatusRequestEntityTooLarge, codeTooLarge, "body: larger than the limit of %d bytes", limit)
}

func checkJSONContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return errorf(http.StatusUnsupportedMediaType, codeUnsupportedMedia,
			"content-type: want application/json, got %q", ct)
	}
	// JSON text is UTF-8 (RFC 8259 section 8.1).
	if cs, named := params["charset"]; named && !strings.EqualFold(cs, "utf-8") {
		return errorf(http.StatusUnsupportedMediaType, codeUnsupportedMedia,
			"content-type: JSON is UTF-8, got charset %q", cs)
	}
	return nil
}

func decodeErr(err error) error {
	if err == nil {
		return nil
	}
	var (
		tl *strictjson.TooLargeError
		fe *strictjson.FieldError
	)
	switch {
	case errors.As(err, &tl):
		return tooLarge(tl.Limit)
	case errors.As(err, &fe):
		if fe.Field == "" {
			if strings.HasPrefix(fe.Problem, "body ") {
				return badRequest("%s", fe.Problem) // "body is empty: ..."
			}
			return badRequest("body: %s", fe.Problem)
		}
		return badRequest("%s: %s", fe.Field, fe.Problem)
	}
	return badRequest("body: %v", err)
}

// query checks that r's query names only allowed parameters, each once, and
// returns them.
func query(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("query: %v", err)
	}
	for name, vs := range q {
		if !slices.Contains(allowed, name) {
			if len(allowed) == 0 {
				return nil, badRequest("%s: unknown query parameter (this endpoint takes none)", name)
			}
			return nil, badRequest("%s: unknown query parameter (want one of %s)", name, strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return nil, badRequest("%s: given %d times, want at most once", name, len(vs))
		}
	}
	return q, nil
}

// intParam parses the query parameter name as an integer in min..max; def
// when absent.
func intParam(q url.Values, name string, min, max, def int64) (int64, error) {
	if !q.Has(name) {
		return def, nil
	}
	v := q.Get(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, badRequest("%s: want an integer %d..%d, got %q", name, min, max, v)
	}
	if n < min || n > max {
		return 0, badRequest("%s: must be %d..%d, got %d", name, min, max, n)
	}
	return n, nil
}

func discardLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
