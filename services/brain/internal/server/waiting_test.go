package server

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/schema"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/store"
)

// countingTools is a real tool service for the waiting-call tests. Every
// tool counts the requests per call ID and the requests it holds at once;
// "held" answers only when the test releases it. "approve" plays the
// approval tool: it reports waiting_for_operator, then answers the
// decision the test sends.
type countingTools struct {
	*httptest.Server
	mu        sync.Mutex
	requests  map[string]int // call ID → requests received
	order     []string       // call IDs of held, in arrival order
	inflight  int
	peak      int
	release   chan struct{}     // one receive lets one held request answer
	arrived   chan tool.Request // held requests, as they arrive
	approvals chan approvalReq  // approve requests, as they arrive
	// approveFails are how the next approve requests fail, one each, before
	// approve answers as usual again (see failApprove); approveArgs are
	// the arguments of every approve request, in order.
	approveFails []string
	approveArgs  []string
	approveAt    []time.Time // when each approve request came
	// cancels are the requests of "cancel", the cancel tool of the
	// withdrawal tests, as they arrive; each waits for the test's answer.
	cancels chan cancelReq
}

// cancelReq is a request of the cancel tool: answer takes how it is
// untilGone waits for the next value of ch, false when r's client left
// first.
func untilGone[T any](r *http.Request, ch <-chan T) (T, bool) {
	select {
	case v := <-ch:
		return v, true
	case <-r.Context().Done():
		var zero T
		return zero, false
	}
}

// answered, "ok" or an HTTP status as writeStatus takes it ("503", "404",
// "503 after 2").
type cancelReq struct {
	req    tool.Request
	answer chan string
}

type approvalReq struct {
	req    tool.Request
	args   map[string]any
	decide chan string // "approved"/"denied"/"expired" + "|operator|comment"
}

