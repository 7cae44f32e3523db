package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

func statusOf(t *testing.T, b *brain, sess, id string) (state string, decision map[string]any) {
	t.Helper()
	c := b.call(sess, "approval_status", map[string]any{"approval_id": id}, 30)
	if c.Status != "succeeded" || c.Result == nil {
		t.Fatalf("approval_status %s: %+v", id, c)
	}
	var s map[string]any
	json.Unmarshal(c.Result.StructuredContent, &s)
	if inner, ok := s["result"].(map[string]any); ok {
		decision, _ = inner["structured_content"].(map[string]any)
	}
	state, _ = s["state"].(string)
	return state, decision
}

// TestPendingApprovalsSurviveSIGKILL kills the local service with SIGKILL
// while one approval waits for a poller (approval_start) and one for a
// stream (request_approval), restarts it on the same data directory, and
// decides both; approval_status reads the decisions back through brain.
func TestPendingApprovalsSurviveSIGKILL(t *testing.T) {
	l := startLocal(t, nil)
	b := startBrain(t, l)
	sess := b.session("request_approval", "approval_start", "approval_status")
	evs := b.events(sess)

	started := b.call(sess, "approval_start", map[string]any{"action": "Deploy v2.3 to production", "timeout_seconds": 3600}, 30)
	var st map[string]any
	json.Unmarshal(started.Result.StructuredContent, &st)
	jobID, _ := st["approval_id"].(string)
	if started.Status != "succeeded" || jobID == "" || st["state"] != "running" {
		t.Fatalf("approval_start: %+v %s", started, started.Result.StructuredContent)
	}

	stream := b.call(sess, "request_approval", map[string]any{"action": "Drain node 3", "details": "kubectl drain node-3"}, 0)
	streamID := progressOf(t, next(t, evs, "tool.progress", 10*time.Second)).ApprovalID

	l.p.Kill()
	// The stream's call ends in brain as a dropped connection: an unknown
	// outcome, since the service died mid-call.
	d, r := resultOf(t, next(t, evs, "tool.result", 15*time.Second))
	if d.Status != "failed" || r["unknown_outcome"] != true {
		t.Fatalf("stream call after SIGKILL: %+v %s", d, d.Result)
	}
	if got := b.getCall(stream.ID, 0); got.Status != "failed" {
		t.Fatalf("stream ToolCall %+v", got)
	}

	l.start() // same address, same data directory
	for _, id := range []string{jobID, streamID} {
		if state, _ := statusOf(t, b, sess, id); state != "running" {
			t.Fatalf("approval %s after restart: %s, want still pending (running)", id, state)
		}
	}
	o := signIn(t, l.url, "alice")
	list := o.get("/approvals")
	if !strings.Contains(list, "Deploy v2.3 to production") || !strings.Contains(list, "Drain node 3") {
		t.Fatalf("pending list after restart lacks the approvals:\n%s", list)
	}
	if code := o.decide(jobID, "approve", "approved after the restart"); code != http.StatusOK {
		t.Fatalf("decide %s: %d", jobID, code)
	}
	if code := o.decide(streamID, "deny", "node 3 hosts the primary"); code != http.StatusOK {
		t.Fatalf("decide %s: %d", streamID, code)
	}

	state, dec := statusOf(t, b, sess, jobID)
	if state != "succeeded" || dec["decision"] != "approved" || dec["operator"] != "alice" || dec["comment"] != "approved after the restart" {
		t.Fatalf("approval_status %s: %s %v", jobID, state, dec)
	}
	state, dec = statusOf(t, b, sess, streamID)
	if state != "failed" || dec["decision"] != "denied" || dec["comment"] != "node 3 hosts the primary" {
		t.Fatalf("approval_status %s: %s %v", streamID, state, dec)
	}

	// And once more across a second kill: decisions are durable too.
	l.p.Kill()
	l.start()
	if state, dec := statusOf(t, b, sess, jobID); state != "succeeded" || dec["operator"] != "alice" {
		t.Fatalf("decision after a second SIGKILL: %s %v", state, dec)
	}
	detail := signIn(t, l.url, "alice").get("/approval/" + jobID)
	if !strings.Contains(detail, "approved after the restart") || !strings.Contains(detail, "Decision log") {
		t.Fatalf("detail after restart:\n%s", detail)
	}
}

