package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/invoke"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/brain-tools/suite/services/brain/internal/store/postgres"
	"github.com/brain-tools/suite/services/brain/internal/store/sqlite"
	"github.com/google/go-cmp/cmp"
)

// The approval call of a gated call is brain's own request to an approval
// tool that attaches a call ID it has seen to the approval it recorded
// (local's request_approval): brain sends it again, with the same ID,
// when it ends without a decision while the gated call still waits, and
// after a restart (see sendApproval, takeUp).

// listCalls lists the tenant's calls of session, of tool when set.
func (b *brain) listCalls(tenant, session, tool string) []CallJSON {
	b.t.Helper()
	q := url.Values{"session_id": {session}}
	if tool != "" {
		q.Set("tool", tool)
	}
	r := b.do("GET", "/tool_calls?"+q.Encode(), tenant, nil)
	var page struct {
		ToolCalls []CallJSON `json:"tool_calls"`
	}
	r.json(b.t, &page)
	return page.ToolCalls
}

// nextApprovalReq returns the next approve request that waits for a
// decision, failing after within.
func nextApprovalReq(t *testing.T, ct *countingTools, within time.Duration) approvalReq {
	t.Helper()
	return receive(t, ct.approvals, within, "no approval request waited for a decision")
}

// receive returns the next value of ch, failing with what (and within)
// when none comes within within.
func receive[T any](t *testing.T, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("%s within %s", what, within)
	}
	var zero T
	return zero
}

// TestApprovalCallResent: the approval call ends without a decision —
// the connection dropped before an answer, a 503, a stream that ended
// without a result, the tool saying it is restarting — and brain sends it
// again each time, with the same call ID and arguments, after a pause that
// doubles (0.5 s, 1 s, 2 s, 4 s) with equal jitter (each in [d/2, d]), each
// resend shown as a tool.progress "retrying" of the approval call, whose
// retry_in_ms is the pause brain then waited. The call stays one call, running, with
// one tool.call and one tool.result; the operator's answer to the resent
// request decides the gated call, which is sent once.
func TestApprovalCallResent(t *testing.T) {
	t.Parallel()
	b, ct := startWaitingBrain(t, true, 60)
	s := b.session("t1", "gated")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, stream := b.openSSE(ctx, "t1", s.ID)
	b.waitStreams()
	ct.failNextApprovals("drop", "503", "eof", "restarting")
	begin := time.Now()
	_, c := b.call("t1", s.ID, "gated", map[string]any{"db": "payments"}, 0)
	a := nextApprovalReq(t, ct, 20*time.Second)
	took := time.Since(begin)
	childID := a.req.CallID
	if _, child := b.getCall("t1", childID, 0); child.Status != "running" || deref(child.ParentID) != c.ID || child.CallerType != "system" {
		t.Fatalf("the approval call while resent: %+v", child)
	}
	reqs := ct.approveRequests()
	if len(reqs) != 5 || ct.count(childID) != 5 {
		t.Fatalf("approve got %d requests, %d of them with call ID %s; want 5, all of it", len(reqs), ct.count(childID), childID)
	}
	for i, r := range reqs[1:] {
		if r != reqs[0] {
			t.Errorf("request %d has other arguments: %s, first %s", i+2, r, reqs[0])
		}
	}
	a.decide <- "approved|alice|ok after the restart"
	if _, done := b.getCall("t1", c.ID, 10); done.Status != "succeeded" || ct.count(c.ID) != 1 {
		t.Fatalf("gated call after the resent approval was approved: %+v, sent %d times", done, ct.count(c.ID))
	}

	type retrying struct {
		Status    string `json:"status"`
		Attempt   int    `json:"attempt"`
		ErrorCode string `json:"error_code"`
		RetryInMS int64  `json:"retry_in_ms"`
	}
	var got []retrying
	for len(got) < 4 {
		ev := next(t, stream)
		var e EventJSON
		json.Unmarshal([]byte(ev.data), &e)
		var p retrying
		if ev.name == "tool.progress" && e.CallID == childID && json.Unmarshal(e.Data, &p) == nil && p.Status == "retrying" {
			got = append(got, p)
		}
	}
	want := []retrying{{"retrying", 2, "connection_failed", 500}, {"retrying", 3, "http_status", 1000},
		{"retrying", 4, "no_result_event", 2000}, {"retrying", 5, "tool_error", 4000}}
	var paused time.Duration
	for i := range got {
		if i < len(want) {
			if ms := got[i].RetryInMS; ms < want[i].RetryInMS/2 || ms > want[i].RetryInMS {
				t.Errorf("resend %d: retry_in_ms %d, want the pause %d ms jittered, in [%d, %d]", i+1, ms, want[i].RetryInMS, want[i].RetryInMS/2, want[i].RetryInMS)
			}
			want[i].RetryInMS = got[i].RetryInMS
		}
		paused += time.Duration(got[i].RetryInMS) * time.Millisecond
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("retrying progress of the approval call (-want +got):\n%s", diff)
	}
	if took < paused {
		t.Errorf("the fifth request came %s after the first, want the pauses brain reported, %s (at least 0.25+0.5+1+2 s)", took, paused)
	}
	if calls := b.listCalls("t1", s.ID, ""); len(calls) != 2 {
		t.Errorf("the session has %d calls, want the gated call and one approval call", len(calls))
	}
	if got := eventTypes(eventsOf(b.events("t1", s.ID), childID)); !slices.Equal(got, []string{"tool.call", "tool.result"}) {
		t.Errorf("stored events of the approval call: %v", got)
	}
	if _, child := b.getCall("t1", childID, 5); child.Status != "succeeded" {
		t.Errorf("the approval call: %s", child.Status)
	}
}

