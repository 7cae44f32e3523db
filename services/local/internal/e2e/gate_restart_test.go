package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A gated call's approval call is brain's own request_approval call, and
// local attaches a call ID it has seen (same tenant and session) to the
// approval it recorded: so brain sends that call again, with its ID, when
// it ends without a decision while the gated call waits (local restarted),
// and when brain itself restarted. These tests run both with the real
// processes; the operator's approval, given on the page of the local that
// came back, releases the gated call, and local holds one approval for it.

var dataIDRE = regexp.MustCompile(`data-id="([a-z2-7]+)"`)

// approvalsFor returns the IDs of the approvals in state (pending, all,
// cancelled, …) that local holds for gated call gate, as the operator
// finds them on the page: by the call's ID, which their details name.
func approvalsFor(t *testing.T, o *operator, state, gate string) []string {
	t.Helper()
	page := o.get("/approvals?" + url.Values{"state": {state}, "q": {gate}, "per": {"100"}}.Encode())
	var ids []string
	for _, m := range dataIDRE.FindAllStringSubmatch(page, -1) {
		if !slices.Contains(ids, m[1]) {
			ids = append(ids, m[1])
		}
	}
	slices.Sort(ids)
	return ids
}

// approvalCalls returns brain's approval calls (request_approval, caller
// system) made for gated call gate of session.
func (b *brain) approvalCalls(session, gate string) []toolCall {
	b.t.Helper()
	var page struct {
		ToolCalls []toolCall `json:"tool_calls"`
	}
	b.do(http.MethodGet, "/tool_calls?"+url.Values{"session_id": {session}, "tool": {"request_approval"}}.Encode(), nil, &page)
	var out []toolCall
	for _, c := range page.ToolCalls {
		if c.ParentID != nil && *c.ParentID == gate {
			out = append(out, c)
		}
	}
	return out
}

// streamsOf reads local's tool_calls_in_flight for request_approval: the
// streams it answers now.
func (l *local) streams() int {
	l.t.Helper()
	resp, err := http.Get(l.url + "/metrics")
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "tool_calls_in_flight{") && strings.Contains(line, `tool="request_approval"`) {
			n, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			return int(n)
		}
	}
	return 0
}

// eventually polls cond every 50 ms until it holds, failing with what
// after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
	}
}

// progressWhere returns the next tool.progress of ch that ok accepts,
// waiting up to within; false when none came.
func progressWhere(ch <-chan event, within time.Duration, ok func(map[string]any) bool) (map[string]any, bool) {
	deadline := time.After(within)
	for {
		select {
		case e, open := <-ch:
			if !open {
				return nil, false
			}
			var p map[string]any
			if e.Type == "tool.progress" && json.Unmarshal(e.Data, &p) == nil && ok(p) {
				return p, true
			}
		case <-deadline:
			return nil, false
		}
	}
}

// TestGatedCallSurvivesLocalRestart is the tester's report: local stops
// — killed, or stopped gracefully, which answers its streams "restarting,
// still pending" — while a gated call waits for its operator. Brain's
// approval call ends without a decision, and brain sends it again, with
// the same call ID, until local is back; the operator approves, on the
// restarted local's page, the approval they had seen before (once the
// resent call attached to it, or before), and the gated call runs, once.
// Local holds one approval for it, and brain one approval call, which
// showed its resends as tool.progress "retrying".
func TestGatedCallSurvivesLocalRestart(t *testing.T) {
	for _, stop := range []string{"SIGKILL", "SIGTERM"} {
		t.Run(stop, func(t *testing.T) {
			l := startLocal(t, nil)
			cnt := newCounter(t)
			b := startBrainWith(t, l, withWaitingTools(cnt, 120, false))
			sess := b.session("restart_db")
			evs := b.events(sess)
			c := b.call(sess, "restart_db", map[string]any{"db": "orders-1"}, 0)
			p := progressOf(t, next(t, evs, "tool.progress", 10*time.Second))
			if stop == "SIGKILL" {
				l.p.Kill()
			} else {
				l.p.Stop()
			}
			_, retried := progressWhere(evs, 10*time.Second, func(m map[string]any) bool { return m["status"] == "retrying" })
			time.Sleep(time.Second) // local stays down a while: brain asks again meanwhile
			l.start()
			o := signIn(t, l.url, "alice")
			if stop == "SIGKILL" {
				// The operator opens the page once brain's call is back on it.
				if _, ok := progressWhere(evs, 15*time.Second, func(m map[string]any) bool {
					return m["status"] == "waiting_for_operator" && m["approval_id"] == p.ApprovalID
				}); !ok {
					t.Errorf("brain's approval call did not come back to approval %s after the restart", p.ApprovalID)
				}
			}
			if code := o.decide(p.ApprovalID, "approve", "checked after the restart"); code != http.StatusOK {
				t.Fatalf("decide %s on the restarted page: %d", p.ApprovalID, code)
			}
			if got := b.getCall(c.ID, 30); got.Status != "succeeded" || cnt.sent(c.ID) != 1 {
				t.Fatalf("gated call after the operator approved on the restarted page: %s (%s), sent %d times",
					got.Status, deref(got.ErrorMessage), cnt.sent(c.ID))
			}
			if ids := approvalsFor(t, o, "all", c.ID); !slices.Equal(ids, []string{p.ApprovalID}) {
				t.Errorf("local's approvals for the gated call: %v, want only %s", ids, p.ApprovalID)
			}
			if ac := b.approvalCalls(sess, c.ID); len(ac) != 1 || ac[0].Status != "succeeded" {
				t.Errorf("brain's approval calls for the gated call: %+v, want one, succeeded", ac)
			}
			if !retried {
				t.Error("no tool.progress retrying of the approval call while local was down")
			}
		})
	}
}

