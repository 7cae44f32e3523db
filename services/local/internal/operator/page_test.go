package operator

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/sse"
	"github.com/brain-tools/suite/services/local/internal/approval"
)

func TestSignedOutIsSentToSignIn(t *testing.T) {
	s := newStack(t, Config{})
	c := s.client()
	tests := []struct {
		method, path string
		status       int
		location     string
	}{
		{"GET", "/approvals", http.StatusSeeOther, "/operator/signin?next=/approvals"},
		{"GET", "/approval/" + jobs.NewID(), http.StatusSeeOther, "/operator/signin?next=/approval/"},
		{"GET", "/approvals/rows", http.StatusUnauthorized, ""},
		{"GET", "/approvals/live", http.StatusUnauthorized, ""},
		{"POST", "/approval/" + jobs.NewID() + "/decision", http.StatusUnauthorized, ""},
	}
	for _, tt := range tests {
		var a answer
		if tt.method == "GET" {
			a = c.get(tt.path)
		} else {
			a = c.post(tt.path, url.Values{"decision": {"approve"}})
		}
		if a.status != tt.status || !strings.HasPrefix(a.header.Get("Location"), tt.location) {
			t.Errorf("%s %s: %d %q, want %d %q", tt.method, tt.path, a.status, a.header.Get("Location"), tt.status, tt.location)
		}
	}
}

func TestSignIn(t *testing.T) {
	s := newStack(t, Config{})
	c := s.client()
	form := c.get("/operator/signin")
	csrf := csrfOf(t, form.body)
	cookie := form.header.Get("Set-Cookie")
	if !strings.Contains(cookie, signinCookie+"="+csrf) || !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Strict") {
		t.Fatalf("sign-in form cookie %q", cookie)
	}
	tests := []struct {
		name   string
		form   url.Values
		status int
		want   string
	}{
		{"no csrf", url.Values{"name": {"alice"}, "token": {operatorToken}}, http.StatusForbidden, "CSRF token is missing or wrong"},
		{"wrong csrf", url.Values{"csrf": {jobs.NewID()}, "name": {"alice"}, "token": {operatorToken}}, http.StatusForbidden, "CSRF token is missing or wrong"},
		{"wrong token", url.Values{"csrf": {csrf}, "name": {"alice"}, "token": {"op-token-0123456789abcdeX"}}, http.StatusUnauthorized, "Wrong operator token."},
		{"empty token", url.Values{"csrf": {csrf}, "name": {"alice"}, "token": {""}}, http.StatusUnauthorized, "Wrong operator token."},
		{"no name", url.Values{"csrf": {csrf}, "token": {operatorToken}}, http.StatusBadRequest, "Name: required with the shared operator token"},
		{"long name", url.Values{"csrf": {csrf}, "name": {strings.Repeat("n", 65)}, "token": {operatorToken}}, http.StatusBadRequest, "Name: 65 characters, more than the limit of 64"},
		{"name of the expiry entries", url.Values{"csrf": {csrf}, "name": {"system"}, "token": {operatorToken}}, http.StatusBadRequest, "Name: &#34;system&#34; is reserved"},
		{"name of the caller's cancel entries", url.Values{"csrf": {csrf}, "name": {" Caller "}, "token": {operatorToken}}, http.StatusBadRequest, "Name: &#34;Caller&#34; is reserved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each refusal renders a fresh form with a new secret; use the
			// one the test started with by resetting the cookie.
			u, _ := url.Parse(s.url)
			c.http.Jar.SetCookies(u, []*http.Cookie{{Name: signinCookie, Value: csrf, Path: "/"}})
			a := c.post("/operator/signin", tt.form)
			if a.status != tt.status || !strings.Contains(a.body, tt.want) {
				t.Fatalf("status %d, want %d with %q: %s", a.status, tt.status, tt.want, a.body)
			}
			if strings.Contains(a.header.Get("Set-Cookie"), sessionCookie+"=") {
				t.Fatal("a refused sign-in set a session cookie")
			}
		})
	}
	u, _ := url.Parse(s.url)
	c.http.Jar.SetCookies(u, []*http.Cookie{{Name: signinCookie, Value: csrf, Path: "/"}})
	a := c.post("/operator/signin", url.Values{"csrf": {csrf}, "name": {"alice"}, "token": {operatorToken}, "next": {"https://evil.example/"}})
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/approvals" {
		t.Fatalf("sign-in: %d to %q (an outside next must not be followed)", a.status, a.header.Get("Location"))
	}
	var session string
	for _, sc := range a.header.Values("Set-Cookie") {
		if strings.HasPrefix(sc, sessionCookie+"=") {
			session = sc
		}
	}
	if !strings.Contains(session, "HttpOnly") || !strings.Contains(session, "SameSite=Strict") || !strings.Contains(session, "Path=/") {
		t.Fatalf("session cookie %q", session)
	}
	list := c.get("/approvals")
	if list.status != 200 || !strings.Contains(list.body, "Signed in as <strong>alice</strong>") {
		t.Fatalf("list: %d %s", list.status, list.body)
	}
	for _, h := range []string{"Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy"} {
		if list.header.Get(h) == "" {
			t.Errorf("no %s header", h)
		}
	}
	if cc := list.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}

	// Sign-out needs the CSRF token too, then the cookie is worthless.
	if a := c.post("/operator/signout", url.Values{}); a.status != http.StatusForbidden {
		t.Fatalf("sign-out without csrf: %d", a.status)
	}
	if a := c.post("/operator/signout", url.Values{"csrf": {csrfOf(t, list.body)}}); a.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", a.status)
	}
	if a := c.get("/approvals"); a.status != http.StatusSeeOther {
		t.Fatalf("after sign-out: %d", a.status)
	}
}