func newCountingTools(t *testing.T) *countingTools {
	ct := &countingTools{requests: map[string]int{}, release: make(chan struct{}, 100),
		arrived: make(chan tool.Request, 100), approvals: make(chan approvalReq, 100), cancels: make(chan cancelReq, 100)}
	ct.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+toolsKey {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var req tool.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/tools/")
		ct.mu.Lock()
		ct.requests[req.CallID]++
		if name == "held" {
			ct.order = append(ct.order, req.CallID)
		}
		ct.inflight++
		ct.peak = max(ct.peak, ct.inflight)
		ct.mu.Unlock()
		done := func() {
			ct.mu.Lock()
			ct.inflight--
			ct.mu.Unlock()
		}
		switch name {
		case "busy":
			done()
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		case "held":
			ct.arrived <- req
			if _, ok := untilGone(r, ct.release); !ok {
				done()
				return
			}
		case "cancel":
			c := cancelReq{req: req, answer: make(chan string, 1)}
			ct.cancels <- c
			how, ok := untilGone(r, c.answer)
			if !ok {
				done()
				return
			}
			if state, rest, ok := strings.Cut(how, "|"); ok {
				// "state|decision|operator": local's approval_cancel
				// answer for an approval that stands so.
				done()
				writeCancelAnswer(w, state, rest)
				return
			}
			if how != "ok" {
				done()
				writeStatus(w, how)
				return
			}
		case "approve":
			ct.mu.Lock()
			ct.approveArgs = append(ct.approveArgs, string(req.Arguments))
			ct.approveAt = append(ct.approveAt, time.Now())
			var fail string
			if len(ct.approveFails) > 0 {
				fail, ct.approveFails = ct.approveFails[0], ct.approveFails[1:]
			}
			ct.mu.Unlock()
			if fail != "" {
				done()
				failApprove(w, fail)
				return
			}
			var args map[string]any
			json.Unmarshal(req.Arguments, &args)
			a := approvalReq{req: req, args: args, decide: make(chan string, 1)}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: progress\ndata: {\"status\":\"waiting_for_operator\"}\n\n")
			w.(http.Flusher).Flush()
			ct.approvals <- a
			d, ok := untilGone(r, a.decide)
			if !ok {
				done()
				return
			}
			parts := strings.SplitN(d, "|", 3)
			for len(parts) < 3 {
				parts = append(parts, "")
			}
			sc, _ := json.Marshal(map[string]string{"approval_id": "a1", "decision": parts[0], "operator": parts[1], "comment": parts[2]})
			res, _ := json.Marshal(tool.Result{Content: []tool.Content{tool.Text(parts[0])}, IsError: parts[0] != "approved", StructuredContent: sc})
			done()
			fmt.Fprintf(w, "event: result\ndata: %s\n\n", res)
			return
		}
		done()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"content":[{"type":"text","text":"ran %s"}]}`, req.CallID)
	}))
	t.Cleanup(ct.Close)
	return ct
}

// writeCancelAnswer answers a cancel request as local's approval_cancel
// does (pkg/jobs StatusJSON) for an approval in job state state whose
// decision and operator are decisionOperator, "decision|operator".
func writeCancelAnswer(w http.ResponseWriter, state, decisionOperator string) {
	decision, operator, _ := strings.Cut(decisionOperator, "|")
	sc, _ := json.Marshal(map[string]string{"approval_id": "a1", "decision": decision, "operator": operator, "comment": ""})
	inner := tool.Result{Content: []tool.Content{tool.Text(decision + " by " + operator)}, IsError: decision != "approved", StructuredContent: sc}
	status, _ := json.Marshal(map[string]any{"approval_id": "a1", "state": state, "created_at": time.Now().UTC().Format(time.RFC3339Nano),
		"finished_at": time.Now().UTC().Format(time.RFC3339Nano), "result": inner})
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(tool.Result{Content: []tool.Content{tool.Text("approval a1: " + state)}, StructuredContent: status})
}

// writeStatus answers how: an HTTP status, then optionally " after " and
// the Retry-After to send with it ("404", "503 after 2").
func writeStatus(w http.ResponseWriter, how string) {
	status, after, ok := strings.Cut(how, " after ")
	code, err := strconv.Atoi(status)
	if err != nil {
		panic("writeStatus: " + how)
	}
	if ok {
		w.Header().Set("Retry-After", after)
	}
	w.WriteHeader(code)
}

// failApprove answers an approve request the way how says: "drop" (the
// connection closes before an answer), an HTTP status as writeStatus takes
// it ("503", "404", "429 after 2"), "eof" (the stream ends after
// waiting_for_operator, without a result), "restarting" (is_error with
// unknown_outcome and no decision, as local's answer when it shuts down),
// "refused" (is_error, a known outcome, no decision) or "withdrawn"
// (decision cancelled by system, as local's after a dropped stream).
func failApprove(w http.ResponseWriter, how string) {
	result := func(r tool.Result) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(r)
	}
	switch how {
	case "drop":
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	case "eof":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: progress\ndata: {\"status\":\"waiting_for_operator\"}\n\n")
	case "restarting":
		result(tool.Result{Content: []tool.Content{tool.Text("The approval service is restarting.")}, IsError: true, UnknownOutcome: true})
	case "refused":
		result(tool.Result{Content: []tool.Content{tool.Text("call already asked for another action")}, IsError: true})
	case "withdrawn":
		sc, _ := json.Marshal(map[string]string{"approval_id": "a0", "decision": "cancelled", "operator": "system", "comment": "the caller stopped waiting (stream closed)"})
		result(tool.Result{Content: []tool.Content{tool.Text("Cancelled.")}, IsError: true, StructuredContent: sc})
	default:
		writeStatus(w, how)
	}
}

// failNextApprovals makes the next approve requests fail as hows say.
func (ct *countingTools) failNextApprovals(hows ...string) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.approveFails = append(ct.approveFails, hows...)
}

// approveRequests returns the arguments of every approve request so far.
func (ct *countingTools) approveRequests() []string {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return slices.Clone(ct.approveArgs)
}

// approveTimes returns when each approve request so far came.
func (ct *countingTools) approveTimes() []time.Time {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return slices.Clone(ct.approveAt)
}

func (ct *countingTools) count(callID string) int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return ct.requests[callID]
}

// waitingConfig binds the counting tools: lookup (a function tool with an
// output_schema), lookup_fast (one that times out in 1 s), gated (always
// asks), plain, held (max_concurrency 2) and, with approvalTool, approve
// as the approvals tool. approvalTimeout is approvals.timeout_seconds.
func waitingConfig(t *testing.T, url string, approvalTool bool, approvalTimeout int) *config.Config {
	t.Helper()
	data, env := waitingConfigJSON(url, approvalTool, approvalTimeout)
	cfg, err := config.Parse(data, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("host config: %v", err)
	}
	return cfg
}

// approveDetailsMax is the maxLength of details the approve tool takes,
// local's request_approval's.
const approveDetailsMax = 16384

// waitingConfigJSON is waitingConfig's document and the environment it
// names.
func waitingConfigJSON(url string, approvalTool bool, approvalTimeout int) ([]byte, map[string]string) {
	bind := func(name string, extra map[string]any) map[string]any {
		b := map[string]any{"name": name, "description": name + " tool", "tenants": []string{"t1", "t2"},
			"input_schema": map[string]any{"type": "object"}}
		if extra["type"] == nil {
			b["url"], b["token_env"] = url+"/tools/"+name, "BRAIN_TOOLS_KEY"
		}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	out := map[string]any{"type": "object", "properties": map[string]any{"status": map[string]any{"type": "string"}}, "required": []string{"status"}}
	tools := []any{
		bind("lookup", map[string]any{"type": "function", "output_schema": out, "max_output_bytes": 512,
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}}, "required": []string{"order_id"}}}),
		bind("lookup_fast", map[string]any{"type": "function", "timeout_seconds": 1}),
		bind("gated", map[string]any{"require_approval": "always"}),
		bind("plain", nil),
		bind("held", map[string]any{"max_concurrency": 2}),
		bind("approve", map[string]any{"timeout_seconds": 120, "input_schema": map[string]any{"type": "object", "properties": map[string]any{
			"action": map[string]any{"type": "string"}, "details": map[string]any{"type": "string", "maxLength": approveDetailsMax},
			"timeout_seconds": map[string]any{"type": "integer"}}, "required": []string{"action", "timeout_seconds"}}}),
		bind("busy", nil),
	}
	doc := map[string]any{"tools": tools, "api_keys": []any{
		map[string]string{"env": "KEY_ONE", "tenant": "t1"}, map[string]string{"env": "KEY_TWO", "tenant": "t2"}}}
	approvals := map[string]any{"timeout_seconds": approvalTimeout}
	if approvalTool {
		approvals["tool"] = "approve"
	}
	doc["approvals"] = approvals
	data, _ := json.Marshal(doc)
	return data, map[string]string{"BRAIN_TOOLS_KEY": toolsKey, "KEY_ONE": apiKeys["t1"], "KEY_TWO": apiKeys["t2"]}
}

// startWaitingBrain starts a brain with the counting tools, on the store
// BRAIN_TEST_STORE names: as three replicas too, when no option is given.
func startWaitingBrain(t *testing.T, approvalTool bool, approvalTimeout int, opts ...func(*Options)) (*brain, *countingTools) {
	t.Helper()
	ct := newCountingTools(t)
	if testStore == storeReplicas && len(opts) == 0 {
		doc, env := waitingConfigJSON(ct.URL, approvalTool, approvalTimeout)
		return startReplicasWith(t, doc, env, 3, false), ct
	}
	cfg := waitingConfig(t, ct.URL, approvalTool, approvalTimeout)
	return startBrain(t, append([]func(*Options){func(o *Options) { o.Config = cfg }}, opts...)...), ct
}

func (b *brain) getCall(tenant, id string, wait int) (int, CallJSON) {
	b.t.Helper()
	r := b.do("GET", fmt.Sprintf("/tool_calls/%s?wait_seconds=%d", id, wait), tenant, nil)
	var c CallJSON
	r.json(b.t, &c)
	return r.status, c
}

func (b *brain) respond(tenant, id string, body any) resp {
	b.t.Helper()
	return b.do("POST", "/tool_calls/"+id+"/respond", tenant, body)
}

// eventsOf returns the session's events of call id, by type.
func eventsOf(evs []EventJSON, id string) []EventJSON {
	var out []EventJSON
	for _, e := range evs {
		if e.CallID == id {
			out = append(out, e)
		}
	}
	return out
}

// TestFunctionTool: a call of a function tool waits in requires_input with
// its prompt, response_schema and response_expires_at; the application's
// result is checked as a tool's answer is (a bad one is refused naming the
// field, and the call still waits), then ends the call; the wait is bounded
// by timeout_seconds; a cancelled call takes no answer.
func TestFunctionTool(t *testing.T) {
	t.Parallel()
	b, _ := startWaitingBrain(t, false, 300)
	s := b.session("t1", "lookup", "lookup_fast", "plain")

	status, c := b.call("t1", s.ID, "lookup", map[string]string{"order_id": "A-17"}, 0)
	if status != 202 || c.Status != "requires_input" || c.Prompt == nil || !strings.Contains(*c.Prompt, `{"order_id":"A-17"}`) ||
		c.ResponseExpiresAt == nil || c.StartedAt == nil || c.ResultAvailable || c.Retryable != nil || c.CallerType != "api" ||
		c.ParentID != nil || c.SpanID != nil || c.QueuePosition != nil {
		t.Fatalf("function call: %d %+v", status, c)
	}
	if exp, _ := time.Parse(time.RFC3339Nano, *c.ResponseExpiresAt); time.Until(exp) < 290*time.Second || time.Until(exp) > 300*time.Second {
		t.Errorf("response_expires_at %s, want timeout_seconds (300 s) from now", *c.ResponseExpiresAt)
	}
	rs, err := schema.Compile("response_schema", c.ResponseSchema)
	if err != nil {
		t.Fatalf("response_schema does not compile: %v\n%s", err, c.ResponseSchema)
	}
	for doc, ok := range map[string]bool{
		`{"content":[{"type":"text","text":"x"}]}`: true, `{"structured_content":{"status":"shipped"}}`: true,
		`{"structured_content":{"state":"x"}}`: false, `{"is_error":true,"structured_content":{"state":"x"}}`: true,
		`{"content":[]}`: false, `{}`: false, `{"contents":[]}`: false,
	} {
		if err := rs.Validate("response", []byte(doc)); (err == nil) != ok {
			t.Errorf("response_schema on %s: %v, want valid %v", doc, err, ok)
		}
	}

	for _, tc := range []struct {
		name   string
		body   any
		status int
		code   string
		want   string
	}{
		{"unknown field", `{"content":[{"type":"text","text":"x"}],"extra":1}`, 400, httpapi.CodeInvalidRequest, "extra: unknown field"},
		{"bad block type", `{"content":[{"type":"audio"}]}`, 400, httpapi.CodeInvalidRequest, `content[0].type: unknown content type "audio"`},
		{"text block without text", `{"content":[{"type":"text"}]}`, 400, httpapi.CodeInvalidRequest, "content[0].text: required in a text block"},
		{"empty result", `{}`, 400, httpapi.CodeInvalidRequest, "neither content nor structured_content"},
		{"empty content list", `{"content":[]}`, 400, httpapi.CodeInvalidRequest, "content is an empty list; give it at least 1 block"},
		{"output_schema mismatch", `{"structured_content":{"status":5}}`, 400, httpapi.CodeInvalidRequest, `structured_content: does not match tool lookup's output_schema: structured_content: at "/status"`},
		{"not an object", `[1]`, 400, httpapi.CodeInvalidRequest, "body: must be a result object, got an array"},
		{"trailing data", `{"content":[{"type":"text","text":"x"}]} {}`, 400, httpapi.CodeInvalidRequest, "body: unexpected data after the JSON value"},
		{"over max_output_bytes", `{"content":[{"type":"text","text":"` + strings.Repeat("x", 500) + `"}]}`, 413, httpapi.CodeTooLarge, "larger than tool lookup's max_output_bytes 512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefusal(t, b.respond("t1", c.ID, tc.body), tc.status, tc.code, tc.want)
		})
	}
	wantRefusal(t, b.do("POST", "/tool_calls/"+c.ID+"/respond", "t1", `{"content":[]}`, "Content-Type", "text/plain"), 415, httpapi.CodeUnsupportedMedia, "Content-Type must be application/json")
	wantRefusal(t, b.respond("t2", c.ID, `{"content":[{"type":"text","text":"x"}]}`), 404, httpapi.CodeNotFound, c.ID)
	if _, again := b.getCall("t1", c.ID, 0); again.Status != "requires_input" {
		t.Fatalf("after refused answers the call is %s, want still requires_input", again.Status)
	}
	// Exactly max_output_bytes is taken: the body is the result.
	exact := `{"structured_content":{"status":"shipped","pad":"` + strings.Repeat("p", 512-len(`{"structured_content":{"status":"shipped","pad":""}}`)) + `"}}`
	if len(exact) != 512 {
		t.Fatalf("edge result of %d bytes", len(exact))
	}
	r := b.respond("t1", c.ID, exact)
	var done CallJSON
	r.json(t, &done)
	text, res := resultText(t, done.Result)
	if r.status != 200 || done.Status != "succeeded" || !done.ResultAvailable || done.Retryable != nil || done.Prompt != nil ||
		string(done.ResponseSchema) != "null" || done.ResponseExpiresAt != nil || !strings.Contains(text, `"status":"shipped"`) || res.IsError {
		t.Fatalf("answered: %d %s", r.status, r.body)
	}
	wantRefusal(t, b.respond("t1", c.ID, `{"content":[{"type":"text","text":"again"}]}`), 409, httpapi.CodeConflict, "already succeeded")
	evs := eventsOf(b.events("t1", s.ID), c.ID)
	if got := eventTypes(evs); !slices.Equal(got, []string{"tool.call", "tool.requires_input", "tool.responded", "tool.result"}) {
		t.Fatalf("events %v", got)
	}
	var ri requiresInputData
	json.Unmarshal(evs[1].Data, &ri)
	var rd respondedData
	json.Unmarshal(evs[2].Data, &rd)
	if ri.Kind != "function" || ri.Prompt != *c.Prompt || rd.Responder.Type != "api" || rd.Responder.APIKey != "KEY_ONE" || rd.Kind != "function" {
		t.Errorf("requires_input %+v, responded %+v", ri, rd)
	}

	// An error result bypasses output_schema and fails the call as the
	// tool's own error.
	_, c2 := b.call("t1", s.ID, "lookup", map[string]string{"order_id": "B"}, 0)
	r = b.respond("t1", c2.ID, `{"is_error":true,"structured_content":{"reason":"no such order"}}`)
	r.json(t, &done)
	text, _ = resultText(t, done.Result)
	if done.Status != "failed" || deref(done.ErrorCode) != "tool_error" || text != `{"reason":"no such order"}` || done.Retryable == nil || *done.Retryable {
		t.Errorf("error answer: %s", r.body)
	}

	// timeout_seconds bounds the wait; an answer after it is 409.
	_, c3 := b.call("t1", s.ID, "lookup_fast", map[string]any{}, 0)
	_, timedOut := b.getCall("t1", c3.ID, 5)
	if timedOut.Status != "timed_out" || deref(timedOut.ErrorCode) != "timeout" || !timedOut.UnknownOutcome || timedOut.Retryable == nil || *timedOut.Retryable {
		t.Fatalf("after timeout_seconds: %+v", timedOut)
	}
	wantRefusal(t, b.respond("t1", c3.ID, `{"content":[{"type":"text","text":"late"}]}`), 409, httpapi.CodeConflict, "already timed_out")

	// Cancelled while waiting: it takes no answer.
	_, c4 := b.call("t1", s.ID, "lookup", map[string]string{"order_id": "C"}, 0)
	r = b.do("POST", "/tool_calls/"+c4.ID+"/cancel", "t1", nil)
	var cancelled CallJSON
	r.json(t, &cancelled)
	if r.status != 200 || cancelled.Status != "cancelled" || !cancelled.UnknownOutcome {
		t.Fatalf("cancel while waiting: %d %s", r.status, r.body)
	}
	wantRefusal(t, b.respond("t1", c4.ID, `{"content":[{"type":"text","text":"late"}]}`), 409, httpapi.CodeConflict, "already cancelled")

	// A call that does not wait for input takes none.
	_, p := b.call("t1", s.ID, "plain", map[string]any{}, 5)
	wantRefusal(t, b.respond("t1", p.ID, `{"approved":true}`), 409, httpapi.CodeConflict, "already succeeded")
	wantRefusal(t, b.respond("t1", "call_nope", `{}`), 404, httpapi.CodeNotFound, "call_nope")
	// Arguments that fail input_schema are refused before anybody is asked.
	_, bad := b.call("t1", s.ID, "lookup", map[string]any{"order": 1}, 5)
	if bad.Status != "failed" || deref(bad.ErrorCode) != "invalid_arguments" || bad.Prompt != nil {
		t.Errorf("invalid arguments: %+v", bad)
	}
}