// TestApprovalResendStopsAtExpiry: an approval tool that keeps failing is
// asked again only while the gated call waits; at response_expires_at the
// gated call ends approval_expired, never sent, its approval call has
// ended (failed with its last failure, or cancelled when the expiry came
// first), and nothing is sent to the approval tool after that.
func TestApprovalResendStopsAtExpiry(t *testing.T) {
	t.Parallel()
	b, ct := startWaitingBrain(t, true, 2)
	fails := make([]string, 50)
	for i := range fails {
		fails[i] = "503"
	}
	ct.failNextApprovals(fails...)
	s := b.session("t1", "gated")
	_, c := b.call("t1", s.ID, "gated", map[string]any{}, 0)
	if _, got := b.getCall("t1", c.ID, 10); got.Status != "failed" || deref(got.ErrorCode) != "approval_expired" || ct.count(c.ID) != 0 {
		t.Fatalf("gated call: %+v, sent %d times", got, ct.count(c.ID))
	}
	children := b.listCalls("t1", s.ID, "approve")
	if len(children) != 1 {
		t.Fatalf("%d approval calls, want 1", len(children))
	}
	if _, child := b.getCall("t1", children[0].ID, 5); child.Status != "cancelled" && child.Status != "failed" {
		t.Errorf("the approval call after the expiry: %+v", child)
	}
	n := len(ct.approveRequests())
	if n < 3 || ct.count(children[0].ID) != n {
		t.Errorf("approve got %d requests (%d of the approval call) in 2 s, want 3 or more (after 0, at most 0.5 and 1.5 s)", n, ct.count(children[0].ID))
	}
	time.Sleep(2500 * time.Millisecond)
	if after := len(ct.approveRequests()); after != n {
		t.Errorf("approve got %d more requests after the gated call expired", after-n)
	}
}

