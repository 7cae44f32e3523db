package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/brain-tools/suite/pkg/httpapi"
)

// TestWriteErrorClientGone: a handler error after the client went away
// (its request context cancelled, the error wrapping context.Canceled) is
// answered 499 and not logged, where brain used to log an ERROR 500; a
// real failure is still a logged 500 whose cause is never sent, and a 401
// carries brain's realm. A database that did not answer is a 503, a
// warning.
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
		// The database not answering is a 503 to wait out, a warning.
		{"database silent", false, fmt.Errorf("read call: %w", context.DeadlineExceeded), http.StatusServiceUnavailable, false, "deadline"},
		{"database refused", false, fmt.Errorf("create call: %w", &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED}), http.StatusServiceUnavailable, false, "refused"},
		{"database cut off", false, fmt.Errorf("create call: %w", &net.OpError{Op: "read", Net: "unix", Err: syscall.ECONNRESET}), http.StatusServiceUnavailable, false, "reset"},
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

// TestNULInStoredStringsIsNot500: a U+0000 is valid JSON, and SQLite keeps
// it in a text column where PostgreSQL refuses it ("invalid byte sequence
// for encoding UTF8: 0x00"): found by a tester as a 500 on PostgreSQL for a
// session's harness and a toolset's name and description, where SQLite
// answered 201; an ID with a NUL, in the path or the query, was a 500 there
// too, where SQLite answered 404. Both stores now answer the same: a string
// brain keeps in a column of its own, or looks a row up by, is refused
// with a 400 naming it; a string inside a JSON document brain keeps
// (arguments, a tool's or an answer's result, a comment, a description in
// a tool's definition, config.model) is JSON-escaped there, and round-trips.
func TestNULInStoredStringsIsNot500(t *testing.T) {
	b, ct := startWaitingBrain(t, false, 60, allowLoopback)
	const nul = "a\x00b"
	esc := url.PathEscape(nul)
	sess := b.session("t1", "lookup", "gated", "plain")
	fn := func() string {
		_, c := b.call("t1", sess.ID, "lookup", map[string]any{"order_id": "1"}, 0)
		return c.ID
	}
	gate := func() string { _, c := b.call("t1", sess.ID, "gated", map[string]any{}, 0); return c.ID }
	var ts, tool CustomToolJSON
	b.created("/toolsets", "t1", map[string]any{"name": "set", "tools": []string{"plain"}}, &ts)
	toolBody := func(extra map[string]any) map[string]any {
		body := map[string]any{"name": "ct", "description": "d", "url": ct.URL + "/tools/plain", "input_schema": map[string]any{"type": "object"}}
		for k, v := range extra {
			body[k] = v
		}
		return body
	}
	b.created("/custom_tools", "t1", toolBody(nil), &tool)

	refused := []struct{ name, method, path, field string }{
		{"a session by id", "GET", "/sessions/" + esc, "id"},
		{"a session's events", "GET", "/sessions/" + esc + "/events", "id"},
		{"a session's tools", "GET", "/sessions/" + esc + "/tools", "id"},
		{"a session to close", "POST", "/sessions/" + esc + "/close", "id"},
		{"a tool call by id", "GET", "/tool_calls/" + esc, "id"},
		{"a tool call to cancel", "POST", "/tool_calls/" + esc + "/cancel", "id"},
		{"tool calls of a session", "GET", "/tool_calls?session_id=" + esc, "session_id"},
		{"tool calls of a tool", "GET", "/tool_calls?tool=" + esc, "tool"},
		{"tool calls after", "GET", "/tool_calls?after=" + esc, "after"},
		{"a custom tool by id", "GET", "/custom_tools/" + esc, "id"},
		{"a custom tool to delete", "DELETE", "/custom_tools/" + esc, "id"},
		{"a revision by id", "GET", "/tool_revisions/" + esc, "id"},
		{"a toolset by id", "GET", "/toolsets/" + esc, "id"},
		{"a secret by name", "GET", "/secrets/" + esc, "name"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			wantRefusal(t, b.do(tc.method, tc.path, "t1", nil), http.StatusBadRequest, httpapi.CodeInvalidRequest, tc.field+": must not contain NUL (U+0000)")
		})
	}

	withBody := []struct {
		name, method, path string
		body               any
		field              string // "": stored, and read back with the NUL
	}{
		{"harness", "POST", "/sessions", map[string]any{"harness": nul, "config": map[string]any{"tools": []string{"plain"}}}, "harness"},
		{"config.toolset_id", "POST", "/sessions", map[string]any{"config": map[string]any{"toolset_id": nul}}, "config.toolset_id"},
		{"config.model", "POST", "/sessions", map[string]any{"config": map[string]any{"tools": []string{"plain"}, "model": nul}}, ""},
		{"toolset name", "POST", "/toolsets", map[string]any{"name": nul, "tools": []string{"plain"}}, "name"},
		{"toolset description", "POST", "/toolsets", map[string]any{"name": "nul", "description": nul, "tools": []string{"plain"}}, "description"},
		{"toolset name, updated", "PUT", "/toolsets/" + ts.ID, map[string]any{"name": nul, "tools": []string{"plain"}}, "name"},
		{"toolset description, updated", "PUT", "/toolsets/" + ts.ID, map[string]any{"name": "set", "description": nul, "tools": []string{"plain"}}, "description"},
		{"custom tool description", "POST", "/custom_tools", toolBody(map[string]any{"name": "ct2", "description": nul}), ""},
		{"custom tool schema", "POST", "/custom_tools", toolBody(map[string]any{"name": "ct3", "input_schema": map[string]any{"type": "object", "description": nul}}), ""},
		{"function tool description", "PUT", "/sessions/" + b.session("t1").ID + "/tools",
			map[string]any{"tools": []any{map[string]any{"type": "function", "name": "f", "description": nul}}}, ""},
		{"arguments", "POST", "/sessions/" + sess.ID + "/tool_calls", map[string]any{"tool": "plain", "arguments": map[string]any{"text": nul}, "wait_seconds": 5}, ""},
		{"an arguments name", "POST", "/sessions/" + sess.ID + "/tool_calls", map[string]any{"tool": "plain", "arguments": map[string]any{nul: 1}, "wait_seconds": 5}, ""},
		{"a function call's arguments", "POST", "/sessions/" + sess.ID + "/tool_calls", map[string]any{"tool": "lookup", "arguments": map[string]any{"order_id": nul}}, ""},
		{"a function tool's answer", "POST", "/tool_calls/" + fn() + "/respond",
			map[string]any{"content": []any{map[string]any{"type": "text", "text": nul}}, "structured_content": map[string]any{"status": nul}}, ""},
		{"a function tool's error answer", "POST", "/tool_calls/" + fn() + "/respond",
			map[string]any{"content": []any{map[string]any{"type": "text", "text": nul}}, "is_error": true}, ""},
		{"an approval's comment", "POST", "/tool_calls/" + gate() + "/respond", map[string]any{"approved": false, "comment": nul}, ""},
	}
	for _, tc := range withBody {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(tc.method, tc.path, "t1", tc.body)
			if tc.field != "" {
				wantRefusal(t, r, http.StatusBadRequest, httpapi.CodeInvalidRequest, tc.field+": must not contain NUL (U+0000)")
				return
			}
			// Kept as JSON has it, or quoted in a message (an approval's
			// comment, in the refusal's error_message).
			if r.status >= 300 || !strings.Contains(string(r.body), `a\u0000b`) && !strings.Contains(string(r.body), `a\\x00b`) {
				t.Errorf("%s %s with a NUL in %s: %d %.300s; want it kept", tc.method, tc.path, tc.name, r.status, r.body)
			}
		})
	}
}
