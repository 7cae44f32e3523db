package bearer

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		header string
		want   string
		ok     bool
	}{
		{"match", "Bearer s3cret", "s3cret", true},
		{"scheme case-insensitive", "bearer s3cret", "s3cret", true},
		{"extra spaces trimmed", "Bearer  s3cret ", "s3cret", true},
		{"wrong token", "Bearer nope", "s3cret", false},
		{"prefix of token", "Bearer s3cre", "s3cret", false},
		{"longer token", "Bearer s3cretX", "s3cret", false},
		{"basic scheme", "Basic s3cret", "s3cret", false},
		{"no scheme", "s3cret", "s3cret", false},
		{"empty header", "", "s3cret", false},
		{"empty token", "Bearer ", "s3cret", false},
		{"server without token never matches", "Bearer ", "", false},
		// Two headers (joined by \n here): a proxy and the service might
		// each read another.
		{"two headers, both right", "Bearer s3cret\nBearer s3cret", "s3cret", false},
		{"two headers, first right", "Bearer s3cret\nBearer nope", "s3cret", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.header != "" {
				for _, h := range strings.Split(tt.header, "\n") {
					r.Header.Add("Authorization", h)
				}
			}
			if got := Check(r, tt.want); got != tt.ok {
				t.Fatalf("Check = %v, want %v", got, tt.ok)
			}
		})
	}
}

func TestRequire(t *testing.T) {
	h := Require("tok", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	tests := []struct {
		header  string
		status  int
		message string
	}{
		{"Bearer tok", http.StatusTeapot, ""},
		{"", http.StatusUnauthorized, "missing bearer token"},
		{"Bearer bad", http.StatusUnauthorized, "invalid bearer token"},
		{"Token tok", http.StatusUnauthorized, "malformed Authorization header"},
		{"Bearer tok\nBearer tok", http.StatusUnauthorized, "2 Authorization headers: send one"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if tt.header != "" {
			for _, h := range strings.Split(tt.header, "\n") {
				r.Header.Add("Authorization", h)
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.status {
			t.Errorf("%q: status %d, want %d", tt.header, w.Code, tt.status)
		}
		if tt.message != "" {
			if !strings.Contains(w.Body.String(), tt.message) || w.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("%q: body %s, challenge %q", tt.header, w.Body, w.Header().Get("WWW-Authenticate"))
			}
		}
	}
}

func TestCheckToken(t *testing.T) {
	for tok, want := range map[string]string{
		"0123456789abcdef": "",
		"short":            "",
		"with inner space": "",
		" lead":            "surrounding whitespace",
		"trail ":           "surrounding whitespace",
		"tab\t":            "surrounding whitespace",
		"nl\nin":           "control character (byte 2)",
		"del\x7f":          "control character (byte 3)",
	} {
		err := CheckToken(tok)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckToken(%q) = %v, want %q", tok, err, want)
		}
	}
}