func TestNamedOperatorTokens(t *testing.T) {
	s := newStack(t, Config{Operators: map[string]string{"Dana.Ops": "dana-token-0123456789"}, OperatorTenants: map[string]string{"Dana.Ops": "acme"}})
	c := s.client()
	csrf := c.signIn("someone else", "dana-token-0123456789")
	p := s.requestApproval("c1", map[string]any{"action": "x"})
	a := c.post("/approval/"+p.ID+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}})
	if a.status != http.StatusSeeOther {
		t.Fatalf("decide: %d %s", a.status, a.body)
	}
	got, _ := s.svc.Store().Get(context.Background(), p.ID)
	if got.Operator != "Dana.Ops" {
		t.Fatalf("operator %q, want the configured name", got.Operator)
	}
}

func TestDecisionPaths(t *testing.T) {
	s := newStack(t, Config{})
	c := s.client()
	csrf := c.signIn("alice", operatorToken)
	ctx := context.Background()

	p := s.requestApproval("c1", map[string]any{"action": "drop table <users>", "details": "<script>alert(1)</script>\n  indented line"})
	detail := c.get("/approval/" + p.ID)
	if detail.status != 200 {
		t.Fatalf("detail: %d", detail.status)
	}
	for _, want := range []string{"drop table &lt;users&gt;", "&lt;script&gt;alert(1)&lt;/script&gt;\n  indented line", ">acme<", ">sess-1<", ">c1<"} {
		if !strings.Contains(detail.body, want) {
			t.Errorf("detail lacks %q", want)
		}
	}
	if strings.Contains(detail.body, "<script>alert(1)") {
		t.Fatal("details are not escaped")
	}

	refusals := []struct {
		name   string
		form   url.Values
		header []string
		status int
		want   string
	}{
		{"no csrf", url.Values{"decision": {"approve"}}, nil, http.StatusForbidden, "CSRF token is missing or wrong"},
		{"other csrf", url.Values{"csrf": {jobs.NewID()}, "decision": {"approve"}}, nil, http.StatusForbidden, "CSRF token is missing or wrong"},
		{"cross-site origin", url.Values{"csrf": {csrf}, "decision": {"approve"}}, []string{"Origin", "https://evil.example"}, http.StatusForbidden, "sent from another site"},
		{"no decision", url.Values{"csrf": {csrf}}, nil, http.StatusBadRequest, "decision: choose approve or deny"},
		{"bad decision", url.Values{"csrf": {csrf}, "decision": {"maybe"}}, nil, http.StatusBadRequest, "decision: choose approve or deny"},
		{"comment too long", url.Values{"csrf": {csrf}, "decision": {"approve"}, "comment": {strings.Repeat("c", approval.MaxCommentChars+1)}}, nil, http.StatusBadRequest, "comment: 2001 characters, more than the limit of 2000"},
		{"form too large", url.Values{"csrf": {csrf}, "decision": {"approve"}, "comment": {strings.Repeat("c", maxFormBytes)}}, nil, http.StatusRequestEntityTooLarge, "larger than"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			a := c.post("/approval/"+p.ID+"/decision", tt.form, tt.header...)
			if a.status != tt.status || !strings.Contains(a.body, tt.want) {
				t.Fatalf("status %d, want %d with %q", a.status, tt.status, tt.want)
			}
			if got, _ := s.svc.Store().Get(ctx, p.ID); got.Status != approval.Pending {
				t.Fatalf("a refused POST decided the approval: %s", got.Status)
			}
		})
	}

	// Same-origin with the longest comment allowed: approved, and the
	// stream ends with the approval.
	comment := strings.Repeat("ok ", approval.MaxCommentChars/3)
	a := c.post("/approval/"+p.ID+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}, "comment": {comment}}, "Origin", s.url)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/approval/"+p.ID {
		t.Fatalf("approve: %d %q %s", a.status, a.header.Get("Location"), a.body)
	}
	res := p.wait(t)
	if res.IsError || !strings.Contains(res.Content[0].Text, "Approved by operator alice") {
		t.Fatalf("result %+v", res)
	}
	// The second answer gets 409, whoever sends it.
	other := s.client()
	otherCSRF := other.signIn("bob", operatorToken)
	late := other.post("/approval/"+p.ID+"/decision", url.Values{"csrf": {otherCSRF}, "decision": {"deny"}})
	if late.status != http.StatusConflict || !strings.Contains(late.body, "Already decided: this request was approved by alice") {
		t.Fatalf("second answer: %d %s", late.status, late.body)
	}
	log, _ := s.svc.Store().Log(ctx, p.ID)
	if len(log) != 1 || log[0].Operator != "alice" || log[0].Comment != strings.TrimSpace(comment) {
		t.Fatalf("log %+v", log)
	}

	// Expired and cancelled requests cannot be answered.
	exp := s.requestApproval("c2", map[string]any{"action": "x", "timeout_seconds": 1})
	if r := exp.wait(t); !r.IsError || !strings.Contains(r.Content[0].Text, "Expired") {
		t.Fatalf("expiry result %+v", r)
	}
	a = c.post("/approval/"+exp.ID+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}})
	if a.status != http.StatusConflict || !strings.Contains(a.body, "expired at") || !strings.Contains(a.body, "can no longer be answered") {
		t.Fatalf("answer to an expired request: %d %s", a.status, a.body)
	}
	can := s.requestApproval("c3", map[string]any{"action": "x"})
	ch, stop := s.svc.Subscribe(func(string) bool { return true })
	defer stop()
	can.cancel()
	for {
		got, _ := s.svc.Store().Get(ctx, can.ID)
		if got.Status == approval.Cancelled {
			break
		}
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("dropped stream did not cancel")
		}
	}
	a = c.post("/approval/"+can.ID+"/decision", url.Values{"csrf": {csrf}, "decision": {"deny"}})
	if a.status != http.StatusConflict || !strings.Contains(a.body, "was cancelled") {
		t.Fatalf("answer to a cancelled request: %d %s", a.status, a.body)
	}

	// Unknown and malformed IDs.
	if a := c.post("/approval/"+jobs.NewID()+"/decision", url.Values{"csrf": {csrf}, "decision": {"approve"}}); a.status != http.StatusNotFound {
		t.Fatalf("unknown id: %d", a.status)
	}
	if a := c.get("/approval/not-an-id"); a.status != http.StatusNotFound {
		t.Fatalf("malformed id: %d", a.status)
	}
}