// TestApprovalNotResent: a decision, and an answer that is no failure of
// the way there, are not sent again: a denial fails the gated call at
// once; a refusal with a known outcome, or a 404, leaves the gated call
// waiting for an answer through the API, with the approval call failed
// after one request.
func TestApprovalNotResent(t *testing.T) {
	t.Parallel()
	b, ct := startWaitingBrain(t, true, 60)
	s := b.session("t1", "gated")

	_, d := b.call("t1", s.ID, "gated", map[string]any{}, 0)
	nextApprovalReq(t, ct, 5*time.Second).decide <- "denied|bob|no"
	if _, got := b.getCall("t1", d.ID, 5); deref(got.ErrorCode) != "approval_denied" || ct.count(d.ID) != 0 {
		t.Fatalf("denied: %+v", got)
	}
	time.Sleep(time.Second)
	if n := len(ct.approveRequests()); n != 1 {
		t.Errorf("approve got %d requests for a denied call, want 1", n)
	}

	for _, how := range []string{"refused", "404"} {
		t.Run(how, func(t *testing.T) {
			before := len(ct.approveRequests())
			ct.failNextApprovals(how)
			_, c := b.call("t1", s.ID, "gated", map[string]any{"how": how}, 0)
			var child CallJSON
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				var ids []string
				for _, ac := range b.listCalls("t1", s.ID, "approve") {
					if deref(ac.ParentID) == c.ID {
						ids = append(ids, ac.ID)
					}
				}
				if len(ids) == 1 {
					_, child = b.getCall("t1", ids[0], 5)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("approval calls of %s: %v", c.ID, ids)
				}
			}
			if child.Status != "failed" {
				t.Fatalf("approval call answered %s: %+v", how, child)
			}
			time.Sleep(time.Second)
			if n := len(ct.approveRequests()) - before; n != 1 {
				t.Errorf("approve got %d requests, want 1", n)
			}
			if _, got := b.getCall("t1", c.ID, 0); got.Status != "requires_input" {
				t.Fatalf("gated call after its approval call failed: %s", got.Status)
			}
			if r := b.respond("t1", c.ID, `{"approved":false}`); r.status != 200 {
				t.Errorf("answer through the API: %d %s", r.status, r.body)
			}
		})
	}
}

// TestApprovalAskedAgainWhenWithdrawn: the approval tool answers that it
// withdrew the approval itself (cancelled by system: local does so when
// the stream it answered dropped before brain asked again), so nobody can
// decide it any more: brain asks again with a new approval call, and the
// operator's answer to that one decides the gated call.
func TestApprovalAskedAgainWhenWithdrawn(t *testing.T) {
	t.Parallel()
	b, ct := startWaitingBrain(t, true, 60)
	s := b.session("t1", "gated")
	ct.failNextApprovals("withdrawn")
	_, c := b.call("t1", s.ID, "gated", map[string]any{}, 0)
	a := nextApprovalReq(t, ct, 5*time.Second)
	a.decide <- "approved|alice|"
	if _, got := b.getCall("t1", c.ID, 5); got.Status != "succeeded" || ct.count(c.ID) != 1 {
		t.Fatalf("gated call: %+v, sent %d times", got, ct.count(c.ID))
	}
	children := b.listCalls("t1", s.ID, "approve")
	if len(children) != 2 || children[1].ID != a.req.CallID || deref(children[0].ParentID) != c.ID || deref(children[1].ParentID) != c.ID {
		t.Fatalf("approval calls %+v, want the withdrawn one and %s", children, a.req.CallID)
	}
	if children[0].Status != "failed" || children[1].Status != "succeeded" {
		t.Errorf("approval calls: %s, %s", children[0].Status, children[1].Status)
	}
}

