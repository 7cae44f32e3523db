package operator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/time/rate"

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

// AllTenants in APPROVAL_OPERATOR_TENANTS makes an operator an admin.
const AllTenants = "*"

// session is one signed-in operator. It lives in memory only: a restart of
// the service signs everyone out, and the cookie holds nothing but an
// unguessable key.
type session struct {
	operator string
	account  approval.Account // what the operator may see; Name is the account's
	shared   bool             // signed in with the shared token
	csrf     string
	expires  time.Time
}

// sees reports whether the operator may see tenant's approvals.
func (s *session) sees(tenant string) bool { return s.account.Sees(tenant) }

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

// create signs an operator in and returns the cookie value.
func (s *sessions) create(operator string, account approval.Account, shared bool) (string, *session) {
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
	sess := &session{operator: operator, account: account, shared: shared, csrf: jobs.NewID(), expires: now.Add(s.ttl)}
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

// accounts builds the operator accounts the configuration names: one per
// APPROVAL_OPERATORS or APPROVAL_OPERATOR_IDENTITIES name, scoped by
// APPROVAL_OPERATOR_TENANTS (AllTenants: an admin), which must list each
// of them and nobody else.
func (cfg Config) accounts() ([]approval.Account, error) {
	if cfg.Token == "" && len(cfg.Operators) == 0 && len(cfg.Identities) == 0 {
		return nil, errors.New("operator page: APPROVAL_OPERATOR_TOKEN is not set (or give operator accounts: APPROVAL_OPERATORS=name:token,... or APPROVAL_OPERATOR_IDENTITIES=name:identity,..., each scoped in APPROVAL_OPERATOR_TENANTS)")
	}
	if cfg.Token != "" && len(cfg.Token) < MinTokenLength {
		return nil, fmt.Errorf("operator page: APPROVAL_OPERATOR_TOKEN is %d bytes, shorter than the minimum of %d", len(cfg.Token), MinTokenLength)
	}
	byName := map[string]*approval.Account{}
	get := func(name string) *approval.Account {
		if a := byName[name]; a != nil {
			return a
		}
		a := &approval.Account{Name: name}
		byName[name] = a
		return a
	}
	seenToken := map[string]string{}
	for name, tok := range cfg.Operators {
		if err := checkConfiguredName(name); err != nil {
			return nil, fmt.Errorf("operator page: APPROVAL_OPERATORS: %w", err)
		}
		if len(tok) < MinTokenLength {
			return nil, fmt.Errorf("operator page: APPROVAL_OPERATORS: the token of %q is %d bytes, shorter than the minimum of %d", name, len(tok), MinTokenLength)
		}
		if other, dup := seenToken[tok]; dup {
			return nil, fmt.Errorf("operator page: APPROVAL_OPERATORS: %q shares a token with %q", name, other)
		}
		if tok == cfg.Token {
			return nil, fmt.Errorf("operator page: APPROVAL_OPERATORS: %q shares a token with APPROVAL_OPERATOR_TOKEN", name)
		}
		seenToken[tok] = name
		get(name).TokenHash = approval.HashToken(tok)
	}
	seenIdentity := map[string]string{}
	for name, id := range cfg.Identities {
		if err := checkConfiguredName(name); err != nil {
			return nil, fmt.Errorf("operator page: APPROVAL_OPERATOR_IDENTITIES: %w", err)
		}
		if id == "" || strings.TrimSpace(id) != id {
			return nil, fmt.Errorf("operator page: APPROVAL_OPERATOR_IDENTITIES: the identity of %q is empty or has surrounding spaces", name)
		}
		if other, dup := seenIdentity[id]; dup {
			return nil, fmt.Errorf("operator page: APPROVAL_OPERATOR_IDENTITIES: %q and %q share the identity %q", name, other, id)
		}
		seenIdentity[id] = name
		get(name).Identity = id
	}
	if len(cfg.Identities) > 0 && cfg.IdentityHeader == "" {
		return nil, errors.New("operator page: APPROVAL_OPERATOR_IDENTITIES needs APPROVAL_IDENTITY_HEADER, the header in which the authenticating proxy names the operator")
	}
	if cfg.IdentityHeader != "" && len(cfg.IdentityProxies) == 0 {
		return nil, errors.New("operator page: APPROVAL_IDENTITY_HEADER needs APPROVAL_IDENTITY_PROXIES, the addresses (CIDRs) of the proxies allowed to set it; from anywhere else the header is ignored")
	}
	for name, scope := range cfg.OperatorTenants {
		a, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("operator page: APPROVAL_OPERATOR_TENANTS: %q has no token in APPROVAL_OPERATORS and no identity in APPROVAL_OPERATOR_IDENTITIES", name)
		}
		if scope == AllTenants {
			a.Admin = true
			continue
		}
		tenants := strings.Split(scope, "|")
		for _, t := range tenants {
			if t == "" || strings.TrimSpace(t) != t {
				return nil, fmt.Errorf("operator page: APPROVAL_OPERATOR_TENANTS: %q: tenant %q is empty or has surrounding spaces (tenants are separated by |, or * for an admin)", name, t)
			}
		}
		sort.Strings(tenants)
		a.Tenants = slices.Compact(tenants)
	}
	var out []approval.Account
	for name, a := range byName {
		if _, ok := cfg.OperatorTenants[name]; !ok {
			return nil, fmt.Errorf("operator page: APPROVAL_OPERATOR_TENANTS: say which tenants %q may decide for (%s:tenant|tenant) or make them an admin (%s:*)", name, name, name)
		}
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// sharedAccount is the account of the shared APPROVAL_OPERATOR_TOKEN: an
// admin, whose holder names themself, but never with the name of an
// account.
var sharedAccount = approval.Account{Name: "shared operator token", Admin: true}

// authenticator checks operator sign-ins: personal tokens against the
// accounts in the store, the shared token against APPROVAL_OPERATOR_TOKEN.
type authenticator struct {
	shared string
	store  *approval.Store
}

var errWrongToken = errors.New("wrong operator token")

// operator returns who holds token, with the account that sets what they
// see: the account of a personal token (its name, whatever the form says),
// or for the shared token an admin under formName, which must not be an
// account's name. A personal token is found by its hash; the shared one is
// compared in constant time.
func (a *authenticator) operator(ctx context.Context, token, formName string) (name string, acct approval.Account, shared bool, err error) {
	acct, err = a.store.AccountByToken(ctx, token)
	switch {
	case err == nil:
		return acct.Name, acct, false, nil
	case !errors.Is(err, approval.ErrNoAccount):
		return "", approval.Account{}, false, err
	}
	if a.shared == "" || !bearer.Equal(token, a.shared) {
		return "", approval.Account{}, false, errWrongToken
	}
	formName = strings.TrimSpace(formName)
	if formName == "" {
		return "", approval.Account{}, false, errors.New("name: required with the shared operator token, so the decision log says who answered")
	}
	if err := checkName(formName); err != nil {
		return "", approval.Account{}, false, err
	}
	if taken, err := a.isAccount(ctx, formName); err != nil {
		return "", approval.Account{}, false, err
	} else if taken {
		return "", approval.Account{}, false, fmt.Errorf("name: %q is an operator account's name; the shared token cannot sign in as a personal operator (sign in with that operator's own token)", formName)
	}
	return formName, sharedAccount, true, nil
}

// isAccount reports whether name is an account's name in any letter case.
func (a *authenticator) isAccount(ctx context.Context, name string) (bool, error) {
	_, err := a.store.AccountByName(ctx, name)
	if errors.Is(err, approval.ErrNoAccount) {
		return false, nil
	}
	return err == nil, err
}

// checkName checks an operator's name as the decision log records it and
// the page shows it: 1 to MaxNameChars characters, no control or format
// characters (which could hide or reorder it), and not one of the names the
// log uses for decisions nobody signed in made (approval.SystemOperator,
// approval.CallerOperator, in any case), which the page shows differently.
func checkName(name string) error {
	if name == "" {
		return errors.New("name: must not be empty")
	}
	if n := utf8.RuneCountInString(name); n > MaxNameChars {
		return fmt.Errorf("name: %d characters, more than the limit of %d", n, MaxNameChars)
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("name: must not contain control or invisible characters (U+%04X)", r)
		}
	}
	for _, reserved := range []string{approval.SystemOperator, approval.CallerOperator, sharedAccount.Name} {
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
			return fmt.Errorf("name %q: want 1 to %d ASCII letters, digits, '.', '_', '-' or '@', got %q (no spaces around a name:value pair)", name, MaxNameChars, r)
		}
	}
	if err := checkName(name); err != nil {
		return fmt.Errorf("name %q: %s", name, strings.TrimPrefix(err.Error(), "name: "))
	}
	return nil
}

