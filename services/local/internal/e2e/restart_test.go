package e2e

import (
	"encoding/json"
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

	l.p.kill()
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
	l.p.kill()
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
	l.p.stop()
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
