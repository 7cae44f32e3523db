package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/jobs"
	jsonschema "github.com/brain-tools/suite/pkg/schema"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/sse"
	"github.com/brain-tools/suite/pkg/tool"
)

type fixture struct {
	t   *testing.T
	svc *Service
	url string
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	return newFixtureLogged(t, cfg, nil)
}

// newFixtureLogged is newFixture with the service logging to logger.
func newFixtureLogged(t *testing.T, cfg Config, logger *slog.Logger) *fixture {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.PageURL == "" {
		cfg.PageURL = "http://operator.test"
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = 50 * time.Millisecond
	}
	svc, err := New(context.Background(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	srv := &service.Server{Name: "local", Config: service.Config{Token: "tools-key", Heartbeat: 100 * time.Millisecond, StreamAfter: 5 * time.Second, MaxRequestBytes: 1 << 20}, Tools: svc.Tools()}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		svc.Close()
	})
	return &fixture{t: t, svc: svc, url: ts.URL}
}

func (f *fixture) post(ctx context.Context, name string, req tool.Request) *http.Response {
	f.t.Helper()
	body, _ := json.Marshal(req)
	hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url+"/tools/"+name, bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json, text/event-stream")
	hr.Header.Set("Authorization", "Bearer tools-key")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		f.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		f.t.Fatalf("%s: status %d: %s", name, resp.StatusCode, data)
	}
	return resp
}

func request(tenant, session, call string, args any) tool.Request {
	a, _ := json.Marshal(args)
	return tool.Request{TenantID: tenant, SessionID: session, CallID: call, Arguments: a}
}

// stream is one request_approval call read as the host reads it.
type stream struct {
	progress []Progress
	result   *tool.Result
	err      error
}

// readStream reads events until the result; onProgress runs after each
// progress event.
func readStream(t *testing.T, resp *http.Response, onProgress func(Progress)) stream {
	t.Helper()
	defer resp.Body.Close()
	var s stream
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		data, _ := io.ReadAll(resp.Body)
		s.result, s.err = tool.DecodeResult(data)
		return s
	}
	for ev, err := range sse.Read(resp.Body, 1<<20) {
		if err != nil {
			s.err = err
			return s
		}
		switch ev.Name {
		case "progress":
			var p Progress
			if err := json.Unmarshal([]byte(ev.Data), &p); err != nil {
				t.Fatalf("progress %q: %v", ev.Data, err)
			}
			s.progress = append(s.progress, p)
			if onProgress != nil {
				onProgress(p)
			}
		case "result":
			s.result, s.err = tool.DecodeResult([]byte(ev.Data))
		default:
			t.Fatalf("unexpected event %q", ev.Name)
		}
	}
	return s
}

func decision(t *testing.T, r *tool.Result) Decision {
	t.Helper()
	var d Decision
	if err := json.Unmarshal(r.StructuredContent, &d); err != nil {
		t.Fatalf("structured_content %s: %v", r.StructuredContent, err)
	}
	return d
}

func TestRequestApprovalOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		decide   func(f *fixture, id string)
		timeout  int
		isError  bool
		status   Status
		operator string
		text     []string
	}{
		{
			name:     "approved",
			decide:   func(f *fixture, id string) { f.svc.Decide(context.Background(), id, Approved, "alice", "go ahead") },
			status:   Approved,
			operator: "alice",
			text:     []string{"Approved by operator alice", `Comment: "go ahead"`},
		},
		{
			name:     "denied",
			decide:   func(f *fixture, id string) { f.svc.Decide(context.Background(), id, Denied, "bob", "not on a Friday") },
			isError:  true,
			status:   Denied,
			operator: "bob",
			text:     []string{"Denied by operator bob", "not on a Friday"},
		},
		{
			name:     "expired",
			timeout:  1,
			isError:  true,
			status:   Expired,
			operator: SystemOperator,
			text:     []string{"Expired: no operator answered", "Nobody denied it"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{})
			args := map[string]any{"action": "restart the database", "details": "systemctl restart postgresql\non db-1"}
			if tt.timeout > 0 {
				args["timeout_seconds"] = tt.timeout
			}
			resp := f.post(context.Background(), "request_approval", request("t1", "s1", "c1", args))
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Fatalf("content type %q: progress must come at once over SSE", ct)
			}
			s := readStream(t, resp, func(p Progress) {
				if tt.decide != nil {
					tt.decide(f, p.ApprovalID)
				}
			})
			if s.err != nil || s.result == nil {
				t.Fatalf("stream: %v", s.err)
			}
			if len(s.progress) != 1 {
				t.Fatalf("%d progress events, want 1", len(s.progress))
			}
			p := s.progress[0]
			if p.Status != "waiting_for_operator" || !jobs.ValidID(p.ApprovalID) || p.URL != "http://operator.test/approval/"+p.ApprovalID {
				t.Fatalf("progress = %+v", p)
			}
			if s.result.IsError != tt.isError {
				t.Fatalf("is_error = %v, want %v: %+v", s.result.IsError, tt.isError, s.result)
			}
			d := decision(t, s.result)
			if d.Decision != tt.status || d.Operator != tt.operator || d.ApprovalID != p.ApprovalID || d.Action != "restart the database" {
				t.Fatalf("decision = %+v", d)
			}
			for _, want := range tt.text {
				if !strings.Contains(s.result.Content[0].Text, want) {
					t.Errorf("text %q lacks %q", s.result.Content[0].Text, want)
				}
			}
			if tt.status == Expired && strings.Contains(s.result.Content[0].Text, "Denied") {
				t.Errorf("an expiry reads like a denial: %q", s.result.Content[0].Text)
			}
		})
	}
}

