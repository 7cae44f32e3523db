package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/pgtest"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The store the API tests run on, from BRAIN_TEST_STORE (make test runs
// this package once with each):
//
//	sqlite (or unset)  one brain in this process on SQLite
//	postgres           one brain in this process on PostgreSQL
//	replicas           three brain processes on one PostgreSQL database,
//	                   behind a round-robin proxy: each request of a test
//	                   goes to the next replica
const (
	storeSQLite   = "sqlite"
	storePostgres = "postgres"
	storeReplicas = "replicas"
)

var testStore = storeSQLite

// pg is the PostgreSQL server of the tests that need one, started by the
// first of them (pgOnce) and stopped by TestMain.
var (
	pg     *pgtest.Server
	pgErr  error
	pgOnce sync.Once
)

// childEnv names the variable that makes the test binary a brain replica
// (runChild) instead of running tests; its value is the replica's
// childConfig as JSON.
const childEnv = "BRAIN_TEST_REPLICA"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(runChild(cfg))
	}
	switch v := os.Getenv("BRAIN_TEST_STORE"); v {
	case "", storeSQLite:
	case storePostgres, storeReplicas:
		testStore = v
	default:
		fmt.Fprintf(os.Stderr, "BRAIN_TEST_STORE: want sqlite, postgres or replicas, got %q\n", v)
		os.Exit(2)
	}
	code := m.Run()
	if pg != nil {
		pg.Close()
	}
	os.Exit(code)
}

// testDatabase returns the URL of a new database for t.
func testDatabase(t testing.TB) string {
	t.Helper()
	pgOnce.Do(func() { pg, pgErr = pgtest.Start() })
	if pgErr != nil {
		t.Fatalf("brain's PostgreSQL tests: %v", pgErr)
	}
	return pg.NewDatabase(t)
}

// childConfig is what a replica process is started with.
type childConfig struct {
	Config      json.RawMessage   `json:"config"`
	Env         map[string]string `json:"env"`
	DatabaseURL string            `json:"database_url"`
	PublicURL   string            `json:"public_url"`
	Lease       time.Duration     `json:"lease"`
	Heartbeat   time.Duration     `json:"heartbeat"`
	// AllowLoopback gives the replica loopbackGuard (allowLoopback).
	AllowLoopback bool `json:"allow_loopback"`
}

// runChild is a brain replica: it serves on 127.0.0.1:0, prints "listening
// ADDR" on stdout, and stops on SIGTERM as brain does.
func runChild(cfgJSON string) int {
	var cc childConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cc); err != nil {
		fmt.Fprintln(os.Stderr, "replica config:", err)
		return 2
	}
	cfg, err := config.Parse(cc.Config, func(k string) string { return cc.Env[k] })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	o := Options{Config: cfg, DatabaseURL: cc.DatabaseURL, PublicURL: cc.PublicURL,
		Lease: cc.Lease, Heartbeat: cc.Heartbeat, SecretsKey: testSecretsKey}
	if cc.AllowLoopback {
		allowLoopback(&o)
	}
	srv, err := New(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("listening %s\n", ln.Addr())
	err = srv.Serve(ctx, ln)
	if cerr := srv.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// replica is one brain process of startReplicas.
type replica struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
}

// testLease is the replicas' lease: short, so that a killed replica's
// calls are taken over within a test.
const testLease = 1500 * time.Millisecond

// startReplicas starts n brain processes (this test binary, as runChild)
// on one new database, behind a round-robin proxy on 127.0.0.1 whose URL
// is the brain's, and stops them when t ends.
// With allowLoopback each replica has loopbackGuard (allowLoopback).
func startReplicas(t *testing.T, ts *toolServer, n int, allowLoopback bool) *brain {
	t.Helper()
	doc, env := hostConfigJSON(ts.URL)
	b := startReplicasWith(t, doc, env, n, allowLoopback)
	b.tools = ts
	return b
}

// startReplicasWith is startReplicas with host config doc and the
// environment it names.
func startReplicasWith(t *testing.T, doc []byte, env map[string]string, n int, allowLoopback bool) *brain {
	t.Helper()
	dbURL := testDatabase(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxyURL := "http://" + ln.Addr().String()
	cc, _ := json.Marshal(childConfig{Config: doc, Env: env, DatabaseURL: dbURL, PublicURL: proxyURL,
		Lease: testLease, Heartbeat: 50 * time.Millisecond, AllowLoopback: allowLoopback})
	b := &brain{t: t, url: proxyURL, dbURL: dbURL}
	for range n {
		r := &replica{done: make(chan struct{})}
		r.cmd = exec.Command(exe, "-test.run=^$")
		r.cmd.Env = append(os.Environ(), childEnv+"="+string(cc))
		r.cmd.Stderr = &testLog{t: t, prefix: "replica: "}
		r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := r.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { r.cmd.Wait(); close(r.done) }()
		t.Cleanup(func() {
			r.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-r.done:
			case <-time.After(20 * time.Second):
				r.cmd.Process.Kill()
				<-r.done
			}
		})
		line, err := bufio.NewReader(out).ReadString('\n')
		if !strings.HasPrefix(line, "listening ") {
			t.Fatalf("replica did not start: %q, %v", line, err)
		}
		r.url = "http://" + strings.TrimSpace(strings.TrimPrefix(line, "listening "))
		go io.Copy(io.Discard, out)
		b.replicas = append(b.replicas, r)
	}
	var next atomic.Uint64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			live := b.liveReplicas()
			u, _ := url.Parse(live[int(next.Add(1))%len(live)].url)
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1, // SSE: every event at once
		ErrorLog:      nil,
	}
	hs := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return b
}