// TestApprovalGate: a gated call waits in requires_input with a prompt
// showing the tool and its exact arguments; approved, the tool gets exactly
// one request; denied or expired, it gets none and the result says why.
func TestApprovalGate(t *testing.T) {
	t.Parallel()
	b, ct := startWaitingBrain(t, false, 2)
	s := b.session("t1", "gated", "plain")

	_, c := b.call("t1", s.ID, "gated", json.RawMessage(`{"path":"/srv/a b","n":3}`), 0)
	if c.Status != "requires_input" || c.StartedAt != nil || c.Prompt == nil || !strings.Contains(*c.Prompt, "tool gated") ||
		!strings.Contains(*c.Prompt, `{"path":"/srv/a b","n":3}`) || string(c.ResponseSchema) != string(approvalResponseSchema) || c.ResponseExpiresAt == nil {
		t.Fatalf("gated call: %+v", c)
	}
	for _, tc := range []struct{ body, want string }{
		{`{}`, "approved: required"},
		{`{"approved":"yes"}`, "approved: wrong type"},
		{`{"approved":true,"comment":"` + strings.Repeat("é", MaxCommentChars+1) + `"}`, "comment: longer than 2000 characters (got 2001)"},
		{`{"approved":true,"reason":"x"}`, "reason: unknown field"},
		{`{"Approved":true}`, `did you mean "approved"`},
		{`null`, "body: must be a JSON object, got null"},
	} {
		wantRefusal(t, b.respond("t1", c.ID, tc.body), 400, httpapi.CodeInvalidRequest, tc.want)
	}
	if ct.count(c.ID) != 0 {
		t.Fatal("the tool got a gated call before it was approved")
	}
	r := b.respond("t1", c.ID, map[string]any{"approved": true, "comment": strings.Repeat("é", MaxCommentChars)})
	var ok CallJSON
	r.json(t, &ok)
	if r.status != 200 && r.status != 202 || ok.Status == "requires_input" || ok.Prompt != nil {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	_, ok = b.getCall("t1", c.ID, 5)
	if ok.Status != "succeeded" || ct.count(c.ID) != 1 || ok.StartedAt == nil {
		t.Fatalf("approved call: %+v, the tool got %d requests", ok, ct.count(c.ID))
	}
	wantRefusal(t, b.respond("t1", c.ID, `{"approved":false}`), 409, httpapi.CodeConflict, "already succeeded")

	_, d := b.call("t1", s.ID, "gated", map[string]any{"rm": "-rf"}, 0)
	r = b.respond("t1", d.ID, map[string]any{"approved": false, "comment": "Use the staging copy."})
	var denied CallJSON
	r.json(t, &denied)
	text, res := resultText(t, denied.Result)
	if r.status != 200 || denied.Status != "failed" || deref(denied.ErrorCode) != "approval_denied" || !res.IsError || res.UnknownOutcome ||
		denied.UnknownOutcome || denied.Retryable == nil || *denied.Retryable || ct.count(d.ID) != 0 ||
		!strings.Contains(text, "the application (API key KEY_ONE) denied it") || !strings.Contains(text, `"Use the staging copy."`) || !strings.Contains(text, "not sent") {
		t.Fatalf("denied: %d %s (tool got %d)", r.status, r.body, ct.count(d.ID))
	}

	_, e := b.call("t1", s.ID, "gated", map[string]any{}, 0)
	_, expired := b.getCall("t1", e.ID, 5)
	text, res = resultText(t, expired.Result)
	if expired.Status != "failed" || deref(expired.ErrorCode) != "approval_expired" || !res.IsError || res.UnknownOutcome ||
		expired.Retryable == nil || !*expired.Retryable || ct.count(e.ID) != 0 || !strings.Contains(text, "nobody answered") {
		t.Fatalf("expired: %+v", expired)
	}
	wantRefusal(t, b.respond("t1", e.ID, `{"approved":true}`), 409, httpapi.CodeConflict, "already failed")

	// Cancelled while waiting for its approval: never sent, retryable.
	_, f := b.call("t1", s.ID, "gated", map[string]any{}, 0)
	r = b.do("POST", "/tool_calls/"+f.ID+"/cancel", "t1", nil)
	var cancelled CallJSON
	r.json(t, &cancelled)
	if cancelled.Status != "cancelled" || cancelled.UnknownOutcome || cancelled.Retryable == nil || !*cancelled.Retryable || ct.count(f.ID) != 0 {
		t.Fatalf("cancelled gated call: %s", r.body)
	}

	evs := b.events("t1", s.ID)
	if got := eventTypes(eventsOf(evs, c.ID)); !slices.Equal(got, []string{"tool.call", "tool.requires_input", "tool.responded", "tool.result"}) {
		t.Errorf("approved call's events %v", got)
	}
	if got := eventTypes(eventsOf(evs, d.ID)); !slices.Equal(got, []string{"tool.call", "tool.requires_input", "tool.responded", "tool.result"}) {
		t.Errorf("denied call's events %v", got)
	}
	if got := eventTypes(eventsOf(evs, e.ID)); !slices.Equal(got, []string{"tool.call", "tool.requires_input", "tool.result"}) {
		t.Errorf("expired call's events %v", got)
	}
	var rd respondedData
	json.Unmarshal(eventsOf(evs, d.ID)[2].Data, &rd)
	if rd.Kind != "approval" || rd.Approved == nil || *rd.Approved || deref(rd.Comment) != "Use the staging copy." || rd.Responder.APIKey != "KEY_ONE" {
		t.Errorf("tool.responded of the denial: %s", eventsOf(evs, d.ID)[2].Data)
	}
}

// TestSessionRequireApproval: a session may gate a tool its binding does
// not, never loosen one; each refusal names the field.
func TestSessionRequireApproval(t *testing.T) {
	t.Parallel()
	b, ct := startWaitingBrain(t, false, 300)
	for _, tc := range []struct {
		name string
		cfg  map[string]any
		want string
	}{
		{"loosen", map[string]any{"tools": []string{"gated"}, "require_approval": map[string]any{"gated": "never"}},
			`config.require_approval.gated: "never" would loosen the binding's require_approval "always"; a session may only tighten it`},
		{"tool not in the session", map[string]any{"tools": []string{"plain"}, "require_approval": map[string]any{"gated": "always"}},
			`config.require_approval.gated: "gated" is not one of config.tools`},
		{"bad value", map[string]any{"tools": []string{"plain"}, "require_approval": map[string]any{"plain": "sometimes"}},
			`config.require_approval.plain: must be "always" or "never", got "sometimes"`},
		{"null", map[string]any{"tools": []string{"plain"}, "require_approval": map[string]any{"plain": nil}},
			`config.require_approval.plain: must be "always" or "never", got null`},
		{"function tool", map[string]any{"tools": []string{"lookup"}, "require_approval": map[string]any{"lookup": "always"}},
			`config.require_approval.lookup: "lookup" is a function tool`},
		{"not an object", map[string]any{"tools": []string{"plain"}, "require_approval": "always"}, "config.require_approval: wrong type"},
		{"in the wrong case", map[string]any{"tools": []string{"plain"}, "requireApproval": map[string]any{}}, "config.requireApproval: unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefusal(t, b.do("POST", "/sessions", "t1", map[string]any{"config": tc.cfg}), 400, httpapi.CodeInvalidRequest, tc.want)
		})
	}
	r := b.do("POST", "/sessions", "t1", map[string]any{"config": map[string]any{"tools": []string{"plain", "gated"},
		"require_approval": map[string]any{"plain": "always", "gated": "always"}}})
	var s SessionJSON
	r.json(t, &s)
	if r.status != 201 || !strings.Contains(string(s.Config), `"require_approval":{"gated":"always","plain":"always"}`) {
		t.Fatalf("tightening session: %d %s", r.status, r.body)
	}
	_, c := b.call("t1", s.ID, "plain", map[string]any{}, 0)
	if c.Status != "requires_input" || ct.count(c.ID) != 0 {
		t.Fatalf("plain in a session that gates it: %+v", c)
	}
	// Another session's plain is not gated.
	other := b.session("t1", "plain")
	if _, c := b.call("t1", other.ID, "plain", map[string]any{}, 5); c.Status != "succeeded" {
		t.Fatalf("plain elsewhere: %+v", c)
	}
	// "never" on a binding that does not gate is no change.
	if r := b.do("POST", "/sessions", "t1", map[string]any{"config": map[string]any{"tools": []string{"plain"}, "require_approval": map[string]any{"plain": "never"}}}); r.status != 201 {
		t.Errorf("never on an ungated binding: %d %s", r.status, r.body)
	}
	// Nor may a tool set bring in a function tool under a name the
	// session gates: its approved call once crashed brain (a close of a
	// closed channel: the function tool's wait took the approval's answer).
	function := map[string]any{"type": "function", "name": "plain", "description": "shadows plain"}
	wantRefusal(t, b.do("PUT", "/sessions/"+s.ID+"/tools", "t1", map[string]any{"tools": []any{map[string]any{"name": "gated"}, function}}),
		400, httpapi.CodeInvalidRequest, `tools[1].name: "plain" is a function tool, answered by the application itself, and the session's config.require_approval.plain is "always": a function tool cannot be gated`)
	function["name"] = "other"
	if r := b.do("PUT", "/sessions/"+s.ID+"/tools", "t1", map[string]any{"tools": []any{map[string]any{"name": "plain"}, function}}); r.status != 200 {
		t.Fatalf("an ungated function tool: %d %s", r.status, r.body)
	}
	if _, c := b.call("t1", s.ID, "plain", map[string]any{}, 0); c.Status != "requires_input" || !strings.HasPrefix(deref(c.Prompt), "Approve") {
		t.Errorf("plain after the PUT: %+v", c)
	}
}