func TestRequestApprovalHeartbeats(t *testing.T) {
	f := newFixture(t, Config{})
	resp := f.post(context.Background(), "request_approval", request("t1", "s1", "c1", map[string]any{"action": "x"}))
	defer resp.Body.Close()
	// Read raw lines: comments are what keep the stream alive.
	buf := make([]byte, 4096)
	var got strings.Builder
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && strings.Count(got.String(), ": heartbeat") < 2 {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if strings.Count(got.String(), ": heartbeat") < 2 {
		t.Fatalf("no heartbeats on a waiting stream: %q", got.String())
	}
}

func TestSameCallAttachesToSameApproval(t *testing.T) {
	f := newFixture(t, Config{})
	req := request("t1", "s1", "c1", map[string]any{"action": "pay invoice 7", "details": "EUR 120"})
	ids := make(chan string, 2)
	results := make(chan stream, 2)
	for range 2 {
		go func() {
			resp := f.post(context.Background(), "request_approval", req)
			results <- readStream(t, resp, func(p Progress) { ids <- p.ApprovalID })
		}()
	}
	a, b := <-ids, <-ids
	if a != b {
		t.Fatalf("the same call made two approvals: %s and %s", a, b)
	}
	pending, _ := f.svc.store.ListPending(context.Background(), 10)
	if len(pending) != 1 {
		t.Fatalf("%d pending approvals, want 1", len(pending))
	}
	f.svc.Decide(context.Background(), a, Approved, "alice", "")
	for range 2 {
		s := <-results
		if s.result == nil || s.result.IsError {
			t.Fatalf("attached stream: %+v %v", s.result, s.err)
		}
	}
	// Sent again after the decision: the decision at once, no new approval.
	s := readStream(t, f.post(context.Background(), "request_approval", req), nil)
	if len(s.progress) != 0 || s.result == nil || s.result.IsError || decision(t, s.result).ApprovalID != a {
		t.Fatalf("after decision: %+v", s)
	}
	// The same call with other details is refused, never a second approval.
	other := request("t1", "s1", "c1", map[string]any{"action": "pay invoice 7", "details": "EUR 12000"})
	s = readStream(t, f.post(context.Background(), "request_approval", other), nil)
	if s.result == nil || !s.result.IsError || !strings.Contains(s.result.Content[0].Text, "already requested approval "+a) {
		t.Fatalf("other details: %+v", s.result)
	}
}

// openApproval posts request_approval for call and returns the approval
// ID of its progress event, with the stream's cancel (which drops it).
func openApproval(t *testing.T, f *fixture, call string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp := f.post(ctx, "request_approval", request("t1", "s1", call, map[string]any{"action": "x"}))
	for ev, err := range sse.Read(resp.Body, 1<<20) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Name == "progress" {
			var p Progress
			json.Unmarshal([]byte(ev.Data), &p)
			return p.ApprovalID, func() { cancel(); resp.Body.Close() }
		}
	}
	t.Fatal("no progress event")
	return "", nil
}

// detached waits until no stream of f's service waits on id: the
// service saw the drop.
func detached(t *testing.T, f *fixture, id string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		f.svc.mu.Lock()
		n := f.svc.streams[id]
		f.svc.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the service did not see the stream drop")
		}
	}
}