// holdingProxy forwards TCP connections to addr and, when a client's side
// closes, keeps its connection to addr open: the server never learns that
// the client went away, as when the client's host vanished or a partition
// cut it off. It returns the proxy's address.
func holdingProxy(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				down.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, down, up)
			mu.Unlock()
			go io.Copy(up, down) // the client went: up stays open
			go func() {
				io.Copy(down, up)
				down.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// withApprovalsThrough is withWaitingTools with request_approval's url
// on addr instead of local's own.
func withApprovalsThrough(cnt *counter, timeout int, addr string) func(doc map[string]any) {
	return func(doc map[string]any) {
		tools := doc["tools"].([]json.RawMessage)
		for i, raw := range tools {
			var b map[string]any
			if json.Unmarshal(raw, &b) == nil && b["name"] == "request_approval" {
				u, _ := url.Parse(b["url"].(string))
				u.Host = addr
				b["url"] = u.String()
				tools[i], _ = json.Marshal(b)
			}
		}
		withWaitingTools(cnt, timeout, false)(doc)
	}
}

// TestGatedCallSurvivesBrainRestart: brain is killed while a gated call
// waits for its operator, and starts again on its data directory.
//
// partitioned: local never saw brain's connection go (brain's host
// vanished; here a proxy keeps local's side open), so the approval stays
// pending on the page. The new brain sends the approval call again with
// its call ID, which local attaches to that approval: there is no second
// one, and the operator's approval of it releases the gated call.
//
// closed: local saw the connection close, and keeps the approval pending
// for APPROVAL_REATTACH_GRACE (default 30 s): the new brain, back within
// it, sends the approval call again with its call ID and local attaches
// it to the same approval, as when partitioned.
//
// closed, no grace: local withdrew the approval at once (cancelled, by
// system). The new brain's resend finds it withdrawn and asks again with
// a new approval call: one approval is pending, and its approval releases
// the gated call.
func TestGatedCallSurvivesBrainRestart(t *testing.T) {
	for _, tc := range []struct {
		name        string
		partitioned bool
		env         map[string]string // local's
		askedAgain  bool
	}{
		{name: "partitioned", partitioned: true},
		{name: "closed"},
		{name: "closed, no grace", env: map[string]string{"APPROVAL_REATTACH_GRACE": "0"}, askedAgain: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := startLocal(t, tc.env)
			cnt := newCounter(t)
			edit := withWaitingTools(cnt, 120, false)
			if tc.partitioned {
				edit = withApprovalsThrough(cnt, 120, holdingProxy(t, l.addr))
			}
			b := startBrainWith(t, l, edit)
			sess := b.session("restart_db")
			evs := b.events(sess)
			c := b.call(sess, "restart_db", map[string]any{"db": "orders-2"}, 0)
			p := progressOf(t, next(t, evs, "tool.progress", 10*time.Second))
			first := b.approvalCalls(sess, c.ID)
			if len(first) != 1 {
				t.Fatalf("approval calls before the kill: %+v", first)
			}

			b.p.Kill()
			o := signIn(t, l.url, "alice")
			graced := !tc.partitioned && !tc.askedAgain
			if graced {
				// The page says the caller went and when the approval is
				// withdrawn unless it comes back.
				eventually(t, 10*time.Second, "the detail page says the caller disconnected", func() bool {
					return strings.Contains(o.get("/approval/"+p.ApprovalID), `id="disconnected"`)
				})
			}
			b.start()
			var pending []string
			switch {
			case !tc.askedAgain:
				streams := 1
				if tc.partitioned {
					streams = 2 // local answers the old stream still
				}
				eventually(t, 15*time.Second, "the new brain's approval request reached local", func() bool { return l.streams() == streams })
				pending = approvalsFor(t, o, "pending", c.ID)
				if all := approvalsFor(t, o, "all", c.ID); !slices.Equal(all, []string{p.ApprovalID}) {
					t.Fatalf("local's approvals for the gated call after brain restarted: %v, want only %s, still pending", all, p.ApprovalID)
				}
				if ac := b.approvalCalls(sess, c.ID); len(ac) != 1 || ac[0].ID != first[0].ID || ac[0].Status != "running" {
					t.Errorf("brain's approval calls after the restart: %+v, want %s, running", ac, first[0].ID)
				}
				if graced && strings.Contains(o.get("/approval/"+p.ApprovalID), `id="disconnected"`) {
					t.Error("the detail page still says the caller disconnected after it came back")
				}
			default:
				eventually(t, 15*time.Second, "one pending approval for the gated call", func() bool {
					pending = approvalsFor(t, o, "pending", c.ID)
					return len(pending) == 1 && l.streams() == 1
				})
				if all := approvalsFor(t, o, "all", c.ID); len(all) != 2 || pending[0] == p.ApprovalID ||
					!slices.Equal(approvalsFor(t, o, "cancelled", c.ID), []string{p.ApprovalID}) {
					t.Errorf("local's approvals for the gated call: %v (pending %v), want the withdrawn %s and a new pending one", all, pending, p.ApprovalID)
				}
			}
			if len(pending) != 1 || !tc.askedAgain && pending[0] != p.ApprovalID {
				t.Fatalf("pending approvals for the gated call: %v, want one", pending)
			}
			if code := o.decide(pending[0], "approve", "approved after brain restarted"); code != http.StatusOK {
				t.Fatalf("decide %s: %d", pending[0], code)
			}
			if got := b.getCall(c.ID, 30); got.Status != "succeeded" || cnt.sent(c.ID) != 1 {
				t.Fatalf("gated call after the approval: %s (%s), sent %d times", got.Status, deref(got.ErrorMessage), cnt.sent(c.ID))
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