// seedGate stores, as a brain process that died would have left them, a
// session of t1 with a gated call waiting for its approval until expires
// and its approval call running, its approval pending on the approval
// tool until approvalExpires (timeout_seconds, whole seconds rounded up),
// and returns their IDs and the options that open a brain on that store:
// the data dir (SQLite) or the database (PostgreSQL, the dead replica's
// leases already run out).
func seedGate(t *testing.T, expires, approvalExpires time.Time) (gate, child string, opts func(*Options)) {
	t.Helper()
	ctx := context.Background()
	var (
		db   store.Store
		err  error
		opt  func(*Options)
		done func()
	)
	switch testStore {
	case storeSQLite:
		dir := t.TempDir()
		db, err = sqlite.Open(filepath.Join(dir, "brain.db"), sqlite.Options{})
		opt = func(o *Options) { o.DataDir = dir }
		done = func() {}
	case storePostgres:
		url := testDatabase(t)
		db, err = postgres.Open(ctx, postgres.Options{URL: url, Replica: "replica_dead", Lease: 100 * time.Millisecond})
		opt = func(o *Options) {
			o.DataDir, o.DatabaseURL, o.SecretsKey, o.Lease = "", url, testSecretsKey, time.Second
		}
		done = func() { time.Sleep(200 * time.Millisecond) } // past the dead replica's lease
	default:
		t.Skip("seeds the store in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	sess := &store.Session{ID: "ses_gate", TenantID: "t1", Status: store.SessionActive, Tools: []string{"gated"},
		Config: json.RawMessage(`{"tools":["gated"]}`), CreatedAt: now, UpdatedAt: now}
	must(db.CreateSession(ctx, sess, &store.Event{Type: store.EventSessionCreated, SessionID: sess.ID, Time: now, Data: json.RawMessage(`{}`)}))
	g := &store.Call{ID: "call_gate", SessionID: sess.ID, TenantID: "t1", Tool: "gated", Status: store.CallRequiresInput,
		Arguments: json.RawMessage(`{"db":"payments"}`), CreatedAt: now, InputKind: store.InputApproval,
		Prompt: "Approve calling tool gated?", ResponseSchema: approvalResponseSchema, ResponseExpiresAt: expires.UTC(), CallerType: store.CallerAPI}
	must(db.CreateCall(ctx, g, &store.Event{Type: store.EventToolCall, SessionID: sess.ID, CallID: g.ID, Time: now, Data: json.RawMessage(`{}`)}))
	args := fmt.Sprintf(`{"action":"Call tool gated","details":"Call: call_gate","timeout_seconds":%d}`, int(time.Until(approvalExpires).Seconds())+1)
	c := &store.Call{ID: "call_approval", SessionID: sess.ID, TenantID: "t1", Tool: "approve", Status: store.CallRunning,
		Arguments: json.RawMessage(args), CreatedAt: now, StartedAt: now, ParentID: g.ID, CallerType: store.CallerSystem}
	must(db.CreateCall(ctx, c, &store.Event{Type: store.EventToolCall, SessionID: sess.ID, CallID: c.ID, Time: now, Data: json.RawMessage(`{}`)}))
	must(db.Close())
	done()
	return g.ID, c.ID, opt
}

// TestRecoverResendsApprovalCall: brain died while a gated call waited
// for its approval with the approval call running (the approval tool has
// recorded that approval and an operator may be reading it). The next
// brain — on SQLite the next process, on PostgreSQL the replica that takes
// the dead one's calls over — sends that approval call again with its
// call ID and arguments instead of ending it and asking anew: no second
// approval, and the operator's answer to the first decides the gated call.
func TestRecoverResendsApprovalCall(t *testing.T) {
	t.Parallel()
	ct := newCountingTools(t)
	expires := time.Now().Add(time.Minute)
	gate, child, opt := seedGate(t, expires, expires)
	b := startBrain(t, func(o *Options) { o.Config = waitingConfig(t, ct.URL, true, 60) }, opt)
	a := nextApprovalReq(t, ct, 10*time.Second)
	if a.req.CallID != child {
		t.Fatalf("the approval tool got call %s, want the approval call left running, %s", a.req.CallID, child)
	}
	if _, c := b.getCall("t1", child, 0); c.Status != "running" {
		t.Fatalf("the approval call after the restart: %+v", c)
	}
	a.decide <- "approved|alice|decided the approval brain asked before it died"
	if _, c := b.getCall("t1", gate, 10); c.Status != "succeeded" || ct.count(gate) != 1 {
		t.Fatalf("gated call: %+v, sent %d times", c, ct.count(gate))
	}
	if got := b.listCalls("t1", "ses_gate", "approve"); len(got) != 1 || got[0].Status != "succeeded" {
		t.Errorf("approval calls after the restart: %+v, want the one, succeeded", got)
	}
	if n := len(ct.approveRequests()); n != 1 {
		t.Errorf("approve got %d requests, want 1", n)
	}
	var rd respondedData
	for _, e := range eventsOf(b.events("t1", "ses_gate"), gate) {
		if e.Type == "tool.responded" {
			json.Unmarshal(e.Data, &rd)
		}
	}
	if rd.Responder.Name != "alice" || rd.Responder.CallID != child {
		t.Errorf("responder %+v", rd.Responder)
	}
}

// TestRecoverExpiredGateEndsApprovalCall: a gated call whose approval
// expired while brain was down ends approval_expired; its approval call
// ends brain_restarted and is not sent again.
func TestRecoverExpiredGateEndsApprovalCall(t *testing.T) {
	t.Parallel()
	ct := newCountingTools(t)
	expires := time.Now().Add(300 * time.Millisecond)
	gate, child, opt := seedGate(t, expires, expires)
	time.Sleep(400 * time.Millisecond)
	b := startBrain(t, func(o *Options) { o.Config = waitingConfig(t, ct.URL, true, 60) }, opt)
	if _, c := b.getCall("t1", gate, 10); deref(c.ErrorCode) != "approval_expired" {
		t.Fatalf("gated call: %+v", c)
	}
	if _, c := b.getCall("t1", child, 10); deref(c.ErrorCode) != "brain_restarted" {
		t.Fatalf("approval call: %+v", c)
	}
	time.Sleep(time.Second)
	if n := len(ct.approveRequests()); n != 0 {
		t.Errorf("approve got %d requests, want none", n)
	}
}

// TestShutdownParksApprovalCall: brain shuts down while the approval call
// of a gated call waits to be sent again (the approval tool answered 503
// with Retry-After 30): it is left running, as its gated call is left
// waiting, not recorded cancelled; the next brain sends it again with its
// call ID at once, and the operator's answer to it decides the gated
// call.
func TestShutdownParksApprovalCall(t *testing.T) {
	t.Parallel()
	ct := newCountingTools(t)
	cfg := waitingConfig(t, ct.URL, true, 60)
	o := Options{Config: cfg, DataDir: t.TempDir()}
	switch testStore {
	case storeSQLite:
	case storePostgres:
		o.DataDir, o.DatabaseURL, o.SecretsKey, o.Lease = "", testDatabase(t), testSecretsKey, time.Second
	default:
		t.Skip("stops a brain in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	serve := func() (*brain, func()) {
		srv, err := New(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		return &brain{t: t, srv: srv, url: newHTTPTestServer(t, srv)}, func() {
			if err := srv.Close(); err != nil {
				t.Error(err)
			}
		}
	}
	b, stop := serve()
	s := b.session("t1", "gated")
	ct.failNextApprovals("503 after 30") // the pause before the resend: 30 s, not the jittered 0.25–0.5 s
	_, c := b.call("t1", s.ID, "gated", map[string]any{}, 0)
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 5 s", what)
			}
		}
	}
	eventually("the first approval request", func() bool { return len(ct.approveRequests()) == 1 })
	children := b.listCalls("t1", s.ID, "approve")
	if len(children) != 1 {
		t.Fatalf("approval calls: %+v", children)
	}
	stop() // within the 30 s before the approval call is sent again

	b, stop = serve()
	defer stop()
	a := nextApprovalReq(t, ct, 10*time.Second)
	if a.req.CallID != children[0].ID {
		t.Fatalf("the approval tool got call %s after the restart, want the approval call left running, %s", a.req.CallID, children[0].ID)
	}
	a.decide <- "approved|alice|"
	if _, got := b.getCall("t1", c.ID, 10); got.Status != "succeeded" || ct.count(c.ID) != 1 {
		t.Fatalf("gated call: %+v, sent %d times", got, ct.count(c.ID))
	}
	if got := b.listCalls("t1", s.ID, "approve"); len(got) != 1 || got[0].Status != "succeeded" {
		t.Errorf("approval calls after the restart: %+v, want the one, succeeded", got)
	}
}

