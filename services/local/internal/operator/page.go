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
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/sse"
	"github.com/brain-tools/suite/services/local/internal/approval"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config is the operator page's part of the local service's environment.
type Config struct {
	// Token is the shared operator token (env APPROVAL_OPERATOR_TOKEN), at
	// least 16 bytes. Its holder names themself when signing in.
	Token string `env:"APPROVAL_OPERATOR_TOKEN"`
	// Operators are per-person tokens, name:token pairs separated by commas
	// without spaces (env APPROVAL_OPERATORS); a name is 1 to 64 ASCII
	// letters, digits, '.', '_', '-' or '@', not system or caller. Either
	// this or Token is required.
	Operators map[string]string `env:"APPROVAL_OPERATORS" envSeparator:"," envKeyValSeparator:":"`
	// SessionTTL is how long a sign-in lasts (env APPROVAL_OPERATOR_SESSION_TTL).
	SessionTTL time.Duration `env:"APPROVAL_OPERATOR_SESSION_TTL" envDefault:"12h"`
	// Secure marks cookies Secure (env APPROVAL_COOKIE_SECURE). Default:
	// true when the page URL is https.
	Secure *bool `env:"APPROVAL_COOKIE_SECURE"`
}

// Limits of the page's forms.
const (
	maxFormBytes    = 64 << 10
	listLimit       = 500
	decidedLimit    = 20
	liveHeartbeat   = 15 * time.Second
	signinFormTTL   = 30 * time.Minute
	maxCommentChars = approval.MaxCommentChars
)

// Page serves the operator page.
type Page struct {
	svc      *approval.Service
	auth     *authenticator
	sessions *sessions
	secure   bool
	logger   *slog.Logger
	pages    map[string]*template.Template
	ctx      context.Context
}

// Open parses the page's variables from environ and returns the page.
// Live streams end when ctx does (the service shutting down).
func Open(ctx context.Context, environ map[string]string, svc *approval.Service, logger *slog.Logger) (*Page, error) {
	cfg, err := parseConfig(environ)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg, svc, logger)
}

// Check refuses what Open would refuse in the page's own settings, without
// an approval service: local calls it before the approval store opens, so
// a bad setting touches no file.
func Check(environ map[string]string) error {
	cfg, err := parseConfig(environ)
	if err == nil {
		_, err = cfg.authenticator()
	}
	return err
}

func parseConfig(environ map[string]string) (Config, error) {
	cfg, err := service.ParseEnv[Config](environ)
	if err != nil {
		return cfg, err
	}
	// The map keeps the last token of a name given twice; refuse instead.
	if name := repeatedOperator(environ["APPROVAL_OPERATORS"]); name != "" {
		return cfg, fmt.Errorf("operator page: APPROVAL_OPERATORS: %q is listed more than once: give each operator one name:token pair", name)
	}
	return cfg, nil
}

// authenticator checks the tokens and the session TTL.
func (cfg Config) authenticator() (*authenticator, error) {
	auth, err := newAuthenticator(cfg.Token, cfg.Operators)
	if err != nil {
		return nil, err
	}
	if cfg.SessionTTL <= 0 {
		return nil, fmt.Errorf("operator page: APPROVAL_OPERATOR_SESSION_TTL must be positive, got %s", cfg.SessionTTL)
	}
	return auth, nil
}

// repeatedOperator returns the first name that APPROVAL_OPERATORS
// (name:token pairs separated by commas) lists twice, or "".
func repeatedOperator(raw string) string {
	if raw == "" {
		return ""
	}
	seen := map[string]bool{}
	for _, pair := range strings.Split(raw, ",") {
		name, _, _ := strings.Cut(pair, ":")
		if seen[name] {
			return name
		}
		seen[name] = true
	}
	return ""
}

