package server

import (
	"crypto/rand"
	"encoding/base32"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/julienschmidt/httprouter"
)

// MaxBodyBytes is the default cap on every request body brain reads (1 MiB,
// Options.MaxRequestBytes changes it); a larger body is
// refused with 413 naming the limit.
const MaxBodyBytes = 1 << 20

// idEncoding is lower-case base32 with its alphabet in byte order, so that
// IDs sort as the bytes they encode.
var idEncoding = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// newID returns prefix_ and 26 base32 characters: 48 bits of the Unix time
// in milliseconds, then 80 random bits. IDs made later sort later, so the
// rows a busy brain inserts and updates share the newest pages of the
// tables keyed by ID instead of dirtying a random page each (fewer pages
// written per commit). The random bits keep IDs unguessable. Request IDs are httpapi's (the same shape, "req_").
func newID(prefix string) string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	rand.Read(b[6:])
	return prefix + "_" + idEncoding.EncodeToString(b[:])
}

// handle adapts a handler that returns an error to httprouter; the error
// is answered by writeError. A path parameter with a NUL is refused first
// (see noNUL): every one is an ID or a name brain looks up.
func (s *Server) handle(h func(w http.ResponseWriter, r *http.Request, p httprouter.Params) error) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		for _, param := range p {
			if err := noNUL(param.Key, param.Value); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		if err := h(w, r, p); err != nil {
			s.writeError(w, r, err)
		}
	}
}

// noNUL refuses a NUL (U+0000) in string v of field: for a string brain
// keeps in a text column of its own or looks a row up by. PostgreSQL's
// text holds no NUL (a query carrying one fails, "invalid byte sequence
// for encoding UTF8: 0x00") where SQLite's does: without this the stores
// would answer such a request differently, PostgreSQL with a 500. A string
// inside a JSON document brain keeps (arguments, results, answers, tool
// definitions) needs no check: it is stored JSON-escaped, "\u0000".
func noNUL(field, v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return httpapi.BadRequest("%s: must not contain NUL (U+0000)", field)
	}
	return nil
}

// writeError answers err as httpapi.Responder does (the JSON error body; a
// client that went away gets 499 and no log line; a 5xx is logged with its
// cause), with brain's realm on a 401's challenge.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := httpapi.Classify(r, err)
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="brain"`)
	}
	httpapi.Responder{Logger: s.log}.Error(w, r, e)
}

// noStore marks every answer of the API as not to be cached: each is the
// state of a session or call at one moment.
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// query checks that r's query names only allowed parameters, each once, and
// returns them.
func query(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, httpapi.BadRequest("query: %v", err)
	}
	for name, vs := range q {
		if !slices.Contains(allowed, name) {
			if len(allowed) == 0 {
				return nil, httpapi.BadRequest("%s: unknown query parameter (this endpoint takes none)", name)
			}
			return nil, httpapi.BadRequest("%s: unknown query parameter (want one of %s)", name, strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return nil, httpapi.BadRequest("%s: given %d times, want at most once", name, len(vs))
		}
		for _, v := range vs {
			if err := noNUL(name, v); err != nil {
				return nil, err
			}
		}
	}
	return q, nil
}

// intParam parses the query parameter name as an integer in min..max; def
// when absent. It reads the integers a JSON body's integer fields read (a
// JSON number whose value is one: "10", "1e1", "10.0"; strictjson's rule),
// so wait_seconds means the same in a query as in a body; "+5" and "0x5"
// are not JSON numbers, and the space JSON allows around one is refused.
func intParam(q url.Values, name string, min, max, def int64) (int64, error) {
	if !q.Has(name) {
		return def, nil
	}
	v := q.Get(name)
	var n int64
	if v != strings.TrimSpace(v) || strictjson.Unmarshal([]byte(v), &n) != nil {
		hint := ""
		if strings.HasPrefix(v, " ") {
			// An unencoded + in a query string stands for a space.
			hint = ` (a "+" in a query string is a space; a number takes no sign but "-")`
		}
		return 0, httpapi.BadRequest("%s: want an integer %d..%d, got %q%s", name, min, max, v, hint)
	}
	if n < min || n > max {
		return 0, httpapi.BadRequest("%s: must be %d..%d, got %d", name, min, max, n)
	}
	return n, nil
}

func discardLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