// TestReplicaKilledWhileGateWaits: three replicas; the one running a gated
// call and its approval call is killed (SIGKILL) while the approval tool
// holds the approval call's stream. The replica that takes the calls over
// after the lease sends the same approval call again, with its call ID —
// not a second one — and the operator's answer to it decides the gated
// call, which is sent once.
func TestReplicaKilledWhileGateWaits(t *testing.T) {
	t.Parallel()
	ct := newCountingTools(t)
	doc, env := waitingConfigJSON(ct.URL, true, 60)
	b := startReplicasWith(t, doc, env, 3, false)
	owner := &brain{t: t, url: b.replicas[0].url}
	s := owner.session("t1", "gated")
	_, c := owner.call("t1", s.ID, "gated", map[string]any{}, 0)
	first := nextApprovalReq(t, ct, 5*time.Second)
	if err := b.replicas[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-b.replicas[0].done
	again := nextApprovalReq(t, ct, 2*testLease+5*time.Second)
	if again.req.CallID != first.req.CallID {
		t.Fatalf("after the takeover the approval tool got call %s, want the approval call %s again", again.req.CallID, first.req.CallID)
	}
	again.decide <- "approved|alice|"
	if _, got := b.getCall("t1", c.ID, 15); got.Status != "succeeded" || ct.count(c.ID) != 1 {
		t.Fatalf("gated call: %+v, sent %d times", got, ct.count(c.ID))
	}
	if got := b.listCalls("t1", s.ID, "approve"); len(got) != 1 || got[0].Status != "succeeded" {
		t.Errorf("approval calls: %+v, want the one, succeeded", got)
	}
}

// TestResendPause: the pause before each resend, with the jitter's draws
// injected: the backoff step (0.5 s doubling to 5 s) with equal jitter, in
// [step/2, step], unless the tool sent a Retry-After, which is the pause
// as given; either way at most the time left, and the step doubles.
func TestResendPause(t *testing.T) {
	t.Parallel()
	lowest := func(int64) int64 { return 0 }
	highest := func(n int64) int64 { return n - 1 }
	middle := func(n int64) int64 { return n / 2 }
	day := 24 * time.Hour
	type step struct {
		retryAfter, left, want time.Duration
	}
	for _, tc := range []struct {
		name  string
		draw  func(int64) int64
		steps []step
	}{
		{"lowest draws: half the step", lowest, []step{
			{0, day, 250 * time.Millisecond}, {0, day, 500 * time.Millisecond}, {0, day, time.Second},
			{0, day, 2 * time.Second}, {0, day, 2500 * time.Millisecond}, {0, day, 2500 * time.Millisecond}}},
		{"highest draws: the step", highest, []step{
			{0, day, 500 * time.Millisecond}, {0, day, time.Second}, {0, day, 2 * time.Second},
			{0, day, 4 * time.Second}, {0, day, 5 * time.Second}, {0, day, 5 * time.Second}}},
		{"middle draws", middle, []step{
			{0, day, 375 * time.Millisecond}, {0, day, 750 * time.Millisecond}, {0, day, 1500 * time.Millisecond},
			{0, day, 3 * time.Second}, {0, day, 3750 * time.Millisecond}}},
		{"Retry-After is the pause, the step doubles under it", lowest, []step{
			{2 * time.Second, day, 2 * time.Second}, {0, day, 500 * time.Millisecond}, {0, day, time.Second},
			{7 * time.Second, day, 7 * time.Second}, {0, day, 2500 * time.Millisecond}}},
		{"Retry-After not jittered", highest, []step{{time.Second, day, time.Second}, {100 * time.Millisecond, day, 100 * time.Millisecond}}},
		{"capped by the time left", highest, []step{
			{0, 300 * time.Millisecond, 300 * time.Millisecond}, {0, 300 * time.Millisecond, 300 * time.Millisecond},
			{0, 3 * time.Second, 2 * time.Second}}},
		{"a huge Retry-After capped by the time left", lowest, []step{
			{3600 * time.Second, 3 * time.Second, 3 * time.Second}, {4294967295 * time.Second, day, day}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := resendPause{draw: tc.draw}
			for i, s := range tc.steps {
				if got := p.next(invoke.Outcome{RetryAfter: s.retryAfter}, s.left); got != s.want {
					t.Errorf("pause %d (Retry-After %s, %s left) = %s, want %s", i+1, s.retryAfter, s.left, got, s.want)
				}
			}
		})
	}

	// Seeded draws, as rand.Int64N makes them: each pause within
	// [step/2, step], and not all the same.
	r := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		p := resendPause{draw: r.Int64N}
		seen := map[time.Duration]bool{}
		for step := approvalResendMin; step <= approvalResendMax; step = min(2*step, approvalResendMax) {
			got := p.next(invoke.Outcome{}, time.Hour)
			if got < step/2 || got > step {
				t.Fatalf("pause %s for the step %s, want within [%s, %s]", got, step, step/2, step)
			}
			seen[got] = true
			if step == approvalResendMax {
				break
			}
		}
		if len(seen) < 2 {
			t.Errorf("the jittered pauses %v are all the same", seen)
		}
	}
	// The zero value draws from math/rand/v2.
	var p resendPause
	if got := p.next(invoke.Outcome{}, time.Hour); got < approvalResendMin/2 || got > approvalResendMin {
		t.Errorf("first pause of the zero value %s, want within [%s, %s]", got, approvalResendMin/2, approvalResendMin)
	}
}

