// Package operator is the approval page the local service serves to
// operators: a live list of pending approvals, a detail view with the exact
// action and details, tenant, session, call, requested and expiry times, and
// an approve / deny form with an optional comment.
//
// Operators sign in with a token from the environment and get an HttpOnly,
// SameSite=Strict session cookie; every POST carries the session's CSRF
// token (the sign-in form its own). The decision form is plain HTML and
// works without JavaScript; a small script only keeps the list live.
package operator

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/csv"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/sse"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/services/local/internal/approval"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config is the operator page's part of the local service's environment.
type Config struct {
	// Token is the shared operator token (env APPROVAL_OPERATOR_TOKEN), at
	// least 16 bytes. Its holder is an admin (every tenant) and names
	// themself when signing in, but never with an account's name.
	Token string `env:"APPROVAL_OPERATOR_TOKEN"`
	// Operators are personal tokens, name:token pairs separated by commas
	// without spaces (env APPROVAL_OPERATORS); a name is 1 to 64 ASCII
	// letters, digits, '.', '_', '-' or '@', not system or caller. Each
	// name needs its tenants in APPROVAL_OPERATOR_TENANTS.
	Operators pairs `env:"APPROVAL_OPERATORS"`
	// OperatorTenants scope the accounts: name:tenant|tenant pairs, or
	// name:* for an admin who sees every tenant (env
	// APPROVAL_OPERATOR_TENANTS). Every account must be listed.
	OperatorTenants pairs `env:"APPROVAL_OPERATOR_TENANTS"`
	// Identities are name:identity pairs (env APPROVAL_OPERATOR_IDENTITIES):
	// an operator an authenticating proxy names in APPROVAL_IDENTITY_HEADER
	// is signed in as that account, without a token.
	Identities pairs `env:"APPROVAL_OPERATOR_IDENTITIES"`
	// IdentityHeader is the request header in which the proxy names the
	// operator (env APPROVAL_IDENTITY_HEADER), e.g. X-Forwarded-Email.
	IdentityHeader string `env:"APPROVAL_IDENTITY_HEADER"`
	// IdentityProxies are the addresses or CIDRs of the proxies allowed to
	// set APPROVAL_IDENTITY_HEADER (env APPROVAL_IDENTITY_PROXIES,
	// comma-separated); from any other address the header is ignored.
	IdentityProxies []string `env:"APPROVAL_IDENTITY_PROXIES" envSeparator:","`
	// SessionTTL is how long a sign-in lasts (env APPROVAL_OPERATOR_SESSION_TTL).
	SessionTTL time.Duration `env:"APPROVAL_OPERATOR_SESSION_TTL" envDefault:"12h"`
	// SigninAttempts is how many failed sign-ins per name typed and per
	// client address are allowed within APPROVAL_SIGNIN_WINDOW (env
	// APPROVAL_SIGNIN_ATTEMPTS); past them the form answers 429.
	SigninAttempts int `env:"APPROVAL_SIGNIN_ATTEMPTS" envDefault:"5"`
	// SigninWindow is the window of APPROVAL_SIGNIN_ATTEMPTS (env
	// APPROVAL_SIGNIN_WINDOW): after it one more attempt comes back every
	// window/attempts.
	SigninWindow time.Duration `env:"APPROVAL_SIGNIN_WINDOW" envDefault:"15m"`
	// Secure marks cookies Secure (env APPROVAL_COOKIE_SECURE). Default:
	// true when the page URL is https.
	Secure *bool `env:"APPROVAL_COOKIE_SECURE"`
}

// Limits of the page's forms.
const (
	maxFormBytes = 64 << 10
	// DefaultPageSize and MaxPageSize bound the queue's pages (per=):
	// however many approvals wait, a page lists at most MaxPageSize.
	DefaultPageSize = 50
	MaxPageSize     = 100
	MinPageSize     = 10
	// maxTextChars caps the queue's text search and session filter.
	maxTextChars    = 200
	decidedLimit    = 20
	auditPageSize   = 100
	liveHeartbeat   = 15 * time.Second
	signinFormTTL   = 30 * time.Minute
	maxCommentChars = approval.MaxCommentChars
)

// Page serves the operator page.
type Page struct {
	svc      *approval.Service
	auth     *authenticator
	sessions *sessions
	throttle *throttle
	identity string  // IdentityHeader
	proxies  proxies // IdentityProxies
	secure   bool
	logger   *slog.Logger
	pages    map[string]*template.Template
	ctx      context.Context
	// errors answers the errors handlers return with the message page.
	errors httpapi.Responder
	// auditRows is the store's Audit; a test makes it fail part way
	// through, which no real store does on demand.
	auditRows func(context.Context, approval.AuditQuery, func(approval.AuditEntry) error) (int, error)
}

