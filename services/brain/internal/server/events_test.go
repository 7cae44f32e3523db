package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/google/go-cmp/cmp"
)

func TestEventStream(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "progress")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, evs := b.openSSE(ctx, "t1", s.ID)
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	created := next(t, evs)
	if created.name != "session.created" || created.id == "" {
		t.Fatalf("first event = %+v", created)
	}
	_, c := b.call("t1", s.ID, "progress", nil, 0)

	call := next(t, evs)
	p1 := next(t, evs)
	waitStarted(t, b.tools)
	b.tools.releaseAll()
	p2 := next(t, evs)
	result := next(t, evs)
	got := []string{call.name, p1.name, p2.name, result.name}
	if diff := cmp.Diff([]string{"tool.call", "tool.progress", "tool.progress", "tool.result"}, got); diff != "" {
		t.Fatalf("live events (-want +got):\n%s", diff)
	}
	if call.id == "" || result.id == "" || p1.id != "" || p2.id != "" {
		t.Errorf("ids: tool.call %q tool.result %q progress %q %q; want ids on stored events only", call.id, result.id, p1.id, p2.id)
	}
	var pe EventJSON
	if err := json.Unmarshal([]byte(p1.data), &pe); err != nil {
		t.Fatal(err)
	}
	if pe.CallID != c.ID || string(pe.Data) != `{"step":1}` || pe.ID != "" {
		t.Errorf("progress event = %s", p1.data)
	}
	var re EventJSON
	json.Unmarshal([]byte(result.data), &re)
	var rd struct {
		Tool       string          `json:"tool"`
		Status     string          `json:"status"`
		ErrorCode  *string         `json:"error_code"`
		Result     json.RawMessage `json:"result"`
		DurationMS *int64          `json:"duration_ms"`
	}
	if err := json.Unmarshal(re.Data, &rd); err != nil {
		t.Fatal(err)
	}
	if re.ID != result.id || re.CallID != c.ID || rd.Tool != "progress" || rd.Status != "succeeded" || rd.ErrorCode != nil || rd.DurationMS == nil {
		t.Errorf("tool.result event = %s", result.data)
	}
	// Heartbeats: comment lines while idle (50 ms in tests).
	deadline := time.After(5 * time.Second)
heartbeat:
	for {
		select {
		case ev := <-evs:
			if ev.comment {
				break heartbeat
			}
		case <-deadline:
			t.Fatal("no heartbeat comment within 5 s")
		}
	}

	// Resume: after tool.call, only tool.result comes back (progress is
	// live-only); Last-Event-ID wins over ?after.
	for _, hdr := range [][]string{{"Last-Event-ID", call.id}, {}} {
		rctx, rcancel := context.WithCancel(context.Background())
		path := s.ID
		if len(hdr) == 0 {
			path = s.ID + "/events?after=" + call.id
		}
		var stream <-chan sseEvent
		if len(hdr) == 0 {
			req, _ := http.NewRequestWithContext(rctx, "GET", b.url+"/sessions/"+path, nil)
			req.Header.Set("Authorization", "Bearer "+apiKeys["t1"])
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Body.Close()
			stream = readSSE(r.Body)
		} else {
			_, stream = b.openSSE(rctx, "t1", s.ID, hdr...)
		}
		if ev := next(t, stream); ev.name != "tool.result" || ev.id != result.id {
			t.Errorf("resume %v: first event = %+v, want tool.result %s", hdr, ev, result.id)
		}
		rcancel()
	}
}