// TestApprovedCallWaitsForASlot: an approved call of a gated tool with
// max_concurrency is stored queued and goes on once a slot is free (it
// stayed queued for ever, never joining its queue: found by a tester with
// the demo's sandbox_exec), in turn with the calls queued before it.
func TestApprovedCallWaitsForASlot(t *testing.T) {
	t.Parallel()
	b, ct := startWaitingBrain(t, false, 300)
	r := b.do("POST", "/sessions", "t1", map[string]any{"config": map[string]any{"tools": []string{"held"}, "require_approval": map[string]any{"held": "always"}}})
	var s SessionJSON
	if r.json(t, &s); r.status != 201 {
		t.Fatalf("session: %d %s", r.status, r.body)
	}
	var ids []string
	for i := range 3 {
		_, c := b.call("t1", s.ID, "held", map[string]int{"i": i}, 0)
		if c.Status != "requires_input" {
			t.Fatalf("call %d: %+v", i, c)
		}
		ids = append(ids, c.ID)
	}
	for range ids {
		ct.release <- struct{}{} // each held request answers at once
	}
	for _, id := range ids {
		if r := b.respond("t1", id, map[string]any{"approved": true}); r.status != 200 && r.status != 202 {
			t.Fatalf("approve %s: %d %s", id, r.status, r.body)
		}
	}
	for _, id := range ids {
		if _, c := b.getCall("t1", id, 10); c.Status != "succeeded" || ct.count(id) != 1 {
			t.Errorf("approved call %s: %s, sent %d times", id, c.Status, ct.count(id))
		}
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.peak > 2 {
		t.Errorf("%d calls at once, over max_concurrency 2", ct.peak)
	}
}

// TestGatedToolTurnedFunction: a host config reloaded with a tool a
// session gates now a function tool; a call of it is refused, 409, naming
// the gate, not started waiting for both an approval and an answer.
func TestGatedToolTurnedFunction(t *testing.T) {
	t.Parallel()
	if testStore == storeReplicas {
		t.Skip("reloads one brain's host config in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	b, ct := startWaitingBrain(t, false, 300, func(*Options) {})
	r := b.do("POST", "/sessions", "t1", map[string]any{"config": map[string]any{"tools": []string{"plain"}, "require_approval": map[string]any{"plain": "always"}}})
	var s SessionJSON
	if r.json(t, &s); r.status != 201 {
		t.Fatalf("session: %d %s", r.status, r.body)
	}
	data, env := waitingConfigJSON(ct.URL, false, 300)
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, tl := range doc["tools"].([]any) {
		if b := tl.(map[string]any); b["name"] == "plain" {
			delete(b, "url")
			delete(b, "token_env")
			b["type"] = "function"
		}
	}
	data, _ = json.Marshal(doc)
	cfg, err := config.Parse(data, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	b.srv.Reload(cfg)
	wantRefusal(t, b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", map[string]any{"tool": "plain"}), 409, httpapi.CodeConflict,
		`tool: session "`+s.ID+`" gates "plain" (config.require_approval "always"), which is now a function tool`)
}

// TestMaxConcurrency: with max_concurrency 2 and 10 calls at once, the tool
// never holds more than 2; the others wait queued, with their place shown,
// and go running in the order they were made; a queued call cancelled is
// never sent, and retryable.
func TestMaxConcurrency(t *testing.T) {
	t.Parallel()
	b, ct := startWaitingBrain(t, false, 300)
	s := b.session("t1", "held")
	ids := make([]string, 10)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			_, c := b.call("t1", s.ID, "held", map[string]int{"i": i}, 0)
			ids[i] = c.ID
		})
	}
	wg.Wait()
	for range 2 {
		select {
		case <-ct.arrived:
		case <-time.After(5 * time.Second):
			t.Fatal("the first two calls did not reach the tool")
		}
	}
	// The calls in the order brain stored them: the list's order.
	var list struct {
		ToolCalls []CallJSON `json:"tool_calls"`
	}
	b.do("GET", "/tool_calls?session_id="+s.ID, "t1", nil).json(t, &list)
	var order, queued []string
	for _, c := range list.ToolCalls {
		order = append(order, c.ID)
		switch c.Status {
		case "queued":
			queued = append(queued, c.ID)
			if c.QueuePosition == nil || *c.QueuePosition != len(queued) || c.StartedAt != nil {
				t.Errorf("queued call %s: position %v, started_at %v; want %d, null", c.ID, c.QueuePosition, c.StartedAt, len(queued))
			}
		case "running":
			if c.QueuePosition != nil {
				t.Errorf("running call with a queue position %d", *c.QueuePosition)
			}
		default:
			t.Errorf("call %s is %s", c.ID, c.Status)
		}
	}
	// The first two took the free slots at once; they reach the tool in
	// either order.
	ct.mu.Lock()
	first := slices.Sorted(slices.Values(ct.order))
	ct.order = slices.Clone(order[:2])
	ct.mu.Unlock()
	if len(queued) != 8 || !slices.Equal(first, slices.Sorted(slices.Values(order[:2]))) {
		t.Fatalf("queued %d, the tool got %v first, stored order %v", len(queued), first, order)
	}
	// Cancel the fourth queued call: it leaves the queue, never sent.
	gone := queued[3]
	r := b.do("POST", "/tool_calls/"+gone+"/cancel", "t1", nil)
	var c CallJSON
	r.json(t, &c)
	if c.Status != "cancelled" || c.UnknownOutcome || c.Retryable == nil || !*c.Retryable || c.QueuePosition != nil {
		t.Fatalf("cancelled queued call: %s", r.body)
	}
	if _, c := b.getCall("t1", queued[4], 0); c.QueuePosition == nil || *c.QueuePosition != 4 {
		t.Errorf("the call after the cancelled one: position %v, want 4", c.QueuePosition)
	}
	// One answer at a time: each frees a slot for exactly one queued call.
	for range 7 {
		ct.release <- struct{}{}
		select {
		case <-ct.arrived:
		case <-time.After(5 * time.Second):
			t.Fatal("a freed slot went to no queued call")
		}
	}
	for range 2 {
		ct.release <- struct{}{}
	}
	for _, id := range ids {
		if _, c := b.getCall("t1", id, 10); (id == gone) != (c.Status == "cancelled") || id != gone && c.Status != "succeeded" {
			t.Errorf("call %s ended %s", id, c.Status)
		}
	}
	want := slices.DeleteFunc(slices.Clone(order), func(id string) bool { return id == gone })
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if !slices.Equal(ct.order, want) {
		t.Errorf("the tool got the calls in the order\n%v\nwant the stored order\n%v", ct.order, want)
	}
	if ct.peak > 2 {
		t.Errorf("the tool held %d calls at once, want at most 2", ct.peak)
	}
	if ct.requests[gone] != 0 {
		t.Error("the cancelled queued call was sent")
	}
	for _, id := range want {
		if ct.requests[id] != 1 {
			t.Errorf("call %s sent %d times", id, ct.requests[id])
		}
	}
}

// TestQueueFull: past Options.MaxQueued waiting calls, a call is refused
// before it is sent, retryable; one less is queued.
func TestQueueFull(t *testing.T) {
	t.Parallel()
	b, ct := startWaitingBrain(t, false, 300, func(o *Options) { o.MaxQueued = 3 })
	s := b.session("t1", "held")
	var statuses []string
	for range 5 {
		_, c := b.call("t1", s.ID, "held", map[string]any{}, 0)
		statuses = append(statuses, c.Status)
	}
	// 2 running, 3 queued (the cap), then a sixth is refused.
	_, c := b.call("t1", s.ID, "held", map[string]any{}, 5)
	if c.Status != "failed" || deref(c.ErrorCode) != "queue_full" || c.Retryable == nil || !*c.Retryable || c.UnknownOutcome || ct.count(c.ID) != 0 {
		t.Fatalf("sixth call: %+v (statuses before %v)", c, statuses)
	}
	if !strings.Contains(deref(c.ErrorMessage), "3 calls of tenant \"t1\" already wait") {
		t.Errorf("message %q", deref(c.ErrorMessage))
	}
	// Another tenant has its own queue.
	s2 := b.session("t2", "held")
	if _, c := b.call("t2", s2.ID, "held", map[string]any{}, 0); c.Status != "running" {
		t.Errorf("t2's first call: %s", c.Status)
	}
	for range 7 {
		ct.release <- struct{}{}
	}
}

// TestApprovalCall: with an approval tool in the host config, a gated call
// makes an approval call (caller_type system, parent_id the gated call,
// the exact arguments in its details); the operator's answer there decides
// the gated call, and an answer through the API cancels it.
func TestApprovalCall(t *testing.T) {
	t.Parallel()
	b, ct := startWaitingBrain(t, true, 60)
	s := b.session("t1", "gated")
	nextApproval := func() approvalReq {
		t.Helper()
		select {
		case a := <-ct.approvals:
			return a
		case <-time.After(5 * time.Second):
			t.Fatal("no approval call reached the approval tool")
		}
		return approvalReq{}
	}

	_, c := b.call("t1", s.ID, "gated", map[string]any{"db": "payments"}, 0)
	a := nextApproval()
	details, _ := a.args["details"].(string)
	if a.args["action"] != "Call tool gated" || !strings.Contains(details, `{"db":"payments"}`) || !strings.Contains(details, c.ID) ||
		a.args["timeout_seconds"].(float64) < 59 || a.args["timeout_seconds"].(float64) > 60 || a.req.SessionID != s.ID {
		t.Fatalf("approval request %+v", a.args)
	}
	_, child := b.getCall("t1", a.req.CallID, 0)
	if child.CallerType != "system" || deref(child.ParentID) != c.ID || child.Tool != "approve" || child.Status != "running" {
		t.Fatalf("approval call %+v", child)
	}
	a.decide <- "approved|alice|Go ahead."
	if _, done := b.getCall("t1", c.ID, 5); done.Status != "succeeded" || ct.count(c.ID) != 1 {
		t.Fatalf("approved on the page: %+v, sent %d times", done, ct.count(c.ID))
	}
	evs := b.events("t1", s.ID)
	var rd respondedData
	for _, e := range eventsOf(evs, c.ID) {
		if e.Type == "tool.responded" {
			json.Unmarshal(e.Data, &rd)
		}
	}
	if rd.Responder.Type != "operator" || rd.Responder.Name != "alice" || rd.Responder.CallID != a.req.CallID || deref(rd.Comment) != "Go ahead." {
		t.Errorf("responder %+v", rd)
	}

	_, d := b.call("t1", s.ID, "gated", map[string]any{}, 0)
	a = nextApproval()
	a.decide <- "denied|bob|Not today."
	_, denied := b.getCall("t1", d.ID, 5)
	text, _ := resultText(t, denied.Result)
	if deref(denied.ErrorCode) != "approval_denied" || !strings.Contains(text, `operator bob denied it, saying: "Not today."`) || ct.count(d.ID) != 0 {
		t.Fatalf("denied on the page: %+v", denied)
	}

	// Answered through the API: the approval call is cancelled.
	_, e := b.call("t1", s.ID, "gated", map[string]any{}, 0)
	a = nextApproval()
	if r := b.respond("t1", e.ID, `{"approved":true}`); r.status >= 300 && r.status != 202 {
		t.Fatalf("respond: %d %s", r.status, r.body)
	}
	if _, child := b.getCall("t1", a.req.CallID, 5); child.Status != "cancelled" {
		t.Errorf("the approval call after an answer through the API: %s", child.Status)
	}
	if _, done := b.getCall("t1", e.ID, 5); done.Status != "succeeded" || ct.count(e.ID) != 1 {
		t.Errorf("gated call answered through the API: %+v", done)
	}

	// Expired on the page.
	_, f := b.call("t1", s.ID, "gated", map[string]any{}, 0)
	nextApproval().decide <- "expired|system|"
	if _, exp := b.getCall("t1", f.ID, 5); deref(exp.ErrorCode) != "approval_expired" || ct.count(f.ID) != 0 {
		t.Errorf("expired on the page: %+v", exp)
	}

	// The interrupt of the session ends both.
	_, g := b.call("t1", s.ID, "gated", map[string]any{}, 0)
	a = nextApproval()
	b.do("POST", "/sessions/"+s.ID+"/interrupt", "t1", nil)
	for _, id := range []string{g.ID, a.req.CallID} {
		if _, c := b.getCall("t1", id, 0); c.Status != "cancelled" {
			t.Errorf("after the interrupt %s is %s", id, c.Status)
		}
	}
}

// TestApprovalDetailsFit: details never exceed the approval tool's
// maxLength (in characters, not bytes); arguments too long for it are shown
// from their beginning under a notice that says how long they are and what
// they hash to, and arguments that fit are shown whole.
func TestApprovalDetailsFit(t *testing.T) {
	t.Parallel()
	call := func(args string) *store.Call {
		return &store.Call{ID: "call_0123456789abcdefghijklmnop", Tool: "gated", TenantID: "t1", SessionID: "sess_0123456789abcdefghijklmn", Arguments: json.RawMessage(args)}
	}
	long := `{"sql":"` + strings.Repeat("é", 20000) + `"}`
	for _, tc := range []struct {
		name, args string
		max        int
		whole      bool
	}{
		{"fits", `{"db":"payments"}`, 16384, true},
		{"no maxLength", long, 0, true},
		{"multibyte, too long", long, 16384, false},
		{"ascii, too long", `{"sql":"` + strings.Repeat("x", 16384) + `"}`, 16384, false},
		{"one character too long", `{"s":"` + strings.Repeat("x", 1024-len(approvalDetails(call(`{"s":""}`), 0))+1) + `"}`, 1024, false},
		{"exactly at the limit", `{"s":"` + strings.Repeat("x", 1024-len(approvalDetails(call(`{"s":""}`), 0))) + `"}`, 1024, true},
		// Shown, counted and hashed as the record has them (GET
		// /tool_calls/{id}), not as sent: a sum of the sent bytes could
		// not be checked against the record.
		{"spaced and escaped, fits", `{ "db" : "<payments>" }`, 16384, true},
		{"spaced and escaped, too long", "{\n  \"sql\": \"" + strings.Repeat("a < b & ", 3000) + `"}`, 16384, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := call(tc.args)
			d := approvalDetails(c, tc.max)
			tc.args = string(appendRaw(nil, []byte(tc.args))) // as GET /tool_calls/{id} has them
			if n := utf8.RuneCountInString(d); tc.max > 0 && n > tc.max {
				t.Fatalf("details are %d characters, over %d", n, tc.max)
			}
			if !utf8.ValidString(d) || !strings.Contains(d, "Call: "+c.ID) {
				t.Fatalf("details %.300q", d)
			}
			if tc.whole {
				if !strings.HasSuffix(d, "Arguments (exact JSON):\n"+tc.args) {
					t.Fatalf("arguments not shown whole: %.300q", d)
				}
				return
			}
			notice := fmt.Sprintf("They are %d characters; only the first ", utf8.RuneCountInString(tc.args))
			sum := fmt.Sprintf("SHA-256 of the whole JSON: %x.", sha256.Sum256([]byte(tc.args)))
			_, shown, ok := strings.Cut(d, ").\n")
			if !strings.Contains(d, "TOO LONG TO SHOW IN FULL") || !strings.Contains(d, notice) || !strings.Contains(d, sum) || !ok ||
				!strings.HasSuffix(shown, "…") || !strings.HasPrefix(tc.args, strings.TrimSuffix(shown, "…")) {
				t.Fatalf("details %.600q", d)
			}
			if want := fmt.Sprintf("only the first %d follow", utf8.RuneCountInString(shown)-1); !strings.Contains(d, want) {
				t.Errorf("the notice does not say how many characters follow (%s): %.400q", want, d)
			}
			if tc.max-utf8.RuneCountInString(d) > 8 {
				t.Errorf("details are %d characters: %d unused", utf8.RuneCountInString(d), tc.max-utf8.RuneCountInString(d))
			}
		})
	}
}