func TestLiveStream(t *testing.T) {
	s := newStack(t, Config{})
	c := s.client()
	c.signIn("alice", operatorToken)
	req, _ := http.NewRequest(http.MethodGet, s.url+"/approvals/live", nil)
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	events := make(chan string, 10)
	go func() {
		for ev, err := range sse.Read(resp.Body, 1<<16) {
			if err != nil {
				return
			}
			events <- ev.Name + " " + ev.Data
		}
	}()
	next := func() string {
		select {
		case e := <-events:
			return e
		case <-time.After(5 * time.Second):
			t.Fatal("no live event")
		}
		return ""
	}
	if e := next(); e != `changed {"pending":0}` {
		t.Fatalf("first event %q", e)
	}
	s.requestApproval("c1", map[string]any{"action": "x"})
	if e := next(); e != `changed {"pending":1}` {
		t.Fatalf("after a request %q", e)
	}
	rows := c.get("/approvals/rows")
	if rows.status != 200 || !strings.Contains(rows.body, `data-count="1"`) || strings.Contains(rows.body, "<html") {
		t.Fatalf("rows fragment: %d %s", rows.status, rows.body)
	}
}

func TestStaticFiles(t *testing.T) {
	s := newStack(t, Config{})
	c := s.client()
	for path, ctype := range map[string]string{"/operator/static/page.css": "text/css", "/operator/static/live.js": "javascript"} {
		a := c.get(path)
		if a.status != 200 || !strings.Contains(a.header.Get("Content-Type"), ctype) {
			t.Errorf("%s: %d %q", path, a.status, a.header.Get("Content-Type"))
		}
	}
}