func TestEventPage(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "echo")
	for i := range 3 {
		b.call("t1", s.ID, "echo", map[string]string{"text": fmt.Sprint(i)}, 5)
	}
	all := b.events("t1", s.ID)
	if len(all) != 7 {
		t.Fatalf("events = %v", eventTypes(all))
	}
	for i := 1; i < len(all); i++ {
		a, _ := strconv.ParseInt(all[i-1].ID, 10, 64)
		z, _ := strconv.ParseInt(all[i].ID, 10, 64)
		if z <= a {
			t.Errorf("event ids not increasing: %s then %s", all[i-1].ID, all[i].ID)
		}
	}
	var tc toolCallData
	json.Unmarshal(all[1].Data, &tc)
	if all[1].Type != "tool.call" || tc.Tool != "echo" || string(tc.Arguments) != `{"text":"0"}` || all[1].CallID == "" {
		t.Errorf("tool.call event = %+v", all[1])
	}
	tests := []struct {
		query  string
		status int
		ids    []string
		more   bool
		want   []string
	}{
		{"?limit=2", 200, []string{all[0].ID, all[1].ID}, true, nil},
		{"?after=" + all[1].ID + "&limit=2", 200, []string{all[2].ID, all[3].ID}, true, nil},
		{"?after=" + all[4].ID, 200, []string{all[5].ID, all[6].ID}, false, nil},
		{"?after=" + all[6].ID, 200, nil, false, nil},
		{"?limit=1000", 200, nil, false, nil},
		{"?limit=1001", 400, nil, false, []string{"limit", "1..1000"}},
		{"?limit=0", 400, nil, false, []string{"limit"}},
		{"?after=0&limit=1", 200, []string{all[0].ID}, true, nil},
		{"?after=9223372036854775807", 200, nil, false, nil},
		{"?after=-1", 400, nil, false, []string{`after: want an event id (a non-negative integer; 0 = from the start), got "-1"`}},
		{"?after=x", 400, nil, false, []string{`after: want an event id (a non-negative integer; 0 = from the start), got "x"`}},
		{"?after=9223372036854775808", 400, nil, false, []string{`after: want an event id`}},
		{"?after=", 400, nil, false, []string{`after: want an event id`, `got ""`}},
		{"?after=%2B1", 400, nil, false, []string{`after: want an event id`, `got "+1"`}},
		{"?after=01", 400, nil, false, []string{`got "01"`}},
		{"?since=1", 400, nil, false, []string{"since", "unknown query parameter"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			r := b.do("GET", "/sessions/"+s.ID+"/events"+tt.query, "t1", nil, "Accept", "application/json")
			if tt.status != 200 {
				wantRefusal(t, r, tt.status, httpapi.CodeInvalidRequest, tt.want...)
				return
			}
			var page struct {
				Events  []EventJSON `json:"events"`
				HasMore bool        `json:"has_more"`
			}
			r.json(t, &page)
			if tt.query == "?limit=1000" {
				if len(page.Events) != 7 {
					t.Errorf("%d events", len(page.Events))
				}
				return
			}
			var ids []string
			for _, e := range page.Events {
				ids = append(ids, e.ID)
			}
			if !cmp.Equal(ids, tt.ids) || page.HasMore != tt.more {
				t.Errorf("ids %v has_more %v, want %v %v", ids, page.HasMore, tt.ids, tt.more)
			}
		})
	}
	// The JSON page reads Last-Event-ID as the stream does: it wins over
	// ?after=, and garbage is refused, not ignored.
	for _, tc := range []struct {
		hdr, query string
		ids        []string
		want       string
	}{
		{all[4].ID, "", []string{all[5].ID, all[6].ID}, ""},
		{all[4].ID, "?after=0", []string{all[5].ID, all[6].ID}, ""},
		{"garbage", "", nil, `last-event-id: want an event id (a non-negative integer; 0 = from the start), got "garbage"`},
		{"1.5", "?after=1", nil, `last-event-id: want an event id`},
		{"+3", "", nil, `last-event-id: want an event id (a non-negative integer; 0 = from the start), got "+3"`},
		{"03", "", nil, `got "03"`},
	} {
		r := b.do("GET", "/sessions/"+s.ID+"/events"+tc.query, "t1", nil, "Accept", "application/json", "Last-Event-ID", tc.hdr)
		if tc.want != "" {
			wantRefusal(t, r, 400, httpapi.CodeInvalidRequest, tc.want)
			continue
		}
		var page struct {
			Events []EventJSON `json:"events"`
		}
		r.json(t, &page)
		var ids []string
		for _, e := range page.Events {
			ids = append(ids, e.ID)
		}
		if !cmp.Equal(ids, tc.ids) {
			t.Errorf("JSON page after Last-Event-ID %s%s: ids %v, want %v", tc.hdr, tc.query, ids, tc.ids)
		}
	}
	wantRefusal(t, b.do("GET", "/sessions/"+s.ID+"/events", "t1", nil, "Accept", "application/json", "Last-Event-ID", "1", "+Last-Event-ID", "2"),
		400, httpapi.CodeInvalidRequest, "last-event-id: sent 2 times; send one")
	// Refusals of the event stream (no Accept: application/json) say what
	// to do instead; none prints an internal bound.
	for _, tc := range []struct {
		query string
		hdr   []string
		want  string
	}{
		{"?limit=5", nil, "limit: only the JSON page takes it (send Accept: application/json)"},
		{"?after=1&limit=5", nil, "limit: only the JSON page takes it"},
		{"?limit=5", []string{"Accept", "text/event-stream"}, "limit: only the JSON page takes it"},
		{"?after=-1", nil, `after: want an event id (a non-negative integer; 0 = from the start), got "-1"`},
		{"", []string{"Last-Event-ID", "-3"}, `last-event-id: want an event id (a non-negative integer; 0 = from the start), got "-3"`},
		{"?since=1", nil, "since: unknown query parameter (want one of after)"},
	} {
		r := b.do("GET", "/sessions/"+s.ID+"/events"+tc.query, "t1", nil, tc.hdr...)
		wantRefusal(t, r, 400, httpapi.CodeInvalidRequest, tc.want)
		if strings.Contains(string(r.body), "4611686018427387904") {
			t.Errorf("%s: refusal prints an internal bound: %s", tc.query, r.body)
		}
	}
	wantRefusal(t, b.do("GET", "/sessions/ses_nope/events", "t1", nil, "Accept", "application/json"), 404, httpapi.CodeNotFound, "ses_nope")
	wantRefusal(t, b.do("GET", "/sessions/"+s.ID+"/events", "", nil), 401, httpapi.CodeUnauthorized, "authorization")
}