// New is Open with a parsed Config.
func New(ctx context.Context, cfg Config, svc *approval.Service, logger *slog.Logger) (*Page, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	auth, err := cfg.authenticator()
	if err != nil {
		return nil, err
	}
	secure := strings.HasPrefix(svc.PageURL(), "https://")
	if cfg.Secure != nil {
		secure = *cfg.Secure
	}
	p := &Page{svc: svc, auth: auth, sessions: newSessions(cfg.SessionTTL), secure: secure, logger: logger, ctx: ctx, pages: map[string]*template.Template{}}
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
	}
	base := template.Must(template.New("base").Funcs(funcs).ParseFS(templateFS, "templates/base.html", "templates/lists.html"))
	for _, name := range []string{"signin", "list", "detail", "message"} {
		p.pages[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html"))
	}
	p.pages["lists"] = base
	return p, nil
}

// Routes adds the page's routes:
//
//	GET  /approvals                 the pending list (live)
//	GET  /approvals/rows            the list fragment the live script swaps in
//	GET  /approvals/live            SSE: "changed" whenever approvals change
//	GET  /approval/:id              one approval
//	POST /approval/:id/decision     approve or deny (csrf, decision, comment)
//	GET  /operator/signin           sign-in form
//	POST /operator/signin           sign in (csrf, name, token, next)
//	POST /operator/signout          sign out (csrf)
//	GET  /operator/static/*file     stylesheet and live script
//
// Each GET but the live stream also answers HEAD (RFC 9110 section 9.3.2).
func (p *Page) Routes(r *httprouter.Router) {
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/operator/static/", http.FileServer(http.FS(static)))
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		r.Handle(method, "/approvals", p.wrap(p.list))
		r.Handle(method, "/approvals/rows", p.wrap(p.rows))
		r.Handle(method, "/approval/:id", p.wrap(p.detail))
		r.Handle(method, "/operator/signin", p.wrap(p.signinForm))
		r.Handle(method, "/operator/static/*file", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Header().Set("Cache-Control", "no-cache")
			files.ServeHTTP(w, r)
		})
	}
	r.GET("/approvals/live", p.wrap(p.live))
	r.POST("/approval/:id/decision", p.wrap(p.decide))
	r.POST("/operator/signin", p.wrap(p.signin))
	r.POST("/operator/signout", p.wrap(p.signout))
}

type handler func(w http.ResponseWriter, r *http.Request, ps httprouter.Params)

// wrap sets the page's security headers on every answer.
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
		h(w, r, ps)
	}
}

// data is what every template gets.
type data struct {
	Operator string
	CSRF     string
	Error    string
	Title    string
	// sign-in
	Name, Next string
	// list: PendingTotal counts every pending approval, Pending holds the
	// oldest listLimit of them
	Pending, Decided []approval.Approval
	PendingTotal     int
	// detail
	A   approval.Approval
	Log []approval.LogEntry
}

