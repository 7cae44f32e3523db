package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/servicetest"
	"github.com/brain-tools/suite/pkg/version"
)

func TestHealthzAndRouting(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	tests := []struct {
		name, method, path, tenant string
		status                     int
		code                       string
		want                       []string
	}{
		{"healthz without auth", "GET", "/healthz", "", 200, "", nil},
		{"healthz with query", "GET", "/healthz?x=1", "", 400, httpapi.CodeInvalidRequest, []string{"x", "unknown query parameter"}},
		{"unknown route", "GET", "/nope", "t1", 404, httpapi.CodeNotFound, []string{"/nope"}},
		{"trailing slash is not redirected", "GET", "/catalog/", "t1", 404, httpapi.CodeNotFound, []string{"/catalog/"}},
		{"wrong method on sessions", "PUT", "/sessions", "t1", 405, httpapi.CodeMethodNotAllowed, []string{"PUT", "POST"}},
		{"wrong method on catalog", "POST", "/catalog", "t1", 405, httpapi.CodeMethodNotAllowed, []string{"POST", "GET"}},
		{"wrong method on tool call", "DELETE", "/tool_calls/x", "t1", 405, httpapi.CodeMethodNotAllowed, []string{"DELETE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.do(tt.method, tt.path, tt.tenant, nil)
			if r.header.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id header")
			}
			if tt.status == 200 {
				if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"status":"ok"}` {
					t.Errorf("got %d %s", r.status, r.body)
				}
				return
			}
			wantRefusal(t, r, tt.status, tt.code, tt.want...)
			if tt.status == 405 && r.header.Get("Allow") == "" {
				t.Error("405 without Allow header")
			}
		})
	}
	t.Run("HEAD healthz", func(t *testing.T) {
		for _, tc := range []struct {
			path   string
			status int
		}{
			{"/healthz", 200},
			{"/healthz?x=1", 400},
		} {
			r := b.do("HEAD", tc.path, "", nil)
			if r.status != tc.status || len(r.body) != 0 || r.header.Get("X-Request-Id") == "" {
				t.Errorf("HEAD %s: %d %q, want %d, no body, an X-Request-Id", tc.path, r.status, r.body, tc.status)
			}
		}
	})
	t.Run("request id kept when well-formed", func(t *testing.T) {
		r := b.do("GET", "/healthz", "", nil, "X-Request-Id", "abc-123")
		if got := r.header.Get("X-Request-Id"); got != "abc-123" {
			t.Errorf("X-Request-Id = %q, want abc-123", got)
		}
		r = b.do("GET", "/healthz", "", nil, "X-Request-Id", "bad id\twith tab")
		if got := r.header.Get("X-Request-Id"); got == "" || strings.Contains(got, " ") {
			t.Errorf("X-Request-Id = %q, want a fresh id", got)
		}
	})
}

func TestCatalog(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	tests := []struct {
		tenant string
		status int
		want   []string
		code   string
	}{
		{"t1", 200, []string{"echo", "slow", "progress", "inspect"}, ""},
		{"t2", 200, []string{"echo", "secret"}, ""},
		{"", 401, nil, httpapi.CodeUnauthorized},
		{"wrong-key", 401, nil, httpapi.CodeUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.tenant, func(t *testing.T) {
			r := b.do("GET", "/catalog", tt.tenant, nil)
			if tt.status != 200 {
				wantRefusal(t, r, tt.status, tt.code, "authorization")
				if r.header.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
				return
			}
			if strings.Contains(string(r.body), "url") || strings.Contains(string(r.body), "token_env") {
				t.Errorf("catalog shows url or token_env: %s", r.body)
			}
			var cat struct {
				Tools []struct {
					Name        string          `json:"name"`
					InputSchema json.RawMessage `json:"input_schema"`
				} `json:"tools"`
			}
			r.json(t, &cat)
			var names []string
			for _, c := range cat.Tools {
				names = append(names, c.Name)
				if len(c.InputSchema) == 0 {
					t.Errorf("%s: no input_schema", c.Name)
				}
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("catalog of %s (-want +got):\n%s", tt.tenant, diff)
			}
		})
	}
}

func TestCreateSession(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	big := `{"harness":"x"` + strings.Repeat(" ", MaxBodyBytes) + `}`
	exact := `{"harness":"x"` + strings.Repeat(" ", MaxBodyBytes-len(`{"harness":"x"}`)) + `}`
	tests := []struct {
		name   string
		tenant string
		body   any
		hdr    []string
		status int
		code   string
		want   []string
	}{
		{"tools and known fields", "t1", `{"harness":"pi","config":{"model":"openai/gpt-4.1-mini","tools":["echo","slow"]}}`, nil, 201, "", nil},
		{"no config", "t1", `{}`, nil, 201, "", nil},
		{"body at the size limit", "t1", exact, nil, 201, "", nil},
		{"harness at its limit", "t1", map[string]any{"harness": strings.Repeat("h", MaxHarnessBytes)}, nil, 201, "", nil},
		{"model at its limit", "t1", map[string]any{"config": map[string]any{"model": strings.Repeat("m", MaxModelBytes)}}, nil, 201, "", nil},
		{"harness over its limit", "t1", map[string]any{"harness": strings.Repeat("h", MaxHarnessBytes+1)}, nil, 400, httpapi.CodeInvalidRequest, []string{"harness", "64"}},
		{"model over its limit", "t1", map[string]any{"config": map[string]any{"model": strings.Repeat("m", MaxModelBytes+1)}}, nil, 400, httpapi.CodeInvalidRequest, []string{"config.model", "256"}},
		{"unknown tool", "t1", `{"config":{"tools":["echo","nope"]}}`, nil, 400, httpapi.CodeInvalidRequest, []string{"config.tools[1]", `"nope"`}},
		{"tool of another tenant", "t1", `{"config":{"tools":["secret"]}}`, nil, 400, httpapi.CodeInvalidRequest, []string{"config.tools[0]", `"secret"`}},
		{"tool listed twice", "t1", `{"config":{"tools":["echo","slow","echo"]}}`, nil, 400, httpapi.CodeInvalidRequest, []string{"config.tools[2]", `"echo"`, "twice"}},
		{"empty tool name", "t1", `{"config":{"tools":[""]}}`, nil, 400, httpapi.CodeInvalidRequest, []string{"config.tools[0]: must be a tool name, got an empty string"}},
		{"null tool name", "t1", `{"config":{"tools":["echo",null]}}`, nil, 400, httpapi.CodeInvalidRequest, []string{"config.tools[1]: must be a tool name, got null"}},
		{"tool name not a string", "t1", `{"config":{"tools":[1]}}`, nil, 400, httpapi.CodeInvalidRequest, []string{"config.tools[0]"}},
		{"model not a string", "t1", `{"config":{"model":1}}`, nil, 400, httpapi.CodeInvalidRequest, []string{"config.model"}},
		{"unknown config field", "t1", `{"config":{"tools":[],"modle":"x"}}`, nil, 400, httpapi.CodeInvalidRequest, []string{"config.modle"}},
		{"unknown field", "t1", `{"harnes":"pi"}`, nil, 400, httpapi.CodeInvalidRequest, []string{"harnes", "unknown field"}},
		{"unknown nested field", "t1", `{"config":{"toolz":[]}}`, nil, 400, httpapi.CodeInvalidRequest, []string{"toolz", "unknown field"}},
		{"nested field in the wrong case", "t1", `{"config":{"Tools":["echo"]}}`, nil, 400, httpapi.CodeInvalidRequest, []string{"config.Tools", "case-sensitive"}},
		{"wrong type", "t1", `{"config":{"tools":"echo"}}`, nil, 400, httpapi.CodeInvalidRequest, []string{"tools", "array"}},
		{"wrong type of harness", "t1", `{"harness":7}`, nil, 400, httpapi.CodeInvalidRequest, []string{"harness", "string"}},
		{"malformed JSON", "t1", `{"config":`, nil, 400, httpapi.CodeInvalidRequest, []string{"malformed JSON"}},
		{"trailing data", "t1", `{} {}`, nil, 400, httpapi.CodeInvalidRequest, []string{"after the JSON value"}},
		{"empty body", "t1", ``, nil, 400, httpapi.CodeInvalidRequest, []string{"body is empty: expected a JSON value"}},
		{"string with a lone surrogate", "t1", `{"harness":"\ud800"}`, nil, 400, httpapi.CodeInvalidRequest, []string{"harness: string has an unpaired UTF-16 surrogate"}},
		{"null body", "t1", `null`, nil, 400, httpapi.CodeInvalidRequest, []string{"body: must be a JSON object, got null"}},
		{"null body with spaces", "t1", " \n null ", nil, 400, httpapi.CodeInvalidRequest, []string{"body: must be a JSON object, got null"}},
		{"array body", "t1", `[]`, nil, 400, httpapi.CodeInvalidRequest, []string{"body: must be a JSON object, got an array"}},
		{"string body", "t1", `"config"`, nil, 400, httpapi.CodeInvalidRequest, []string{"body: must be a JSON object, got a string"}},
		{"number body", "t1", `1`, nil, 400, httpapi.CodeInvalidRequest, []string{"body: must be a JSON object, got a number"}},
		{"boolean body", "t1", `true`, nil, 400, httpapi.CodeInvalidRequest, []string{"body: must be a JSON object, got a boolean"}},
		{"body over the size limit", "t1", big, nil, 413, httpapi.CodeTooLarge, []string{"1048576"}},
		{"text content type", "t1", `{}`, []string{"Content-Type", "text/plain"}, 415, httpapi.CodeUnsupportedMedia, []string{"Content-Type must be application/json", "text/plain"}},
		{"no content type", "t1", `{}`, []string{"Content-Type", ""}, 415, httpapi.CodeUnsupportedMedia, []string{"Content-Type must be application/json"}},
		{"json with charset", "t1", `{}`, []string{"Content-Type", "application/json; charset=utf-8"}, 201, "", nil},
		{"json in another charset", "t1", `{}`, []string{"Content-Type", "application/json; charset=latin1"}, 415, httpapi.CodeUnsupportedMedia, []string{"charset", "latin1"}},
		{"no API key", "", `{}`, nil, 401, httpapi.CodeUnauthorized, []string{"authorization"}},
		{"wrong API key", "bogus", `{}`, nil, 401, httpapi.CodeUnauthorized, []string{"API key"}},
		{"basic auth", "", `{}`, []string{"Authorization", "Basic dTpw"}, 401, httpapi.CodeUnauthorized, []string{"bearer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.do("POST", "/sessions", tt.tenant, tt.body, tt.hdr...)
			if tt.status != 201 {
				wantRefusal(t, r, tt.status, tt.code, tt.want...)
				return
			}
			if r.status != 201 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			var s SessionJSON
			r.json(t, &s)
			if !strings.HasPrefix(s.ID, "ses_") || s.TenantID != tt.tenant || s.Status != "active" || s.Tools == nil {
				t.Errorf("session = %+v", s)
			}
			got := b.do("GET", "/sessions/"+s.ID, tt.tenant, nil)
			var again SessionJSON
			got.json(t, &again)
			if diff := cmp.Diff(s, again); diff != "" {
				t.Errorf("GET differs from POST (-post +get):\n%s", diff)
			}
		})
	}
	t.Run("stored fields", func(t *testing.T) {
		r := b.do("POST", "/sessions", "t1", `{"harness":"pi","config":{"model":"m1","tools":["echo"]}}`)
		var s SessionJSON
		r.json(t, &s)
		if s.Harness == nil || *s.Harness != "pi" || string(s.Config) != `{"model":"m1","tools":["echo"]}` || !slices.Equal(s.Tools, []string{"echo"}) {
			t.Errorf("session = %+v, config %s", s, s.Config)
		}
		evs := b.events("t1", s.ID)
		if len(evs) != 1 || evs[0].Type != "session.created" || evs[0].ID == "" {
			t.Errorf("events = %+v, want one session.created", evs)
		}
	})
	t.Run("unknown query parameter", func(t *testing.T) {
		wantRefusal(t, b.do("POST", "/sessions?debug=1", "t1", `{}`), 400, httpapi.CodeInvalidRequest, "debug")
	})
}

// TestTenantIsolation: whatever IDs a tenant sends, another tenant's
// sessions, calls and events are "not found".
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s1 := b.session("t1", "echo")
	_, c1 := b.call("t1", s1.ID, "echo", map[string]string{"text": "mine"}, 5)
	s2 := b.session("t2", "echo")
	_, c2 := b.call("t2", s2.ID, "echo", map[string]string{"text": "theirs"}, 5)
	tests := []struct {
		name, method, path string
		body               any
		hdr                []string
	}{
		{"get session", "GET", "/sessions/" + s1.ID, nil, nil},
		{"interrupt session", "POST", "/sessions/" + s1.ID + "/interrupt", nil, nil},
		{"close session", "POST", "/sessions/" + s1.ID + "/close", nil, nil},
		{"delete session", "DELETE", "/sessions/" + s1.ID, nil, nil},
		{"events page", "GET", "/sessions/" + s1.ID + "/events", nil, []string{"Accept", "application/json"}},
		{"events stream", "GET", "/sessions/" + s1.ID + "/events", nil, nil},
		{"call in session", "POST", "/sessions/" + s1.ID + "/tool_calls", map[string]any{"tool": "echo", "arguments": map[string]string{"text": "x"}}, nil},
		{"get call", "GET", "/tool_calls/" + c1.ID, nil, nil},
		{"wait for call", "GET", "/tool_calls/" + c1.ID + "?wait_seconds=1", nil, nil},
		{"cancel call", "POST", "/tool_calls/" + c1.ID + "/cancel", nil, nil},
		{"list calls of session", "GET", "/tool_calls?session_id=" + s1.ID, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantRefusal(t, b.do(tt.method, tt.path, "t2", tt.body, tt.hdr...), 404, httpapi.CodeNotFound, "not found")
		})
	}
	r := b.do("GET", "/tool_calls", "t2", nil)
	var list struct {
		ToolCalls []CallJSON `json:"tool_calls"`
	}
	r.json(t, &list)
	if len(list.ToolCalls) != 1 || list.ToolCalls[0].ID != c2.ID {
		t.Errorf("t2 lists %+v, want only its own call %s", list.ToolCalls, c2.ID)
	}
	if s := b.do("GET", "/sessions/"+s1.ID, "t1", nil); s.status != 200 {
		t.Errorf("t1 lost its own session after t2's attempts: %d", s.status)
	}
	if evs := b.events("t1", s1.ID); len(evs) != 3 {
		t.Errorf("t1 session events = %v, want session.created, tool.call, tool.result", eventTypes(evs))
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "echo")
	b.call("t1", s.ID, "echo", map[string]string{"text": "hi"}, 5)
	b.call("t1", s.ID, "echo", map[string]string{}, 5) // invalid_arguments
	if r := b.do("GET", "/catalog", "", nil); r.status != http.StatusUnauthorized {
		t.Fatalf("GET /catalog without a key: %d", r.status)
	}
	r := b.do("GET", "/metrics", "", nil)
	v := version.Get()
	for _, want := range []string{
		`tool_calls_total{error_code="",service="brain",status="succeeded",tool="echo",transport="http"} 1`,
		`tool_calls_total{error_code="invalid_arguments",service="brain",status="failed",tool="echo",transport="http"} 1`,
		`tool_call_duration_seconds_count{service="brain",status="succeeded",tool="echo",transport="http"} 1`,
		`tool_calls_in_flight{service="brain",tool="echo",transport="http"} 0`,
		`http_requests_total{code="401",method="GET",route="/catalog",service="brain"} 1`,
		`http_request_duration_seconds_count{method="POST",route="/sessions",service="brain"} 1`,
		`auth_failures_total{route="/catalog",service="brain"} 1`,
		`http_requests_in_flight{service="brain"} 1`, // this scrape
		`event_streams{service="brain"} 0`,
		`sessions_active{service="brain"} 1`,
		fmt.Sprintf(`build_info{goversion=%q,revision=%q,service="brain",version=%q} 1`, v.GoVersion, v.Revision, v.Version),
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestSessionEventsAfterContextDone(t *testing.T) {
	// An SSE stream ends when the server shuts down (Serve cancels request
	// contexts), so Shutdown does not hang on it.
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, evs := b.openSSE(ctx, "t1", s.ID)
	if ev := next(t, evs); ev.name != "session.created" {
		t.Fatalf("first event %+v", ev)
	}
	if r := b.do("GET", "/sessions/"+s.ID+"/events", "t1", nil, "Last-Event-ID", "x"); r.status != http.StatusBadRequest {
		t.Errorf("bad Last-Event-ID: %d", r.status)
	}
}

// TestRefusalsDoNotEchoHugeInput: a refusal repeats at most httpapi.MaxEcho bytes of
// any one value the client sent (a path ID, a header, a field name).
func TestRefusalsDoNotEchoHugeInput(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "echo")
	huge := strings.Repeat("x", 10_000)
	for _, tc := range []struct {
		name       string
		r          resp
		status     int
		code, want string
	}{
		{"session id", b.do("GET", "/sessions/ses_"+huge, "t1", nil), 404, httpapi.CodeNotFound, `session "ses_xxx`},
		{"call id", b.do("GET", "/tool_calls/call_"+huge, "t1", nil), 404, httpapi.CodeNotFound, `tool call "call_xxx`},
		{"last-event-id", b.do("GET", "/sessions/"+s.ID+"/events", "t1", nil, "Accept", "application/json", "Last-Event-ID", huge), 400, httpapi.CodeInvalidRequest, `last-event-id: want an event id`},
		{"field name", b.do("POST", "/sessions", "t1", []byte(`{"`+huge+`":1}`)), 400, httpapi.CodeInvalidRequest, "unknown field"},
		{"exactly httpapi.MaxEcho is kept whole", b.do("GET", "/sessions/"+strings.Repeat("y", httpapi.MaxEcho), "t1", nil), 404, httpapi.CodeNotFound, strings.Repeat("y", httpapi.MaxEcho) + `"`},
	} {
		wantRefusal(t, tc.r, tc.status, tc.code, tc.want)
		if len(tc.r.body) > 2*httpapi.MaxEcho {
			t.Errorf("%s: refusal of %d bytes: %.200s", tc.name, len(tc.r.body), tc.r.body)
		}
		if tc.name != "exactly httpapi.MaxEcho is kept whole" && !strings.Contains(string(tc.r.body), "…") {
			t.Errorf("%s: refusal does not mark the cut: %.200s", tc.name, tc.r.body)
		}
	}
}

// TestTwoAuthorizationHeaders: a request with two Authorization headers is
// refused even when both carry the right key (a proxy and brain could each
// read another), for the API and for event reads.
func TestTwoAuthorizationHeaders(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "echo")
	for _, path := range []string{"/catalog", "/sessions/" + s.ID + "/events"} {
		r := b.do("GET", path, "t1", nil, "Accept", "application/json", "+Authorization", "Bearer "+apiKeys["t1"])
		wantRefusal(t, r, 401, httpapi.CodeUnauthorized, "authorization: 2 Authorization headers; send one")
	}
}

// TestMaxRequestBytes: Options.MaxRequestBytes moves the body limit both
// ways (a tool call's arguments included), and New refuses a limit out of
// range before it touches the data dir.
func TestMaxRequestBytes(t *testing.T) {
	t.Parallel()
	const limit = 2 << 20 // twice the default
	b := startBrain(t, func(o *Options) { o.MaxRequestBytes = limit })
	s := b.session("t1", "echo")
	// echo's schema refuses pad, so the call fails without reaching the
	// tool; what counts here is that brain read the body (200, not 413).
	body := func(n int) string {
		head, tail := `{"tool":"echo","arguments":{"pad":"`, `"},"wait_seconds":10}`
		return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
	}
	if r := b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", body(limit)); r.status != 200 {
		t.Errorf("call of exactly %d bytes: %d %s", limit, r.status, r.body)
	}
	wantRefusal(t, b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", body(limit+1)), 413, httpapi.CodeTooLarge, "request body is larger than the limit of 2097152 bytes")

	small := startBrain(t, func(o *Options) { o.MaxRequestBytes = 64 })
	wantRefusal(t, small.do("POST", "/sessions", "t1", `{"harness":"`+strings.Repeat("h", 60)+`"}`), 413, httpapi.CodeTooLarge, "limit of 64 bytes")

	for _, n := range []int64{-1, MaxRequestBytesLimit + 1} {
		dir := filepath.Join(t.TempDir(), "data")
		_, err := New(context.Background(), Options{Config: hostConfig(t, "http://127.0.0.1:1"), DataDir: dir, MaxRequestBytes: n})
		if err == nil || !strings.Contains(err.Error(), "max request bytes: want 1..67108864") {
			t.Errorf("MaxRequestBytes %d: err %v", n, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("MaxRequestBytes %d: data dir made (%v)", n, err)
		}
	}
}

// syncBuffer is the log sink of brain tests, with the scan they share.
type syncBuffer struct{ servicetest.LogBuffer }

// warned reports whether b, a JSON log, has a WARN record whose attrs
// include each of want's keys with a value that contains want's.
func (b *syncBuffer) warned(want map[string]string) bool {
	for line := range strings.Lines(b.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["level"] != "WARN" {
			continue
		}
		match := true
		for k, v := range want {
			if _, ok := rec[k]; !ok || !strings.Contains(fmt.Sprint(rec[k]), v) {
				match = false
			}
		}
		if match {
			return true
		}
	}
	return false
}

// TestLogs: one access-log line per request with its request ID (the
// caller's X-Request-Id when it sent one), route, status, duration and
// tenant, a 401 included, and never the key; brain logs its shutdown. (That
// every line logged with a request's context carries its ID is
// tracing.LogHandler's, shown over HTTP and MCP in pkg/service.)
func TestLogs(t *testing.T) {
	t.Parallel()
	buf := &syncBuffer{}
	// Registered before startBrain, this runs after its cleanup has
	// stopped the server.
	t.Cleanup(func() {
		if !strings.Contains(buf.String(), `"msg":"brain shutting down: new calls are refused, calls in flight are cancelled"`) {
			t.Errorf("no shutdown line in the log:\n%s", buf.String())
		}
	})
	b := startBrain(t, func(o *Options) { o.Logger = service.NewLogger(buf, slog.LevelDebug) })
	s := b.session("t1", "echo")
	b.call("t1", s.ID, "echo", map[string]string{"text": "hi"}, 5)
	if r := b.do("GET", "/sessions/"+s.ID, "t1", nil, "X-Request-Id", "caller-get-1"); r.status != http.StatusOK {
		t.Fatalf("GET session: %d", r.status)
	}
	if r := b.do("GET", "/catalog", "", nil, "X-Request-Id", "caller-401", "Authorization", "Bearer wrong-key-123456789"); r.status != http.StatusUnauthorized {
		t.Fatalf("GET /catalog with a wrong key: %d", r.status)
	}

	var requests []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if rec["msg"] != "request" {
			continue
		}
		requests = append(requests, rec)
		if id, _ := rec["request_id"].(string); id == "" {
			t.Errorf("access-log line without request_id: %s", l)
		}
		for _, k := range []string{"route", "status", "duration_ms", "method", "path"} {
			if rec[k] == nil {
				t.Errorf("access-log line without %s: %s", k, l)
			}
		}
	}
	byID := map[string]map[string]any{}
	for _, r := range requests {
		byID[r["request_id"].(string)] = r
	}
	if r := byID["caller-get-1"]; r == nil || r["route"] != "/sessions/:id" || r["status"] != float64(200) || r["tenant"] != "t1" {
		t.Errorf("the GET session's line: %v", r)
	}
	if r := byID["caller-401"]; r == nil || r["route"] != "/catalog" || r["status"] != float64(401) {
		t.Errorf("the 401's line: %v", r)
	}
	if strings.Contains(buf.String(), "wrong-key-123456789") || strings.Contains(buf.String(), apiKeys["t1"]) {
		t.Errorf("a key reached the log:\n%s", buf.String())
	}
	if n := len(requests); n < 4 {
		t.Errorf("%d access-log lines for 4 requests:\n%s", n, buf.String())
	}
}