// TestGatedCallWithLongArguments: a gated call whose arguments are longer
// than the approval tool's details reaches the operator all the same, and
// their approval sends it with its arguments whole.
func TestGatedCallWithLongArguments(t *testing.T) {
	t.Parallel()
	b, ct := startWaitingBrain(t, true, 60)
	s := b.session("t1", "gated")
	sql := strings.Repeat("ü <", 10000)
	// Sent with spaces and unescaped <, as a client may: the record has
	// them compact and escaped, and the notice's sum is of that.
	r := b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", `{"tool": "gated", "arguments": {"sql": "`+sql+`"}}`)
	var c CallJSON
	if r.json(t, &c); r.status != 202 {
		t.Fatalf("gated call: %d %s", r.status, r.body)
	}
	var a approvalReq
	select {
	case a = <-ct.approvals:
	case <-time.After(5 * time.Second):
		_, c = b.getCall("t1", c.ID, 0)
		t.Fatalf("no approval call reached the approval tool; the gated call is %s", c.Status)
	}
	details, _ := a.args["details"].(string)
	if n := utf8.RuneCountInString(details); n > approveDetailsMax || !strings.Contains(details, "TOO LONG TO SHOW IN FULL") {
		t.Fatalf("details: %d characters: %.300q", n, details)
	}
	_, rec := b.getCall("t1", c.ID, 0)
	if sum := fmt.Sprintf("SHA-256 of the whole JSON: %x.", sha256.Sum256(rec.Arguments)); !strings.Contains(details, sum) {
		t.Errorf("the notice's sum is not the record's (%s): %.400q", sum, details)
	}
	a.decide <- "approved|alice|"
	_, done := b.getCall("t1", c.ID, 5)
	if done.Status != "succeeded" || ct.count(c.ID) != 1 || !strings.Contains(string(done.Arguments), strings.ReplaceAll(sql, "<", `\u003c`)) {
		t.Fatalf("approved: %s, sent %d times, arguments %d bytes", done.Status, ct.count(c.ID), len(done.Arguments))
	}
}