// pairs is a list of name:value pairs separated by commas, as the
// APPROVAL_OPERATOR* variables give them. The value is everything after
// the first ':'. A name listed twice is refused, where a map would keep
// the last value silently.
type pairs map[string]string

// UnmarshalText implements encoding.TextUnmarshaler, which env uses.
func (p *pairs) UnmarshalText(text []byte) error {
	m := pairs{}
	for _, pair := range strings.Split(string(text), ",") {
		name, value, ok := strings.Cut(pair, ":")
		if !ok {
			return fmt.Errorf("%q: want name:value", pair)
		}
		if _, dup := m[name]; dup {
			return fmt.Errorf("%q is listed more than once: give each operator one name:value pair", name)
		}
		m[name] = value
	}
	*p = m
	return nil
}

// Check refuses what New would refuse in the page's own settings, without
// an approval service: local calls it before the approval store opens, so
// a bad setting touches no file.
func (cfg Config) Check() error {
	_, _, err := cfg.check()
	return err
}

// check refuses settings that cannot work and returns the accounts.
func (cfg Config) check() ([]approval.Account, proxies, error) {
	accounts, err := cfg.accounts()
	if err != nil {
		return nil, nil, err
	}
	ps, err := parseProxies(cfg.IdentityProxies)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case cfg.SessionTTL <= 0:
		return nil, nil, fmt.Errorf("operator page: APPROVAL_OPERATOR_SESSION_TTL must be positive, got %s", cfg.SessionTTL)
	case cfg.SigninAttempts < 1:
		return nil, nil, fmt.Errorf("operator page: APPROVAL_SIGNIN_ATTEMPTS must be at least 1, got %d", cfg.SigninAttempts)
	case cfg.SigninWindow <= 0:
		return nil, nil, fmt.Errorf("operator page: APPROVAL_SIGNIN_WINDOW must be positive, got %s", cfg.SigninWindow)
	}
	return accounts, ps, nil
}

// New is Open with a parsed Config. It writes the configured accounts to
// the approval store, replacing the ones stored before.
func New(ctx context.Context, cfg Config, svc *approval.Service, logger *slog.Logger) (*Page, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	accounts, ps, err := cfg.check()
	if err != nil {
		return nil, err
	}
	if err := svc.Store().SyncAccounts(ctx, accounts); err != nil {
		return nil, fmt.Errorf("operator page: %w", err)
	}
	secure := strings.HasPrefix(svc.PageURL(), "https://")
	if cfg.Secure != nil {
		secure = *cfg.Secure
	}
	p := &Page{svc: svc, auth: &authenticator{shared: cfg.Token, store: svc.Store()}, sessions: newSessions(cfg.SessionTTL),
		throttle: newThrottle(cfg.SigninAttempts, cfg.SigninWindow), identity: cfg.IdentityHeader, proxies: ps,
		secure: secure, logger: logger, ctx: ctx, pages: map[string]*template.Template{}, auditRows: svc.Store().Audit}
	funcs := template.FuncMap{
		"ts":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"until": func(t time.Time) string {
			d := time.Until(t).Round(time.Second)
			if d <= 0 {
				return "due now"
			}
			return "in " + d.String()
		},
		"exact": func(s string) template.HTML { h, _ := exact(s); return h },
		"marks": func(s string) string { _, m := exact(s); return m.String() },
		"add":   func(a, b int) int { return a + b },
		"list":  func(s ...string) []string { return s },
	}
	base := template.Must(template.New("base").Funcs(funcs).ParseFS(templateFS, "templates/base.html", "templates/lists.html"))
	for _, name := range []string{"signin", "list", "detail", "message", "audit"} {
		p.pages[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html"))
	}
	p.pages["lists"] = base
	p.errors = httpapi.Responder{Logger: logger, Render: p.renderError}
	return p, nil
}

// Routes adds the page's routes:
//
//	GET  /approvals                 the queue (live): filters, search, pages
//	GET  /approvals/rows            the queue fragment the live script swaps in
//	GET  /approvals/live            SSE: "changed" whenever visible approvals change
//	GET  /approval/:id              one approval
//	POST /approval/:id/decision     approve or deny (csrf, decision, comment)
//	GET  /operator/audit            the audit log (admins)
//	GET  /operator/audit.csv        the audit log as CSV (admins)
//	GET  /operator/signin           sign-in form
//	POST /operator/signin           sign in (csrf, name, token, next)
//	POST /operator/signout          sign out (csrf)
//	GET  /operator/static/*file     stylesheet and live script
//
// Each GET but the live stream also answers HEAD (RFC 9110 section 9.3.2).
func (p *Page) Routes(r *httprouter.Router) {
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/operator/static/", http.FileServer(http.FS(static)))
	// Each route under its pattern, for the metrics, access log and span
	// (httpapi.Observe).
	handle := func(method, path string, h httprouter.Handle) { r.Handle(method, path, httpapi.RouteHandle(path, h)) }
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		handle(method, "/approvals", p.wrap(p.list))
		handle(method, "/approvals/rows", p.wrap(p.rows))
		handle(method, "/approval/:id", p.wrap(p.detail))
		handle(method, "/operator/signin", p.wrap(p.signinForm))
		handle(method, "/operator/audit", p.wrap(p.audit))
		handle(method, "/operator/audit.csv", p.wrap(p.auditCSV))
		handle(method, "/operator/static/*file", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Header().Set("Cache-Control", "no-cache")
			files.ServeHTTP(w, r)
		})
	}
	handle(http.MethodGet, "/approvals/live", p.wrap(p.live))
	handle(http.MethodPost, "/approval/:id/decision", p.wrap(p.decide))
	handle(http.MethodPost, "/operator/signin", p.wrap(p.signin))
	handle(http.MethodPost, "/operator/signout", p.wrap(p.signout))
}