// TestSIGTERMLeavesStreamsPending: a graceful stop answers waiting streams
// at once (is_error, unknown outcome, "still pending") instead of holding the
// shutdown, and does not cancel their approvals.
func TestSIGTERMLeavesStreamsPending(t *testing.T) {
	l := startLocal(t, nil)
	b := startBrain(t, l)
	sess := b.session("request_approval", "approval_status")
	evs := b.events(sess)
	c := b.call(sess, "request_approval", map[string]any{"action": "Rotate TLS certificates"}, 0)
	id := progressOf(t, next(t, evs, "tool.progress", 10*time.Second)).ApprovalID

	begin := time.Now()
	l.p.Stop()
	if took := time.Since(begin); took > 5*time.Second {
		t.Fatalf("graceful stop took %s with a stream waiting", took)
	}
	next(t, evs, "tool.result", 10*time.Second)
	got := b.getCall(c.ID, 5)
	if got.Result == nil || !got.Result.IsError || !got.Result.UnknownOutcome || !strings.Contains(got.Result.Content[0].Text, "still pending") {
		t.Fatalf("stream's result on SIGTERM: %+v", got.Result)
	}
	l.start()
	if state, _ := statusOf(t, b, sess, id); state != "running" {
		t.Fatalf("approval after a graceful restart: %s, want still pending", state)
	}
}

// TestRecoverApprovalByCallIDAfterSIGKILL is the tester's report: local is
// killed while request_approval waits; brain ends the call failed with
// unknown_outcome; after the restart the approval is still pending, and
// the agent, which never stored the approval_id (it came only in a
// live-only progress event), finds it by the call_id of its failed call.
// Another session of the same tenant cannot.
func TestRecoverApprovalByCallIDAfterSIGKILL(t *testing.T) {
	l := startLocal(t, nil)
	b := startBrain(t, l)
	tools := []string{"request_approval", "approval_status", "approval_cancel"}
	sess := b.session(tools...)
	evs := b.events(sess)

	stream := b.call(sess, "request_approval", map[string]any{"action": "Drop table audit_2019", "details": "DROP TABLE audit_2019;"}, 0)
	// Only to know the approval is recorded: the test does not keep the ID
	// for the agent's side, as brain does not either.
	seen := progressOf(t, next(t, evs, "tool.progress", 10*time.Second)).ApprovalID
	l.p.Kill()
	d, r := resultOf(t, next(t, evs, "tool.result", 15*time.Second))
	if d.Status != "failed" || d.ErrorCode == nil || *d.ErrorCode != "connection_failed" || r["unknown_outcome"] != true {
		t.Fatalf("request_approval after SIGKILL: %+v %s", d, d.Result)
	}
	l.start()

	byCall := func(session, tool string, args map[string]any) (toolCall, map[string]any) {
		t.Helper()
		c := b.call(session, tool, args, 30)
		if c.Result == nil {
			t.Fatalf("%s %v: no result: %+v", tool, args, c)
		}
		var m map[string]any
		json.Unmarshal(c.Result.StructuredContent, &m)
		return c, m
	}
	c, m := byCall(sess, "approval_status", map[string]any{"call_id": stream.ID})
	if c.Status != "succeeded" || m["state"] != "running" || m["approval_id"] != seen {
		t.Fatalf("approval_status by call_id after restart: %+v %v, want approval %s running", c, m, seen)
	}

	// Another session of the tenant does not see this session's call.
	other := b.session(tools...)
	for _, tool := range []string{"approval_status", "approval_cancel"} {
		c, _ = byCall(other, tool, map[string]any{"call_id": stream.ID})
		if !c.Result.IsError || !strings.Contains(c.Result.Content[0].Text, "no approval was requested by call_id") {
			t.Fatalf("%s by call_id from another session: %+v", tool, c.Result)
		}
	}

	// The operator approves; the agent's waiting status call sees it.
	o := signIn(t, l.url, "alice")
	decided := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		code, err := o.tryDecide(seen, "approve", "checked the backup")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		decided <- err
	}()
	c, m = byCall(sess, "approval_status", map[string]any{"call_id": stream.ID, "wait_seconds": 15})
	if err := <-decided; err != nil {
		t.Fatalf("operator decision: %v", err)
	}
	inner, _ := m["result"].(map[string]any)
	dec, _ := inner["structured_content"].(map[string]any)
	if c.Status != "succeeded" || m["state"] != "succeeded" || dec["decision"] != "approved" || dec["operator"] != "alice" {
		t.Fatalf("approval_status by call_id with wait_seconds: %+v %v", c, m)
	}
}