// TestShutdownLeavesWaitingCalls: at shutdown, calls waiting for an answer
// or a slot are left as stored, not cancelled: nothing they wait for was
// sent. The next brain on the data dir takes them up: they are answerable
// again, and the queued call runs once a slot is free. Running calls end
// cancelled as before.
func TestShutdownLeavesWaitingCalls(t *testing.T) {
	t.Parallel()
	ct := newCountingTools(t)
	cfg := waitingConfig(t, ct.URL, false, 300)
	dir := t.TempDir()
	serve := func() (*brain, func()) {
		srv, err := New(t.Context(), Options{Config: cfg, DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		return &brain{t: t, srv: srv, url: hs.URL}, func() {
			if err := srv.Close(); err != nil {
				t.Error(err)
			}
			hs.Close()
		}
	}
	b, stop := serve()
	s := b.session("t1", "lookup", "gated", "held")
	_, fn := b.call("t1", s.ID, "lookup", map[string]string{"order_id": "A"}, 0)
	_, gated := b.call("t1", s.ID, "gated", map[string]any{}, 0)
	var held []CallJSON
	for range 3 {
		_, c := b.call("t1", s.ID, "held", map[string]any{}, 0)
		held = append(held, c)
	}
	for range 2 {
		<-ct.arrived
	}
	if held[2].Status != "queued" {
		t.Fatalf("third held call %s", held[2].Status)
	}
	stop()

	b, stop = serve()
	defer stop()
	for _, c := range []CallJSON{fn, gated} {
		if _, got := b.getCall("t1", c.ID, 0); got.Status != "requires_input" || got.Prompt == nil || *got.Prompt != *c.Prompt {
			t.Errorf("after the restart %s is %+v", c.Tool, got)
		}
	}
	for _, c := range held[:2] {
		if _, got := b.getCall("t1", c.ID, 0); got.Status != "cancelled" || !got.UnknownOutcome {
			t.Errorf("running call at shutdown: %+v", got)
		}
	}
	// The queued call had a slot free when brain came back.
	select {
	case req := <-ct.arrived:
		if req.CallID != held[2].ID {
			t.Fatalf("the tool got %s, want the queued call", req.CallID)
		}
	case <-time.After(5 * time.Second):
		_, got := b.getCall("t1", held[2].ID, 0)
		t.Fatalf("the queued call did not run after the restart: %+v", got)
	}
	// The held requests cancelled at shutdown leave the tool once it sees
	// their connections close; a release sent before could go to one of
	// them, not to the queued call's.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ct.mu.Lock()
		n := ct.inflight
		ct.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still at the tool, want only the queued call's", n)
		}
	}
	ct.release <- struct{}{}
	r := b.respond("t1", fn.ID, `{"structured_content":{"status":"shipped"}}`)
	if r.status != 200 {
		t.Errorf("answer after the restart: %d %s", r.status, r.body)
	}
	b.respond("t1", gated.ID, `{"approved":true}`)
	for _, id := range []string{gated.ID, held[2].ID} {
		if _, got := b.getCall("t1", id, 5); got.Status != "succeeded" || ct.count(id) != 1 {
			t.Errorf("%s after the restart: %s, sent %d times", id, got.Status, ct.count(id))
		}
	}
}