// TestInspection: a binding with inspect_session gets a token and brain_url;
// the token reads its own session's events while the call runs, nothing of
// another session, and nothing once the call returned.
func TestInspection(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "inspect", "echo")
	other := b.session("t1", "echo")
	type check struct {
		name   string
		status int
	}
	var (
		token   string
		checks  []check
		seenURL string
		types   []string
		ended   = make(chan bool, 1)
	)
	b.tools.mu.Lock()
	b.tools.inspectFn = func(req tool.Request) *tool.Result {
		token, seenURL = req.InspectionToken, req.BrainURL
		get := func(name, path string, hdr ...string) resp {
			r := b.do("GET", path, token, nil, hdr...)
			checks = append(checks, check{name, r.status})
			return r
		}
		r := get("own session page", "/sessions/"+req.SessionID+"/events", "Accept", "application/json")
		var page struct{ Events []EventJSON }
		json.Unmarshal(r.body, &page)
		types = eventTypes(page.Events)
		get("other session", "/sessions/"+other.ID+"/events", "Accept", "application/json")
		get("session resource", "/sessions/"+req.SessionID, "")
		get("catalog", "/catalog", "")
		// An SSE stream opened with the token ends when the call returns.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			hreq, _ := http.NewRequestWithContext(ctx, "GET", b.url+"/sessions/"+req.SessionID+"/events", nil)
			hreq.Header.Set("Authorization", "Bearer "+token)
			res, err := http.DefaultClient.Do(hreq)
			if err != nil {
				ended <- false
				return
			}
			defer res.Body.Close()
			for range readSSE(res.Body) {
			}
			ended <- ctx.Err() == nil
		}()
		b.waitStreams()
		return tool.TextResult("inspected")
	}
	b.tools.mu.Unlock()
	_, c := b.call("t1", s.ID, "inspect", nil, 5)
	if c.Status != "succeeded" {
		t.Fatalf("inspect call: %+v", c)
	}
	if len(token) < 22 || seenURL != b.url {
		t.Errorf("token %d chars (want ≥ 128 bits), brain_url %q, want %q", len(token), seenURL, b.url)
	}
	want := []check{{"own session page", 200}, {"other session", 404}, {"session resource", 401}, {"catalog", 401}}
	if diff := cmp.Diff(want, checks, cmp.AllowUnexported(check{})); diff != "" {
		t.Errorf("reads with the token during the call (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"session.created", "tool.call"}, types); diff != "" {
		t.Errorf("events seen by the tool (-want +got):\n%s", diff)
	}
	// After the call returned: 401 everywhere.
	wantRefusal(t, b.do("GET", "/sessions/"+s.ID+"/events", token, nil, "Accept", "application/json"), 401, httpapi.CodeUnauthorized, "inspection token")
	wantRefusal(t, b.do("GET", "/sessions/"+other.ID+"/events", token, nil, "Accept", "application/json"), 401, httpapi.CodeUnauthorized)
	if !<-ended {
		t.Error("SSE stream opened with the inspection token did not end when the call returned")
	}
	// A binding without inspect_session gets neither field.
	_, e := b.call("t1", s.ID, "echo", map[string]string{"text": "x"}, 5)
	if e.Status != "succeeded" {
		t.Fatalf("echo: %+v", e)
	}
}