// handler is one route of the page: it answers, or returns the error that
// p.errors answers with the message page (an *httpapi.Error for a refusal,
// anything else a 500 whose cause is only logged).
type handler func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error

// wrap sets the page's security headers on every answer, refuses a query
// value with a NUL (noNULQuery) and answers the handler's error.
func (p *Page) wrap(h handler) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		// same-origin, not no-referrer: with no-referrer Chromium sends
		// "Origin: null" on the page's own form POSTs, which sameOrigin refuses.
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		err := noNULQuery(r)
		if err == nil {
			err = h(w, r, ps)
		}
		if err != nil {
			p.errors.Error(w, r, err)
		}
	}
}

// noNULQuery refuses with a 400 naming it a query value that holds a NUL
// (U+0000), on every route: the queue's and the audit log's filters are
// looked up in the store, where PostgreSQL cannot take a NUL and SQLite
// can (approval.NoNUL), and no other value needs one. Brain refuses its
// query values the same way.
func noNULQuery(r *http.Request) error {
	for name, vs := range r.URL.Query() {
		for _, v := range vs {
			if err := approval.NoNUL(name, v); err != nil {
				return refuse(http.StatusBadRequest, httpapi.CodeInvalidRequest, err.Error()+".")
			}
		}
	}
	return nil
}

// codeAdminsOnly is the code of the audit log's refusal of an operator who
// is not an admin.
const codeAdminsOnly = "admins_only"

// titles are the message page's titles by error code; any other code is
// titled with its status text.
var titles = map[string]string{
	httpapi.CodeInvalidRequest: "Bad request",
	httpapi.CodeUnauthorized:   "Sign in first",
	httpapi.CodeForbidden:      "Refused",
	codeAdminsOnly:             "Admins only",
	httpapi.CodeNotFound:       "Not found",
	httpapi.CodeTooLarge:       "Too large",
	httpapi.CodeInternal:       "Internal error",
	httpapi.CodeUnavailable:    "Unavailable",
}

// refuse is a refusal the message page shows: status, code (its title) and
// the message for the operator.
func refuse(status int, code, msg string) *httpapi.Error {
	return &httpapi.Error{Status: status, Code: code, Message: msg}
}

// errNotFound answers an approval the operator may not see exactly as one
// that does not exist.
var errNotFound = refuse(http.StatusNotFound, httpapi.CodeNotFound, "There is no approval with this ID.")