// TestRetryable: retryable is null until a call failed; false for an
// unknown outcome or a refusal of the arguments; true for a 429 that says
// when to come back (its outcome still unknown, as the contract says).
func TestRetryable(t *testing.T) {
	t.Parallel()
	b, _ := startWaitingBrain(t, false, 300)
	s := b.session("t1", "busy", "plain", "lookup")
	for _, tc := range []struct {
		tool           string
		args           any
		status         string
		retryable      *bool
		unknownOutcome bool
	}{
		{"busy", map[string]any{}, "failed", ptr(true), true},
		{"plain", map[string]any{}, "succeeded", nil, false},
		{"lookup", map[string]any{"order_id": 5}, "failed", ptr(false), false},
	} {
		_, c := b.call("t1", s.ID, tc.tool, tc.args, 5)
		if c.Status != tc.status || c.UnknownOutcome != tc.unknownOutcome || (c.Retryable == nil) != (tc.retryable == nil) ||
			c.Retryable != nil && *c.Retryable != *tc.retryable {
			t.Errorf("%s: %s unknown=%v retryable=%v (%s)", tc.tool, c.Status, c.UnknownOutcome, c.Retryable, deref(c.ErrorMessage))
		}
	}
	var d toolResultData
	for _, e := range b.events("t1", s.ID) {
		if e.Type == "tool.result" {
			json.Unmarshal(e.Data, &d)
			break
		}
	}
	if d.Retryable == nil || !*d.Retryable {
		t.Errorf("the first tool.result says retryable %v", d.Retryable)
	}
}

func ptr[T any](v T) *T { return &v }
