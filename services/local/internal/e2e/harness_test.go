package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/pgtest"
	"github.com/brain-tools/suite/pkg/servicetest"
	"github.com/brain-tools/suite/pkg/sse"
	"github.com/brain-tools/suite/pkg/tool"
)

const (
	toolsKey      = "tools-key-e2e-0123456789"
	brainKey      = "brain-key-e2e-0123456789"
	operatorToken = "operator-token-e2e-0123456789"
	tenant        = "local"
)

// Binaries built once per test run by TestMain, and the PostgreSQL
// server of the tests that run several local replicas.
var (
	localBin string
	brainBin string
	pg       *pgtest.Server
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "local-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, b := range []struct {
		bin *string
		dir string
	}{{&localBin, "../.."}, {&brainBin, "../../../brain"}} {
		if *b.bin, err = servicetest.Build(b.dir, dir); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	if pg, err = pgtest.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e tests need PostgreSQL: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if err := pg.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: stop postgres: %v\n", err)
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// local is one local service process and what it needs to restart.
type local struct {
	t    testing.TB
	addr string
	url  string
	env  map[string]string
	p    *servicetest.Process
}

func startLocal(t testing.TB, extra map[string]string) *local {
	t.Helper()
	addr := freePort(t)
	env := map[string]string{
		"ADDR":                    addr,
		"BRAIN_TOOLS_KEY":         toolsKey,
		"APPROVAL_DATA_DIR":       t.TempDir(),
		"APPROVAL_OPERATOR_TOKEN": operatorToken,
		"LOG_LEVEL":               "debug",
	}
	for k, v := range extra {
		env[k] = v
	}
	l := &local{t: t, addr: addr, url: "http://" + addr, env: env}
	l.start()
	return l
}

func (l *local) start() {
	l.t.Helper()
	l.p = servicetest.StartProcess(l.t, "local", localBin, l.env)
	l.p.AwaitHealthy(l.t, l.url+"/healthz", 20*time.Second)
}

// bindings reads the local service's published bindings (GET /tools): the
// host config is generated from them, not typed.
func (l *local) bindings() []json.RawMessage {
	l.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, l.url+"/tools", nil)
	req.Header.Set("Authorization", "Bearer "+toolsKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 {
		l.t.Fatalf("GET /tools: %d %v", resp.StatusCode, err)
	}
	return body.Tools
}

// brain is one brain process configured with the local service's tools,
// and what it needs to start again on the same data directory.
type brain struct {
	t    testing.TB
	url  string
	p    *servicetest.Process
	env  map[string]string
	args []string
}

var listeningRE = regexp.MustCompile(`brain listening on (\S+)`)

func startBrain(t testing.TB, l *local) *brain {
	t.Helper()
	return startBrainWith(t, l, nil)
}

// startBrainWith is startBrain with a host config that edit changes first:
// its "tools" are the local service's published bindings (as
// []json.RawMessage), "api_keys" one key for tenant local.
func startBrainWith(t testing.TB, l *local, edit func(doc map[string]any)) *brain {
	t.Helper()
	dir := t.TempDir()
	doc := map[string]any{
		"tools":    l.bindings(),
		"api_keys": []map[string]string{{"env": "BRAIN_API_KEY", "tenant": tenant}},
	}
	if edit != nil {
		edit(doc)
	}
	cfg, _ := json.Marshal(doc)
	path := filepath.Join(dir, "brain.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	b := &brain{t: t, env: map[string]string{
		"BRAIN_ADDR": "127.0.0.1:0", "BRAIN_DATA_DIR": filepath.Join(dir, "data"),
		"BRAIN_API_KEY": brainKey, "BRAIN_TOOLS_KEY": toolsKey, "LOG_LEVEL": "debug",
	}, args: []string{"-config", path}}
	b.start()
	return b
}

// start starts the brain process, on a new port (b.url changes) and the
// same data directory and host config as before.
func (b *brain) start() {
	b.t.Helper()
	b.p = servicetest.StartProcess(b.t, "brain", brainBin, b.env, b.args...)
	b.url = "http://" + b.p.Await(b.t, listeningRE, 20*time.Second)[1]
	b.p.AwaitHealthy(b.t, b.url+"/healthz", 20*time.Second)
}