// TestSessionEndOrderAndStreamEnd: closing or interrupting a session with
// calls in flight records every call's tool.result before the session's
// event, on the stored page and on a live stream; the stream of a closed
// session ends after session.closed (live, or replayed when opened later,
// or 204 when nothing is left after Last-Event-ID); the stream of an
// interrupted session stays open until the session is closed.
func TestSessionEndOrderAndStreamEnd(t *testing.T) {
	t.Parallel()
	type step struct{ method, path string }
	tests := []struct {
		name  string
		steps []step // ending requests, in order, each answered 200
		want  []string
	}{
		{"DELETE", []step{{"DELETE", ""}},
			[]string{"session.created", "tool.call", "tool.call", "tool.result", "tool.result", "session.closed"}},
		{"POST close", []step{{"POST", "/close"}},
			[]string{"session.created", "tool.call", "tool.call", "tool.result", "tool.result", "session.closed"}},
		{"interrupt then close", []step{{"POST", "/interrupt"}, {"POST", "/close"}},
			[]string{"session.created", "tool.call", "tool.call", "tool.result", "tool.result", "session.interrupted", "session.closed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := startBrain(t)
			s := b.session("t1", "slow")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, live := b.openSSE(ctx, "t1", s.ID)
			for range 2 {
				b.call("t1", s.ID, "slow", nil, 0)
				waitStarted(t, b.tools)
			}
			var got []string
			for _, st := range tt.steps {
				r := b.do(st.method, "/sessions/"+s.ID+st.path, "t1", nil)
				if r.status != 200 {
					t.Fatalf("%s %s: %d %s", st.method, st.path, r.status, r.body)
				}
				if st.path != "/interrupt" {
					continue
				}
				// Interrupted: the calls' results, then session.interrupted,
				// and the stream stays open (heartbeats keep coming).
				for len(got) < len(tt.want)-1 {
					got = append(got, next(t, live).name)
				}
				select {
				case ev, ok := <-live:
					if !ok || !ev.comment {
						t.Fatalf("stream of an interrupted session: %+v, open %v; want a heartbeat", ev, ok)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("no heartbeat on the stream of an interrupted session")
				}
			}
			// Closed: the rest, then the stream ends by itself.
			for ev := range live {
				if !ev.comment {
					got = append(got, ev.name)
				}
			}
			if ctx.Err() != nil {
				t.Fatal("the stream of a closed session did not end")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("live stream (-want +got):\n%s", diff)
			}
			stored := b.events("t1", s.ID)
			if diff := cmp.Diff(tt.want, eventTypes(stored)); diff != "" {
				t.Errorf("stored events (-want +got):\n%s", diff)
			}
			for _, ev := range stored {
				if ev.Type != "tool.result" {
					continue
				}
				var rd toolResultData
				json.Unmarshal(ev.Data, &rd)
				if rd.Status != "cancelled" || deref(rd.ErrorCode) != "cancelled" {
					t.Errorf("tool.result = %s, want cancelled", ev.Data)
				}
			}

			// Opened on the closed session: replays and ends.
			_, replay := b.openSSE(ctx, "t1", s.ID, "Last-Event-ID", stored[1].ID)
			var again []string
			for ev := range replay {
				if !ev.comment {
					again = append(again, ev.name)
				}
			}
			if ctx.Err() != nil {
				t.Fatal("a stream opened on a closed session did not end")
			}
			if diff := cmp.Diff(tt.want[2:], again); diff != "" {
				t.Errorf("replay after %s (-want +got):\n%s", stored[1].ID, diff)
			}
			// Nothing left after the last event: 204, so SSE clients stop
			// reconnecting.
			last := stored[len(stored)-1].ID
			for _, hdr := range [][]string{{"Last-Event-ID", last}, {}} {
				path := "/sessions/" + s.ID + "/events"
				if len(hdr) == 0 {
					path += "?after=" + last
				}
				r := b.do("GET", path, "t1", nil, hdr...)
				if r.status != http.StatusNoContent || len(r.body) != 0 {
					t.Errorf("stream after the last event of a closed session (%v): %d %q, want 204 and no body", hdr, r.status, r.body)
				}
			}
		})
	}
}

// TestCloseRacingNewCalls: calls created while a session is being closed are
// either refused (409) or cancelled and recorded before session.closed;
// nothing follows session.closed and every tool.call has its tool.result.
func TestCloseRacingNewCalls(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "slow")
	b.call("t1", s.ID, "slow", nil, 0)
	waitStarted(t, b.tools)
	var wg sync.WaitGroup
	statuses := make(chan int, 40)
	for range 20 {
		wg.Go(func() {
			r := b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", map[string]any{"tool": "slow"})
			statuses <- r.status
		})
	}
	closes := make(chan int, 2)
	for _, path := range []string{"/interrupt", "/close"} {
		wg.Go(func() { closes <- b.do("POST", "/sessions/"+s.ID+path, "t1", nil).status })
	}
	wg.Wait()
	close(statuses)
	close(closes)
	for st := range statuses {
		if st != http.StatusAccepted && st != http.StatusConflict {
			t.Errorf("call during close: %d, want 202 or 409", st)
		}
	}
	var ok200 int
	for st := range closes {
		if st == 200 {
			ok200++
		}
	}
	if ok200 == 0 {
		t.Fatal("neither interrupt nor close answered 200")
	}
	evs := b.events("t1", s.ID)
	open := map[string]bool{}
	for i, ev := range evs {
		switch ev.Type {
		case "tool.call":
			open[ev.CallID] = true
		case "tool.result":
			delete(open, ev.CallID)
		case "session.closed":
			if i != len(evs)-1 {
				t.Errorf("events after session.closed: %v", eventTypes(evs[i:]))
			}
			if len(open) != 0 {
				t.Errorf("calls without a tool.result before session.closed: %v", open)
			}
		}
	}
	if last := evs[len(evs)-1].Type; last != "session.closed" {
		t.Errorf("last event %s, want session.closed", last)
	}
}

