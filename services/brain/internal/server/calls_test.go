package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/google/go-cmp/cmp"
)

func TestCreateCall(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "echo", "slow")
	tests := []struct {
		name   string
		body   any
		status int
		code   string
		want   []string // message parts for refusals
		// for accepted calls
		callStatus, errorCode, text string
		isError, unknown            bool
	}{
		{name: "succeeds", body: map[string]any{"tool": "echo", "arguments": map[string]string{"text": "hello"}, "wait_seconds": 5},
			status: 200, callStatus: "succeeded", text: "hello"},
		{name: "wait_seconds at its limit", body: map[string]any{"tool": "echo", "arguments": map[string]string{"text": "hi"}, "wait_seconds": MaxWaitSeconds},
			status: 200, callStatus: "succeeded", text: "hi"},
		{name: "arguments fail the schema", body: map[string]any{"tool": "echo", "arguments": map[string]string{"text": strings.Repeat("x", 101)}, "wait_seconds": 5},
			status: 200, callStatus: "failed", errorCode: "invalid_arguments", isError: true, text: "/text"},
		{name: "arguments miss a required field", body: map[string]any{"tool": "echo", "wait_seconds": 5},
			status: 200, callStatus: "failed", errorCode: "invalid_arguments", isError: true, text: "text"},
		{name: "no wait answers 202", body: map[string]any{"tool": "slow"}, status: 202, callStatus: "running"},
		{name: "refused without a wait answers its end", body: map[string]any{"tool": "echo", "arguments": map[string]any{"text": 5}},
			status: 200, callStatus: "failed", errorCode: "invalid_arguments", isError: true, text: "/text"},
		{name: "refused with wait 0 answers its end", body: map[string]any{"tool": "echo", "arguments": map[string]any{"extra": true, "text": "a"}, "wait_seconds": 0},
			status: 200, callStatus: "failed", errorCode: "invalid_arguments", isError: true, text: "extra"},
		{name: "tool not enabled", body: map[string]any{"tool": "progress"}, status: 400, code: httpapi.CodeInvalidRequest, want: []string{"tool", `"progress"`, "not enabled"}},
		{name: "tool of another tenant", body: map[string]any{"tool": "secret"}, status: 400, code: httpapi.CodeInvalidRequest, want: []string{"tool", `"secret"`}},
		{name: "no tool", body: map[string]any{"arguments": map[string]string{}}, status: 400, code: httpapi.CodeInvalidRequest, want: []string{"tool", "required"}},
		{name: "wait_seconds over its limit", body: map[string]any{"tool": "echo", "wait_seconds": MaxWaitSeconds + 1}, status: 400, code: httpapi.CodeInvalidRequest, want: []string{"wait_seconds", "0..60", "61"}},
		{name: "negative wait_seconds", body: map[string]any{"tool": "echo", "wait_seconds": -1}, status: 400, code: httpapi.CodeInvalidRequest, want: []string{"wait_seconds"}},
		{name: "wait_seconds of wrong type", body: `{"tool":"echo","wait_seconds":"5"}`, status: 400, code: httpapi.CodeInvalidRequest, want: []string{"wait_seconds", "integer"}},
		{name: "fractional wait_seconds", body: `{"tool":"echo","wait_seconds":1.5}`, status: 400, code: httpapi.CodeInvalidRequest, want: []string{"wait_seconds", "integer"}},
		{name: "arguments not an object", body: `{"tool":"echo","arguments":["a"]}`, status: 400, code: httpapi.CodeInvalidRequest, want: []string{"arguments", "object"}},
		{name: "unknown field", body: `{"tool":"echo","args":{}}`, status: 400, code: httpapi.CodeInvalidRequest, want: []string{"args", "unknown field"}},
		{name: "field in the wrong case", body: `{"Tool":"echo","arguments":{"text":"a"}}`, status: 400, code: httpapi.CodeInvalidRequest, want: []string{"Tool", "unknown field", `did you mean "tool"`}},
		{name: "malformed JSON", body: `{"tool":`, status: 400, code: httpapi.CodeInvalidRequest, want: []string{"malformed JSON"}},
		{name: "null body", body: `null`, status: 400, code: httpapi.CodeInvalidRequest, want: []string{"body: must be a JSON object, got null"}},
		{name: "body over the size limit", body: `{"tool":"echo","arguments":{"text":"` + strings.Repeat("a", MaxBodyBytes) + `"}}`, status: 413, code: httpapi.CodeTooLarge, want: []string{"1048576"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", tt.body)
			if tt.code != "" {
				wantRefusal(t, r, tt.status, tt.code, tt.want...)
				return
			}
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			var c CallJSON
			r.json(t, &c)
			if c.Status != tt.callStatus || c.SessionID != s.ID || c.TenantID != "t1" || !strings.HasPrefix(c.ID, "call_") {
				t.Errorf("call = %+v", c)
			}
			if tt.callStatus == "running" {
				if string(c.Result) != "null" || c.FinishedAt != nil || c.StartedAt == nil {
					t.Errorf("pending call has result %s, finished_at %v", c.Result, c.FinishedAt)
				}
				return
			}
			text, res := resultText(t, c.Result)
			if res.IsError != tt.isError || res.UnknownOutcome != tt.unknown || c.UnknownOutcome != tt.unknown || !strings.Contains(text, tt.text) {
				t.Errorf("result = %s, want is_error %v unknown_outcome %v text ~ %q", c.Result, tt.isError, tt.unknown, tt.text)
			}
			if got := deref(c.ErrorCode); got != tt.errorCode {
				t.Errorf("error_code = %q, want %q", got, tt.errorCode)
			}
			if c.FinishedAt == nil {
				t.Error("finished call without finished_at")
			}
			g := b.do("GET", "/tool_calls/"+c.ID, "t1", nil)
			var again CallJSON
			g.json(t, &again)
			if g.status != 200 {
				t.Errorf("GET finished call: %d", g.status)
			}
			if diff := cmp.Diff(c, again); diff != "" {
				t.Errorf("GET differs from POST (-post +get):\n%s", diff)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestWaitAndGet(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "slow")
	st, c := b.call("t1", s.ID, "slow", nil, 0)
	if st != http.StatusAccepted {
		t.Fatalf("status %d", st)
	}
	waitStarted(t, b.tools)
	tests := []struct {
		query  string
		status int
		want   []string
	}{
		{"?wait_seconds=61", 400, []string{"wait_seconds", "0..60"}},
		{"?wait_seconds=-1", 400, []string{"wait_seconds"}},
		{"?wait_seconds=abc", 400, []string{"wait_seconds", "integer"}},
		// The integers a body's wait_seconds takes, and no others.
		{"?wait_seconds=%2B5", 400, []string{"wait_seconds", "integer", `"+5"`}},
		{"?wait_seconds=%205", 400, []string{"wait_seconds", "integer"}},
		{"?wait_seconds=+5", 400, []string{"wait_seconds", "integer", `" 5"`, `a "+" in a query string is a space`}},
		{"?wait_seconds=5%20", 400, []string{"wait_seconds", "integer", `"5 "`}},
		{"?wait_seconds=0x1", 400, []string{"wait_seconds", "integer"}},
		{"?wait_seconds=1.5", 400, []string{"wait_seconds", "integer"}},
		{"?wait_seconds=", 400, []string{"wait_seconds", "integer"}},
		{"?wait_seconds=1e2", 400, []string{"wait_seconds", "0..60"}},
		{"?wait_seconds=99999999999999999999999", 400, []string{"wait_seconds", "integer"}},
		{"?wait_seconds=0e1", 202, nil},
		{"?wait_seconds=1e0", 202, nil},
		{"?wait_seconds=0.0", 202, nil},
		{"?wait_seconds=-0", 202, nil},
		{"?wait_seconds=1&wait_seconds=2", 400, []string{"wait_seconds", "2 times"}},
		{"?wait=1", 400, []string{"wait", "unknown query parameter"}},
		{"", 202, nil},
		{"?wait_seconds=0", 202, nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			r := b.do("GET", "/tool_calls/"+c.ID+tt.query, "t1", nil)
			if tt.status >= 400 {
				wantRefusal(t, r, tt.status, httpapi.CodeInvalidRequest, tt.want...)
				return
			}
			var got CallJSON
			r.json(t, &got)
			if r.status != tt.status || got.Status != "running" {
				t.Errorf("%d %s", r.status, r.body)
			}
		})
	}
	start := time.Now()
	r := b.do("GET", "/tool_calls/"+c.ID+"?wait_seconds=1", "t1", nil)
	if r.status != http.StatusAccepted || time.Since(start) < 900*time.Millisecond {
		t.Errorf("wait 1 s on a running call: %d after %v", r.status, time.Since(start))
	}
	go func() { time.Sleep(100 * time.Millisecond); b.tools.releaseAll() }()
	r = b.do("GET", "/tool_calls/"+c.ID+"?wait_seconds=10", "t1", nil)
	var done CallJSON
	r.json(t, &done)
	if r.status != 200 || done.Status != "succeeded" {
		t.Errorf("wait for release: %d %s", r.status, r.body)
	}
	wantRefusal(t, b.do("GET", "/tool_calls/call_nope", "t1", nil), 404, httpapi.CodeNotFound, "call_nope")
}

func TestCancelCall(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "slow", "echo")
	_, c := b.call("t1", s.ID, "slow", nil, 0)
	waitStarted(t, b.tools)
	tests := []struct {
		name   string
		body   any
		hdr    []string
		status int
		code   string
		want   []string
	}{
		{"unknown field in body", `{"reason":"x"}`, nil, 400, httpapi.CodeInvalidRequest, []string{"reason", "unknown field"}},
		{"body of wrong content type", `{}`, []string{"Content-Type", "text/plain"}, 415, httpapi.CodeUnsupportedMedia, []string{"Content-Type must be application/json"}},
		{"unknown call", nil, nil, 404, httpapi.CodeNotFound, []string{"not found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := c.ID
			if tt.status == 404 {
				id = "call_nope"
			}
			wantRefusal(t, b.do("POST", "/tool_calls/"+id+"/cancel", "t1", tt.body, tt.hdr...), tt.status, tt.code, tt.want...)
		})
	}
	r := b.do("POST", "/tool_calls/"+c.ID+"/cancel", "t1", nil)
	var got CallJSON
	r.json(t, &got)
	text, res := resultText(t, got.Result)
	if r.status != 200 || got.Status != "cancelled" || !res.IsError || !res.UnknownOutcome || !got.UnknownOutcome || deref(got.ErrorCode) != "cancelled" {
		t.Errorf("cancel in flight: %d %s", r.status, r.body)
	}
	if !strings.Contains(text, "cancel") {
		t.Errorf("result text %q does not say cancelled", text)
	}
	wantRefusal(t, b.do("POST", "/tool_calls/"+c.ID+"/cancel", "t1", `{}`), 409, httpapi.CodeConflict, c.ID, "cancelled")
	_, done := b.call("t1", s.ID, "echo", map[string]string{"text": "x"}, 5)
	wantRefusal(t, b.do("POST", "/tool_calls/"+done.ID+"/cancel", "t1", nil), 409, httpapi.CodeConflict, "succeeded")
	evs := b.events("t1", s.ID)
	if diff := cmp.Diff([]string{"session.created", "tool.call", "tool.result", "tool.call", "tool.result"}, eventTypes(evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The tool saw its request end.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.tools.mu.Lock()
		n := b.tools.cancelled
		b.tools.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tool saw %d cancelled requests, want 1", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestInterruptAndClose(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "slow", "echo")
	var calls []CallJSON
	for range 2 {
		_, c := b.call("t1", s.ID, "slow", nil, 0)
		waitStarted(t, b.tools)
		calls = append(calls, c)
	}
	steps := []struct {
		name, method, path string
		body               any
		status             int
		want               []string
		sessionStatus      string
	}{
		{"interrupt", "POST", "/interrupt", nil, 200, nil, "interrupted"},
		{"call in interrupted session", "POST", "/tool_calls", map[string]any{"tool": "echo", "arguments": map[string]string{"text": "x"}}, 409, []string{"interrupted"}, ""},
		{"interrupt again", "POST", "/interrupt", nil, 409, []string{"interrupted"}, ""},
		{"interrupt with unknown field", "POST", "/interrupt", `{"now":true}`, 400, []string{"now"}, ""},
		{"interrupt with a null body", "POST", "/interrupt", `null`, 400, []string{"body: must be a JSON object, got null"}, ""},
		{"close", "POST", "/close", `{}`, 200, nil, "closed"},
		{"close again", "POST", "/close", nil, 409, []string{"closed"}, ""},
		{"delete closed", "DELETE", "", nil, 409, []string{"closed"}, ""},
		{"call in closed session", "POST", "/tool_calls", map[string]any{"tool": "echo"}, 409, []string{"closed"}, ""},
	}
	for _, st := range steps {
		r := b.do(st.method, "/sessions/"+s.ID+st.path, "t1", st.body)
		switch {
		case st.status == 200:
			var got SessionJSON
			r.json(t, &got)
			if r.status != 200 || got.Status != st.sessionStatus {
				t.Errorf("%s: %d %s", st.name, r.status, r.body)
			}
		case st.status == 400:
			wantRefusal(t, r, 400, httpapi.CodeInvalidRequest, st.want...)
		default:
			wantRefusal(t, r, st.status, httpapi.CodeConflict, st.want...)
		}
		if st.name == "interrupt" {
			for _, c := range calls {
				g := b.do("GET", "/tool_calls/"+c.ID, "t1", nil)
				var got CallJSON
				g.json(t, &got)
				_, res := resultText(t, got.Result)
				if g.status != 200 || got.Status != "cancelled" || !res.IsError || !res.UnknownOutcome {
					t.Errorf("call %s after interrupt: %d %s", c.ID, g.status, g.body)
				}
			}
		}
	}
	want := []string{"session.created", "tool.call", "tool.call", "tool.result", "tool.result", "session.interrupted", "session.closed"}
	if diff := cmp.Diff(want, eventTypes(b.events("t1", s.ID))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// DELETE closes too.
	s2 := b.session("t1")
	r := b.do("DELETE", "/sessions/"+s2.ID, "t1", nil)
	var got SessionJSON
	r.json(t, &got)
	if r.status != 200 || got.Status != "closed" {
		t.Errorf("DELETE: %d %s", r.status, r.body)
	}
}

func TestListCalls(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s1 := b.session("t1", "echo", "slow")
	s2 := b.session("t1", "echo")
	for i := range 3 {
		b.call("t1", s1.ID, "echo", map[string]string{"text": fmt.Sprint(i)}, 5)
	}
	b.call("t1", s1.ID, "echo", map[string]string{}, 5) // failed
	b.call("t1", s2.ID, "echo", map[string]string{"text": "s2"}, 5)
	b.call("t1", s1.ID, "slow", nil, 0)
	waitStarted(t, b.tools)
	tests := []struct {
		query  string
		status int
		n      int
		want   []string
	}{
		{"", 200, 6, nil},
		{"?session_id=" + s1.ID, 200, 5, nil},
		{"?session_id=" + s2.ID, 200, 1, nil},
		{"?tool=echo", 200, 5, nil},
		{"?tool=slow&status=running", 200, 1, nil},
		{"?status=succeeded", 200, 4, nil},
		{"?status=failed&session_id=" + s1.ID, 200, 1, nil},
		{"?status=cancelled", 200, 0, nil},
		{"?tool=nope", 200, 0, nil},
		{"?limit=2", 200, 2, nil},
		{"?limit=1000", 200, 6, nil},
		{"?limit=1001", 400, 0, []string{"limit", "1..1000"}},
		{"?limit=0", 400, 0, []string{"limit"}},
		{"?status=done", 400, 0, []string{"status", `"done"`, "queued", "timed_out"}},
		{"?state=running", 400, 0, []string{"state", "unknown query parameter"}},
		{"?session_id=ses_nope", 404, 0, []string{"ses_nope"}},
		{"?session_id=", 400, 0, []string{"session_id", "must not be empty"}},
		{"?session_id=&tool=echo", 400, 0, []string{"session_id", "must not be empty"}},
		{"?tool=", 400, 0, []string{"tool", "must not be empty"}},
		{"?status=", 400, 0, []string{"status", "must not be empty"}},
		{"?limit=", 400, 0, []string{"limit", "integer"}},
		{"?after=", 400, 0, []string{"after", "must not be empty"}},
		{"?after=call_nope", 400, 0, []string{"after", "call_nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			r := b.do("GET", "/tool_calls"+tt.query, "t1", nil)
			if tt.status != 200 {
				code := httpapi.CodeInvalidRequest
				if tt.status == 404 {
					code = httpapi.CodeNotFound
				}
				wantRefusal(t, r, tt.status, code, tt.want...)
				return
			}
			var list struct {
				ToolCalls []CallJSON `json:"tool_calls"`
			}
			r.json(t, &list)
			if r.status != 200 || len(list.ToolCalls) != tt.n {
				t.Errorf("%d calls, want %d: %s", len(list.ToolCalls), tt.n, r.body)
			}
		})
	}
}

// TestListCallsPaging: pages of limit calls chained by next_after list
// every call exactly once, in order, with has_more false on the last; a
// cursor from another tenant is refused like an unknown one.
func TestListCallsPaging(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "echo")
	var want []string
	for i := range 7 {
		_, c := b.call("t1", s.ID, "echo", map[string]string{"text": fmt.Sprint(i)}, 5)
		want = append(want, c.ID)
	}
	var got []string
	after := ""
	for page := 0; ; page++ {
		path := "/tool_calls?limit=3&session_id=" + s.ID
		if after != "" {
			path += "&after=" + after
		}
		r := b.do("GET", path, "t1", nil)
		var list struct {
			ToolCalls []CallJSON `json:"tool_calls"`
			HasMore   bool       `json:"has_more"`
			NextAfter string     `json:"next_after"`
		}
		r.json(t, &list)
		for _, c := range list.ToolCalls {
			got = append(got, c.ID)
		}
		if !list.HasMore {
			if list.NextAfter != "" || page != 2 {
				t.Fatalf("last page %d: next_after %q", page, list.NextAfter)
			}
			break
		}
		if len(list.ToolCalls) != 3 || list.NextAfter != list.ToolCalls[2].ID {
			t.Fatalf("page %d: %d calls, next_after %q", page, len(list.ToolCalls), list.NextAfter)
		}
		after = list.NextAfter
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged\n%v\nwant\n%v", got, want)
	}
	r := b.do("GET", "/tool_calls?after="+want[0], "t2", nil)
	wantRefusal(t, r, 400, httpapi.CodeInvalidRequest, "after", want[0])
}

func TestTraceparent(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "echo")
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r := b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", map[string]any{"tool": "echo", "arguments": map[string]string{"text": "x"}, "wait_seconds": 5}, "traceparent", tp)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	b.call("t1", s.ID, "echo", map[string]string{"text": "untraced"}, 5)
	b.tools.mu.Lock()
	defer b.tools.mu.Unlock()
	got := b.tools.traceparent
	if len(got) != 2 || !strings.HasPrefix(got[0], "00-4bf92f3577b34da6a3ce929d0e0e4736-") || got[1] != "" {
		t.Errorf("traceparent at the tool = %q, want the trace of the request, then none", got)
	}
}

// TestShutdownCancelsCalls: Close ends calls still in flight as cancelled
// with their tool.result recorded, so a restart finds nothing to recover.
func TestShutdownCancelsCalls(t *testing.T) {
	t.Parallel()
	ts := newToolServer(t)
	dir := t.TempDir()
	cfg := hostConfig(t, ts.URL)
	srv, err := New(context.Background(), Options{Config: cfg, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	b := &brain{t: t, srv: srv, tools: ts, dir: dir}
	hs := newHTTPTestServer(t, srv)
	b.url = hs
	s := b.session("t1", "slow")
	_, c := b.call("t1", s.ID, "slow", nil, 0)
	waitStarted(t, ts)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv2, err := New(context.Background(), Options{Config: cfg, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	got, err := srv2.store.Call(context.Background(), "t1", c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "cancelled" || got.ErrorCode != "cancelled" || !got.UnknownOutcome {
		t.Errorf("call after shutdown = %+v", got)
	}
}

// TestListCallsAcrossSessions: the tenant's list, across sessions, is in
// the order the calls were made, and paging through it one call at a time
// sees every call once. (Event IDs are numbered per session, so an order by
// a call's tool.call event ID interleaved sessions and paging skipped
// calls.)
func TestListCallsAcrossSessions(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	a, z := b.session("t1", "echo"), b.session("t1", "echo")
	var want []string
	for i := range 3 {
		_, c := b.call("t1", a.ID, "echo", map[string]string{"text": fmt.Sprint(i)}, 5)
		want = append(want, c.ID)
	}
	for i := range 3 {
		_, c := b.call("t1", z.ID, "echo", map[string]string{"text": fmt.Sprint(i)}, 5)
		want = append(want, c.ID)
	}
	var got []string
	after := ""
	for range len(want) + 1 {
		path := "/tool_calls?limit=1"
		if after != "" {
			path += "&after=" + after
		}
		var list struct {
			ToolCalls []CallJSON `json:"tool_calls"`
			HasMore   bool       `json:"has_more"`
			NextAfter string     `json:"next_after"`
		}
		b.do("GET", path, "t1", nil).json(t, &list)
		for _, c := range list.ToolCalls {
			got = append(got, c.ID)
		}
		if !list.HasMore {
			break
		}
		after = list.NextAfter
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged one at a time\n%v\nwant\n%v", got, want)
	}
}

// TestWaiterLeaves: a client that leaves while it waits on its call
// (wait_seconds) is logged as gone (499), not as answered; its call goes
// on and ends as usual.
func TestWaiterLeaves(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	b := startBrain(t, func(o *Options) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	s := b.session("t1", "slow")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", b.url+"/sessions/"+s.ID+"/tool_calls", strings.NewReader(`{"tool":"slow","wait_seconds":30}`))
	req.Header.Set("Authorization", "Bearer "+apiKeys["t1"])
	req.Header.Set("Content-Type", "application/json")
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("the waiter got %d before it left", res.StatusCode)
	}
	started := waitStarted(t, b.tools)
	var line map[string]any
	for deadline := time.Now().Add(5 * time.Second); line == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for l := range strings.Lines(logs.String()) {
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == "request" && rec["method"] == "POST" && rec["route"] == "/sessions/:id/tool_calls" {
				line = rec
			}
		}
	}
	if line == nil || line["status"] != float64(httpapi.StatusClientClosedRequest) {
		t.Errorf("access log of the waiter that left: %v, want status %d", line, httpapi.StatusClientClosedRequest)
	}
	b.tools.releaseAll()
	if status, c := b.getCall("t1", started.CallID, 10); status != http.StatusOK || c.Status != "succeeded" {
		t.Errorf("the call after its waiter left: %d %s, want it succeeded", status, c.Status)
	}
}
