package server

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
	"github.com/google/go-cmp/cmp"
)

// serving is a brain whose shutdown the test drives: stop cancels Serve's
// context and returns Serve's error; Close runs at cleanup.
type serving struct {
	*brain
	stop func() error
}

func serveBrain(t *testing.T, edit func(*Server)) *serving {
	t.Helper()
	ts := newToolServer(t)
	dir := t.TempDir()
	srv, err := New(context.Background(), Options{Config: hostConfig(t, ts.URL), DataDir: dir, Heartbeat: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	var once sync.Once
	var serveErr error
	stop := func() error {
		once.Do(func() { cancel(); serveErr = <-served })
		return serveErr
	}
	t.Cleanup(func() {
		stop()
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &serving{brain: &brain{t: t, url: "http://" + ln.Addr().String(), srv: srv, tools: ts, dir: dir}, stop: stop}
}

// TestShutdownWaiterGetsFinalState: at shutdown (what SIGTERM does through
// Serve's context), a client waiting on its call with wait_seconds gets the
// call's final state, cancelled, not 202 running; an open event stream
// delivers the tool.result before it ends.
func TestShutdownWaiterGetsFinalState(t *testing.T) {
	t.Parallel()
	b := serveBrain(t, nil)
	s := b.session("t1", "slow")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, live := b.openSSE(ctx, "t1", s.ID)
	type answer struct {
		status int
		call   CallJSON
	}
	waiter := make(chan answer, 1)
	go func() {
		r := b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", map[string]any{"tool": "slow", "wait_seconds": 30})
		var c CallJSON
		json.Unmarshal(r.body, &c)
		waiter <- answer{r.status, c}
	}()
	waitStarted(t, b.tools)
	if err := b.stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	got := <-waiter
	_, res := resultText(t, got.call.Result)
	if got.status != http.StatusOK || got.call.Status != "cancelled" || deref(got.call.ErrorCode) != "cancelled" ||
		!res.IsError || !res.UnknownOutcome || got.call.FinishedAt == nil {
		t.Errorf("waiter at shutdown: %d %+v, want 200 and the call cancelled", got.status, got.call)
	}
	var names []string
	for ev := range live {
		if !ev.comment {
			names = append(names, ev.name)
		}
	}
	if diff := cmp.Diff([]string{"session.created", "tool.call", "tool.result"}, names); diff != "" {
		t.Errorf("event stream at shutdown (-want +got):\n%s", diff)
	}
}

// stuckInvoker never returns before release, whatever its context says: a
// call that outlasts the shutdown grace.
type stuckInvoker struct {
	started chan struct{}
	release chan struct{}
}

func (si *stuckInvoker) Call(ctx context.Context, _ *config.Tool, _ tool.Request, _ func(json.RawMessage)) invoke.Outcome {
	si.started <- struct{}{}
	<-si.release
	return invoke.Outcome{Result: *tool.Errorf("cancelled"), Status: "cancelled", ErrorCode: "cancelled"}
}

// TestShutdownRefusals: once shutdown began, a new call is 503; a waiter
// whose call has not recorded its final state when brain stops answering
// gets 503 saying brain is shutting down, not a call that looks running.
func TestShutdownRefusals(t *testing.T) {
	t.Parallel()
	t.Run("new call while draining", func(t *testing.T) {
		t.Parallel()
		b := startBrain(t)
		s := b.session("t1", "echo")
		b.srv.drain(time.Second)
		wantRefusal(t, b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", map[string]any{"tool": "echo", "arguments": map[string]string{"text": "x"}}),
			http.StatusServiceUnavailable, httpapi.CodeUnavailable, "shutting down")
	})
	t.Run("waiter outlasting the grace", func(t *testing.T) {
		t.Parallel()
		si := &stuckInvoker{started: make(chan struct{}, 1), release: make(chan struct{})}
		b := serveBrain(t, func(s *Server) { s.invoker = si; s.grace = 200 * time.Millisecond })
		t.Cleanup(func() { close(si.release) }) // runs before Close
		s := b.session("t1", "slow")
		waiter := make(chan resp, 1)
		go func() {
			waiter <- b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", map[string]any{"tool": "slow", "wait_seconds": 30})
		}()
		<-si.started
		go b.stop()
		wantRefusal(t, <-waiter, http.StatusServiceUnavailable, httpapi.CodeUnavailable, "shutting down", "final state")
	})
}

// TestCloseBounded: a call goroutine that does not return after it was
// cancelled (stuckInvoker ignores its context, as a final write hanging
// on an unreachable database would) holds the shutdown (Serve, then
// Close) up for two grace periods in all, not for ever: Close returns an error naming the call, and the call,
// left as stored, is ended brain_restarted by the next brain on the store.
func TestCloseBounded(t *testing.T) {
	t.Parallel()
	if testStore == storeReplicas {
		t.Skip("drives one brain's Close in this process: BRAIN_TEST_STORE=sqlite or postgres")
	}
	si := &stuckInvoker{started: make(chan struct{}, 1), release: make(chan struct{})}
	ts := newToolServer(t)
	dir := t.TempDir()
	srv, err := New(context.Background(), Options{Config: hostConfig(t, ts.URL), DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	const grace = 400 * time.Millisecond
	srv.invoker, srv.grace = si, grace
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	b := &brain{t: t, url: "http://" + ln.Addr().String(), srv: srv, tools: ts, dir: dir}
	s := b.session("t1", "slow")
	var c CallJSON
	r := b.do("POST", "/sessions/"+s.ID+"/tool_calls", "t1", map[string]any{"tool": "slow"})
	r.json(t, &c)
	<-si.started
	stopped := time.Now()
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	err = srv.Close()
	// Two grace periods after the calls were cancelled, Serve's shutdown
	// and Close together: not one in Serve and two more in Close.
	if took := time.Since(stopped); took < 2*grace || took > 2*grace+grace*3/4 {
		t.Errorf("shutdown and close with a stuck call took %s, want about %s", took, 2*grace)
	}
	if err == nil || !strings.Contains(err.Error(), c.ID) || !strings.Contains(err.Error(), "left as stored") || !strings.Contains(err.Error(), "800ms after they were cancelled") {
		t.Errorf("close with a stuck call: %v, want an error naming %s", err, c.ID)
	}
	// The process would exit here; the next brain on the store ends the
	// call, and the stuck goroutine, let go, records nothing over it.
	next := startBrain(t, func(o *Options) { o.DataDir, o.DatabaseURL = dir, "" })
	status, got := next.getCall("t1", c.ID, 0)
	if status != http.StatusOK || got.Status != "failed" || deref(got.ErrorCode) != "brain_restarted" {
		t.Errorf("the stuck call after a restart: %d %s %s, want failed brain_restarted", status, got.Status, deref(got.ErrorCode))
	}
	close(si.release)
	srv.calls.Wait()
	if _, got := next.getCall("t1", c.ID, 0); got.Status != "failed" {
		t.Errorf("the stuck call once its goroutine returned: %s, want failed as the next brain recorded it", got.Status)
	}
}

// TestShutdownRequestInProgress: a request in progress when shutdown
// begins (one held up by its database, here by a hold in front of the
// handler) is not cut short: it gets its answer if it ends within the
// grace; one that outlasts the grace is ended then, answered 503 saying
// brain is shutting down (not 499, as if the client had left), and Serve
// says so.
func TestShutdownRequestInProgress(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// hold is how the request waits before brain's handler runs.
		hold       func(s *Server, r *http.Request)
		grace      time.Duration
		wantStatus int
		wantServe  string // "" for none
	}{
		{"answered within the grace", func(s *Server, r *http.Request) {
			for !s.isDraining() {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
		}, 5 * time.Second, http.StatusOK, ""},
		{"ended after the grace", func(s *Server, r *http.Request) {
			<-r.Context().Done()
		}, 200 * time.Millisecond, http.StatusServiceUnavailable, "requests still in progress 200ms after the listener closed ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			held := make(chan struct{})
			handled := make(chan error, 1)
			b := serveBrain(t, func(s *Server) {
				s.grace = tc.grace
				inner := s.handler
				s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get("X-Hold") != "" {
						close(held)
						tc.hold(s, r)
						handled <- r.Context().Err()
					}
					inner.ServeHTTP(w, r)
				})
			})
			s := b.session("t1", "echo")
			_, c := b.call("t1", s.ID, "echo", map[string]any{"text": "hi"}, 5)
			got := make(chan resp, 1)
			go func() { got <- b.do("GET", "/tool_calls/"+c.ID, "t1", nil, "X-Hold", "1") }()
			<-held
			err := b.stop()
			ctxErr := <-handled
			r := <-got
			if tc.wantServe == "" {
				var call CallJSON
				r.json(t, &call)
				if err != nil || ctxErr != nil || r.status != http.StatusOK || call.ID != c.ID {
					t.Errorf("serve %v, request context %v, answer %d %s; want the call, 200, and no error", err, ctxErr, r.status, r.body)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantServe) || ctxErr == nil {
				t.Errorf("serve: %v, request context %v; want %q and the request ended", err, ctxErr, tc.wantServe)
			}
			wantRefusal(t, r, tc.wantStatus, httpapi.CodeUnavailable, "shutting down")
		})
	}
}
