package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"sync"

	"github.com/brain-tools/suite/pkg/bearer"
	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/services/brain/internal/store"
)

// tenant authenticates r by its API key (Authorization: Bearer) and returns
// the key's tenant; 401 otherwise.
func (s *Server) tenant(r *http.Request) (string, error) {
	tenant, _, err := s.caller(r)
	return tenant, err
}

// caller is tenant, and the name of the key's environment variable: who
// answered, when a call is answered through the API.
func (s *Server) caller(r *http.Request) (tenant, keyEnv string, err error) {
	tok, err := bearerToken(r, "Authorization: Bearer <api key>")
	if err != nil {
		return "", "", err
	}
	k, ok := s.config().APIKeyFor(tok)
	if !ok {
		return "", "", httpapi.Errorf(http.StatusUnauthorized, httpapi.CodeUnauthorized, "authorization: unknown API key")
	}
	httpapi.SetTenant(r.Context(), k.Tenant)
	return k.Tenant, k.Env, nil
}

// bearerToken returns r's bearer token, or the 401 that says what is wrong
// (want says what to send).
func bearerToken(r *http.Request, want string) (string, error) {
	tok, ok := bearer.FromRequest(r)
	if ok {
		return tok, nil
	}
	if n := len(r.Header.Values("Authorization")); n > 1 {
		return "", httpapi.Errorf(http.StatusUnauthorized, httpapi.CodeUnauthorized, "authorization: %d Authorization headers; send one (%s)", n, want)
	}
	return "", httpapi.Errorf(http.StatusUnauthorized, httpapi.CodeUnauthorized, "authorization: missing bearer token (%s)", want)
}

// inspectionTokenBytes is the entropy of an inspection token: 256 bits.
const inspectionTokenBytes = 32

// grant is what one inspection token allows: reading the events of one
// session until the call it was issued for returns (revoked is then closed).
type grant struct {
	tenant    string
	sessionID string
	callID    string
	revoked   chan struct{}
}

// inspections holds the live inspection tokens, keyed by their SHA-256 so the
// tokens themselves are never kept (the contract: "Don't log or store it").
// On SQLite tokens live in memory only: a restart revokes them all; on a
// shared store their hashes are in the store too (issueToken).
type inspections struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*grant
}

// issue returns a new token for reading sessionID's events, and the grant to
// revoke when the call returns.
func (in *inspections) issue(tenant, sessionID, callID string) (string, *grant) {
	var b [inspectionTokenBytes]byte
	rand.Read(b[:])
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	g := &grant{tenant: tenant, sessionID: sessionID, callID: callID, revoked: make(chan struct{})}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.m == nil {
		in.m = map[[sha256.Size]byte]*grant{}
	}
	in.m[sha256.Sum256([]byte(tok))] = g
	return tok, g
}

// revoke ends the token of g.
func (in *inspections) revoke(tok string, g *grant) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.m, sha256.Sum256([]byte(tok)))
	close(g.revoked)
}

func (in *inspections) lookup(tok string) (*grant, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	g, ok := in.m[sha256.Sum256([]byte(tok))]
	return g, ok
}

// issueToken issues the inspection token of call c; on a shared store it is
// also recorded there (by its hash), so every replica honours it.
func (s *Server) issueToken(ctx context.Context, c *store.Call) (string, *grant) {
	tok, g := s.tokens.issue(c.TenantID, c.SessionID, c.ID)
	if s.shared != nil {
		if err := s.shared.PutToken(ctx, sha256.Sum256([]byte(tok)), c.TenantID, c.SessionID, c.ID); err != nil {
			s.logStoreFailure("record inspection token: other replicas will refuse it", err, "call_id", c.ID)
		}
	}
	return tok, g
}

// revokeToken ends tok, on every replica.
func (s *Server) revokeToken(ctx context.Context, tok string, g *grant) {
	s.tokens.revoke(tok, g)
	if s.shared != nil {
		// Its call has finished by now, which alone ends the token on other
		// replicas (store.Shared.Token); the row only goes away.
		if err := s.shared.DeleteToken(context.WithoutCancel(ctx), sha256.Sum256([]byte(tok))); err != nil {
			s.log.Warn("delete inspection token", "call_id", g.callID, "err", err)
		}
	}
}

// lookupToken finds what tok allows: in this replica's memory, or on a
// shared store in the store (a token another replica issued). Such a grant
// has no revoked channel: its stream ends at its call's tool.result.
func (s *Server) lookupToken(ctx context.Context, tok string) (*grant, bool, error) {
	if g, ok := s.tokens.lookup(tok); ok || s.shared == nil {
		return g, ok, nil
	}
	tenant, session, call, err := s.shared.Token(ctx, sha256.Sum256([]byte(tok)))
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return &grant{tenant: tenant, sessionID: session, callID: call}, true, nil
}

// eventsAuth authenticates a read of sessionID's events: by API key, or by an
// inspection token issued for that session. A token for another session
// answers 404 as if the session did not exist; an unknown or revoked token
// 401. The grant is nil for API keys.
func (s *Server) eventsAuth(r *http.Request, sessionID string) (string, *grant, error) {
	tok, err := bearerToken(r, "API key or inspection token")
	if err != nil {
		return "", nil, err
	}
	if tenant, ok := s.config().TenantForKey(tok); ok {
		httpapi.SetTenant(r.Context(), tenant)
		return tenant, nil, nil
	}
	g, ok, err := s.lookupToken(r.Context(), tok)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		return "", nil, httpapi.Errorf(http.StatusUnauthorized, httpapi.CodeUnauthorized, "authorization: unknown API key or expired inspection token")
	}
	if g.sessionID != sessionID {
		return "", nil, httpapi.NotFound("session %q not found", sessionID)
	}
	httpapi.SetTenant(r.Context(), g.tenant)
	return g.tenant, g, nil
}