// throttle limits failed sign-ins per key (an account name, an address):
// each key may fail burst times, then once per interval (a token bucket of
// golang.org/x/time/rate). A key out of tokens is refused before its
// token is even checked, so guessing cannot go faster than the limit.
type throttle struct {
	mu       sync.Mutex
	interval time.Duration
	burst    int
	keys     map[string]*rate.Limiter
	now      func() time.Time
}

// maxThrottleKeys bounds the keys kept; full buckets are dropped first.
const maxThrottleKeys = 10000

func newThrottle(attempts int, window time.Duration) *throttle {
	return &throttle{interval: window / time.Duration(attempts), burst: attempts, keys: map[string]*rate.Limiter{}, now: time.Now}
}

// wait returns how long the first of keys stays locked out, 0 when none is.
func (t *throttle) wait(keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var longest time.Duration
	for _, k := range keys {
		l, ok := t.keys[k]
		if !ok {
			continue
		}
		if tokens := l.TokensAt(now); tokens < 1 {
			if d := time.Duration((1 - tokens) * float64(t.interval)); d > longest {
				longest = d
			}
		}
	}
	return longest
}

// fail records a failed sign-in against each key.
func (t *throttle) fail(keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if len(t.keys) >= maxThrottleKeys {
		for k, l := range t.keys {
			if l.TokensAt(now) >= float64(t.burst) {
				delete(t.keys, k)
			}
		}
	}
	for _, k := range keys {
		l, ok := t.keys[k]
		if !ok {
			if len(t.keys) >= maxThrottleKeys {
				continue // every slot holds a key still failing: the others still count
			}
			l = rate.NewLimiter(rate.Every(t.interval), t.burst)
			t.keys[k] = l
		}
		l.AllowN(now, 1)
	}
}

// signinKeys are the throttle keys of a sign-in: the name typed (any
// case) and the client's address (an IPv6 address by its /64, which one
// host usually holds whole).
func signinKeys(r *http.Request, name string) []string {
	keys := []string{"addr:" + clientNet(r)}
	if name = strings.TrimSpace(name); name != "" {
		keys = append(keys, "name:"+strings.ToLower(name))
	}
	return keys
}

func clientNet(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if addr.Is6() && !addr.Is4In6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.Unmap().String()
}

// proxies are the addresses allowed to vouch for an identity header.
type proxies []netip.Prefix

func parseProxies(cidrs []string) (proxies, error) {
	var out proxies
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			addr, aerr := netip.ParseAddr(c)
			if aerr != nil {
				return nil, fmt.Errorf("operator page: APPROVAL_IDENTITY_PROXIES: %q is neither a CIDR nor an address", c)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		out = append(out, p)
	}
	return out, nil
}

// trusted reports whether r came straight from an allowed proxy.
func (ps proxies) trusted(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, p := range ps {
		if p.Contains(addr) {
			return true
		}
	}
	return false
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