// raw sends a request as the tenant's application and returns the status
// and body, whatever the status.
func (b *brain) raw(method, path string, body any) (int, []byte) {
	b.t.Helper()
	var r io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(v)
	default:
		data, _ := json.Marshal(body)
		r = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, b.url+path, r)
	req.Header.Set("Authorization", "Bearer "+brainKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func (b *brain) do(method, path string, body any, into any) int {
	b.t.Helper()
	var r io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		r = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, b.url+path, r)
	req.Header.Set("Authorization", "Bearer "+brainKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		b.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if into != nil {
		if err := json.Unmarshal(data, into); err != nil {
			b.t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
	return resp.StatusCode
}

func (b *brain) session(tools ...string) string {
	b.t.Helper()
	var s struct{ ID string }
	b.do(http.MethodPost, "/sessions", map[string]any{"config": map[string]any{"tools": tools}}, &s)
	return s.ID
}

// toolCall is brain's ToolCall resource.
type toolCall struct {
	ID                string          `json:"id"`
	Tool              string          `json:"tool"`
	Status            string          `json:"status"`
	ParentID          *string         `json:"parent_id"`
	CallerType        string          `json:"caller_type"`
	Prompt            *string         `json:"prompt"`
	ResponseSchema    json.RawMessage `json:"response_schema"`
	ResponseExpiresAt *string         `json:"response_expires_at"`
	ErrorCode         *string         `json:"error_code"`
	ErrorMessage      *string         `json:"error_message"`
	UnknownOutcome    bool            `json:"unknown_outcome"`
	Retryable         *bool           `json:"retryable"`
	Result            *tool.Result    `json:"result"`
}

func (b *brain) call(session, name string, args any, wait int) toolCall {
	b.t.Helper()
	var c toolCall
	b.do(http.MethodPost, "/sessions/"+session+"/tool_calls", map[string]any{"tool": name, "arguments": args, "wait_seconds": wait}, &c)
	return c
}

func (b *brain) getCall(id string, wait int) toolCall {
	b.t.Helper()
	var c toolCall
	b.do(http.MethodGet, fmt.Sprintf("/tool_calls/%s?wait_seconds=%d", id, wait), nil, &c)
	return c
}

// event is one session event from brain.
type event struct {
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	CallID string          `json:"call_id"`
	Time   string          `json:"time"`
	Data   json.RawMessage `json:"data"`
}

// events follows the session's SSE stream until the test ends.
func (b *brain) events(session string) <-chan event {
	b.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url+"/sessions/"+session+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+brainKey)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b.t.Fatalf("events: %d", resp.StatusCode)
	}
	ch := make(chan event, 100)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		for ev, err := range sse.Read(resp.Body, 4<<20) {
			if err != nil {
				return
			}
			var e event
			if json.Unmarshal([]byte(ev.Data), &e) == nil {
				ch <- e
			}
		}
	}()
	return ch
}

// next returns the next event of type typ, skipping others.
func next(t testing.TB, ch <-chan event, typ string, within time.Duration) event {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("event stream ended while waiting for %s", typ)
			}
			if e.Type == typ {
				return e
			}
		case <-deadline:
			t.Fatalf("no %s event within %s", typ, within)
		}
	}
}

// operator is a signed-in operator on the page, over plain HTTP.
type operator struct {
	t    testing.TB
	base string
	c    *http.Client
	csrf string
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func signIn(t testing.TB, base, name string) *operator {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	o := &operator{t: t, base: base, c: &http.Client{Jar: jar}}
	form := o.get("/operator/signin")
	m := csrfRE.FindStringSubmatch(form)
	if m == nil {
		t.Fatalf("no csrf in the sign-in form: %s", form)
	}
	resp, err := o.c.PostForm(base+"/operator/signin", url.Values{"csrf": {m[1]}, "name": {name}, "token": {operatorToken}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m = csrfRE.FindStringSubmatch(string(body))
	if resp.StatusCode != 200 || m == nil || !strings.Contains(string(body), "Signed in as") {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, body)
	}
	o.csrf = m[1]
	return o
}

func (o *operator) get(path string) string {
	o.t.Helper()
	resp, err := o.c.Get(o.base + path)
	if err != nil {
		o.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// decide answers approval id and returns the final status code (after the
// 303 to the detail view, 200).
func (o *operator) decide(id, decision, comment string) int {
	o.t.Helper()
	code, err := o.tryDecide(id, decision, comment)
	if err != nil {
		o.t.Fatal(err)
	}
	return code
}

// tryDecide is decide for goroutines other than the test's.
func (o *operator) tryDecide(id, decision, comment string) (int, error) {
	resp, err := o.c.PostForm(o.base+"/approval/"+id+"/decision", url.Values{"csrf": {o.csrf}, "decision": {decision}, "comment": {comment}})
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// readLines returns the lines of s that contain substr.
func readLines(s, substr string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			out = append(out, sc.Text())
		}
	}
	return out
}