// TestDroppedStreamGrace: when the last stream waiting on an approval
// drops, the approval is withdrawn (cancelled by system, "the caller
// stopped waiting") at once with no grace, after the grace when nobody
// sends the call again, and never when the same call comes back within
// the grace: the operator's answer then reaches the new stream. A
// shutdown drops the withdrawal; the approval stays pending. On both
// stores.
func TestDroppedStreamGrace(t *testing.T) {
	// Long enough that the test acts well within it on a loaded machine
	// (200 ms was not, under a full make test on PostgreSQL).
	const grace = 1500 * time.Millisecond
	tests := []struct {
		name     string
		grace    time.Duration
		back     bool // the same call is sent again within the grace
		shutdown bool // the service shuts down within the grace
		want     Status
	}{
		{name: "no grace: cancelled at once", want: Cancelled},
		{name: "nobody comes back: cancelled after the grace", grace: grace, want: Cancelled},
		{name: "the same call comes back: pending, answered on the new stream", grace: grace, back: true, want: Approved},
		{name: "shutdown within the grace: stays pending", grace: grace, shutdown: true, want: Pending},
	}
	stores := map[string]func(t *testing.T) Config{
		"sqlite":   func(t *testing.T) Config { return Config{DataDir: t.TempDir()} },
		"postgres": func(t *testing.T) Config { return Config{DatabaseURL: pg.NewDatabase(t)} },
	}
	for storeName, cfgOf := range stores {
		for _, tt := range tests {
			t.Run(storeName+"/"+tt.name, func(t *testing.T) {
				cfg := cfgOf(t)
				cfg.ReattachGrace = tt.grace
				f := newFixture(t, cfg)
				ctx := context.Background()
				id, drop := openApproval(t, f, "c1")
				w := f.svc.watch(id)
				defer f.svc.unwatch(id, w)
				drop()
				detached(t, f, id)
				dropped := time.Now()
				due := dropped.Add(tt.grace) // when the withdrawal would fire
				if tt.grace > 0 {
					if a, _ := f.svc.store.Get(ctx, id); a.Status != Pending {
						t.Fatalf("right after the drop, within the grace: %s, want pending", a.Status)
					}
					at, ok := f.svc.Withdrawal(id)
					if !ok || at.Before(dropped.Add(-tt.grace)) || at.After(dropped.Add(tt.grace)) {
						t.Errorf("Withdrawal(%s) = %s %v, want about %s from now", id, at, ok, tt.grace)
					}
					if ok {
						due = at
					}
				}
				switch {
				case tt.back:
					results := make(chan stream, 1)
					ids := make(chan string, 1)
					go func() {
						resp := f.post(ctx, "request_approval", request("t1", "s1", "c1", map[string]any{"action": "x"}))
						results <- readStream(t, resp, func(p Progress) { ids <- p.ApprovalID })
					}()
					select {
					case again := <-ids:
						if again != id {
							t.Fatalf("the call sent again got approval %s, want %s", again, id)
						}
					case s := <-results:
						t.Fatalf("the call sent again within the grace was answered at once: %+v %v", s.result, s.err)
					case <-time.After(5 * time.Second):
						t.Fatal("no progress for the call sent again")
					}
					if _, ok := f.svc.Withdrawal(id); ok {
						t.Error("a withdrawal is still due after the call came back")
					}
					time.Sleep(time.Until(due) + 300*time.Millisecond)
					if a, _ := f.svc.store.Get(ctx, id); a.Status != Pending {
						t.Fatalf("past the grace with the call back: %s (%s), want pending", a.Status, a.Comment)
					}
					if _, err := f.svc.Decide(ctx, id, Approved, "alice", "ok"); err != nil {
						t.Fatal(err)
					}
					s := <-results
					if s.result == nil || s.result.IsError || decision(t, s.result).ApprovalID != id {
						t.Fatalf("the new stream: %+v %v", s.result, s.err)
					}
				case tt.shutdown:
					f.svc.Close()
					time.Sleep(time.Until(due) + 300*time.Millisecond)
					var st *Store
					var err error
					if cfg.DatabaseURL != "" {
						st, err = OpenPostgres(ctx, PostgresOptions{URL: cfg.DatabaseURL})
					} else {
						st, err = OpenSQLite(ctx, cfg.DataDir+"/approvals.db")
					}
					if err != nil {
						t.Fatal(err)
					}
					defer st.Close()
					if a, err := st.Get(ctx, id); err != nil || a.Status != Pending {
						t.Fatalf("after a shutdown within the grace: %s (%s) %v, want pending", a.Status, a.Comment, err)
					}
					return
				default:
					select {
					case <-w.ch:
					case <-time.After(5 * time.Second):
						t.Fatal("approval not changed after the stream dropped")
					}
					if took := time.Since(dropped); took < tt.grace*3/4 || took > tt.grace+2*time.Second {
						t.Errorf("withdrawn %s after the drop, want about %s", took, tt.grace)
					}
				}
				a, err := f.svc.store.Get(ctx, id)
				if err != nil || a.Status != tt.want {
					t.Fatalf("after the drop: %+v, %v; want %s", a, err, tt.want)
				}
				log, _ := f.svc.store.Log(ctx, id)
				if len(log) != 1 {
					t.Fatalf("decision log %+v, want one entry", log)
				}
				if tt.want == Cancelled {
					if a.Operator != SystemOperator || a.Comment != "the caller stopped waiting (stream closed)" {
						t.Fatalf("withdrawn by %q: %q", a.Operator, a.Comment)
					}
					if _, _, err := f.svc.store.Decide(ctx, id, Approved, "alice", ""); err == nil || !strings.Contains(err.Error(), "was cancelled") {
						t.Fatalf("answer after the withdrawal: %v", err)
					}
				}
			})
		}
	}
}

func callJSON(t *testing.T, f *fixture, tenant, name string, args any) (*tool.Result, map[string]any) {
	t.Helper()
	return callAs(t, f, tenant, "s1", "call-"+jobs.NewID(), name, args)
}

// callAs is callJSON from the given session and call.
func callAs(t *testing.T, f *fixture, tenant, session, callID, name string, args any) (*tool.Result, map[string]any) {
	t.Helper()
	s := readStream(t, f.post(context.Background(), name, request(tenant, session, callID, args)), nil)
	if s.err != nil || s.result == nil {
		t.Fatalf("%s: %v", name, s.err)
	}
	var m map[string]any
	if s.result.HasStructured() {
		json.Unmarshal(s.result.StructuredContent, &m)
	}
	return s.result, m
}

func TestApprovalJobTools(t *testing.T) {
	f := newFixture(t, Config{})
	res, m := callJSON(t, f, "t1", "approval_start", map[string]any{"action": "rotate keys", "timeout_seconds": 86400})
	if res.IsError || m["state"] != "running" || m["status"] != "pending" {
		t.Fatalf("start = %+v %v", res, m)
	}
	id := m["approval_id"].(string)
	if m["url"] != "http://operator.test/approval/"+id {
		t.Fatalf("url = %v", m["url"])
	}

	// Tenant scoping: another tenant gets "not found" for status and cancel.
	for _, name := range []string{"approval_status", "approval_cancel"} {
		res, _ := callJSON(t, f, "t2", name, map[string]any{"approval_id": id})
		if !res.IsError || !strings.Contains(res.Content[0].Text, "no approval with this ID") {
			t.Fatalf("%s from another tenant: %+v", name, res)
		}
	}
	a, _ := f.svc.store.Get(context.Background(), id)
	if a.Status != Pending {
		t.Fatalf("another tenant's cancel changed the approval: %s", a.Status)
	}

	res, m = callJSON(t, f, "t1", "approval_status", map[string]any{"approval_id": id})
	if res.IsError || m["state"] != "running" || m["result"] != nil {
		t.Fatalf("status while pending = %+v %v", res, m)
	}

	// A status call that waits sees the decision the moment it is made.
	go func() {
		time.Sleep(200 * time.Millisecond)
		f.svc.Decide(context.Background(), id, Denied, "carol", "use the runbook")
	}()
	start := time.Now()
	res, m = callJSON(t, f, "t1", "approval_status", map[string]any{"approval_id": id, "wait_seconds": 10})
	if time.Since(start) > 5*time.Second {
		t.Fatal("status wait did not end at the decision")
	}
	if res.IsError || m["state"] != "failed" {
		t.Fatalf("status after denial = %+v %v", res, m)
	}
	inner := m["result"].(map[string]any)
	sc := inner["structured_content"].(map[string]any)
	if inner["is_error"] != true || sc["decision"] != "denied" || sc["operator"] != "carol" || sc["comment"] != "use the runbook" {
		t.Fatalf("result in status = %v", inner)
	}
	if !strings.Contains(res.Content[0].Text, "Denied by operator carol") {
		t.Fatalf("status text %q", res.Content[0].Text)
	}

	// Cancel: withdrawn, recorded as the caller's, then unanswerable.
	_, m = callJSON(t, f, "t1", "approval_start", map[string]any{"action": "other"})
	id2 := m["approval_id"].(string)
	res, m = callJSON(t, f, "t1", "approval_cancel", map[string]any{"approval_id": id2})
	if res.IsError || m["state"] != "cancelled" {
		t.Fatalf("cancel = %+v %v", res, m)
	}
	if _, err := f.svc.Decide(context.Background(), id2, Approved, "alice", ""); err == nil {
		t.Fatal("a cancelled approval was answered")
	}
	log, _ := f.svc.store.Log(context.Background(), id2)
	if len(log) != 1 || log[0].Decision != Cancelled || log[0].Operator != CallerOperator {
		t.Fatalf("log = %+v", log)
	}
}

