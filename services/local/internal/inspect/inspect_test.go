package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

const token = "insp-0123456789abcdef-SECRET"

// eventsServer answers GET /sessions/{id}/events with Accept:
// application/json the way brain documents it (BRAIN_IFACE.md): pages of
// {"events":[...],"has_more":bool} after ?after= up to ?limit=, 401 with
// brain's error body for a wrong token. The end-to-end test in package e2e
// runs the same tool against the real brain.
type eventsServer struct {
	mu       sync.Mutex
	events   []map[string]any
	requests []*http.Request
	paths    []string
}

func (s *eventsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	s.paths = append(s.paths, r.URL.EscapedPath())
	if r.Header.Get("Authorization") != "Bearer "+token {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"code":"unauthorized","message":"authorization: unknown API key or expired inspection token","request_id":"r1"}}`)
		return
	}
	if r.Header.Get("Accept") != "application/json" {
		http.Error(w, "want json", http.StatusNotAcceptable)
		return
	}
	after, _ := strconv.Atoi(r.URL.Query().Get("after"))
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	var out []map[string]any
	for _, ev := range s.events {
		id, _ := strconv.Atoi(ev["id"].(string))
		if id > after {
			out = append(out, ev)
		}
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"events": out, "has_more": more})
}

func (s *eventsServer) add(typ, callID string, data map[string]any) {
	id := len(s.events) + 1
	s.events = append(s.events, map[string]any{
		"id": strconv.Itoa(id), "type": typ, "session_id": "s1", "call_id": callID,
		"time": fmt.Sprintf("2026-01-01T00:00:%02dZ", id%60), "data": data,
	})
}

func run(t *testing.T, opts Options, brainURL, tok, args string) (*tool.Result, string) {
	t.Helper()
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tl := Tool(opts)
	req := tool.Request{TenantID: "t1", SessionID: "s1", CallID: "c-inspect", Arguments: json.RawMessage(args), InspectionToken: tok, BrainURL: brainURL}
	// Through the real service runtime, so its request logging is checked too.
	srv := &service.Server{Name: "local", Config: service.Config{NoAuth: true, Heartbeat: 1e9, StreamAfter: 5e9, MaxRequestBytes: 1 << 20}, Logger: logger, Tools: []service.Tool{tl}}
	body, _ := json.Marshal(req)
	rec := httptest.NewRecorder()
	hr := httptest.NewRequest(http.MethodPost, "/tools/inspect_session", bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	srv.Handler().ServeHTTP(rec, hr)
	res, err := tool.DecodeResult(rec.Body.Bytes())
	if err != nil {
		t.Fatalf("%v: %s", err, rec.Body.String())
	}
	if strings.Contains(logs.String(), tok) && tok != "" {
		t.Fatalf("the inspection token is in the logs: %s", logs.String())
	}
	return res, logs.String()
}

func TestSummary(t *testing.T) {
	es := &eventsServer{}
	es.add("session.created", "", map[string]any{"status": "active"})
	for i := range 12 {
		call := fmt.Sprintf("c%d", i)
		es.add("tool.call", call, map[string]any{"tool": "echo", "arguments": map[string]any{"text": "x"}})
		status, code := "succeeded", any(nil)
		if i%4 == 3 {
			status, code = "failed", "tool_error"
		}
		es.add("tool.result", call, map[string]any{"tool": "echo", "status": status, "error_code": code, "duration_ms": 10 + i, "result": map[string]any{}})
	}
	es.add("tool.call", "c-inspect", map[string]any{"tool": "inspect_session", "arguments": map[string]any{}})
	ts := httptest.NewServer(es)
	defer ts.Close()

	res, _ := run(t, Options{}, ts.URL, token, `{"last_n":3}`)
	if res.IsError {
		t.Fatalf("result %+v", res)
	}
	var s Summary
	if err := json.Unmarshal(res.StructuredContent, &s); err != nil {
		t.Fatal(err)
	}
	if s.EventsRead != 26 || s.Truncated || s.Counts["tool.call"] != 13 || s.Counts["tool.result"] != 12 || s.Counts["session.created"] != 1 || s.CallsTotal != 13 {
		t.Fatalf("summary = %+v", s)
	}
	if len(s.Calls) != 3 {
		t.Fatalf("calls = %+v", s.Calls)
	}
	c10, c11, self := s.Calls[0], s.Calls[1], s.Calls[2]
	if c10.CallID != "c10" || c10.Status != "succeeded" || *c10.DurationMS != 20 || c10.FinishedAt == "" {
		t.Fatalf("c10 = %+v", c10)
	}
	if c11.Status != "failed" || c11.ErrorCode != "tool_error" {
		t.Fatalf("c11 = %+v", c11)
	}
	if self.Tool != "inspect_session" || self.Status != "running" || self.DurationMS != nil {
		t.Fatalf("own call = %+v", self)
	}
	text := res.Content[0].Text
	for _, want := range []string{"Session s1: 26 events (session.created 1, tool.call 13, tool.result 12).", "Last 3 of 13 tool calls", "- echo (call c11): failed [tool_error] in 21ms", "- inspect_session (call c-inspect): running"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(string(res.StructuredContent)+text, token) {
		t.Fatal("the token is in the result")
	}
}

// TestSummaryOfWaitingCalls: a call waiting for an answer is
// requires_input; an answered one names who answered; an approval call
// names the call it was made for.
func TestSummaryOfWaitingCalls(t *testing.T) {
	es := &eventsServer{}
	es.add("session.created", "", map[string]any{"status": "active"})
	es.add("tool.call", "gated", map[string]any{"tool": "storage_delete", "arguments": map[string]any{}, "caller_type": "api"})
	es.add("tool.requires_input", "gated", map[string]any{"tool": "storage_delete", "kind": "approval"})
	es.add("tool.call", "ask", map[string]any{"tool": "request_approval", "arguments": map[string]any{}, "caller_type": "system", "parent_id": "gated"})
	es.add("tool.result", "ask", map[string]any{"tool": "request_approval", "status": "succeeded", "duration_ms": 5})
	es.add("tool.responded", "gated", map[string]any{"tool": "storage_delete", "kind": "approval", "responder": map[string]any{"type": "operator", "name": "alice"}, "approved": true})
	es.add("tool.call", "fn", map[string]any{"tool": "lookup_order", "arguments": map[string]any{}})
	es.add("tool.requires_input", "fn", map[string]any{"tool": "lookup_order", "kind": "function"})
	es.add("tool.call", "c-inspect", map[string]any{"tool": "inspect_session", "arguments": map[string]any{}})
	ts := httptest.NewServer(es)
	defer ts.Close()
	res, _ := run(t, Options{}, ts.URL, token, `{}`)
	var s Summary
	if err := json.Unmarshal(res.StructuredContent, &s); err != nil {
		t.Fatal(err)
	}
	if s.Counts["tool.requires_input"] != 2 || s.Counts["tool.responded"] != 1 || len(s.Calls) != 4 {
		t.Fatalf("summary %+v", s)
	}
	gated, ask, fn := s.Calls[0], s.Calls[1], s.Calls[2]
	if gated.Status != "running" || gated.RespondedBy != "operator alice" || ask.ParentID != "gated" || fn.Status != "requires_input" {
		t.Errorf("calls %+v", s.Calls)
	}
	text := res.Content[0].Text
	for _, want := range []string{"tool.requires_input 2, tool.responded 1", "- storage_delete (call gated): running, answered by operator alice",
		"- request_approval (call ask, for call gated): succeeded", "- lookup_order (call fn): requires_input"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

func TestPagingAndTruncation(t *testing.T) {
	es := &eventsServer{}
	for i := range 2500 {
		es.add("tool.call", fmt.Sprintf("c%d", i), map[string]any{"tool": "echo"})
	}
	ts := httptest.NewServer(es)
	defer ts.Close()

	res, _ := run(t, Options{}, ts.URL, token, `{}`)
	var s Summary
	json.Unmarshal(res.StructuredContent, &s)
	if s.EventsRead != 2500 || s.Truncated || len(s.Calls) != DefaultLastN || s.CallsTotal != 2500 {
		t.Fatalf("summary: read %d truncated %v calls %d total %d", s.EventsRead, s.Truncated, len(s.Calls), s.CallsTotal)
	}
	if n := len(es.requests); n != 3 {
		t.Fatalf("%d pages read, want 3 (1000+1000+500)", n)
	}

	es.requests = nil
	res, _ = run(t, Options{MaxEvents: 1500}, ts.URL, token, `{"last_n":100}`)
	json.Unmarshal(res.StructuredContent, &s)
	if s.EventsRead != 1500 || !s.Truncated || !strings.Contains(res.Content[0].Text, "Only the first 1500 events were read") {
		t.Fatalf("truncated summary: %+v %q", s.EventsRead, res.Content[0].Text)
	}
}

func TestErrors(t *testing.T) {
	es := &eventsServer{}
	ts := httptest.NewServer(es)
	defer ts.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, ts.URL+r.URL.Path, http.StatusFound)
	}))
	defer redirect.Close()
	tests := []struct {
		name, url, tok, args, want string
	}{
		{"no token", ts.URL, "", `{}`, `set "inspect_session": true`},
		{"wrong token", ts.URL, "insp-wrong-but-long-enough", `{}`, "brain refused the inspection token (status 401): authorization: unknown API key or expired inspection token"},
		{"bad scheme", "ftp://127.0.0.1", token, `{}`, "brain_url: scheme must be http or https"},
		{"query in url", ts.URL + "?x=1", token, `{}`, "brain_url: must be a plain base URL"},
		{"brain down", "http://127.0.0.1:1", token, `{}`, "read events from brain"},
		{"redirect not followed", redirect.URL, token, `{}`, "status 302"},
		{"last_n too big", ts.URL, token, `{"last_n":101}`, `invalid arguments: at "/last_n": maximum: got 101, want 100`},
		{"last_n zero", ts.URL, token, `{"last_n":0}`, `invalid arguments: at "/last_n": minimum: got 0, want 1`},
		{"unknown argument", ts.URL, token, `{"session_id":"other"}`, "session_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := run(t, Options{}, tt.url, tt.tok, tt.args)
			if !res.IsError || !strings.Contains(res.Content[0].Text, tt.want) {
				t.Fatalf("got %+v, want is_error with %q", res.Content, tt.want)
			}
			if tt.tok != "" && strings.Contains(res.Content[0].Text, tt.tok) {
				t.Fatal("the token is in the result")
			}
		})
	}
}

func TestSessionIDIsOnePathSegment(t *testing.T) {
	es := &eventsServer{}
	ts := httptest.NewServer(es)
	defer ts.Close()
	tl := Tool(Options{})
	call := service.NewCall(tool.Request{TenantID: "t1", SessionID: "../../admin", CallID: "c", Arguments: json.RawMessage(`{}`), InspectionToken: token, BrainURL: ts.URL + "/base/"}, nil, nil)
	tl.Handler(context.Background(), call)
	if len(es.paths) != 1 || es.paths[0] != "/base/sessions/..%2F..%2Fadmin/events" {
		t.Fatalf("paths = %v", es.paths)
	}
}

// TestBrainURLAllowList: with BrainURLs set, the token goes only to a
// brain_url on the list (scheme and host case, a default port and a
// trailing slash aside); any other is refused before a request is made.
func TestBrainURLAllowList(t *testing.T) {
	es := &eventsServer{}
	es.add("session.created", "", map[string]any{"status": "active"})
	ts := httptest.NewServer(es)
	defer ts.Close()
	u, _ := url.Parse(ts.URL)
	for _, tc := range []struct {
		name    string
		allowed []string
		url     string
		ok      bool
	}{
		{"no list: any brain", nil, ts.URL, true},
		{"listed", []string{"http://brain.internal:8080", ts.URL}, ts.URL, true},
		{"listed with a trailing slash", []string{ts.URL + "/"}, ts.URL, true},
		{"listed in upper case", []string{"HTTP://" + strings.ToUpper(u.Host)}, ts.URL, true},
		{"listed with a leading zero in the port", []string{"http://" + u.Hostname() + ":0" + u.Port()}, ts.URL, true},
		{"not listed", []string{"http://brain.internal:8080"}, ts.URL, false},
		{"same host, other port", []string{"http://" + u.Hostname() + ":1"}, ts.URL, false},
		{"same host, other scheme", []string{"https://" + u.Host}, ts.URL, false},
		{"listed base, other path", []string{ts.URL + "/brain"}, ts.URL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(es.requests)
			res, _ := run(t, Options{BrainURLs: tc.allowed}, tc.url, token, `{}`)
			if tc.ok != !res.IsError {
				t.Fatalf("is_error = %v, want %v: %+v", res.IsError, !tc.ok, res.Content)
			}
			if !tc.ok {
				if !strings.Contains(res.Content[0].Text, "not one of this service's INSPECT_BRAIN_URLS") {
					t.Errorf("refusal %q does not say why", res.Content[0].Text)
				}
				if len(es.requests) != before {
					t.Error("the token was sent to a brain_url not on the list")
				}
			}
		})
	}
	if err := CheckBrainURLs([]string{"http://brain:8080", "ftp://x"}); err == nil || !strings.Contains(err.Error(), `"ftp://x"`) {
		t.Errorf("CheckBrainURLs = %v, want an error naming ftp://x", err)
	}
	for _, bad := range []string{"http://brain:99999", "http://brain:0"} {
		if err := CheckBrainURLs([]string{bad}); err == nil || !strings.Contains(err.Error(), "not 1 to 65535") {
			t.Errorf("CheckBrainURLs(%s) = %v, want a port out of range", bad, err)
		}
	}
	// As strict as BRAIN_PUBLIC_URL, which says what brain sends.
	for bad, want := range map[string]string{"http://brain:": "has an empty port", "http://brain:08080": `port "08080"`} {
		if err := CheckBrainURLs([]string{bad}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckBrainURLs(%s) = %v, want %q", bad, err, want)
		}
	}
	if err := CheckBrainURLs([]string{"http://brain:8080", "https://Brain.example/base/"}); err != nil {
		t.Errorf("CheckBrainURLs of good URLs = %v", err)
	}
}

// TestSchemaLimits: the input schema inferred from Args states
// DefaultLastN and MaxLastN, and the output schema accepts a summary.
func TestSchemaLimits(t *testing.T) {
	b := Tool(Options{}).Binding
	var in struct {
		Properties struct {
			LastN struct {
				Minimum, Maximum, Default int
			} `json:"last_n"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b.InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	if got := in.Properties.LastN; got.Minimum != 1 || got.Maximum != MaxLastN || got.Default != DefaultLastN {
		t.Fatalf("last_n schema %+v, want 1 to %d, default %d", got, MaxLastN, DefaultLastN)
	}
	if !b.InspectSession || b.Title == "" || b.Annotations == nil || !b.Annotations.ReadOnlyHint {
		t.Fatalf("binding %+v", b)
	}
}
