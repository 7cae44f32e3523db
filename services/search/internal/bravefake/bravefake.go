// Package bravefake is a stand-in for the Brave Search web search API
// that enforces Brave's request rate the way Brave reports it, for tests
// that cannot reach Brave: GET /res/v1/web/search with an
// X-Subscription-Token header, X-RateLimit-Limit / -Policy / -Remaining /
// -Reset headers on every answer (one comma-separated value per window:
// per second, then per month; Reset in whole seconds, rounded up), and
// Brave's error bodies: 429 RATE_LIMITED when a request comes sooner than
// the per-second limit allows, 422 SUBSCRIPTION_TOKEN_INVALID for a wrong
// token (Brave answers a bad key with 422, not 401).
package bravefake

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"
)

// Path is the endpoint the fake serves.
const Path = "/res/v1/web/search"

// MonthlyQuota is the fake plan's requests a month (Brave's Free plan
// reports "1, 2000"; paid plans "1, 15000" and more).
const MonthlyQuota = 15000

// Server is the fake. PerSecond requests a second are accepted, measured
// between arrivals: a request within 1/PerSecond of the last accepted one
// is answered 429.
type Server struct {
	// Token is the subscription token the fake accepts.
	Token     string
	PerSecond int

	mu       sync.Mutex
	accepted []time.Time // arrival times of answered requests
	limited  []time.Time // arrival times of 429s
	used     int
}

// New returns a fake that accepts token at perSecond requests a second.
func New(token string, perSecond int) *Server {
	return &Server{Token: token, PerSecond: perSecond}
}

// Accepted returns the arrival times of the requests answered 200.
func (s *Server) Accepted() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.accepted...)
}

// Limited returns the arrival times of the requests answered 429.
func (s *Server) Limited() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.limited...)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != Path {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if r.Header.Get("X-Subscription-Token") != s.Token {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody(422, "SUBSCRIPTION_TOKEN_INVALID", "The provided subscription token is invalid.", map[string]any{"component": "authentication"}))
		return
	}
	now := time.Now()
	interval := time.Second / time.Duration(s.PerSecond)
	s.mu.Lock()
	var wait time.Duration
	if n := len(s.accepted); n > 0 {
		wait = s.accepted[n-1].Add(interval).Sub(now)
	}
	limited := wait > 0
	if limited {
		s.limited = append(s.limited, now)
	} else {
		s.accepted = append(s.accepted, now)
		s.used++
		wait = interval
	}
	used := s.used
	s.mu.Unlock()

	h := w.Header()
	h.Set("X-RateLimit-Limit", fmt.Sprintf("%d, %d", s.PerSecond, MonthlyQuota))
	h.Set("X-RateLimit-Policy", fmt.Sprintf("%d;w=1, %d;w=2592000", s.PerSecond, MonthlyQuota))
	// An accepted request uses the window up: 0 left until it resets.
	h.Set("X-RateLimit-Remaining", fmt.Sprintf("0, %d", MonthlyQuota-used))
	h.Set("X-RateLimit-Reset", fmt.Sprintf("%d, %d", int(math.Ceil(wait.Seconds())), 2592000))
	if limited {
		writeJSON(w, http.StatusTooManyRequests, errorBody(429, "RATE_LIMITED", "Request rate limit exceeded for plan.", map[string]any{
			"plan": "Free", "rate_limit": s.PerSecond, "rate_current": s.PerSecond + 1,
			"quota_limit": MonthlyQuota, "quota_current": used, "component": "rate_limiter",
		}))
		return
	}
	q := r.URL.Query().Get("q")
	writeJSON(w, http.StatusOK, map[string]any{
		"type":  "search",
		"query": map[string]any{"original": q, "more_results_available": false},
		"web": map[string]any{"type": "search", "results": []map[string]any{{
			"title": "Result for <strong>" + q + "</strong>", "url": "https://example.com/" + fmt.Sprint(used),
			"description": "A page about " + q + ".", "age": "1 day ago",
			"meta_url": map[string]any{"hostname": "example.com"},
		}}},
	})
}

func errorBody(status int, code, detail string, meta map[string]any) map[string]any {
	return map[string]any{"type": "ErrorResponse", "time": time.Now().Unix(),
		"error": map[string]any{"id": fmt.Sprintf("fake-%d", time.Now().UnixNano()), "status": status, "code": code, "detail": detail, "meta": meta}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