func TestWaitsLeaveNoWatchBehind(t *testing.T) {
	f := newFixture(t, Config{})
	// Unknown IDs, a wait that times out, and a wait that ends by decision.
	for range 3 {
		callJSON(t, f, "t1", "approval_status", map[string]any{"approval_id": jobs.NewID(), "wait_seconds": 1})
	}
	_, m := callJSON(t, f, "t1", "approval_start", map[string]any{"action": "x"})
	id := m["approval_id"].(string)
	callJSON(t, f, "t1", "approval_status", map[string]any{"approval_id": id, "wait_seconds": 1})
	go func() {
		time.Sleep(100 * time.Millisecond)
		f.svc.Decide(context.Background(), id, Approved, "alice", "")
	}()
	callJSON(t, f, "t1", "approval_status", map[string]any{"approval_id": id, "wait_seconds": 10})
	f.svc.mu.Lock()
	defer f.svc.mu.Unlock()
	if len(f.svc.changed) != 0 || len(f.svc.streams) != 0 {
		t.Fatalf("left behind: %d watches, %d stream counts", len(f.svc.changed), len(f.svc.streams))
	}
}

func TestApprovalStartExpiresWithoutWaiters(t *testing.T) {
	f := newFixture(t, Config{})
	_, m := callJSON(t, f, "t1", "approval_start", map[string]any{"action": "x", "timeout_seconds": 1})
	id := m["approval_id"].(string)
	sub, stop := f.svc.Subscribe(func(string) bool { return true })
	defer stop()
	deadline := time.After(5 * time.Second)
	for {
		a, _ := f.svc.store.Get(context.Background(), id)
		if a.Status == Expired {
			break
		}
		select {
		case <-sub:
		case <-deadline:
			t.Fatal("the sweeper did not expire the approval")
		}
	}
	res, m := callJSON(t, f, "t1", "approval_status", map[string]any{"approval_id": id})
	if res.IsError || m["state"] != "failed" || !strings.Contains(res.Content[0].Text, "Expired") {
		t.Fatalf("status = %+v %v", res, m)
	}
}

func TestArgumentErrors(t *testing.T) {
	f := newFixture(t, Config{})
	tests := []struct {
		tool string
		args any
		want string
	}{
		{"request_approval", map[string]any{}, "invalid arguments: at (root): missing property 'action'"},
		{"request_approval", map[string]any{"action": ""}, `invalid arguments: at "/action": minLength: got 0, want 1`},
		{"request_approval", map[string]any{"action": strings.Repeat("é", MaxActionChars+1)}, `invalid arguments: at "/action": maxLength: got 501, want 500`},
		{"request_approval", map[string]any{"action": "x", "details": strings.Repeat("d", MaxDetailsChars+1)}, `at "/details": maxLength: got 16385, want 16384`},
		{"request_approval", map[string]any{"action": "x", "timeout_seconds": 0}, `at "/timeout_seconds": minimum: got 0, want 1`},
		{"request_approval", map[string]any{"action": "x", "timeout_seconds": 3601}, `at "/timeout_seconds": maximum: got 3601, want 3600`},
		{"approval_start", map[string]any{"action": "x", "timeout_seconds": 86401}, `at "/timeout_seconds": maximum: got 86401, want 86400`},
		{"request_approval", map[string]any{"action": "x", "tenant_id": "t9"}, "tenant_id"},
		{"approval_status", map[string]any{"approval_id": "nope"}, `at "/approval_id": 'nope' does not match pattern '^[a-z2-7]{26}$'`},
	}
	// approval_status and approval_cancel name their approval the same
	// way: exactly one of approval_id and call_id.
	id := jobs.NewID()
	for _, name := range []string{"approval_status", "approval_cancel"} {
		tests = append(tests, []struct {
			tool string
			args any
			want string
		}{
			{name, map[string]any{}, "invalid arguments: approval_id or call_id: required: give exactly one of them"},
			{name, map[string]any{"approval_id": id, "call_id": "call-1"}, "invalid arguments: approval_id and call_id: give only one of them, not both"},
			{name, map[string]any{"approval_id": jobs.NewID(), "call_id": "call-1"}, "approval_id and call_id: give only one of them, not both"},
			{name, map[string]any{"call_id": ""}, `invalid arguments: at "/call_id": minLength: got 0, want 1`},
			{name, map[string]any{"call_id": strings.Repeat("c", MaxCallIDChars+1)}, `invalid arguments: at "/call_id": maxLength: got 1025, want 1024`},
			{name, map[string]any{"call_id": 7}, `invalid arguments: at "/call_id": got number, want string`},
			{name, map[string]any{"approval_id": "nope"}, `invalid arguments: at "/approval_id": 'nope' does not match pattern`},
			{name, map[string]any{"call_id": "call-1", "session_id": "s2"}, "session_id"},
		}...)
	}
	tests = append(tests, []struct {
		tool string
		args any
		want string
	}{
		{"approval_status", map[string]any{"wait_seconds": 5}, "approval_id or call_id: required"},
		{"approval_status", map[string]any{"call_id": "call-1", "wait_seconds": 21}, `invalid arguments: at "/wait_seconds": maximum: got 21, want 20`},
		{"approval_status", map[string]any{"call_id": "call-1", "wait_seconds": -1}, `invalid arguments: at "/wait_seconds": minimum: got -1, want 0`},
		{"approval_cancel", map[string]any{"call_id": "call-1", "wait_seconds": 1}, "invalid arguments: at (root): additional properties 'wait_seconds' not allowed"},
	}...)
	for _, tt := range tests {
		t.Run(tt.tool+" "+tt.want, func(t *testing.T) {
			res, _ := callJSON(t, f, "t1", tt.tool, tt.args)
			if !res.IsError || !strings.Contains(res.Content[0].Text, tt.want) {
				t.Fatalf("got %+v, want is_error with %q", res.Content, tt.want)
			}
		})
	}
	// Edges that are allowed.
	for _, args := range []map[string]any{
		{"action": strings.Repeat("é", MaxActionChars), "details": strings.Repeat("d", MaxDetailsChars), "timeout_seconds": 3600},
	} {
		_, m := callJSON(t, f, "t1", "approval_start", args)
		if m["approval_id"] == nil {
			t.Fatalf("edge arguments refused: %v", m)
		}
	}
}