// render executes page into a buffer first, so a template error is a clean
// 500 rather than half a page.
func (p *Page) render(w http.ResponseWriter, status int, page string, d data) {
	var buf bytes.Buffer
	name := "base"
	if page == "lists" {
		name = "lists"
	}
	if err := p.pages[page].ExecuteTemplate(&buf, name, d); err != nil {
		p.logger.Error("render operator page", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (p *Page) message(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	d := data{Title: title, Error: msg}
	if sess, _, ok := p.current(r); ok {
		d.Operator, d.CSRF = sess.operator, sess.csrf
	}
	p.render(w, status, "message", d)
}

// signedIn returns the session, or answers: a GET or HEAD of a page goes to
// the sign-in form, anything else gets 401.
func (p *Page) signedIn(w http.ResponseWriter, r *http.Request) (*session, bool) {
	if sess, _, ok := p.current(r); ok {
		return sess, true
	}
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path != "/approvals/rows" && r.URL.Path != "/approvals/live" {
		http.Redirect(w, r, "/operator/signin?next="+r.URL.Path, http.StatusSeeOther)
		return nil, false
	}
	p.message(w, r, http.StatusUnauthorized, "Sign in first", "You are not signed in, or your sign-in has expired. Sign in and try again.")
	return nil, false
}

func (p *Page) lists(ctx context.Context, d *data) error {
	var err error
	if d.Pending, err = p.svc.Store().ListPending(ctx, listLimit); err != nil {
		return err
	}
	if d.PendingTotal, err = p.svc.Store().CountPending(ctx); err != nil {
		return err
	}
	d.Decided, err = p.svc.Store().ListDecided(ctx, decidedLimit)
	return err
}

func (p *Page) list(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	sess, ok := p.signedIn(w, r)
	if !ok {
		return
	}
	d := data{Operator: sess.operator, CSRF: sess.csrf}
	if err := p.lists(r.Context(), &d); err != nil {
		p.internal(w, r, err)
		return
	}
	p.render(w, http.StatusOK, "list", d)
}

func (p *Page) rows(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	sess, ok := p.signedIn(w, r)
	if !ok {
		return
	}
	d := data{Operator: sess.operator, CSRF: sess.csrf}
	if err := p.lists(r.Context(), &d); err != nil {
		p.internal(w, r, err)
		return
	}
	p.render(w, http.StatusOK, "lists", d)
}

// live streams a "changed" event at once and after every change of the
// approvals, with comment heartbeats, until the client leaves, the sign-in
// expires or the service shuts down.
func (p *Page) live(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if _, ok := p.signedIn(w, r); !ok {
		return
	}
	ch, stop := p.svc.Subscribe()
	defer stop()
	out := sse.NewWriter(w)
	beat := time.NewTicker(liveHeartbeat)
	defer beat.Stop()
	changed := true
	for {
		if changed {
			changed = false
			if _, _, ok := p.current(r); !ok {
				return
			}
			n, err := p.svc.Store().CountPending(r.Context())
			if err != nil {
				return
			}
			if err := out.Event("changed", map[string]int{"pending": n}); err != nil {
				return
			}
		}
		select {
		case <-ch:
			changed = true
		case <-beat.C:
			if err := out.Comment("heartbeat"); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-p.ctx.Done():
			return
		}
	}
}

func (p *Page) load(w http.ResponseWriter, r *http.Request, id string) (approval.Approval, bool) {
	if !jobs.ValidID(id) {
		p.message(w, r, http.StatusNotFound, "Not found", "There is no approval with this ID.")
		return approval.Approval{}, false
	}
	a, err := p.svc.Store().Get(r.Context(), id)
	if errors.Is(err, approval.ErrNotFound) {
		p.message(w, r, http.StatusNotFound, "Not found", "There is no approval with this ID.")
		return approval.Approval{}, false
	}
	if err != nil {
		p.internal(w, r, err)
		return approval.Approval{}, false
	}
	return a, true
}

func (p *Page) detail(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	sess, ok := p.signedIn(w, r)
	if !ok {
		return
	}
	a, ok := p.load(w, r, ps.ByName("id"))
	if !ok {
		return
	}
	p.renderDetail(w, r, http.StatusOK, sess, a, "")
}

func (p *Page) renderDetail(w http.ResponseWriter, r *http.Request, status int, sess *session, a approval.Approval, msg string) {
	log, err := p.svc.Store().Log(r.Context(), a.ID)
	if err != nil {
		p.internal(w, r, err)
		return
	}
	p.render(w, status, "detail", data{Operator: sess.operator, CSRF: sess.csrf, A: a, Log: log, Error: msg})
}

// checkPost applies the rules every POST shares: same origin, a form of at
// most 64 KiB, and the CSRF token want.
func (p *Page) checkPost(w http.ResponseWriter, r *http.Request, want string) bool {
	if !sameOrigin(r) {
		p.message(w, r, http.StatusForbidden, "Refused", "This form was sent from another site.")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			p.message(w, r, http.StatusRequestEntityTooLarge, "Too large", fmt.Sprintf("The form is larger than %d bytes.", maxFormBytes))
			return false
		}
		p.message(w, r, http.StatusBadRequest, "Bad request", "The form could not be read.")
		return false
	}
	got := r.PostForm.Get("csrf")
	if got == "" || want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		p.message(w, r, http.StatusForbidden, "Refused", "The form's CSRF token is missing or wrong. Reload the page and try again.")
		return false
	}
	return true
}

func (p *Page) decide(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	sess, ok := p.signedIn(w, r)
	if !ok {
		return
	}
	if !p.checkPost(w, r, sess.csrf) {
		return
	}
	a, ok := p.load(w, r, ps.ByName("id"))
	if !ok {
		return
	}
	var decision approval.Status
	switch r.PostForm.Get("decision") {
	case "approve":
		decision = approval.Approved
	case "deny":
		decision = approval.Denied
	default:
		p.renderDetail(w, r, http.StatusBadRequest, sess, a, "decision: choose approve or deny.")
		return
	}
	comment := strings.TrimSpace(strings.ReplaceAll(r.PostForm.Get("comment"), "\r\n", "\n"))
	if n := utf8.RuneCountInString(comment); n > maxCommentChars {
		p.renderDetail(w, r, http.StatusBadRequest, sess, a, fmt.Sprintf("comment: %d characters, more than the limit of %d.", n, maxCommentChars))
		return
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
		p.renderDetail(w, r, http.StatusConflict, sess, de.Current, msg)
		return
	case errors.Is(err, approval.ErrNotFound):
		p.message(w, r, http.StatusNotFound, "Not found", "There is no approval with this ID.")
		return
	case err != nil:
		p.internal(w, r, err)
		return
	}
	p.logger.Info("operator decision", "approval_id", got.ID, "decision", got.Status, "operator", got.Operator)
	http.Redirect(w, r, "/approval/"+got.ID, http.StatusSeeOther)
}

func (p *Page) signinForm(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if _, _, ok := p.current(r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	p.renderSignin(w, http.StatusOK, "", "", safeNext(r.URL.Query().Get("next")))
}

// renderSignin renders the sign-in form with a fresh form secret, set as a
// cookie and echoed in the form (a double-submit CSRF token: a page of
// another site can read neither).
func (p *Page) renderSignin(w http.ResponseWriter, status int, msg, name, next string) {
	secret := jobs.NewID()
	p.setCookie(w, signinCookie, secret, int(signinFormTTL/time.Second))
	p.render(w, status, "signin", data{CSRF: secret, Error: msg, Name: name, Next: next})
}

func (p *Page) signin(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	want := ""
	if c, err := r.Cookie(signinCookie); err == nil {
		want = c.Value
	}
	if !p.checkPost(w, r, want) {
		return
	}
	name, next := r.PostForm.Get("name"), safeNext(r.PostForm.Get("next"))
	who, err := p.auth.operator(r.PostForm.Get("token"), name)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errWrongToken) {
			status = http.StatusUnauthorized
			p.logger.Warn("operator sign-in refused", "remote", r.RemoteAddr)
		}
		p.renderSignin(w, status, capitalize(err.Error())+".", name, next)
		return
	}
	key, _ := p.sessions.create(who)
	p.setCookie(w, sessionCookie, key, int(p.sessions.ttl/time.Second))
	p.setCookie(w, signinCookie, "", -1)
	p.logger.Info("operator signed in", "operator", who)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (p *Page) signout(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	sess, key, ok := p.current(r)
	if !ok {
		http.Redirect(w, r, "/operator/signin", http.StatusSeeOther)
		return
	}
	if !p.checkPost(w, r, sess.csrf) {
		return
	}
	p.sessions.remove(key)
	p.setCookie(w, sessionCookie, "", -1)
	http.Redirect(w, r, "/operator/signin", http.StatusSeeOther)
}

func (p *Page) internal(w http.ResponseWriter, r *http.Request, err error) {
	p.logger.Error("operator page", "path", r.URL.Path, "err", err)
	p.message(w, r, http.StatusInternalServerError, "Internal error", "Something went wrong on our side. Try again.")
}

// safeNext keeps redirects after sign-in on this page's own paths.
func safeNext(next string) string {
	if next == "/approvals" || (strings.HasPrefix(next, "/approval/") && jobs.ValidID(strings.TrimPrefix(next, "/approval/"))) {
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
