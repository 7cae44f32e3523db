package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/brain-tools/suite/pkg/httpapi"
)

// TestWriteErrorClientGone: a handler error after the client went away
// (its request context cancelled, the error wrapping context.Canceled) is
// answered 499 and not logged, where brain used to log an ERROR 500; a
// real failure is still a logged 500 whose cause is never sent, and a 401
// carries brain's realm.
func TestWriteErrorClientGone(t *testing.T) {
	tests := []struct {
		name     string
		cancel   bool
		err      error
		status   int
		logged   bool
		notInRes string
	}{
		{"client gone", true, context.Canceled, httpapi.StatusClientClosedRequest, false, ""},
		{"client gone, wrapped", true, fmt.Errorf("list calls: %w", context.Canceled), httpapi.StatusClientClosedRequest, false, ""},
		{"canceled while the client is there", false, context.Canceled, http.StatusInternalServerError, true, "canceled"},
		{"store failure", false, errors.New("database is locked"), http.StatusInternalServerError, true, "locked"},
		{"refusal", true, httpapi.BadRequest("tool: required"), http.StatusBadRequest, false, ""},
		{"unauthorized", false, httpapi.Errorf(http.StatusUnauthorized, httpapi.CodeUnauthorized, "authorization: unknown API key"), http.StatusUnauthorized, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := &Server{log: slog.New(slog.NewJSONHandler(&logs, nil))}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/tool_calls", nil)
			w := httptest.NewRecorder()
			httpapi.WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.writeError(w, r, tc.err) })).ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Errorf("status %d, want %d", w.Code, tc.status)
			}
			if got := strings.Contains(logs.String(), `"level":"ERROR"`); got != tc.logged {
				t.Errorf("logged %v, want %v: %s", got, tc.logged, logs.String())
			}
			if tc.notInRes != "" && strings.Contains(w.Body.String(), tc.notInRes) {
				t.Errorf("the answer repeats the cause %q: %s", tc.notInRes, w.Body)
			}
			if tc.status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") != `Bearer realm="brain"` {
				t.Errorf("WWW-Authenticate %q", w.Header().Get("WWW-Authenticate"))
			}
			if id := w.Header().Get(httpapi.HeaderRequestID); tc.status != httpapi.StatusClientClosedRequest && !strings.Contains(w.Body.String(), `"request_id":"`+id+`"`) {
				t.Errorf("body %s does not repeat the request ID %q", w.Body, id)
			}
		})
	}
}
