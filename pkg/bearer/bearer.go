// Package bearer checks "Authorization: Bearer TOKEN" headers in constant
// time, as the contract asks of every tool service ("Check the token").
package bearer

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/brain-tools/suite/pkg/httpapi"
)

// Token returns the credential of an Authorization header value of the form
// "Bearer TOKEN" (scheme case-insensitive, RFC 6750 section 2.1), and false
// when the header has another form or an empty token.
func Token(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// FromRequest returns the bearer credential of r (Token of its
// Authorization header), and false when r has none, a malformed one, or more
// than one Authorization header: with two, a proxy and the service could
// each read another.
func FromRequest(r *http.Request) (string, bool) {
	vs := r.Header.Values("Authorization")
	if len(vs) != 1 {
		return "", false
	}
	return Token(vs[0])
}

// MinTokenBytes is the shortest secret (a service's BRAIN_TOOLS_KEY, one of
// brain's API keys) taken without a warning at start: 16 bytes, 128 bits
// when random.
const MinTokenBytes = 16

// CheckToken checks a configured secret that clients send as
// "Authorization: Bearer TOKEN": no surrounding whitespace (Token trims
// it, so the secret could never match) and no control characters (RFC 9110
// field values cannot carry them). The error says what is wrong, for the
// caller to prefix with the setting's name.
func CheckToken(tok string) error {
	if strings.TrimSpace(tok) != tok {
		return errors.New("has surrounding whitespace, which an Authorization header cannot carry")
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("contains a control character (byte %d)", i)
		}
	}
	return nil
}

// Equal compares two secrets in time independent of their contents and of
// the length of either: both are hashed first, so the comparison always
// covers 32 bytes.
func Equal(got, want string) bool {
	g := sha256.Sum256([]byte(got))
	w := sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// Check reports whether r carries "Authorization: Bearer want". An empty
// want never matches: a service without a token must say so explicitly
// instead of accepting everything.
func Check(r *http.Request, want string) bool {
	got, ok := FromRequest(r)
	return ok && want != "" && Equal(got, want)
}

// Require wraps next so that requests without the bearer token get 401 with
// a WWW-Authenticate challenge and a JSON error body.
func Require(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Check(r, token) {
			Unauthorized(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Unauthorized writes the 401 answer Require uses: a Bearer challenge and
// {"error":{"code":"unauthorized","message":...,"request_id":...}}, the
// request_id repeating the response's X-Request-Id header when it has one.
func Unauthorized(w http.ResponseWriter, r *http.Request) {
	msg := "missing bearer token: send Authorization: Bearer TOKEN"
	if n := len(r.Header.Values("Authorization")); n > 1 {
		msg = fmt.Sprintf("%d Authorization headers: send one, Authorization: Bearer TOKEN", n)
	} else if _, ok := Token(r.Header.Get("Authorization")); ok {
		msg = "invalid bearer token"
	} else if r.Header.Get("Authorization") != "" {
		msg = "malformed Authorization header: want Bearer TOKEN"
	}
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	httpapi.Refuse(w, http.StatusUnauthorized, httpapi.CodeUnauthorized, msg)
}