func TestConfigErrors(t *testing.T) {
	svc, err := approval.New(context.Background(), approval.Config{DataDir: t.TempDir(), PageURL: "http://x", SweepInterval: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{SessionTTL: time.Hour}, "APPROVAL_OPERATOR_TOKEN is not set"},
		{Config{Token: "short", SessionTTL: time.Hour}, "APPROVAL_OPERATOR_TOKEN is 5 bytes, shorter than the minimum of 16"},
		{Config{Operators: map[string]string{"a": "short"}, SessionTTL: time.Hour}, `the token of "a" is 5 bytes`},
		{Config{Token: operatorToken, Operators: map[string]string{"a": operatorToken}, SessionTTL: time.Hour}, `"a" shares a token with APPROVAL_OPERATOR_TOKEN`},
		{Config{Token: operatorToken, SigninAttempts: 5, SigninWindow: time.Minute}, "APPROVAL_OPERATOR_SESSION_TTL must be positive"},
		{Config{Token: operatorToken, SessionTTL: time.Hour, SigninWindow: time.Minute}, "APPROVAL_SIGNIN_ATTEMPTS must be at least 1"},
		{Config{Token: operatorToken, SessionTTL: time.Hour, SigninAttempts: 5}, "APPROVAL_SIGNIN_WINDOW must be positive"},
		// Every account is scoped, and only accounts are.
		{Config{Operators: map[string]string{"ann": "ann-token-0123456789"}, SessionTTL: time.Hour, SigninAttempts: 5, SigninWindow: time.Minute}, `APPROVAL_OPERATOR_TENANTS: say which tenants "ann" may decide for (ann:tenant|tenant) or make them an admin (ann:*)`},
		{Config{Token: operatorToken, OperatorTenants: map[string]string{"bob": "acme"}, SessionTTL: time.Hour, SigninAttempts: 5, SigninWindow: time.Minute}, `APPROVAL_OPERATOR_TENANTS: "bob" has no token in APPROVAL_OPERATORS and no identity`},
		{Config{Operators: map[string]string{"ann": "ann-token-0123456789"}, OperatorTenants: map[string]string{"ann": "acme||b"}, SessionTTL: time.Hour, SigninAttempts: 5, SigninWindow: time.Minute}, `tenant "" is empty`},
		{Config{Identities: map[string]string{"ann": "ann@example.com"}, OperatorTenants: map[string]string{"ann": "acme"}, SessionTTL: time.Hour, SigninAttempts: 5, SigninWindow: time.Minute}, "APPROVAL_OPERATOR_IDENTITIES needs APPROVAL_IDENTITY_HEADER"},
		{Config{Identities: map[string]string{"ann": "ann@example.com"}, OperatorTenants: map[string]string{"ann": "acme"}, IdentityHeader: "X-Email", SessionTTL: time.Hour, SigninAttempts: 5, SigninWindow: time.Minute}, "APPROVAL_IDENTITY_HEADER needs APPROVAL_IDENTITY_PROXIES"},
		{Config{Identities: map[string]string{"ann": "ann@example.com"}, OperatorTenants: map[string]string{"ann": "acme"}, IdentityHeader: "X-Email", IdentityProxies: []string{"proxy"}, SessionTTL: time.Hour, SigninAttempts: 5, SigninWindow: time.Minute}, `APPROVAL_IDENTITY_PROXIES: "proxy" is neither a CIDR nor an address`},
	}
	for _, tt := range tests {
		_, err := New(context.Background(), tt.cfg, svc, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	for _, tt := range []struct {
		operators string
		want      string // "" for success
	}{
		{"alice:0123456789abcdef0123,alice:0123456789abcdef0124", `APPROVAL_OPERATORS: "alice" is listed more than once`},
		{"ann:ann-token-0123456789,bo:bo-token-01234567890,ann:ann-token-0123456789", `APPROVAL_OPERATORS: "ann" is listed more than once`},
		{"ann:ann-token-0123456789,bo:ann-token-0123456789", `APPROVAL_OPERATORS: "`}, // "ann" and "bo" share a token, in map order
		{"ann:ann-token-0123456789,bo:bo-token-01234567890", ""},
		{"ann", "APPROVAL_OPERATORS"},
		// A space after the comma is part of the next name.
		{"alice:0123456789abcdef0123, bob:0123456789abcdef0124", `APPROVAL_OPERATORS: name " bob": want 1 to 64 ASCII letters, digits, '.', '_', '-' or '@', got ' '`},
		{" alice:0123456789abcdef0123", `APPROVAL_OPERATORS: name " alice": want`},
		{"alice :0123456789abcdef0123", `APPROVAL_OPERATORS: name "alice ": want`},
		{"ann smith:0123456789abcdef0123", `APPROVAL_OPERATORS: name "ann smith": want`},
		{"ann<b>:0123456789abcdef0123", `APPROVAL_OPERATORS: name "ann<b>": want 1 to 64 ASCII letters, digits, '.', '_', '-' or '@', got '<'`},
		{"jos\u00e9:0123456789abcdef0123", `APPROVAL_OPERATORS: name "josé": want`},
		{"ann\tb:0123456789abcdef0123", `APPROVAL_OPERATORS: name "ann\tb": want`},
		{":0123456789abcdef0123", `APPROVAL_OPERATORS: name "": must not be empty`},
		{strings.Repeat("n", 65) + ":0123456789abcdef0123", `APPROVAL_OPERATORS: name "nnnn`},
		{"system:0123456789abcdef0123", `APPROVAL_OPERATORS: name "system": "system" is reserved`},
		{"CALLER:0123456789abcdef0123", `APPROVAL_OPERATORS: name "CALLER": "CALLER" is reserved`},
		// The edges of what is accepted.
		{"a:0123456789abcdef0123,Z.9_-@x:0123456789abcdef0124", ""},
		{strings.Repeat("n", 64) + ":0123456789abcdef0123,ann.lee@example.com:0123456789abcdef0124", ""},
	} {
		env := map[string]string{"APPROVAL_OPERATORS": tt.operators, "APPROVAL_OPERATOR_TENANTS": tenantsOf(tt.operators)}
		p, err := openEnv(context.Background(), env, svc, nil)
		switch {
		case tt.want == "" && (err != nil || p == nil):
			t.Errorf("APPROVAL_OPERATORS=%s: %v", tt.operators, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("APPROVAL_OPERATORS=%s: err %v, want %q", tt.operators, err, tt.want)
		}
	}
	p, err := openEnv(context.Background(), map[string]string{"APPROVAL_OPERATORS": "ann:ann-token-0123456789,bo:bo-token-01234567890", "APPROVAL_OPERATOR_TENANTS": "ann:acme|globex,bo:*"}, svc, nil)
	if err != nil || p.secure {
		t.Fatalf("APPROVAL_OPERATORS parse: %v %+v", err, p)
	}
	bo, err := svc.Store().AccountByToken(context.Background(), "bo-token-01234567890")
	ann, err2 := svc.Store().AccountByName(context.Background(), "ANN")
	if err != nil || err2 != nil || !bo.Admin || bo.Name != "bo" || ann.Admin || strings.Join(ann.Tenants, ",") != "acme,globex" {
		t.Fatalf("stored accounts: %+v %v, %+v %v", bo, err, ann, err2)
	}
	p, err = openEnv(context.Background(), map[string]string{"APPROVAL_OPERATOR_TOKEN": operatorToken, "APPROVAL_COOKIE_SECURE": "true"}, svc, nil)
	if err != nil || !p.secure {
		t.Fatalf("APPROVAL_COOKIE_SECURE=true: %v secure=%v", err, p != nil && p.secure)
	}
	if _, err := openEnv(context.Background(), map[string]string{"APPROVAL_OPERATOR_TOKEN": operatorToken, "APPROVAL_OPERATOR_SESSION_TTL": "soon"}, svc, nil); err == nil || !strings.Contains(err.Error(), "APPROVAL_OPERATOR_SESSION_TTL") {
		t.Fatalf("bad TTL: %v", err)
	}
}

// tenantsOf scopes every name of an APPROVAL_OPERATORS value to tenant t.
func tenantsOf(operators string) string {
	var out []string
	for _, pair := range strings.Split(operators, ",") {
		name, _, _ := strings.Cut(pair, ":")
		out = append(out, name+":t")
	}
	return strings.Join(out, ",")
}

// TestErrorPage: a handler's error is answered with the message page: a
// refusal with its title and words, a server fault with neither its cause
// (logged, never shown) nor detail, a client that went away with 499 and
// no log line.
func TestErrorPage(t *testing.T) {
	s := newStack(t, Config{})
	var logs bytes.Buffer
	s.page.errors.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		err    error
		status int
		want   string
		logged bool
	}{
		{"refusal", context.Background(), errNotFound, http.StatusNotFound, "<h1>Not found</h1>", false},
		{"admins only", context.Background(), refuse(http.StatusForbidden, codeAdminsOnly, "The audit log is for admins."), http.StatusForbidden, "<h1>Admins only</h1>", false},
		{"fault", context.Background(), fmt.Errorf("read approvals: disk on fire"), http.StatusInternalServerError, "Something went wrong on our side", true},
		{"database silent", context.Background(), fmt.Errorf("read approvals: disk on fire: %w", context.DeadlineExceeded), http.StatusServiceUnavailable, "<h1>Unavailable</h1>", true},
		{"client gone", cancelled, fmt.Errorf("read approvals: %w", context.Canceled), httpapi.StatusClientClosedRequest, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs.Reset()
			rec := httptest.NewRecorder()
			s.page.errors.Error(rec, httptest.NewRequestWithContext(tt.ctx, http.MethodGet, "/approvals", nil), tt.err)
			body := rec.Body.String()
			if rec.Code != tt.status || !strings.Contains(body, tt.want) || strings.Contains(body, "disk on fire") {
				t.Fatalf("%d %s, want %d with %q", rec.Code, body, tt.status, tt.want)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
				t.Errorf("Content-Type %q", ct)
			}
			if logged := strings.Contains(logs.String(), "disk on fire"); logged != tt.logged {
				t.Errorf("logged %v, want %v: %s", logged, tt.logged, logs.String())
			}
		})
	}
}

// openEnv is what the local service does with the page's environment: the
// Config parsed (with the rest of the service's), then New.
func openEnv(ctx context.Context, environ map[string]string, svc *approval.Service, logger *slog.Logger) (*Page, error) {
	cfg, err := service.ParseEnv[Config](environ)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg, svc, logger)
}