// renderError is the Responder's Render: the message page, with the
// operator's name and sign-out form when signed in. A server fault shows
// no detail (its cause is in the log); a 503 says to retry (its message
// names no cause).
func (p *Page) renderError(w http.ResponseWriter, r *http.Request, e *httpapi.Error) {
	title, msg := titles[e.Code], e.Message
	if title == "" {
		title = http.StatusText(e.Status)
	}
	if e.Status >= 500 && e.Status != http.StatusServiceUnavailable {
		title, msg = titles[httpapi.CodeInternal], "Something went wrong on our side. Try again."
	}
	d := data{Title: title, Error: msg}
	if sess, _, ok := p.current(r); ok {
		d = p.base(sess)
		d.Title, d.Error = title, msg
	}
	if err := p.render(w, e.Status, "message", d); err != nil {
		p.logger.Error("render the operator message page", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
}

// data is what every template gets.
type data struct {
	Operator string
	Admin    bool
	// Scope says what the operator sees: "all tenants" or the tenants.
	Scope string
	CSRF  string
	Error string
	Title string
	// sign-in
	Name, Next string
	// queue: Pending is one page of the selection, Total counts all of it
	Q        queueQuery
	Pending  []approval.Approval
	Total    int
	Pages    []pageLink
	Tenants  []string
	Decided  []approval.Approval
	Filtered bool
	// detail
	A       approval.Approval
	Log     []approval.LogEntry
	Action  template.HTML
	Details template.HTML
	Marks   string // the marked characters of action and details, "" for none
	// Disconnected: the caller's stream dropped and this replica withdraws
	// the approval at WithdrawAt unless the caller comes back.
	Disconnected bool
	WithdrawAt   time.Time
	// audit
	Audit      []approval.AuditEntry
	AuditTotal int
	AuditQ     auditQuery
}

// render executes page into a buffer first, so a template error is a clean
// 500 (the error returned) rather than half a page.
func (p *Page) render(w http.ResponseWriter, status int, page string, d data) error {
	var buf bytes.Buffer
	name := "base"
	if page == "lists" {
		name = "lists"
	}
	if err := p.pages[page].ExecuteTemplate(&buf, name, d); err != nil {
		return fmt.Errorf("render operator page %s: %w", page, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	return nil
}

func (p *Page) base(sess *session) data {
	d := data{Operator: sess.operator, CSRF: sess.csrf, Admin: sess.account.Admin, Scope: "all tenants"}
	if !sess.account.Admin {
		d.Scope = "tenants " + strings.Join(sess.account.Tenants, ", ")
		if len(sess.account.Tenants) == 1 {
			d.Scope = "tenant " + sess.account.Tenants[0]
		}
	}
	return d
}

// signedIn returns the session, or a nil session once it has answered: a
// GET or HEAD of a page goes to the sign-in form; anything else is refused
// with 401 (the error). A request an allowed proxy vouches for
// (IdentityHeader) signs its account in on the way.
func (p *Page) signedIn(w http.ResponseWriter, r *http.Request) (*session, error) {
	if sess, _, ok := p.current(r); ok {
		return sess, nil
	}
	if sess, ok := p.identitySignIn(w, r); ok {
		return sess, nil
	}
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path != "/approvals/rows" && r.URL.Path != "/approvals/live" {
		http.Redirect(w, r, "/operator/signin?next="+r.URL.Path, http.StatusSeeOther)
		return nil, nil
	}
	return nil, refuse(http.StatusUnauthorized, httpapi.CodeUnauthorized, "You are not signed in, or your sign-in has expired. Sign in and try again.")
}

// identitySignIn signs in the account of the identity an allowed proxy
// names in the identity header. A request from elsewhere, or naming no
// account, signs nobody in.
func (p *Page) identitySignIn(w http.ResponseWriter, r *http.Request) (*session, bool) {
	if p.identity == "" {
		return nil, false
	}
	id := r.Header.Get(p.identity)
	if id == "" || !p.proxies.trusted(r) {
		return nil, false
	}
	acct, err := p.svc.Store().AccountByIdentity(r.Context(), id)
	if err != nil {
		if !errors.Is(err, approval.ErrNoAccount) {
			p.logger.Error("operator identity", "err", err)
		}
		p.logger.Warn("operator identity has no account", "remote", r.RemoteAddr)
		return nil, false
	}
	key, sess := p.sessions.create(acct.Name, acct, false)
	p.setCookie(w, sessionCookie, key, int(p.sessions.ttl/time.Second))
	// The request itself goes on with the new session.
	r.AddCookie(&http.Cookie{Name: sessionCookie, Value: key})
	p.logger.Info("operator signed in", "operator", acct.Name, "via", "identity")
	return sess, true
}

// queueQuery is the queue's query string, read leniently: an unusable
// value falls back to its default and is named in Problem.
type queueQuery struct {
	State, Tenant, Session, Text, Sort string
	Page, Per                          int
	Problem                            string
}

// parseQueue reads the queue's filters from the URL.
func parseQueue(v url.Values) queueQuery {
	q := queueQuery{State: v.Get("state"), Tenant: v.Get("tenant"), Session: strings.TrimSpace(v.Get("session")),
		Text: strings.TrimSpace(v.Get("q")), Sort: v.Get("sort"), Page: 1, Per: DefaultPageSize}
	var problems []string
	switch q.State {
	case "":
		q.State = string(approval.Pending)
	case string(approval.Pending), string(approval.Approved), string(approval.Denied), string(approval.Expired), string(approval.Cancelled), approval.StateDecided, approval.StateAll:
	default:
		problems = append(problems, fmt.Sprintf("state %q is not one of the choices; showing pending", strictjson.Clip(q.State, 40)))
		q.State = string(approval.Pending)
	}
	switch q.Sort {
	case "":
		q.Sort = "deadline"
	case "deadline", "newest", "oldest":
	default:
		problems = append(problems, fmt.Sprintf("sort %q is not deadline, newest or oldest; sorted by deadline", strictjson.Clip(q.Sort, 40)))
		q.Sort = "deadline"
	}
	for _, f := range []*string{&q.Text, &q.Session, &q.Tenant} {
		if utf8.RuneCountInString(*f) > maxTextChars {
			problems = append(problems, fmt.Sprintf("a filter is longer than %d characters; cut", maxTextChars))
			*f = string([]rune(*f)[:maxTextChars])
		}
	}
	if s := v.Get("page"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 1 {
			q.Page = n
		} else {
			problems = append(problems, fmt.Sprintf("page %q is not a page number; showing page 1", strictjson.Clip(s, 20)))
		}
	}
	if s := v.Get("per"); s != "" {
		n, err := strconv.Atoi(s)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("per %q is not a number; showing %d a page", strictjson.Clip(s, 20), DefaultPageSize))
		case n < MinPageSize || n > MaxPageSize:
			q.Per = min(max(n, MinPageSize), MaxPageSize)
			problems = append(problems, fmt.Sprintf("per must be from %d to %d; showing %d a page", MinPageSize, MaxPageSize, q.Per))
		default:
			q.Per = n
		}
	}
	q.Problem = strings.Join(problems, "; ")
	return q
}

// values is q as a query string, with page set to page.
func (q queueQuery) values(page int) string {
	v := url.Values{}
	set := func(k, val, def string) {
		if val != def {
			v.Set(k, val)
		}
	}
	set("state", q.State, string(approval.Pending))
	set("tenant", q.Tenant, "")
	set("session", q.Session, "")
	set("q", q.Text, "")
	set("sort", q.Sort, "deadline")
	if q.Per != DefaultPageSize {
		v.Set("per", strconv.Itoa(q.Per))
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// Query is the query string of the queue as it is, for the live script.
func (q queueQuery) Query() string { return q.values(q.Page) }

// filtered reports whether q narrows the default view.
func (q queueQuery) filtered() bool {
	return q.State != string(approval.Pending) || q.Tenant != "" || q.Session != "" || q.Text != ""
}

// pageLink is one link of the queue's pager.
type pageLink struct {
	N       int
	Href    string
	Current bool
	Label   string
}

// pager links the first, previous, current, next and last pages.
func pager(q queueQuery, total int) []pageLink {
	last := max((total+q.Per-1)/q.Per, 1)
	if last == 1 {
		return nil
	}
	var out []pageLink
	add := func(n int, label string) {
		out = append(out, pageLink{N: n, Href: "/approvals" + q.values(n), Current: n == q.Page, Label: label})
	}
	if q.Page > 1 {
		add(1, "First")
		add(q.Page-1, "Previous")
	}
	add(q.Page, fmt.Sprintf("Page %d of %d", q.Page, last))
	if q.Page < last {
		add(q.Page+1, "Next")
		add(last, "Last")
	}
	return out
}

// queue fills d with the page of approvals q selects that sess may see.
func (p *Page) queue(ctx context.Context, sess *session, q queueQuery, d *data) error {
	store := p.svc.Store()
	scope := sess.account.Scope()
	d.Q, d.Filtered = q, q.filtered()
	var err error
	d.Pending, d.Total, err = store.Find(ctx, approval.Query{Scope: scope, State: q.State, Tenant: q.Tenant, Session: q.Session, Text: q.Text,
		Sort: q.Sort, Limit: q.Per, Offset: (q.Page - 1) * q.Per})
	if err != nil {
		return err
	}
	d.Pages = pager(q, d.Total)
	if d.Tenants, err = store.Tenants(ctx, scope); err != nil {
		return err
	}
	if !d.Filtered {
		d.Decided, _, err = store.Find(ctx, approval.Query{Scope: scope, State: approval.StateDecided, Sort: "decided", Limit: decidedLimit})
	}
	return err
}

func (p *Page) list(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	return p.queuePage(w, r, "list")
}

func (p *Page) rows(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	return p.queuePage(w, r, "lists")
}

// queuePage renders the queue the URL selects as page: the whole page
// (list) or its lists alone (lists, which the live script swaps in).
func (p *Page) queuePage(w http.ResponseWriter, r *http.Request, page string) error {
	sess, err := p.signedIn(w, r)
	if sess == nil {
		return err
	}
	d := p.base(sess)
	if err := p.queue(r.Context(), sess, parseQueue(r.URL.Query()), &d); err != nil {
		return err
	}
	return p.render(w, http.StatusOK, page, d)
}

// live streams a "changed" event at once and after every change of the
// approvals the operator may see, with comment heartbeats, until the
// client leaves, the sign-in expires or the service shuts down. Changes of
// other tenants' approvals send nothing.
func (p *Page) live(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess, err := p.signedIn(w, r)
	if sess == nil {
		return err
	}
	ch, stop := p.svc.Subscribe(sess.sees)
	defer stop()
	out := sse.NewWriter(w)
	beat := time.NewTicker(liveHeartbeat)
	defer beat.Stop()
	changed := true
	for {
		if changed {
			changed = false
			if _, _, ok := p.current(r); !ok {
				return nil
			}
			n, err := p.svc.Store().CountPendingIn(r.Context(), sess.account.Scope())
			if err != nil {
				return nil
			}
			if err := out.Event("changed", map[string]int{"pending": n}); err != nil {
				return nil
			}
		}
		select {
		case <-ch:
			changed = true
		case <-beat.C:
			if err := out.Comment("heartbeat"); err != nil {
				return nil
			}
		case <-r.Context().Done():
			return nil
		case <-p.ctx.Done():
			return nil
		}
	}
}

// load returns approval id when sess may see it, answering 404 otherwise:
// another tenant's approval is "not found", exactly as an unknown ID, so
// an operator learns nothing of it, not even that it exists. A pending
// approval past its expiry is expired on the way.
func (p *Page) load(r *http.Request, sess *session, id string) (approval.Approval, error) {
	if !jobs.ValidID(id) {
		return approval.Approval{}, errNotFound
	}
	a, err := p.svc.Store().Get(r.Context(), id)
	if errors.Is(err, approval.ErrNotFound) || err == nil && !sess.sees(a.TenantID) {
		return approval.Approval{}, errNotFound
	}
	if err == nil {
		a, err = p.svc.ExpireIfDue(r.Context(), a)
	}
	return a, err
}

func (p *Page) detail(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess, err := p.signedIn(w, r)
	if sess == nil {
		return err
	}
	a, err := p.load(r, sess, ps.ByName("id"))
	if err != nil {
		return err
	}
	return p.renderDetail(w, r, http.StatusOK, sess, a, "")
}

func (p *Page) renderDetail(w http.ResponseWriter, r *http.Request, status int, sess *session, a approval.Approval, msg string) error {
	log, err := p.svc.Store().Log(r.Context(), a.ID)
	if err != nil {
		return err
	}
	d := p.base(sess)
	d.A, d.Log, d.Error = a, log, msg
	if a.Status == approval.Pending {
		d.WithdrawAt, d.Disconnected = p.svc.Withdrawal(a.ID)
	}
	var am, dm marks
	d.Action, am = exact(a.Action)
	d.Details, dm = exact(a.Details)
	for k, n := range dm {
		am[k] += n
	}
	d.Marks = am.String()
	return p.render(w, status, "detail", d)
}

// checkPost applies the rules every POST shares: same origin, a form of at
// most 64 KiB, and the CSRF token want.
func (p *Page) checkPost(w http.ResponseWriter, r *http.Request, want string) error {
	if !sameOrigin(r) {
		return refuse(http.StatusForbidden, httpapi.CodeForbidden, "This form was sent from another site.")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return refuse(http.StatusRequestEntityTooLarge, httpapi.CodeTooLarge, fmt.Sprintf("The form is larger than %d bytes.", maxFormBytes))
		}
		return refuse(http.StatusBadRequest, httpapi.CodeInvalidRequest, "The form could not be read.")
	}
	got := r.PostForm.Get("csrf")
	if got == "" || want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return refuse(http.StatusForbidden, httpapi.CodeForbidden, "The form's CSRF token is missing or wrong. Reload the page and try again.")
	}
	return nil
}

func (p *Page) decide(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess, err := p.signedIn(w, r)
	if sess == nil {
		return err
	}
	if err := p.checkPost(w, r, sess.csrf); err != nil {
		return err
	}
	a, err := p.load(r, sess, ps.ByName("id"))
	if err != nil {
		return err
	}
	var decision approval.Status
	switch r.PostForm.Get("decision") {
	case "approve":
		decision = approval.Approved
	case "deny":
		decision = approval.Denied
	default:
		return p.renderDetail(w, r, http.StatusBadRequest, sess, a, "decision: choose approve or deny.")
	}
	comment := strings.TrimSpace(strings.ReplaceAll(r.PostForm.Get("comment"), "\r\n", "\n"))
	if n := utf8.RuneCountInString(comment); n > maxCommentChars {
		return p.renderDetail(w, r, http.StatusBadRequest, sess, a, fmt.Sprintf("comment: %d characters, more than the limit of %d.", n, maxCommentChars))
	}
	if err := approval.NoNUL("comment", comment); err != nil {
		return p.renderDetail(w, r, http.StatusBadRequest, sess, a, err.Error()+".")
	}
	got, err := p.svc.Decide(r.Context(), a.ID, decision, sess.operator, comment)
	var de *approval.DecidedError
	switch {
	case errors.As(err, &de):
		msg := "Already decided: this request was " + string(de.Current.Status) + " by " + de.Current.Operator + " at " + de.Current.DecidedAt.UTC().Format("2006-01-02 15:04:05 UTC") + ". Your answer was not recorded."
		switch de.Current.Status {
		case approval.Expired:
			msg = "This request expired at " + de.Current.ExpiresAt.UTC().Format("2006-01-02 15:04:05 UTC") + " and can no longer be answered. Your answer was not recorded."
		case approval.Cancelled:
			msg = "This request was cancelled (" + de.Current.Comment + ") and can no longer be answered. Your answer was not recorded."
		}
		return p.renderDetail(w, r, http.StatusConflict, sess, de.Current, msg)
	case errors.Is(err, approval.ErrNotFound):
		return errNotFound
	case err != nil:
		return err
	}
	p.logger.Info("operator decision", "approval_id", got.ID, "tenant_id", got.TenantID, "decision", got.Status, "operator", got.Operator)
	http.Redirect(w, r, "/approval/"+got.ID, http.StatusSeeOther)
	return nil
}

// auditQuery is the audit log's query string.
type auditQuery struct {
	Tenant, Operator string
	Page             int
	Prev, Next       string // links, "" at the ends
}

func (p *Page) auditQuery(r *http.Request) (approval.AuditQuery, auditQuery) {
	v := r.URL.Query()
	aq := auditQuery{Tenant: strictjson.Clip(v.Get("tenant"), maxTextChars), Operator: strictjson.Clip(v.Get("operator"), maxTextChars), Page: 1}
	if n, err := strconv.Atoi(v.Get("page")); err == nil && n > 1 {
		aq.Page = n
	}
	return approval.AuditQuery{Scope: approval.Scope{All: true}, Tenant: aq.Tenant, Operator: aq.Operator, Limit: auditPageSize, Offset: (aq.Page - 1) * auditPageSize}, aq
}

// admin returns the session of a signed-in admin, as signedIn does, and
// refuses other operators with 403.
func (p *Page) admin(w http.ResponseWriter, r *http.Request) (*session, error) {
	sess, err := p.signedIn(w, r)
	if sess == nil {
		return nil, err
	}
	if !sess.account.Admin {
		return nil, refuse(http.StatusForbidden, codeAdminsOnly, "The audit log is for admins: your account sees "+p.base(sess).Scope+".")
	}
	return sess, nil
}

func (p *Page) audit(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess, err := p.admin(w, r)
	if sess == nil {
		return err
	}
	q, aq := p.auditQuery(r)
	d := p.base(sess)
	total, err := p.auditRows(r.Context(), q, func(e approval.AuditEntry) error {
		d.Audit = append(d.Audit, e)
		return nil
	})
	if err != nil {
		return err
	}
	link := func(page int) string {
		v := url.Values{}
		if aq.Tenant != "" {
			v.Set("tenant", aq.Tenant)
		}
		if aq.Operator != "" {
			v.Set("operator", aq.Operator)
		}
		v.Set("page", strconv.Itoa(page))
		return "/operator/audit?" + v.Encode()
	}
	if aq.Page > 1 {
		aq.Prev = link(aq.Page - 1)
	}
	if aq.Page*auditPageSize < total {
		aq.Next = link(aq.Page + 1)
	}
	d.AuditTotal, d.AuditQ = total, aq
	return p.render(w, http.StatusOK, "audit", d)
}

// auditCSV exports the audit log rows the filters select, all of them,
// newest first, as CSV (RFC 4180). A cell that a spreadsheet would read as
// a formula (starting with = + - @, a tab or a carriage return) gets a
// leading ' so the export cannot run one.
//
// An export is whole or visibly broken, never a shorter file that looks
// complete: an operator who files it as the record of who decided what
// must be able to tell. Nothing is written before the first row is in
// hand, so a failure up to then (the store down, say) is the error page
// with its status, not a 200 with the header row alone. After that the
// 200 has gone out and cannot be taken back, and a CSV has no place for
// an error that a reader or a script would notice; a failure then cuts
// the connection (abort) without the chunked body's last chunk, so that a
// browser marks the download failed and curl exits with an error (18)
// instead of keeping a truncated file. The cause is logged.
func (p *Page) auditCSV(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if sess, err := p.admin(w, r); sess == nil {
		return err
	}
	q, _ := p.auditQuery(r)
	q.Limit, q.Offset = 0, 0
	header := func() {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="approval-audit-`+time.Now().UTC().Format("20060102T150405Z")+`.csv"`)
	}
	if r.Method == http.MethodHead {
		header()
		return nil
	}
	var cw *csv.Writer // nil until the first row: nothing written yet
	start := func() {
		header()
		cw = csv.NewWriter(w)
		_ = cw.Write([]string{"seq", "at", "operator", "tenant_id", "approval_id", "decision", "details_sha256", "comment", "not_used_withdrawn_at"})
	}
	_, err := p.auditRows(r.Context(), q, func(e approval.AuditEntry) error {
		if cw == nil {
			start()
		}
		notUsed := ""
		if !e.WithdrawnAt.IsZero() {
			notUsed = e.WithdrawnAt.Format(time.RFC3339Nano)
		}
		return cw.Write([]string{strconv.FormatInt(e.Seq, 10), e.At.Format(time.RFC3339Nano), safeCell(e.Operator), safeCell(e.TenantID),
			e.ApprovalID, string(e.Decision), e.DetailsHash, safeCell(e.Comment), notUsed})
	})
	switch {
	case err != nil && cw == nil:
		return fmt.Errorf("audit export: %w", err)
	case err != nil:
		if r.Context().Err() == nil { // not just the client gone
			p.logger.Error("audit export cut short: the download is aborted", "err", err)
		}
		cw.Flush() // what was read goes out before the cut
		abort(w)
		return nil
	case cw == nil:
		start() // no rows: the header row is the whole export
	}
	cw.Flush()
	return nil
}

// abort ends a streamed response so that the client sees it broken off:
// the status and what was written go out, then the connection is closed
// without the end of the chunked body. The local service speaks HTTP/1.1,
// where a handler can take the connection over (Hijack); were it ever
// served over HTTP/2, which cannot, it panics with http.ErrAbortHandler,
// net/http's way to the same end.
func abort(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.Flush() // Hijack sends the status, not what the response buffers
	conn, buf, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = buf.Flush()
	_ = conn.Close()
}

func safeCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func (p *Page) signinForm(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if _, _, ok := p.current(r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return nil
	}
	if _, ok := p.identitySignIn(w, r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return nil
	}
	return p.renderSignin(w, http.StatusOK, "", "", safeNext(r.URL.Query().Get("next")))
}

// renderSignin renders the sign-in form with a fresh form secret, set as a
// cookie and echoed in the form (a double-submit CSRF token: a page of
// another site can read neither).
func (p *Page) renderSignin(w http.ResponseWriter, status int, msg, name, next string) error {
	secret := jobs.NewID()
	p.setCookie(w, signinCookie, secret, int(signinFormTTL/time.Second))
	return p.render(w, status, "signin", data{CSRF: secret, Error: msg, Name: name, Next: next})
}

// signin checks a sign-in. Failed attempts are throttled per name typed
// and per client address: past the limit the form answers 429 with the
// wait, without checking the token at all.
func (p *Page) signin(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	want := ""
	if c, err := r.Cookie(signinCookie); err == nil {
		want = c.Value
	}
	if err := p.checkPost(w, r, want); err != nil {
		return err
	}
	name, next := r.PostForm.Get("name"), safeNext(r.PostForm.Get("next"))
	keys := signinKeys(r, name)
	if wait := p.throttle.wait(keys...); wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		p.logger.Warn("operator sign-in throttled", "remote", r.RemoteAddr, "retry_after_s", secs)
		return p.renderSignin(w, http.StatusTooManyRequests, fmt.Sprintf("Too many failed sign-ins for this name or from this address. Try again in %d s.", secs), name, next)
	}
	who, acct, shared, err := p.auth.operator(r.Context(), r.PostForm.Get("token"), name)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errWrongToken) {
			status = http.StatusUnauthorized
			p.throttle.fail(keys...)
			p.logger.Warn("operator sign-in refused", "remote", r.RemoteAddr)
		}
		return p.renderSignin(w, status, capitalize(err.Error())+".", name, next)
	}
	key, _ := p.sessions.create(who, acct, shared)
	p.setCookie(w, sessionCookie, key, int(p.sessions.ttl/time.Second))
	p.setCookie(w, signinCookie, "", -1)
	p.logger.Info("operator signed in", "operator", who, "admin", acct.Admin, "shared_token", shared)
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

func (p *Page) signout(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess, key, ok := p.current(r)
	if !ok {
		http.Redirect(w, r, "/operator/signin", http.StatusSeeOther)
		return nil
	}
	if err := p.checkPost(w, r, sess.csrf); err != nil {
		return err
	}
	p.sessions.remove(key)
	p.setCookie(w, sessionCookie, "", -1)
	http.Redirect(w, r, "/operator/signin", http.StatusSeeOther)
	return nil
}

// safeNext keeps redirects after sign-in on this page's own paths.
func safeNext(next string) string {
	if next == "/approvals" || next == "/operator/audit" || (strings.HasPrefix(next, "/approval/") && jobs.ValidID(strings.TrimPrefix(next, "/approval/"))) {
		return next
	}
	return "/approvals"
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