// TestEventPageAtTheLimit: a JSON page of limit=1000 (the largest) says
// has_more when more events follow, and not when exactly 1000 are left. A
// session of 1001 events used to stop at 1000 with has_more false.
func TestEventPageAtTheLimit(t *testing.T) {
	t.Parallel()
	b := startBrain(t)
	s := b.session("t1", "echo")
	// session.created plus two events per call: 499 calls make 999 events,
	// then one call more makes 1001.
	calls := func(n int) {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				b.call("t1", s.ID, "echo", map[string]string{"text": fmt.Sprint(i)}, 5)
			}()
		}
		wg.Wait()
	}
	type page struct {
		Events  []EventJSON `json:"events"`
		HasMore bool        `json:"has_more"`
	}
	read := func(query string) page {
		t.Helper()
		var p page
		b.do("GET", "/sessions/"+s.ID+"/events"+query, "t1", nil, "Accept", "application/json").json(t, &p)
		return p
	}
	calls(499)
	if p := read("?limit=1000"); len(p.Events) != 999 || p.HasMore {
		t.Fatalf("999 events: page of %d, has_more %v", len(p.Events), p.HasMore)
	}
	b.call("t1", s.ID, "echo", map[string]string{"text": "x"}, 5) // 1001 events
	p := read("?limit=1000")
	if len(p.Events) != 1000 || !p.HasMore {
		t.Fatalf("1001 events: first page of %d, has_more %v; want 1000 and true", len(p.Events), p.HasMore)
	}
	rest := read("?limit=1000&after=" + p.Events[999].ID)
	if len(rest.Events) != 1 || rest.HasMore {
		t.Fatalf("1001 events: second page of %d, has_more %v; want 1 and false", len(rest.Events), rest.HasMore)
	}
	if p := read("?limit=1000&after=1"); len(p.Events) != 1000 || p.HasMore {
		t.Fatalf("exactly 1000 left: page of %d, has_more %v; want 1000 and false", len(p.Events), p.HasMore)
	}
}