func TestTooManyPendingIsAToolError(t *testing.T) {
	f := newFixture(t, Config{MaxPendingPerTenant: 1})
	if res, _ := callJSON(t, f, "t1", "approval_start", map[string]any{"action": "one"}); res.IsError {
		t.Fatalf("first: %+v", res)
	}
	res, _ := callJSON(t, f, "t1", "request_approval", map[string]any{"action": "two"})
	if !res.IsError || res.UnknownOutcome || !strings.Contains(res.Content[0].Text, "too many pending approvals for this tenant (1 pending, limit 1)") {
		t.Fatalf("over the cap: %+v", res)
	}
}

func TestWebhookAnnouncesPendingApprovals(t *testing.T) {
	var mu sync.Mutex
	var got []WebhookEvent
	var sigOK bool
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev WebhookEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("webhook body %s: %v", body, err)
		}
		mu.Lock()
		got = append(got, ev)
		sigOK = r.Header.Get("X-Approval-Signature") == Signature([]byte("s3cret"), body) && r.Header.Get("Content-Type") == "application/json"
		mu.Unlock()
	}))
	defer hook.Close()
	f := newFixture(t, Config{WebhookURL: hook.URL, WebhookSecret: "s3cret"})
	_, m := callJSON(t, f, "t1", "approval_start", map[string]any{"action": "ship release 1.2", "details": "tag v1.2"})
	f.svc.webhook.wait()
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || !sigOK {
		t.Fatalf("webhooks = %+v, signature ok %v", got, sigOK)
	}
	ev := got[0]
	id := m["approval_id"].(string)
	if ev.Event != "approval.pending" || ev.ApprovalID != id || ev.URL != "http://operator.test/approval/"+id || ev.Action != "ship release 1.2" || ev.TenantID != "t1" {
		t.Fatalf("webhook event = %+v", ev)
	}
}

// openEnv is what the local service does with its environment: the
// Config parsed, the page URL defaulted from ADDR and PUBLIC_URL, New.
func openEnv(ctx context.Context, environ map[string]string, addr, publicURL string, logger *slog.Logger) (*Service, error) {
	cfg, err := service.ParseEnv[Config](environ)
	if err != nil {
		return nil, err
	}
	return New(ctx, cfg.WithPageURLDefault(addr, publicURL), logger)
}

func TestOpenFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	s, err := openEnv(context.Background(), map[string]string{"APPROVAL_DATA_DIR": dir}, "127.0.0.1:9999", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.PageURL() != "http://127.0.0.1:9999" || s.URL("x") != "http://127.0.0.1:9999/approval/x" {
		t.Fatalf("page URL %q", s.PageURL())
	}
	s2, err := openEnv(context.Background(), map[string]string{"APPROVAL_DATA_DIR": t.TempDir(), "APPROVAL_PAGE_URL": "https://ops.example/"}, "127.0.0.1:9999", "http://public", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.PageURL() != "https://ops.example" {
		t.Fatalf("APPROVAL_PAGE_URL ignored: %q", s2.PageURL())
	}
	if _, err := openEnv(context.Background(), map[string]string{"APPROVAL_SWEEP_INTERVAL": "often"}, "a", "", nil); err == nil || !strings.Contains(err.Error(), "APPROVAL_SWEEP_INTERVAL") {
		t.Fatalf("bad interval: %v", err)
	}
	if s.grace != 30*time.Second {
		t.Errorf("default APPROVAL_REATTACH_GRACE: %s, want 30s", s.grace)
	}
	for _, tt := range []struct{ value, want string }{
		{"soon", "APPROVAL_REATTACH_GRACE"},
		{"30", "APPROVAL_REATTACH_GRACE"},
		{"-5s", "APPROVAL_REATTACH_GRACE must be 0 (cancel at once) or positive, got -5s"},
	} {
		environ := map[string]string{"APPROVAL_DATA_DIR": t.TempDir(), "APPROVAL_REATTACH_GRACE": tt.value}
		if got, err := openEnv(context.Background(), environ, "a", "", nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			if err == nil {
				got.Close()
			}
			t.Errorf("APPROVAL_REATTACH_GRACE=%q: %v, want an error with %q", tt.value, err, tt.want)
		}
	}
	for value, want := range map[string]time.Duration{"0": 0, "0s": 0, "2m": 2 * time.Minute} {
		got, err := openEnv(context.Background(), map[string]string{"APPROVAL_DATA_DIR": t.TempDir(), "APPROVAL_REATTACH_GRACE": value}, "a", "", nil)
		if err != nil {
			t.Fatalf("APPROVAL_REATTACH_GRACE=%q: %v", value, err)
		}
		got.Close()
		if got.grace != want {
			t.Errorf("APPROVAL_REATTACH_GRACE=%q: grace %s, want %s", value, got.grace, want)
		}
	}
}

// TestOpenNamesThePageURLSource checks that a bad page URL is blamed on
// the variable the operator set: APPROVAL_PAGE_URL, or PUBLIC_URL when the
// page URL defaulted from it.
func TestOpenNamesThePageURLSource(t *testing.T) {
	tests := []struct {
		name      string
		pageURL   string // APPROVAL_PAGE_URL; "" unset
		addr      string
		publicURL string
		wantErr   string // "" for success
		wantURL   string
	}{
		{"bad PUBLIC_URL", "", "127.0.0.1:8081", "notaurl", `approvals: PUBLIC_URL (the default of APPROVAL_PAGE_URL) "notaurl": must be an absolute http:// or https:// URL`, ""},
		{"PUBLIC_URL with a query", "", "127.0.0.1:8081", "https://ops.example/?x=1", `approvals: PUBLIC_URL (the default of APPROVAL_PAGE_URL) "https://ops.example/?x=1": must not contain a query`, ""},
		{"bad APPROVAL_PAGE_URL, good PUBLIC_URL", "notaurl", "127.0.0.1:8081", "https://pub.example", `approvals: APPROVAL_PAGE_URL "notaurl": must be an absolute http:// or https:// URL`, ""},
		{"APPROVAL_PAGE_URL without host", "https://", "127.0.0.1:8081", "", `approvals: APPROVAL_PAGE_URL "https://": has no host`, ""},
		{"APPROVAL_PAGE_URL with a fragment", "https://ops.example/#top", "127.0.0.1:8081", "", `approvals: APPROVAL_PAGE_URL "https://ops.example/#top": must not contain a fragment`, ""},
		{"APPROVAL_PAGE_URL wins over a bad PUBLIC_URL", "https://ops.example/", "127.0.0.1:8081", "notaurl", "", "https://ops.example"},
		{"PUBLIC_URL default", "", "127.0.0.1:8081", "https://pub.example/local/", "", "https://pub.example/local"},
		{"ADDR default", "", "127.0.0.1:8081", "", "", "http://127.0.0.1:8081"},
		{"ADDR without host is taken as before", "", ":8081", "", "", "http://:8081"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			environ := map[string]string{"APPROVAL_DATA_DIR": t.TempDir()}
			if tt.pageURL != "" {
				environ["APPROVAL_PAGE_URL"] = tt.pageURL
			}
			s, err := openEnv(context.Background(), environ, tt.addr, tt.publicURL, nil)
			if tt.wantErr != "" {
				if err == nil {
					s.Close()
					t.Fatalf("New succeeded, want %q", tt.wantErr)
				}
				if err.Error() != tt.wantErr {
					t.Fatalf("New = %q, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.PageURL() != tt.wantURL {
				t.Fatalf("PageURL = %q, want %q", s.PageURL(), tt.wantURL)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{PageURL: "operator.test", SweepInterval: time.Second}, `APPROVAL_PAGE_URL "operator.test": must be an absolute http:// or https:// URL`},
		{Config{PageURL: "http://x", SweepInterval: time.Second, WebhookURL: "ftp://x"}, "APPROVAL_WEBHOOK_URL must be an http or https URL"},
		{Config{PageURL: "http://x"}, "APPROVAL_SWEEP_INTERVAL must be positive"},
		{Config{PageURL: "http://x", SweepInterval: time.Second, MaxPendingPerTenant: -1}, "APPROVAL_MAX_PENDING_PER_TENANT must not be negative"},
		{Config{PageURL: "http://x", SweepInterval: time.Second, ReattachGrace: -time.Second}, "APPROVAL_REATTACH_GRACE must be 0 (cancel at once) or positive, got -1s"},
	}
	for _, tt := range tests {
		tt.cfg.DataDir = t.TempDir()
		_, err := New(context.Background(), tt.cfg, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}

// TestApprovalByCallID is the recovery after a crash: an agent whose
// request_approval stream (or approval_start answer) was lost holds only
// the call_id of that call, and approval_status / approval_cancel find the
// approval with it, within the caller's own tenant and session only, also
// after the service restarted on the same data directory.
func TestApprovalByCallID(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, Config{DataDir: dir})
	ctx := context.Background()
	create := func(tenant, session, callID, action string) string {
		t.Helper()
		// What a request_approval stream killed mid-wait leaves behind: a
		// pending approval that nobody waits on.
		a, created, err := f.svc.Request(ctx, NewApproval{TenantID: tenant, SessionID: session, CallID: callID, Origin: OriginStream, Action: action, Timeout: time.Hour})
		if err != nil || !created {
			t.Fatalf("create %s/%s/%s: created %v, %v", tenant, session, callID, created, err)
		}
		return a.ID
	}
	streamed := create("t1", "s1", "call-stream", "Drain node 3")
	res, m := callAs(t, f, "t1", "s1", "call-start", "approval_start", map[string]any{"action": "Deploy v2.3", "timeout_seconds": 3600})
	if res.IsError {
		t.Fatalf("approval_start: %+v", res)
	}
	started := m["approval_id"].(string)
	// One call_id in two tenants' sessions of the same name: two approvals.
	mineShared := create("t1", "s1", "call-shared", "mine")
	theirsShared := create("t2", "s1", "call-shared", "theirs")
	create("t1", "s2", "call-s2", "another session of t1")
	create("t2", "s9", "call-t2", "another tenant")

	// Before the restart, the stream's approval is found by its call.
	if res, m := callAs(t, f, "t1", "s1", "status-0", "approval_status", map[string]any{"call_id": "call-stream"}); res.IsError || m["approval_id"] != streamed {
		t.Fatalf("before restart: %+v %v", res.Content, m)
	}
	// Restart: the store is closed and opened again on the same directory.
	if err := f.svc.Close(); err != nil {
		t.Fatal(err)
	}
	f = newFixture(t, Config{DataDir: dir})

	tests := []struct {
		name                    string
		tool                    string
		tenant, session, callID string
		wantID                  string // "" for not found
		wantState               string
	}{
		{"request_approval call, same session", "approval_status", "t1", "s1", "call-stream", streamed, "running"},
		{"approval_start call, same session", "approval_status", "t1", "s1", "call-start", started, "running"},
		{"call_id also used in another tenant: own approval", "approval_status", "t1", "s1", "call-shared", mineShared, "running"},
		{"call_id also used in another tenant: theirs for them", "approval_status", "t2", "s1", "call-shared", theirsShared, "running"},
		{"asked from another session of the tenant", "approval_status", "t1", "s2", "call-stream", "", ""},
		{"call made in another session of the tenant", "approval_status", "t1", "s1", "call-s2", "", ""},
		{"call of another tenant, same session name", "approval_status", "t2", "s1", "call-stream", "", ""},
		{"call of another tenant's session", "approval_status", "t1", "s9", "call-t2", "", ""},
		{"unknown call", "approval_status", "t1", "s1", "call-never", "", ""},
		{"longest call_id allowed, unknown", "approval_status", "t1", "s1", strings.Repeat("c", MaxCallIDChars), "", ""},
		{"cancel from another session", "approval_cancel", "t1", "s2", "call-stream", "", ""},
		{"cancel from another tenant", "approval_cancel", "t2", "s1", "call-stream", "", ""},
		{"cancel by call, same session", "approval_cancel", "t1", "s1", "call-start", started, "cancelled"},
		{"status after the cancel", "approval_status", "t1", "s1", "call-start", started, "cancelled"},
		{"the other approval is still pending", "approval_status", "t1", "s1", "call-stream", streamed, "running"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, m := callAs(t, f, tt.tenant, tt.session, fmt.Sprint("call-", i), tt.tool, map[string]any{"call_id": tt.callID})
			text := res.Content[0].Text
			if tt.wantID == "" {
				want := fmt.Sprintf("%s: no approval was requested by call_id %q in this session", tt.tool, tt.callID)
				if !res.IsError || res.UnknownOutcome || !strings.Contains(text, want) || res.HasStructured() {
					t.Fatalf("got %+v, want is_error %q", res, want)
				}
				for _, id := range []string{streamed, started, mineShared, theirsShared} {
					if strings.Contains(text, id) {
						t.Fatalf("not-found answer names approval %s: %q", id, text)
					}
				}
				return
			}
			if res.IsError || m["approval_id"] != tt.wantID || m["state"] != tt.wantState || !strings.Contains(text, tt.wantID) {
				t.Fatalf("got %+v %v, want approval %s %s", res.Content, m, tt.wantID, tt.wantState)
			}
		})
	}

	// The cancels that were not found changed nothing; the one found is
	// the caller's withdrawal.
	if a, _ := f.svc.store.Get(ctx, streamed); a.Status != Pending {
		t.Fatalf("approval %s after cancels from elsewhere: %s", streamed, a.Status)
	}
	if a, _ := f.svc.store.Get(ctx, started); a.Status != Cancelled || a.Operator != CallerOperator {
		t.Fatalf("approval %s after approval_cancel by call: %s by %q", started, a.Status, a.Operator)
	}
	// An operator still answers the pending one, and the agent reads the
	// decision by call.
	if _, err := f.svc.Decide(ctx, streamed, Approved, "alice", "after the restart"); err != nil {
		t.Fatal(err)
	}
	res, m = callAs(t, f, "t1", "s1", "status-last", "approval_status", map[string]any{"call_id": "call-stream"})
	inner, _ := m["result"].(map[string]any)
	sc, _ := inner["structured_content"].(map[string]any)
	if res.IsError || m["state"] != "succeeded" || sc["decision"] != "approved" || sc["operator"] != "alice" || !strings.Contains(res.Content[0].Text, "Approved by operator alice") {
		t.Fatalf("decision by call: %+v %v", res.Content, m)
	}
}

// TestApprovalStatusWaitByCallID: wait_seconds works the same with call_id
// as with approval_id; a call_id that is not found answers at once.
func TestApprovalStatusWaitByCallID(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	_, m := callAs(t, f, "t1", "s1", "call-w", "approval_start", map[string]any{"action": "rotate keys"})
	id := m["approval_id"].(string)

	begin := time.Now()
	res, m := callAs(t, f, "t1", "s1", "status-1", "approval_status", map[string]any{"call_id": "call-w", "wait_seconds": 1})
	if took := time.Since(begin); took < 900*time.Millisecond {
		t.Fatalf("wait_seconds 1 answered after %s", took)
	}
	if res.IsError || m["state"] != "running" || m["approval_id"] != id {
		t.Fatalf("after a wait with no decision: %+v %v", res.Content, m)
	}

	go func() {
		time.Sleep(200 * time.Millisecond)
		f.svc.Decide(ctx, id, Denied, "carol", "use the runbook")
	}()
	begin = time.Now()
	res, m = callAs(t, f, "t1", "s1", "status-2", "approval_status", map[string]any{"call_id": "call-w", "wait_seconds": 20})
	if took := time.Since(begin); took > 10*time.Second {
		t.Fatalf("the wait did not end at the decision: %s", took)
	}
	if res.IsError || m["state"] != "failed" || !strings.Contains(res.Content[0].Text, "Denied by operator carol") {
		t.Fatalf("after the decision: %+v %v", res.Content, m)
	}

	for _, tc := range []struct{ session, callID string }{{"s1", "call-unknown"}, {"s2", "call-w"}} {
		begin = time.Now()
		res, _ = callAs(t, f, "t1", tc.session, "status-3", "approval_status", map[string]any{"call_id": tc.callID, "wait_seconds": 20})
		if took := time.Since(begin); took > 10*time.Second || !res.IsError || !strings.Contains(res.Content[0].Text, "no approval was requested by call_id") {
			t.Fatalf("%s/%s: %+v after %s, want not found at once", tc.session, tc.callID, res.Content, took)
		}
	}
	f.svc.mu.Lock()
	defer f.svc.mu.Unlock()
	if len(f.svc.changed) != 0 {
		t.Fatalf("%d watches left behind", len(f.svc.changed))
	}
}

// TestLookupSchemas checks the published input_schema of approval_status
// and approval_cancel as brain applies it (pkg/schema): call_id and
// approval_id are each accepted, and the "exactly one" rule is left to the
// service, whose answer names the fields, instead of a oneOf whose error
// ("subschemas 0, 1 matched") names neither.
func TestLookupSchemas(t *testing.T) {
	f := newFixture(t, Config{})
	schemas := map[string]*jsonschema.Schema{}
	for _, tl := range f.svc.Tools() {
		if tl.Binding.Name == "approval_status" || tl.Binding.Name == "approval_cancel" {
			s, err := jsonschema.Compile("input_schema", tl.Binding.InputSchema)
			if err != nil {
				t.Fatalf("%s: %v", tl.Binding.Name, err)
			}
			schemas[tl.Binding.Name] = s
		}
	}
	id := jobs.NewID()
	tests := []struct {
		tool, args string
		want       string // "" valid
	}{
		{"approval_status", `{"call_id":"call_1"}`, ""},
		{"approval_status", `{"approval_id":"` + id + `"}`, ""},
		{"approval_status", `{"call_id":"call_1","wait_seconds":20}`, ""},
		{"approval_status", `{}`, ""},
		{"approval_status", `{"approval_id":"` + id + `","call_id":"call_1"}`, ""},
		{"approval_status", `{"call_id":""}`, `at "/call_id": minLength`},
		{"approval_status", `{"call_id":"` + strings.Repeat("c", MaxCallIDChars+1) + `"}`, `at "/call_id": maxLength`},
		{"approval_status", `{"call_id":"c","wait_seconds":21}`, `at "/wait_seconds": maximum`},
		{"approval_status", `{"call":"c"}`, "additional properties 'call' not allowed"},
		{"approval_cancel", `{"call_id":"call_1"}`, ""},
		{"approval_cancel", `{"approval_id":"` + id + `"}`, ""},
		{"approval_cancel", `{"call_id":"c","wait_seconds":1}`, "additional properties 'wait_seconds' not allowed"},
	}
	for _, tt := range tests {
		err := schemas[tt.tool].ValidateObject("arguments", []byte(tt.args))
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s %s: %v, want %q", tt.tool, tt.args, err, tt.want)
		}
	}
}

// TestArgsSchemaLimits: the limits the input schemas state (inferred from
// the argument types' tags) are the package's constants, which the store,
// the page and the messages use.
func TestArgsSchemaLimits(t *testing.T) {
	f := newFixture(t, Config{})
	schemas := map[string]map[string]any{}
	for _, tl := range f.svc.Tools() {
		var m map[string]any
		if err := json.Unmarshal(tl.Binding.InputSchema, &m); err != nil {
			t.Fatal(err)
		}
		schemas[tl.Binding.Name] = m["properties"].(map[string]any)
	}
	limit := func(tool, prop, keyword string) float64 {
		v, _ := schemas[tool][prop].(map[string]any)[keyword].(float64)
		return v
	}
	for _, c := range []struct {
		tool, prop, keyword string
		want                int
	}{
		{"request_approval", "action", "maxLength", MaxActionChars},
		{"approval_start", "action", "maxLength", MaxActionChars},
		{"request_approval", "details", "maxLength", MaxDetailsChars},
		{"request_approval", "timeout_seconds", "maximum", MaxStreamTimeoutSeconds},
		{"approval_start", "timeout_seconds", "maximum", MaxJobTimeoutSeconds},
		{"request_approval", "timeout_seconds", "default", DefaultTimeoutSeconds},
		{"approval_start", "timeout_seconds", "default", DefaultTimeoutSeconds},
		{"approval_status", "call_id", "maxLength", MaxCallIDChars},
		{"approval_cancel", "call_id", "maxLength", MaxCallIDChars},
		{"approval_status", "wait_seconds", "maximum", maxWaitSeconds},
	} {
		if got := limit(c.tool, c.prop, c.keyword); got != float64(c.want) {
			t.Errorf("%s %s %s = %v, want %d", c.tool, c.prop, c.keyword, got, c.want)
		}
	}
}
