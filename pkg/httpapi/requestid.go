package httpapi

import (
	"encoding/base32"
	"encoding/binary"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/brain-tools/suite/pkg/tracing"
)

// HeaderRequestID is the header that carries a request's ID both ways.
const HeaderRequestID = "X-Request-Id"

// idEncoding is lower-case base32 with its alphabet in byte order, so that
// IDs sort as the bytes they encode.
var idEncoding = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// NewRequestID returns a request ID: "req_" and 26 characters of
// 2-7 and a-z, encoding 48 bits of the Unix time in milliseconds, then 80
// random bits. IDs made later sort later, so a log sorted by ID is sorted
// by time. It is a correlation ID, not a secret: the random bits come from
// math/rand/v2, which spares a system call per request.
func NewRequestID() string {
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[:8], uint64(time.Now().UnixMilli())<<16)
	binary.BigEndian.PutUint64(raw[8:], rand.Uint64())
	binary.BigEndian.PutUint16(raw[6:8], uint16(rand.Uint32()))
	var b [4 + 26]byte
	copy(b[:], "req_")
	idEncoding.Encode(b[4:], raw[:])
	return string(b[:])
}

// ValidRequestID reports whether id may be kept as a caller's own request
// ID: 1 to 128 letters, digits, '.', '_', ':' or '-', safe to repeat in a
// header, a JSON body and a log line.
func ValidRequestID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// WithRequestID gives every request an ID: the caller's own X-Request-Id
// when ValidRequestID accepts it (so one ID follows a call from brain into
// a tool service's log), a NewRequestID otherwise. The response's
// X-Request-Id header says it, error bodies repeat it as request_id, and
// handlers read it with RequestID; the request's context carries it
// (tracing.ContextWithRequestID), so every line logged with that context
// through a tracing.LogHandler has it as request_id, and the request's own
// X-Request-Id header is set to it, for handlers that see the headers but
// not the context (the MCP SDK's tool handlers).
func WithRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(HeaderRequestID)
		if !ValidRequestID(id) {
			id = NewRequestID()
		}
		w.Header()[HeaderRequestID] = []string{id}
		r.Header[HeaderRequestID] = []string{id}
		next.ServeHTTP(w, r.WithContext(tracing.ContextWithRequestID(r.Context(), id)))
	})
}

// RequestID returns the ID WithRequestID gave the response w, or "".
func RequestID(w http.ResponseWriter) string {
	if v := w.Header()[HeaderRequestID]; len(v) > 0 {
		return v[0]
	}
	return ""
}