// nextRetrying returns the next tool.progress "retrying" of call id on
// stream.
func nextRetrying(t *testing.T, stream <-chan sseEvent, id string) resendProgress {
	t.Helper()
	for {
		ev := next(t, stream)
		var e EventJSON
		json.Unmarshal([]byte(ev.data), &e)
		var p resendProgress
		if ev.name == "tool.progress" && e.CallID == id && json.Unmarshal(e.Data, &p) == nil && p.Status == "retrying" {
			return p
		}
	}
}

// TestApprovalResendRetryAfter: an approval tool that answers a 429 or
// 503 with Retry-After is asked again after that pause, not brain's own
// (0.5 s at first), and the tool.progress "retrying" says so in
// retry_in_ms. A Retry-After past the time the gated call still waits is
// cut to that time: the gated call then ends approval_expired and nothing
// more is sent. A Retry-After of 0 leaves brain's jittered backoff.
func TestApprovalResendRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		timeout  int           // approvals.timeout_seconds
		fail     string        // the first approve request's answer
		min, max time.Duration // of the pause brain reports (retry_in_ms)
		resent   bool          // a second request comes (else the gated call expires first)
	}{
		{"503 with Retry-After 2", 60, "503 after 2", 2 * time.Second, 2 * time.Second, true},
		{"429 with Retry-After 1", 60, "429 after 1", time.Second, time.Second, true},
		{"Retry-After 0", 60, "503 after 0", approvalResendMin / 2, approvalResendMin, true},
		{"Retry-After past the time left", 3, "503 after 3600", 1500 * time.Millisecond, 3 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, ct := startWaitingBrain(t, true, tc.timeout)
			s := b.session("t1", "gated")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, stream := b.openSSE(ctx, "t1", s.ID)
			b.waitStreams()
			ct.failNextApprovals(tc.fail)
			begin := time.Now()
			_, c := b.call("t1", s.ID, "gated", map[string]any{}, 0)
			var child string
			for deadline := time.Now().Add(5 * time.Second); child == ""; time.Sleep(10 * time.Millisecond) {
				if calls := b.listCalls("t1", s.ID, "approve"); len(calls) == 1 {
					child = calls[0].ID
				} else if time.Now().After(deadline) {
					t.Fatalf("approval calls %+v", calls)
				}
			}
			p := nextRetrying(t, stream, child)
			pause := time.Duration(p.RetryInMS) * time.Millisecond
			if p.Attempt != 2 || p.ErrorCode != "http_status" || pause < tc.min || pause > tc.max {
				t.Errorf("retrying progress %+v, want attempt 2, http_status, retry_in_ms within [%d, %d]", p, tc.min.Milliseconds(), tc.max.Milliseconds())
			}
			if !tc.resent {
				if _, got := b.getCall("t1", c.ID, 10); deref(got.ErrorCode) != "approval_expired" || ct.count(c.ID) != 0 {
					t.Fatalf("gated call: %+v, sent %d times", got, ct.count(c.ID))
				}
				if took := time.Since(begin); took > time.Duration(tc.timeout)*time.Second+3*time.Second {
					t.Errorf("the gated call expired %s after it began, want about its %d s", took, tc.timeout)
				}
				time.Sleep(time.Second)
				if n := len(ct.approveRequests()); n != 1 {
					t.Errorf("approve got %d requests, want 1: the pause ran past the gated call's expiry", n)
				}
				return
			}
			a := nextApprovalReq(t, ct, tc.max+5*time.Second)
			if a.req.CallID != child {
				t.Fatalf("resent approval call %s, want %s", a.req.CallID, child)
			}
			at := ct.approveTimes()
			if gap := at[1].Sub(at[0]); gap < pause || gap < tc.min || gap > tc.max+2*time.Second {
				t.Errorf("the second request came %s after the first, want the pause brain reported, %s (within [%s, %s])", gap, pause, tc.min, tc.max)
			}
			a.decide <- "approved|alice|"
			if _, got := b.getCall("t1", c.ID, 10); got.Status != "succeeded" || ct.count(c.ID) != 1 {
				t.Fatalf("gated call: %+v, sent %d times", got, ct.count(c.ID))
			}
		})
	}
}
