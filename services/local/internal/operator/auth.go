package operator

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/brain-tools/suite/pkg/bearer"
	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/services/local/internal/approval"
)

// Cookie names. Both are HttpOnly and SameSite=Strict; Secure when the page
// is served over https.
const (
	sessionCookie = "operator_session"
	signinCookie  = "operator_signin" // the sign-in form's CSRF secret
)

// MinTokenLength is the shortest operator token accepted from the
// environment, in bytes.
const MinTokenLength = 16

// MaxNameChars caps an operator's name.
const MaxNameChars = 64

// maxSessions bounds the signed-in sessions kept in memory.
const maxSessions = 10000

// session is one signed-in operator. It lives in memory only: a restart of
// the service signs everyone out, and the cookie holds nothing but an
// unguessable key.
type session struct {
	operator string
	csrf     string
	expires  time.Time
}

// sessions holds the signed-in operators by cookie value.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	ttl time.Duration
	now func() time.Time
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{m: map[string]*session{}, ttl: ttl, now: time.Now}
}

// create signs operator in and returns the cookie value.
func (s *sessions) create(operator string) (string, *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.m) >= maxSessions {
		for k, v := range s.m {
			if now.After(v.expires) {
				delete(s.m, k)
			}
		}
		// Still full: drop the oldest-expiring one rather than refuse
		// sign-in to everybody.
		if len(s.m) >= maxSessions {
			var oldest string
			for k, v := range s.m {
				if oldest == "" || v.expires.Before(s.m[oldest].expires) {
					oldest = k
				}
			}
			delete(s.m, oldest)
		}
	}
	key := jobs.NewID() + jobs.NewID()
	sess := &session{operator: operator, csrf: jobs.NewID(), expires: now.Add(s.ttl)}
	s.m[key] = sess
	return key, sess
}

func (s *sessions) get(key string) (*session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[key]
	if !ok {
		return nil, false
	}
	if s.now().After(sess.expires) {
		delete(s.m, key)
		return nil, false
	}
	return sess, true
}

func (s *sessions) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// authenticator checks operator tokens: the shared APPROVAL_OPERATOR_TOKEN,
// whose holder names themself on the sign-in form, and the per-person
// tokens of APPROVAL_OPERATORS, which carry their name.
type authenticator struct {
	shared string
	named  map[string]string // name → token
}

func newAuthenticator(shared string, named map[string]string) (*authenticator, error) {
	if shared == "" && len(named) == 0 {
		return nil, errors.New("operator page: APPROVAL_OPERATOR_TOKEN is not set (or give per-person tokens in APPROVAL_OPERATORS=name:token,...)")
	}
	if shared != "" && len(shared) < MinTokenLength {
		return nil, fmt.Errorf("operator page: APPROVAL_OPERATOR_TOKEN is %d bytes, shorter than the minimum of %d", len(shared), MinTokenLength)
	}
	seen := map[string]string{}
	for name, tok := range named {
		if err := checkConfiguredName(name); err != nil {
			return nil, fmt.Errorf("operator page: APPROVAL_OPERATORS: %w", err)
		}
		if len(tok) < MinTokenLength {
			return nil, fmt.Errorf("operator page: APPROVAL_OPERATORS: the token of %q is %d bytes, shorter than the minimum of %d", name, len(tok), MinTokenLength)
		}
		if other, dup := seen[tok]; dup {
			return nil, fmt.Errorf("operator page: APPROVAL_OPERATORS: %q shares a token with %q", name, other)
		}
		if tok == shared {
			return nil, fmt.Errorf("operator page: APPROVAL_OPERATORS: %q shares a token with APPROVAL_OPERATOR_TOKEN", name)
		}
		seen[tok] = name
	}
	return &authenticator{shared: shared, named: named}, nil
}

// operator returns who holds token: the named operator for a per-person
// token, formName for the shared one. Every configured token is compared,
// in constant time, whatever matches.
func (a *authenticator) operator(token, formName string) (string, error) {
	match := ""
	for name, tok := range a.named {
		if bearer.Equal(token, tok) {
			match = name
		}
	}
	shared := a.shared != "" && bearer.Equal(token, a.shared)
	switch {
	case match != "":
		return match, nil
	case shared:
		formName = strings.TrimSpace(formName)
		if formName == "" {
			return "", errors.New("name: required with the shared operator token, so the decision log says who answered")
		}
		if err := checkName(formName); err != nil {
			return "", err
		}
		return formName, nil
	}
	return "", errWrongToken
}

var errWrongToken = errors.New("wrong operator token")

// checkName checks an operator's name as the decision log records it and
// the page shows it: 1 to MaxNameChars characters, no control characters,
// and not one of the names the log uses for decisions nobody signed in
// made (approval.SystemOperator, approval.CallerOperator, in any case), which
// the page shows differently.
func checkName(name string) error {
	if name == "" {
		return errors.New("name: must not be empty")
	}
	if n := utf8.RuneCountInString(name); n > MaxNameChars {
		return fmt.Errorf("name: %d characters, more than the limit of %d", n, MaxNameChars)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return errors.New("name: must not contain control characters")
		}
	}
	for _, reserved := range []string{approval.SystemOperator, approval.CallerOperator} {
		if strings.EqualFold(name, reserved) {
			return fmt.Errorf("name: %q is reserved: the decision log uses it for decisions no operator made", name)
		}
	}
	return nil
}

// checkConfiguredName checks a name of APPROVAL_OPERATORS: checkName, and
// only ASCII letters, digits, '.', '_', '-' and '@'. The variable is
// name:token pairs split at commas, so "alice:…, bob:…" would otherwise
// configure an operator " bob" whom the page and the log show as "bob".
func checkConfiguredName(name string) error {
	for _, r := range name {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("._-@", r)) {
			return fmt.Errorf("name %q: want 1 to %d ASCII letters, digits, '.', '_', '-' or '@', got %q (no spaces around a name:token pair)", name, MaxNameChars, r)
		}
	}
	if err := checkName(name); err != nil {
		return fmt.Errorf("name %q: %s", name, strings.TrimPrefix(err.Error(), "name: "))
	}
	return nil
}

func (p *Page) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteStrictMode,
	})
}

// current returns the signed-in session of r, if any.
func (p *Page) current(r *http.Request) (*session, string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil, "", false
	}
	sess, ok := p.sessions.get(c.Value)
	return sess, c.Value, ok
}

// sameOrigin refuses a request whose Origin header names another site: a
// second line of defence behind SameSite=Strict cookies and CSRF tokens.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		return origin == ""
	}
	_, host, ok := strings.Cut(origin, "://")
	return ok && strings.EqualFold(host, r.Host)
}