// liveReplicas returns the replicas not killed.
func (b *brain) liveReplicas() []*replica {
	var out []*replica
	for _, r := range b.replicas {
		select {
		case <-r.done:
		default:
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return b.replicas
	}
	return out
}

// waitStreams waits until an event stream is open on the brain (one
// replica or another).
func (b *brain) waitStreams() {
	b.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if b.srv != nil {
			if b.srv.metricStreams() > 0 {
				return
			}
		} else {
			for _, r := range b.liveReplicas() {
				if metricValue(b.t, r.url, "event_streams") > 0 {
					return
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.t.Fatal("no event stream open within 5 s")
}

func (s *Server) metricStreams() float64 { return testutil.ToFloat64(s.metrics.streams) }

// metricValue reads one metric of the brain at base that has one sample
// (its only label the const service).
func metricValue(t *testing.T, base, name string) float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		return 0
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			return f
		}
	}
	return 0
}

// testLog writes a process's output to the test log, line by line.
type testLog struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		line := string(l.buf[:i])
		l.buf = l.buf[i+1:]
		func() {
			defer func() { recover() }() // the test may have ended
			l.t.Log(l.prefix + line)
		}()
	}
	return len(p), nil
}

// TestReplicaKilledMidCall: three replicas; a call runs on one of them
// when it is killed (SIGKILL). Another replica ends the call failed,
// brain_restarted, with an unknown outcome, within the lease (plus the
// third of it the lease loop waits); the tool received it once and never
// again; an event stream on another replica delivered every recorded
// event, in order, with no gap or duplicate, and the stored events are
// the same.
func TestReplicaKilledMidCall(t *testing.T) {
	t.Parallel()
	ts := newToolServer(t)
	b := startReplicas(t, ts, 3, false)
	s := b.session("t1", "echo", "slow")
	if _, c := b.call("t1", s.ID, "echo", map[string]string{"text": "before"}, 5); c.Status != "succeeded" {
		t.Fatalf("echo before the kill: %+v", c)
	}
	victim, watcher := b.replicas[0], b.replicas[1]
	on := func(r *replica) *brain { return &brain{t: t, url: r.url, tools: ts} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, stream := on(watcher).openSSE(ctx, "t1", s.ID)
	_, c := on(victim).call("t1", s.ID, "slow", nil, 0)
	waitStarted(t, ts)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-victim.done
	r := b.do("GET", "/tool_calls/"+c.ID+"?wait_seconds=30", "t1", nil)
	took := time.Since(killed)
	var got CallJSON
	r.json(t, &got)
	_, res := resultText(t, got.Result)
	if r.status != 200 || got.Status != "failed" || deref(got.ErrorCode) != "brain_restarted" || !got.UnknownOutcome || !res.IsError {
		t.Fatalf("call of the killed replica: %d %s", r.status, r.body)
	}
	t.Logf("the killed replica's call ended brain_restarted %s after the kill (lease %s)", took, testLease)
	if limit := testLease + testLease/3 + time.Second; took > limit {
		t.Errorf("ended %s after the kill, want within the lease (%s)", took, limit)
	}
	want := []string{"session.created", "tool.call", "tool.result", "tool.call", "tool.result"}
	var ids, types []string
	for range want {
		ev := next(t, stream)
		ids, types = append(ids, ev.id), append(types, ev.name)
	}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("stream on another replica (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"1", "2", "3", "4", "5"}, ids); diff != "" {
		t.Errorf("stream event ids (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, eventTypes(b.events("t1", s.ID))); diff != "" {
		t.Errorf("stored events (-want +got):\n%s", diff)
	}
	select {
	case req := <-ts.started:
		t.Errorf("the tool got call %s again after the kill", req.CallID)
	case <-time.After(2 * testLease):
	}
}

// TestReplicaRespondThroughAnother: a call waits for input on the replica
// that made it; respond through the other replicas works as on its own:
// a bad body is refused there naming the field (the call still waits), a
// good one ends a function tool's call (200) or sends an approved gated
// call (202, then its tool gets it once); two answers at once through two
// other replicas give one 200 and one 409 saying who answered first; and
// an answer given while the call's replica is dead is taken by the
// replica that takes the call over after the lease.
func TestReplicaRespondThroughAnother(t *testing.T) {
	t.Parallel()
	ct := newCountingTools(t)
	doc, env := waitingConfigJSON(ct.URL, false, 300)
	b := startReplicasWith(t, doc, env, 3, false)
	on := func(r *replica) *brain { return &brain{t: t, url: r.url} }
	owner, other, third := on(b.replicas[0]), on(b.replicas[1]), on(b.replicas[2])
	s := owner.session("t1", "lookup", "gated")

	// A function tool's call, answered through another replica.
	_, fc := owner.call("t1", s.ID, "lookup", map[string]string{"order_id": "A-1"}, 0)
	wantRefusal(t, other.respond("t1", fc.ID, `{"structured_content":{"status":5}}`), 400, httpapi.CodeInvalidRequest, "structured_content: does not match tool lookup's output_schema")
	if _, c := owner.getCall("t1", fc.ID, 0); c.Status != "requires_input" {
		t.Fatalf("after a refused answer the call is %s", c.Status)
	}
	r := other.respond("t1", fc.ID, map[string]any{"structured_content": map[string]string{"status": "shipped"}})
	var done CallJSON
	r.json(t, &done)
	if r.status != 200 || done.Status != "succeeded" {
		t.Fatalf("answer through another replica: %d %s", r.status, r.body)
	}
	var responded []EventJSON
	for _, e := range eventsOf(b.events("t1", s.ID), fc.ID) {
		if e.Type == "tool.responded" {
			responded = append(responded, e)
		}
	}
	if len(responded) != 1 || !strings.Contains(string(responded[0].Data), `"api_key":"KEY_ONE"`) {
		t.Fatalf("tool.responded events %+v", responded)
	}

	// An approval gate, approved through another replica: sent once.
	_, gc := owner.call("t1", s.ID, "gated", map[string]any{}, 0)
	r = third.respond("t1", gc.ID, map[string]any{"approved": true})
	var gone CallJSON
	r.json(t, &gone)
	// 202 gone on, or 200 when the fast tool has answered already.
	if !(r.status == 202 && gone.Status == "running" || r.status == 200 && gone.Status == "succeeded") {
		t.Fatalf("approval through another replica: %d %s", r.status, r.body)
	}
	if _, c := owner.getCall("t1", gc.ID, 10); c.Status != "succeeded" || ct.count(gc.ID) != 1 {
		t.Fatalf("approved gated call: %s, sent %d times", c.Status, ct.count(gc.ID))
	}

	// Two answers at once through the two other replicas: one wins.
	for round := range 3 {
		_, c := owner.call("t1", s.ID, "lookup", map[string]string{"order_id": fmt.Sprint("R-", round)}, 0)
		var wg sync.WaitGroup
		got := make([]resp, 2)
		for i, via := range []*brain{other, third} {
			wg.Go(func() {
				got[i] = via.respond("t1", c.ID, map[string]any{"content": []map[string]string{{"type": "text", "text": fmt.Sprint("answer ", i)}}})
			})
		}
		wg.Wait()
		codes := []int{got[0].status, got[1].status}
		if !(codes[0] == 200 && codes[1] == 409 || codes[0] == 409 && codes[1] == 200) {
			t.Fatalf("round %d: two answers gave %v: %s / %s", round, codes, got[0].body, got[1].body)
		}
		loser := got[0]
		if codes[0] == 200 {
			loser = got[1]
		}
		// Refused by the call's replica (answered first by the other) or,
		// coming later, by its own (the call has finished).
		var e errBody
		loser.json(t, &e)
		if e.Error.Code != httpapi.CodeConflict || !strings.Contains(e.Error.Message, "was already answered by the application (API key KEY_ONE)") &&
			!strings.Contains(e.Error.Message, "is already succeeded") {
			t.Fatalf("round %d: the second answer: %s", round, loser.body)
		}
	}

	// The call's replica dies; an answer through another one waits until
	// the call is taken over, then ends it.
	_, lc := owner.call("t1", s.ID, "lookup", map[string]string{"order_id": "K-1"}, 0)
	if err := b.replicas[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-b.replicas[0].done
	killed := time.Now()
	r = other.respond("t1", lc.ID, map[string]any{"structured_content": map[string]string{"status": "late"}})
	r.json(t, &done)
	if r.status != 200 || done.Status != "succeeded" {
		t.Fatalf("answer while the call's replica was dead: %d %s", r.status, r.body)
	}
	t.Logf("answered %s after the kill (lease %s)", time.Since(killed), testLease)
}

// TestSlowTakeUpKeepsOwnLeases: on PostgreSQL a replica renews its leases
// however long it takes to take up a stopped replica's calls (found by a
// tester: renewals and take-ups shared one goroutine, so a slow take-up —
// a session tool set slow to compile, many calls — stopped the renewals,
// and another replica then ended the live one's running call failed,
// brain_restarted, lost its result, and took up the same waiting call a
// second time). The take-up is made slow by takeUpHook, three leases long,
// not by anything slow in itself, so that the test keeps testing the
// lease loop whatever else gets faster.
func TestSlowTakeUpKeepsOwnLeases(t *testing.T) {
	if testStore != storePostgres {
		t.Skip("needs the PostgreSQL store: BRAIN_TEST_STORE=postgres")
	}
	const lease = time.Second
	const slowness = 3 * lease
	var mu sync.Mutex
	takenBy := map[string][]string{} // call ID → the replicas that took it up
	replica := func(name string) func(*Options) {
		return func(o *Options) {
			o.Lease = lease
			o.takeUpHook = func(ctx context.Context, calls []*store.Call) {
				mu.Lock()
				for _, c := range calls {
					takenBy[c.ID] = append(takenBy[c.ID], name)
				}
				mu.Unlock()
				select {
				case <-time.After(slowness):
				case <-ctx.Done():
				}
			}
		}
	}

	a := startBrain(t, allowLoopback, replica("a"))
	b := startBrain(t, allowLoopback, sameStore(a), replica("b"))
	c := startBrain(t, allowLoopback, sameStore(a), replica("c"))
	c.tools = b.tools

	// On b: a call of slow, running until released.
	sb := b.session("t1", "slow")
	st, slow := b.call("t1", sb.ID, "slow", map[string]any{}, 0)
	if st != http.StatusAccepted || slow.Status != "running" {
		t.Fatalf("slow: %d %+v", st, slow)
	}
	<-b.tools.started

	// On a: a function call waiting for its answer; then a stops, and b or
	// c takes the waiting call up, slowly.
	sa := a.session("t1")
	if r := a.putTools("t1", sa.ID, []any{map[string]any{"type": "function", "name": "f", "description": "d"}}); r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	_, waiting := a.call("t1", sa.ID, "f", map[string]any{}, 0)
	if waiting.Status != "requires_input" {
		t.Fatalf("f: %+v", waiting)
	}
	if err := a.srv.Close(); err != nil {
		t.Fatal(err)
	}

	// Time for a's lease to run out, a take-up, and the take-up of anything
	// a replica lost meanwhile.
	for deadline := time.Now().Add(2*slowness + 3*lease); time.Now().Before(deadline); {
		if _, got := b.getCall("t1", slow.ID, 0); got.Status != "running" {
			t.Fatalf("the slow call b is still running reads %s %s (%s) while b is alive", got.Status, deref(got.ErrorCode), deref(got.ErrorMessage))
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	for id, by := range takenBy {
		if id != waiting.ID {
			t.Errorf("call %s of a live replica taken up by %v", id, by)
		} else if len(by) != 1 {
			t.Errorf("the waiting call taken up by %v; want one replica", by)
		}
	}
	if len(takenBy[waiting.ID]) == 0 {
		t.Errorf("the waiting call of the stopped replica taken up by none")
	}
	mu.Unlock()
	if _, got := b.getCall("t1", waiting.ID, 0); got.Status != "requires_input" {
		t.Errorf("the waiting call after its take-up: %s %s", got.Status, deref(got.ErrorCode))
	}
	b.tools.releaseAll()
	if _, got := b.getCall("t1", slow.ID, 10); got.Status != "succeeded" {
		t.Errorf("the slow call after release: %s %s", got.Status, deref(got.ErrorCode))
	}
}

// TestTakeUpGoesOnPastAFailedCall: on PostgreSQL, when a replica cannot
// take up one of the calls it claimed from a stopped replica (the store
// failing for that call), it takes up the others all the same and gives
// up its claim on that one, which a later round takes up (found by the
// lease helper: the take-up stopped at the first failure, and the calls
// after it stayed claimed, renewed and run by nobody: their answers were
// never taken).
func TestTakeUpGoesOnPastAFailedCall(t *testing.T) {
	if testStore != storePostgres {
		t.Skip("needs the PostgreSQL store: BRAIN_TEST_STORE=postgres")
	}
	const lease = time.Second
	var mu sync.Mutex
	var failed string
	a := startBrain(t, allowLoopback, func(o *Options) { o.Lease = lease })
	b := startBrain(t, allowLoopback, sameStore(a), func(o *Options) {
		o.Lease = lease
		o.takeUpHook = func(ctx context.Context, calls []*store.Call) {
			mu.Lock()
			defer mu.Unlock()
			if failed == "" {
				// The first call claimed fails to take up: its session is
				// not found (this copy of it only; the store is intact).
				failed = calls[0].ID
				calls[0].SessionID = "ses_aaaaaaaaaaaaaaaaaaaaaaaaaa"
			}
		}
	})

	s := a.session("t1")
	if r := a.putTools("t1", s.ID, []any{map[string]any{"type": "function", "name": "f", "description": "d"}}); r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	var ids []string
	for range 3 {
		_, c := a.call("t1", s.ID, "f", map[string]any{}, 0)
		if c.Status != "requires_input" {
			t.Fatalf("f: %+v", c)
		}
		ids = append(ids, c.ID)
	}
	if err := a.srv.Close(); err != nil {
		t.Fatal(err)
	}
	// Each is answered through b and finishes once b runs it.
	for _, id := range ids {
		if r := b.respond("t1", id, `{"content":[{"type":"text","text":"done"}]}`); r.status >= 300 {
			t.Fatalf("respond %s: %d %s", id, r.status, r.body)
		}
	}
	for _, id := range ids {
		if _, got := b.getCall("t1", id, 10); got.Status != "succeeded" {
			mu.Lock()
			t.Errorf("call %s (the one that failed to take up first: %s) after its answer: %s %s", id, failed, got.Status, deref(got.ErrorCode))
			mu.Unlock()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if failed == "" {
		t.Fatal("b took up no call")
	}
}

// TestPausedReplicaFenced: on PostgreSQL a replica paused past its lease
// (its renewals and take-ups held back in-process, as SIGSTOP would) has
// its calls taken over by another: a gated call with the approval call
// whose stream the approval tool holds, a function call waiting for its
// answer, and a running call. When the operator's decision then reaches
// the paused replica's stale approval stream, the store refuses to record
// it (the writes are fenced by owner): it records no decision and does not
// send the gated call. Once it renews again it stops its taken-over calls
// at once, each with a WARN, and its stream to the running call's tool
// ends; the new owner's outcome stands, with no ERROR from it (found by a
// tester with three replicas, BRAIN_LEASE=5s and kill -STOP for 9 s: the
// resumed replica recorded the decision and sent the gated call itself,
// and the owner logged ERROR record tool result).
func TestPausedReplicaFenced(t *testing.T) {
	if testStore != storePostgres {
		t.Skip("needs the PostgreSQL store: BRAIN_TEST_STORE=postgres")
	}
	t.Parallel()
	const lease = time.Second
	ct := newCountingTools(t)
	cfg := waitingConfig(t, ct.URL, true, 60)
	var (
		held              atomic.Bool
		resume            = make(chan struct{})
		pausedLog, ownLog syncBuffer
	)
	paused := startBrain(t, func(o *Options) {
		o.Config, o.Lease = cfg, lease
		o.Logger = slog.New(slog.NewJSONHandler(&pausedLog, nil))
		o.leaseHook = func(ctx context.Context, _ bool) {
			if held.Load() {
				select {
				case <-resume:
				case <-ctx.Done():
				}
			}
		}
	})
	owner := startBrain(t, sameStore(paused), func(o *Options) {
		o.Config, o.Lease = cfg, lease
		o.Logger = slog.New(slog.NewJSONHandler(&ownLog, nil))
	})
	waitUntil := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s", what, within)
			}
		}
	}
	runsOn := func(b *brain, id string) bool { _, ok := b.srv.lookupRunning(id); return ok }

	s := paused.session("t1", "gated", "lookup", "held")
	_, run := paused.call("t1", s.ID, "held", map[string]any{}, 0)
	receive(t, ct.arrived, 5*time.Second, "the held call did not reach its tool")
	_, fn := paused.call("t1", s.ID, "lookup", map[string]string{"order_id": "A-1"}, 0)
	_, gate := paused.call("t1", s.ID, "gated", map[string]any{}, 0)
	if run.Status != "running" || fn.Status != "requires_input" || gate.Status != "requires_input" {
		t.Fatalf("calls before the pause: %s %s %s", run.Status, fn.Status, gate.Status)
	}
	stale := nextApprovalReq(t, ct, 5*time.Second)
	approval := stale.req.CallID

	// A client waits on the running call through the replica about to
	// be paused.
	type waited struct {
		status int
		call   CallJSON
	}
	waiter := make(chan waited, 1)
	go func() {
		status, c := paused.getCall("t1", run.ID, 30)
		waiter <- waited{status, c}
	}()

	// The pause: the other replica takes the calls over once the lease ran
	// out, and sends the approval call again with its ID.
	held.Store(true)
	again := nextApprovalReq(t, ct, 3*lease+10*time.Second)
	if again.req.CallID != approval {
		t.Fatalf("after the takeover the approval tool got call %s, want the approval call %s again", again.req.CallID, approval)
	}
	if _, c := owner.getCall("t1", run.ID, 10); c.Status != "failed" || deref(c.ErrorCode) != "brain_restarted" {
		t.Fatalf("the running call after the takeover: %s %s", c.Status, deref(c.ErrorCode))
	}
	waitUntil("the function call taken up", 10*time.Second, func() bool { return runsOn(owner, fn.ID) && runsOn(owner, gate.ID) })

	// The operator's decision reaches the paused replica's stale stream
	// while it has not noticed anything: the store refuses its writes.
	stale.decide <- "approved|alice|"
	waitUntil("the approval call to end on the paused replica", 10*time.Second, func() bool { return !runsOn(paused, approval) })
	if _, c := owner.getCall("t1", approval, 0); c.Status != "running" {
		t.Errorf("the approval call after the paused replica got the decision: %s, want running on its new owner", c.Status)
	}
	time.Sleep(lease / 2) // time for a gated call sent by the paused replica to arrive
	if n := ct.count(gate.ID); n != 0 {
		t.Errorf("the gated call was sent %d times by the replica that lost it", n)
	}
	if _, c := owner.getCall("t1", gate.ID, 0); c.Status != "requires_input" {
		t.Errorf("the gated call after the paused replica got the decision: %s, want requires_input", c.Status)
	}

	// The paused replica goes on: its renewal finds its calls taken over,
	// and it stops them, streams included.
	close(resume)
	waitUntil("the paused replica to stop its taken-over calls", 10*time.Second, func() bool {
		return !runsOn(paused, gate.ID) && !runsOn(paused, fn.ID) && !runsOn(paused, run.ID)
	})
	// Its waiter gets the call as the owner recorded it, not running.
	select {
	case w := <-waiter:
		if w.status != http.StatusOK || w.call.Status != "failed" || deref(w.call.ErrorCode) != "brain_restarted" {
			t.Errorf("the waiter on the paused replica: %d %s %s, want 200 failed brain_restarted", w.status, w.call.Status, deref(w.call.ErrorCode))
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the waiter on the paused replica did not return")
	}
	waitUntil("the held tool's request from the paused replica to end", 10*time.Second, func() bool {
		ct.mu.Lock()
		defer ct.mu.Unlock()
		return ct.inflight == 1 // the owner's approval stream
	})

	// The owner decides the calls.
	again.decide <- "approved|alice|"
	if _, c := owner.getCall("t1", gate.ID, 10); c.Status != "succeeded" || ct.count(gate.ID) != 1 {
		t.Errorf("the gated call: %s, sent %d times; want succeeded, once", c.Status, ct.count(gate.ID))
	}
	// An answer through the paused replica goes to the owner.
	r := paused.respond("t1", fn.ID, map[string]any{"structured_content": map[string]string{"status": "shipped"}})
	var done CallJSON
	r.json(t, &done)
	if r.status != http.StatusOK || done.Status != "succeeded" {
		t.Errorf("answer through the paused replica: %d %s", r.status, r.body)
	}
	var responded []string
	for _, e := range owner.events("t1", s.ID) {
		if e.Type == "tool.responded" {
			responded = append(responded, e.CallID)
		}
	}
	slices.Sort(responded)
	want := []string{fn.ID, gate.ID}
	slices.Sort(want)
	if diff := cmp.Diff(want, responded); diff != "" {
		t.Errorf("tool.responded events, one per answered call (-want +got):\n%s", diff)
	}

	for _, l := range []struct {
		name string
		log  *syncBuffer
	}{{"owner", &ownLog}, {"paused replica", &pausedLog}} {
		for line := range strings.Lines(l.log.String()) {
			if strings.Contains(line, `"level":"ERROR"`) {
				t.Errorf("%s logged an ERROR: %s", l.name, line)
			}
		}
	}
	for _, id := range []string{approval, gate.ID, fn.ID, run.ID} {
		n := 0
		for line := range strings.Lines(pausedLog.String()) {
			if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, `"call_id":"`+id+`"`) {
				n++
				if !strings.Contains(line, "another brain replica took it over") {
					t.Errorf("the paused replica logged a WARN for call %s other than its takeover: %s", id, line)
				}
			}
		}
		if n != 1 {
			t.Errorf("the paused replica logged %d WARNs for call %s, want 1: that it was taken over", n, id)
		}
	}
}

// TestStuckRenewalKeepsOwnCalls: a replica whose renewals are held up
// past the lease (a renewal stuck on the database) while its claim pass
// still runs does not claim its own calls as a stopped replica's: the
// call it is running is not ended brain_restarted under it, the call
// waiting for an answer is not taken up a second time; once the renewals
// go on, both end as they would have.
func TestStuckRenewalKeepsOwnCalls(t *testing.T) {
	if testStore != storePostgres {
		t.Skip("needs the PostgreSQL store: BRAIN_TEST_STORE=postgres")
	}
	t.Parallel()
	const lease = 500 * time.Millisecond
	ct := newCountingTools(t)
	var held atomic.Bool
	resume := make(chan struct{})
	claims := make(chan struct{}, 100)
	b := startBrain(t, func(o *Options) {
		o.Config, o.Lease = waitingConfig(t, ct.URL, false, 60), lease
		o.leaseHook = func(ctx context.Context, renewal bool) {
			switch {
			case !renewal:
				select {
				case claims <- struct{}{}:
				default:
				}
			case held.Load():
				select {
				case <-resume:
				case <-ctx.Done():
				}
			}
		}
	})
	s := b.session("t1", "lookup", "held")
	_, run := b.call("t1", s.ID, "held", map[string]any{}, 0)
	receive(t, ct.arrived, 5*time.Second, "the held call did not reach its tool")
	_, fn := b.call("t1", s.ID, "lookup", map[string]string{"order_id": "A-1"}, 0)
	if run.Status != "running" || fn.Status != "requires_input" {
		t.Fatalf("calls before the stuck renewal: %s %s", run.Status, fn.Status)
	}

	held.Store(true)
	time.Sleep(2 * lease) // every lease ran out
	for range 3 {         // claim passes after that
		receive(t, claims, 5*time.Second, "no claim pass ran")
	}
	if _, c := b.getCall("t1", run.ID, 0); c.Status != "running" {
		t.Errorf("the running call while its renewal was stuck: %s %s, want running", c.Status, deref(c.ErrorCode))
	}
	if n := ct.count(run.ID); n != 1 {
		t.Errorf("the running call was sent %d times, want once", n)
	}
	close(resume)

	ct.release <- struct{}{}
	if _, c := b.getCall("t1", run.ID, 10); c.Status != "succeeded" {
		t.Errorf("the running call once its tool answered: %s %s, want succeeded", c.Status, deref(c.ErrorCode))
	}
	r := b.respond("t1", fn.ID, map[string]any{"structured_content": map[string]string{"status": "shipped"}})
	var done CallJSON
	r.json(t, &done)
	if r.status != http.StatusOK || done.Status != "succeeded" {
		t.Errorf("answer to the waiting call: %d %s", r.status, r.body)
	}
	var responded int
	for _, e := range b.events("t1", s.ID) {
		if e.Type == "tool.responded" || e.Type == "tool.result" && e.CallID == fn.ID {
			responded++
		}
	}
	if responded != 2 {
		t.Errorf("the waiting call recorded %d tool.responded/tool.result events, want one each", responded)
	}
}

// TestNoClaimsUntilRenewed: a replica claims no other replica's calls
// until its own renewals have succeeded for a lease (after an outage a
// lease that ran out may be a live replica's that could not renew
// either); then it does.
func TestNoClaimsUntilRenewed(t *testing.T) {
	if testStore != storePostgres {
		t.Skip("needs the PostgreSQL store: BRAIN_TEST_STORE=postgres")
	}
	t.Parallel()
	expires := time.Now().Add(time.Minute)
	gate, _, opt := seedGate(t, expires, expires) // a dead replica's calls, their leases run out
	b := startBrain(t, opt, func(o *Options) { o.Lease = time.Hour })
	ctx := context.Background()
	// Taken up: waiting here, or ended (the tool is not in this brain's
	// config).
	takenUp := func() bool {
		_, here := b.srv.lookupRunning(gate)
		_, c := b.getCall("t1", gate, 0)
		return here || c.Status != "requires_input"
	}
	for _, since := range []int64{0, time.Now().UnixNano()} {
		b.srv.healthySince.Store(since)
		b.srv.takeUpExpired(ctx)
		if takenUp() {
			t.Fatalf("took the dead replica's calls up with renewals healthy since %d", since)
		}
	}
	b.srv.healthySince.Store(time.Now().Add(-2 * time.Hour).UnixNano())
	b.srv.takeUpExpired(ctx)
	if !takenUp() {
		t.Errorf("did not take the dead replica's calls up once its renewals held for a lease")
	}
}

// TestDatabaseSilent: while the database takes requests and answers none
// (paused, partitioned away), a request that needs it is answered 503
// once a statement's bound has passed, logged as a warning — a read, a
// wait on a call, a new call — instead of being held until the client
// gives up; once the database answers again, so does brain.
func TestDatabaseSilent(t *testing.T) {
	if testStore != storePostgres {
		t.Skip("needs the PostgreSQL store: BRAIN_TEST_STORE=postgres")
	}
	const bound = 300 * time.Millisecond
	gate, url := pg.Gate(t, testDatabase(t))
	var logs syncBuffer
	b := startBrain(t, func(o *Options) {
		o.DatabaseURL, o.StatementTimeout = url, bound
		// The lease loop renews every lease/3: a few times in the outage.
		o.Lease = time.Second
		o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	sess := b.session("t1", "echo")
	_, c := b.call("t1", sess.ID, "echo", map[string]any{"text": "hi"}, 5)
	// A quiet replica: pgxpool pings a connection idle over a second
	// before handing it out; that ping is bounded too.
	time.Sleep(1100 * time.Millisecond)
	gate.Shut()
	tests := []struct {
		name, method, path string
		body               any
	}{
		{"read a call", "GET", "/tool_calls/" + c.ID, nil},
		{"wait on a call", "GET", "/tool_calls/" + c.ID + "?wait_seconds=30", nil},
		{"new call", "POST", "/sessions/" + sess.ID + "/tool_calls", map[string]any{"tool": "echo", "arguments": map[string]any{"text": "x"}}},
		{"read a session", "GET", "/sessions/" + sess.ID, nil},
	}
	for _, tt := range tests {
		start := time.Now()
		r := b.do(tt.method, tt.path, "t1", tt.body)
		took := time.Since(start)
		if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), `"code":"unavailable"`) {
			t.Errorf("%s while the database is silent: %d %s, want 503 unavailable", tt.name, r.status, r.body)
		}
		if took > 20*bound {
			t.Errorf("%s took %s, want about %s", tt.name, took, bound)
		}
	}
	// brain's own work that needs the database (the lease loop) reports
	// the outage as the requests do: a warning, not an error.
	for deadline := time.Now().Add(5 * time.Second); !logs.warned(map[string]string{"msg": "renew call leases", "err": "deadline exceeded"}) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if !logs.warned(map[string]string{"msg": "request failed", "status": "503", "err": "deadline exceeded"}) ||
		!logs.warned(map[string]string{"msg": "renew call leases", "err": "deadline exceeded"}) ||
		strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("the outage is not logged as warnings naming the cause (requests and the lease loop), or something logged an error; log:\n%s", logs.String())
	}
	gate.Open()
	if r := b.do("GET", "/tool_calls/"+c.ID, "t1", nil); r.status != http.StatusOK {
		t.Errorf("once the database answers again: %d %s", r.status, r.body)
	}
}

// TestDatabaseCut: a PostgreSQL connection cut in the middle of a
// statement without a word from the server (its host gone, a proxy between
// restarted: pgx reads an unexpected EOF) is a 503 logged as a warning, as
// a silent database is, not a 500; brain answers again once the pool has
// replaced the connections the cut ended.
func TestDatabaseCut(t *testing.T) {
	if testStore != storePostgres {
		t.Skip("needs the PostgreSQL store: BRAIN_TEST_STORE=postgres")
	}
	direct := testDatabase(t)
	gate, url := pg.Gate(t, direct)
	var logs syncBuffer
	b := startBrain(t, func(o *Options) {
		o.DatabaseURL = url
		o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	sess := b.session("t1", "echo")
	_, c := b.call("t1", sess.ID, "echo", map[string]any{"text": "hi"}, 5)
	// A lock, taken around the gate, holds brain's read of the call in
	// the database while the gate cuts its connection.
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE tool_calls IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	answer := make(chan resp, 1)
	go func() { answer <- b.do("GET", "/tool_calls/"+c.ID, "t1", nil) }()
	waitForLockWait(t, holder)
	gate.Cut()
	r := <-answer
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), `"code":"unavailable"`) {
		t.Errorf("read cut off mid-statement: %d %s, want 503 unavailable", r.status, r.body)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if !logs.warned(map[string]string{"msg": "request failed", "status": "503", "err": "unexpected EOF"}) || strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("the cut is not logged as a warning naming it, or something logged an error; log:\n%s", logs.String())
	}
	// The pool's other connections were cut too: each fails the request
	// that finds it dead (503), and is replaced.
	for i := 0; ; i++ {
		r := b.do("GET", "/tool_calls/"+c.ID, "t1", nil)
		if r.status == http.StatusOK {
			break
		}
		if r.status != http.StatusServiceUnavailable || i == 10 {
			t.Fatalf("read %d after the cut: %d %s, want 503 until the pool's dead connections are gone, then 200", i+1, r.status, r.body)
		}
	}
}

// waitForLockWait waits until a session of the database conn is on waits
// for a lock (pg_stat_activity).
func waitForLockWait(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("no statement came to wait for the lock")
}

// TestCloseWhileDatabaseSilent: brain stopping while its database takes
// connections and answers none is done within about the statement bound.
// A connection in use as the pool closes, its statement then past the
// bound, comes back only after pgx has waited its own 15 s for the silent
// server (a tester's replica took 18 s to stop with a 2 s bound): the
// close does not wait for it.
func TestCloseWhileDatabaseSilent(t *testing.T) {
	if testStore != storePostgres {
		t.Skip("needs the PostgreSQL store: BRAIN_TEST_STORE=postgres")
	}
	const bound = 300 * time.Millisecond
	gate, url := pg.Gate(t, testDatabase(t))
	var logs syncBuffer
	srv, err := New(context.Background(), Options{Config: hostConfig(t, "http://127.0.0.1:1"), DatabaseURL: url, SecretsKey: testSecretsKey,
		StatementTimeout: bound, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Open()
	// A connection in the pool, then a read on it as the database goes
	// silent.
	if _, err := srv.store.Session(context.Background(), "t1", "ses_none"); err == nil {
		t.Fatal("read a session that does not exist")
	}
	gate.Shut()
	read := make(chan error, 1)
	go func() {
		_, err := srv.store.Session(context.Background(), "t1", "ses_none")
		read <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("close with the database silent took %s, want about %s", took, bound)
	}
	if err := <-read; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the read as the database went silent: %v, want the bound's deadline", err)
	}
	if !logs.warned(map[string]string{"msg": "the store did not close within a statement's bound"}) {
		t.Errorf("no warning that the store's connections were left to the process; log:\n%s", logs.String())
	}
}

// TestRespondWhileDatabaseSilent: an answer the call took while the
// database stopped answering is not held for the outage (a tester's
// respond waited 22 s, the whole pause): 503 within the statement bound,
// naming what to do; the call records the answer once the database is
// back, and an answer given again is refused.
func TestRespondWhileDatabaseSilent(t *testing.T) {
	if testStore != storePostgres {
		t.Skip("needs the PostgreSQL store: BRAIN_TEST_STORE=postgres")
	}
	const bound = 300 * time.Millisecond
	gate, url := pg.Gate(t, testDatabase(t))
	b, _ := startWaitingBrain(t, false, 300, func(o *Options) { o.DatabaseURL, o.StatementTimeout = url, bound })
	sess := b.session("t1", "lookup")
	_, c := b.call("t1", sess.ID, "lookup", map[string]string{"order_id": "A-1"}, 0)
	if c.Status != "requires_input" {
		t.Fatalf("function call: %+v", c)
	}
	// The request's head first: brain reads the call from the database
	// (which still answers), then waits for the body; the database goes
	// silent before the body, so the answer is taken but not recorded.
	body := `{"content":[{"type":"text","text":"shipped"}]}`
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /tool_calls/%s/respond HTTP/1.1\r\nHost: brain\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		c.ID, apiKeys["t1"], len(body), body[:1])
	time.Sleep(500 * time.Millisecond)
	gate.Shut()
	start := time.Now()
	if _, err := io.WriteString(conn, body[1:]); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the database is silent (%s): %v", time.Since(start), err)
	}
	data, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if took := time.Since(start); res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(data), "took the answer") || took > 20*bound {
		t.Errorf("respond while the database is silent: %d %s after %s, want 503 naming the answer taken within about %s", res.StatusCode, data, took, bound)
	}
	gate.Open()
	if status, got := b.getCall("t1", c.ID, 10); status != http.StatusOK || got.Status != "succeeded" {
		t.Errorf("once the database is back: %d %+v, want the answer recorded", status, got)
	}
	if r := b.respond("t1", c.ID, json.RawMessage(body)); r.status != http.StatusConflict {
		t.Errorf("an answer given again: %d %s, want 409", r.status, r.body)
	}
}

// TestCloseWhileReplicaDead: a session whose calls wait on a replica that
// died (a function call in requires_input, a call queued for a slot, calls
// running) closes through another replica on the first try, once the
// dead one's lease runs out: the replica that takes its calls over ends
// the waiting ones cancelled, not sent, since their session is being
// closed, rather than refusing them for that and leaving the close to
// wait for them until it gives up (503).
func TestCloseWhileReplicaDead(t *testing.T) {
	t.Parallel()
	ct := newCountingTools(t)
	doc, env := waitingConfigJSON(ct.URL, false, 300)
	b := startReplicasWith(t, doc, env, 3, false)
	victim := b.replicas[0]
	owner, other := &brain{t: t, url: victim.url}, &brain{t: t, url: b.replicas[1].url}
	s := owner.session("t1", "lookup", "held")
	_, fn := owner.call("t1", s.ID, "lookup", map[string]string{"order_id": "A-1"}, 0)
	var held []CallJSON
	for range 3 { // held takes two at a time: the third queues
		_, c := owner.call("t1", s.ID, "held", map[string]any{}, 0)
		held = append(held, c)
	}
	for range 2 {
		receive(t, ct.arrived, 10*time.Second, "a held call did not reach its tool")
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-victim.done
	r := other.do("POST", "/sessions/"+s.ID+"/close", "t1", map[string]any{})
	took := time.Since(killed)
	if r.status != http.StatusOK {
		t.Fatalf("close through another replica %s after the kill: %d %s, want 200", took.Round(time.Millisecond), r.status, r.body)
	}
	t.Logf("closed %s after the kill (lease %s)", took.Round(time.Millisecond), testLease)
	for _, w := range []struct {
		id, status, code string
		sent             bool
	}{
		{fn.ID, "cancelled", "cancelled", false},
		{held[0].ID, "failed", "brain_restarted", true},
		{held[1].ID, "failed", "brain_restarted", true},
		{held[2].ID, "cancelled", "cancelled", false},
	} {
		_, c := other.getCall("t1", w.id, 0)
		if c.Status != w.status || deref(c.ErrorCode) != w.code || ct.count(w.id) != map[bool]int{false: 0, true: 1}[w.sent] {
			t.Errorf("call %s: %s %s, sent %d times; want %s %s", w.id, c.Status, deref(c.ErrorCode), ct.count(w.id), w.status, w.code)
		}
	}
}
