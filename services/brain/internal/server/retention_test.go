package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRetentionUnderLoad: with a retention of 3 s, the sessions that ended
// more than 3 s ago go with exactly their calls and events (the metric
// counts them), while 32 callers keep calling with no failed call, and the
// sessions that ended since stay whole.
func TestRetentionUnderLoad(t *testing.T) {
	t.Parallel()
	const retention = 3 * time.Second
	b := startBrain(t, func(o *Options) { o.Retention, o.RetentionInterval = retention, 50*time.Millisecond })
	old := make([]string, 10)
	var firstEnded time.Time
	for i := range old {
		s := b.session("t1", "echo")
		for j := range i {
			if _, c := b.call("t1", s.ID, "echo", map[string]string{"text": fmt.Sprint(j)}, 5); c.Status != "succeeded" {
				t.Fatalf("call: %+v", c)
			}
		}
		if i == 0 {
			firstEnded = time.Now() // before: the close is stamped after this
		}
		if r := b.do("POST", "/sessions/"+s.ID+"/close", "t1", nil); r.status != 200 {
			t.Fatalf("close: %d %s", r.status, r.body)
		}
		old[i] = s.ID
	}
	// session.created, a tool.call and a tool.result per call, session.closed.
	var wantCalls, wantEvents float64
	for i := range old {
		wantCalls += float64(i)
		wantEvents += float64(2 + 2*i)
	}
	endedOld := time.Now()
	// Not yet: none is past the retention before the first one is.
	if wait := time.Until(firstEnded.Add(retention - 300*time.Millisecond)); wait > 0 {
		time.Sleep(wait)
		if n := testutil.ToFloat64(b.srv.metrics.removed.WithLabelValues("session")); n != 0 {
			t.Fatalf("retention removed %v sessions before their time", n)
		}
	} else {
		t.Logf("the old sessions took %s to make: no check before the first is due", endedOld.Sub(firstEnded))
	}

	// 32 callers, and new sessions ended while they call.
	live := b.session("t1", "echo")
	var (
		stop          atomic.Bool
		calls, failed atomic.Int64
		wg            sync.WaitGroup
		mu            sync.Mutex
		young         []youngSession
	)
	for w := range 32 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				r := b.do("POST", "/sessions/"+live.ID+"/tool_calls", "t1",
					map[string]any{"tool": "echo", "arguments": map[string]string{"text": "x"}, "wait_seconds": 10})
				calls.Add(1)
				var c CallJSON
				if r.status != http.StatusOK || json.Unmarshal(r.body, &c) != nil || c.Status != "succeeded" {
					failed.Add(1)
				}
				if w == 0 && i%10 == 0 {
					s := b.session("t1", "echo")
					before := time.Now() // the close is stamped after this
					b.do("POST", "/sessions/"+s.ID+"/close", "t1", nil)
					mu.Lock()
					young = append(young, youngSession{s.ID, before})
					mu.Unlock()
				}
			}
		})
	}
	for time.Since(endedOld) < retention+time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	if failed.Load() > 0 || calls.Load() == 0 {
		t.Errorf("%d of %d calls failed during retention", failed.Load(), calls.Load())
	}
	for _, id := range old {
		if r := b.do("GET", "/sessions/"+id, "t1", nil); r.status != http.StatusNotFound {
			t.Errorf("old session %s: %d after retention, want 404", id, r.status)
		}
	}
	// A session ended since is kept until it is past the retention
	// itself: on a loaded machine the callers may take that long to stop.
	// removed counts those gone, before and after the metric is read.
	removed := func() (n int) {
		for _, y := range young {
			due := time.Since(y.closed) >= retention // before the read: conservative
			r := b.do("GET", "/sessions/"+y.id, "t1", nil)
			switch {
			case r.status == http.StatusNotFound && due:
				n++
			case r.status != http.StatusOK || len(b.events("t1", y.id)) == 0:
				t.Errorf("session %s, ended within the retention: %d %s", y.id, r.status, r.body)
			}
		}
		return n
	}
	if r := b.do("GET", "/sessions/"+live.ID, "t1", nil); r.status != http.StatusOK || len(b.events("t1", live.ID)) == 0 {
		t.Errorf("the live session: %d %s", r.status, r.body)
	}
	before := removed()
	got := map[string]float64{}
	for _, k := range []string{"session", "tool_call", "event"} {
		got[k] = testutil.ToFloat64(b.srv.metrics.removed.WithLabelValues(k))
	}
	after := removed()
	// Exactly the old sessions with their calls and events, and any ended
	// since that are past the retention too (no call, two events each).
	gone := int(got["session"]) - len(old)
	if gone < before || gone > after {
		t.Errorf("retention_removed_total{kind=session} = %v, want %d old and %d..%d ended since", got["session"], len(old), before, after)
	}
	if want := map[string]float64{"session": float64(len(old) + gone), "tool_call": wantCalls, "event": wantEvents + float64(2*gone)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("retention_removed_total = %v, want %v", got, want)
	}
	t.Logf("%d calls by 32 callers while retention ran, %d failed; %d sessions ended since, %d of them past the retention and removed by the end", calls.Load(), failed.Load(), len(young), after)
}

// youngSession is a session TestRetentionUnderLoad ended while the callers
// call, and a time before it was closed.
type youngSession struct {
	id     string
	closed time.Time
}
