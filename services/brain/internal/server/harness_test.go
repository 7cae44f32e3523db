package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
)

const toolsKey = "tools-secret"

// testSecretsKey seals tenant secrets on a shared store (every replica of
// a test the same).
var testSecretsKey = []byte("test-secrets-key-0123456789abcdef")

// Tenants and their API keys in every test host config.
var apiKeys = map[string]string{"t1": "key-one", "t2": "key-two"}

// toolServer is a real tool service on 127.0.0.1 speaking the contract, with
// hooks the tests steer.
type toolServer struct {
	*httptest.Server
	started chan tool.Request // every request of the slow and progress tools, once received
	release chan struct{}     // closed: slow and progress tools answer

	mu          sync.Mutex
	traceparent []string
	inspectFn   func(req tool.Request) *tool.Result
	cancelled   int // slow requests whose context ended before release
}

func newToolServer(t *testing.T) *toolServer {
	ts := &toolServer{started: make(chan tool.Request, 100), release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools/{name}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+toolsKey {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var req tool.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ts.mu.Lock()
		ts.traceparent = append(ts.traceparent, r.Header.Get("traceparent"))
		ts.mu.Unlock()
		var res *tool.Result
		switch r.PathValue("name") {
		case "echo", "secret":
			var args struct{ Text string }
			json.Unmarshal(req.Arguments, &args)
			res = tool.TextResult("%s", args.Text)
		case "slow":
			ts.started <- req
			select {
			case <-ts.release:
				res = tool.TextResult("slow done")
			case <-r.Context().Done():
				ts.mu.Lock()
				ts.cancelled++
				ts.mu.Unlock()
				return
			}
		case "progress":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			fmt.Fprintf(w, "event: progress\ndata: {\"step\":1}\n\n")
			w.(http.Flusher).Flush()
			ts.started <- req
			select {
			case <-ts.release:
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "event: progress\ndata: {\"step\":2}\n\nevent: result\ndata: {\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}\n\n")
			return
		case "inspect":
			ts.mu.Lock()
			fn := ts.inspectFn
			ts.mu.Unlock()
			res = fn(req)
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	})
	ts.Server = httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		select {
		case <-ts.release:
		default:
			close(ts.release)
		}
	})
	return ts
}

func (ts *toolServer) releaseAll() { close(ts.release) }

// hostConfig returns a host config: echo (t1, t2), slow, progress and
// inspect (t1), secret (t2).
func hostConfig(t *testing.T, toolURL string) *config.Config {
	t.Helper()
	return hostConfigWith(t, toolURL, nil)
}

// hostConfigWith is hostConfig with edit applied to the document first.
func hostConfigWith(t *testing.T, toolURL string, edit func(doc map[string]any)) *config.Config {
	t.Helper()
	data, env := hostConfigJSONWith(toolURL, edit)
	cfg, err := config.Parse(data, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("host config: %v", err)
	}
	return cfg
}

// hostConfigJSON is hostConfig's document and the environment it names.
func hostConfigJSON(toolURL string) ([]byte, map[string]string) {
	return hostConfigJSONWith(toolURL, nil)
}

// hostConfigJSONWith is hostConfigJSON with edit applied to the document.
func hostConfigJSONWith(toolURL string, edit func(doc map[string]any)) ([]byte, map[string]string) {
	binding := func(name string, tenants []string, extra map[string]any) map[string]any {
		b := map[string]any{
			"name": name, "description": name + " tool", "url": toolURL + "/tools/" + name,
			"token_env": "BRAIN_TOOLS_KEY", "tenants": tenants,
			"input_schema": map[string]any{"type": "object"},
		}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	doc := map[string]any{
		"tools": []any{
			binding("echo", []string{"t1", "t2"}, map[string]any{"input_schema": map[string]any{
				"type":                 "object",
				"properties":           map[string]any{"text": map[string]any{"type": "string", "maxLength": 100}},
				"required":             []string{"text"},
				"additionalProperties": false,
			}}),
			binding("slow", []string{"t1"}, nil),
			binding("progress", []string{"t1"}, nil),
			binding("inspect", []string{"t1"}, map[string]any{"inspect_session": true}),
			binding("secret", []string{"t2"}, nil),
		},
		"api_keys": []any{
			map[string]string{"env": "KEY_ONE", "tenant": "t1"},
			map[string]string{"env": "KEY_TWO", "tenant": "t2"},
		},
	}
	if edit != nil {
		edit(doc)
	}
	data, _ := json.Marshal(doc)
	return data, map[string]string{"BRAIN_TOOLS_KEY": toolsKey, "KEY_ONE": apiKeys["t1"], "KEY_TWO": apiKeys["t2"]}
}

// brain is a real brain server on 127.0.0.1:0 with its tool server.
type brain struct {
	t     *testing.T
	url   string
	srv   *Server
	tools *toolServer
	dir   string
	dbURL string // the PostgreSQL database, when the store is one
	// replicas are the brain processes behind url (startReplicas); srv is
	// then nil.
	replicas []*replica
}

// startBrain starts a brain on the store BRAIN_TEST_STORE names (see
// testStore): in this process on SQLite or PostgreSQL, or as replicas
// behind a round-robin proxy.
func startBrain(t *testing.T, opts ...func(*Options)) *brain {
	t.Helper()
	ts := newToolServer(t)
	if testStore == storeReplicas {
		// Of the options, only allowLoopback reaches the replicas.
		var o Options
		for _, f := range opts {
			f(&o)
		}
		allow := o.Guard == loopbackGuard
		if allow {
			o.Guard = nil
		}
		if !reflect.DeepEqual(o, Options{}) {
			t.Fatal("startBrain: options other than allowLoopback are not passed to replicas; run this test with BRAIN_TEST_STORE=sqlite or postgres")
		}
		return startReplicas(t, ts, 3, allow)
	}
	dir := t.TempDir()
	o := Options{Config: hostConfig(t, ts.URL), DataDir: dir, Heartbeat: 50 * time.Millisecond}
	if testStore == storePostgres {
		o.DataDir, o.DatabaseURL, o.SecretsKey = "", testDatabase(t), testSecretsKey
	}
	for _, f := range opts {
		f(&o)
	}
	srv, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &brain{t: t, url: "http://" + ln.Addr().String(), srv: srv, tools: ts, dir: o.DataDir, dbURL: o.DatabaseURL}
}

// resp is a decoded response.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// errBody is the refusal body.
type errBody struct {
	Error struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	} `json:"error"`
}

// do sends a request as tenant ("" = no Authorization). body: nil, a string
// (sent as is) or a value (JSON-encoded); JSON content type unless hdr says.
func (b *brain) do(method, path, tenant string, body any, hdr ...string) resp {
	b.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		data, err := json.Marshal(v)
		if err != nil {
			b.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tenant != "" {
		key, ok := apiKeys[tenant]
		if !ok {
			key = tenant // a raw token
		}
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		switch {
		case hdr[i+1] == "":
			req.Header.Del(hdr[i])
		case strings.HasPrefix(hdr[i], "+"): // one more value
			req.Header.Add(hdr[i][1:], hdr[i+1])
		default:
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: data}
}

func (b *brain) session(tenant string, tools ...string) SessionJSON {
	b.t.Helper()
	r := b.do("POST", "/sessions", tenant, map[string]any{"config": map[string]any{"tools": tools}})
	if r.status != http.StatusCreated {
		b.t.Fatalf("create session: %d %s", r.status, r.body)
	}
	var s SessionJSON
	r.json(b.t, &s)
	return s
}

func (b *brain) call(tenant, session, toolName string, args any, wait int) (int, CallJSON) {
	b.t.Helper()
	r := b.do("POST", "/sessions/"+session+"/tool_calls", tenant, map[string]any{"tool": toolName, "arguments": args, "wait_seconds": wait})
	if r.status != http.StatusOK && r.status != http.StatusAccepted {
		b.t.Fatalf("call %s: %d %s", toolName, r.status, r.body)
	}
	var c CallJSON
	r.json(b.t, &c)
	return r.status, c
}

func (b *brain) events(tenant, session string) []EventJSON {
	b.t.Helper()
	r := b.do("GET", "/sessions/"+session+"/events?limit=1000", tenant, nil, "Accept", "application/json")
	if r.status != http.StatusOK {
		b.t.Fatalf("events: %d %s", r.status, r.body)
	}
	var page struct{ Events []EventJSON }
	r.json(b.t, &page)
	return page.Events
}

func eventTypes(evs []EventJSON) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func resultText(t *testing.T, raw json.RawMessage) (string, tool.Result) {
	t.Helper()
	var r tool.Result
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	var sb strings.Builder
	for _, c := range r.Content {
		sb.WriteString(c.Text)
	}
	return sb.String(), r
}

// wantRefusal checks a refusal: status, code, a message containing every
// want string, and a request_id equal to the X-Request-Id header.
func wantRefusal(t *testing.T, r resp, status int, code string, want ...string) {
	t.Helper()
	if r.status != status {
		t.Errorf("status = %d, want %d; body %s", r.status, status, r.body)
		return
	}
	var eb errBody
	if err := json.Unmarshal(r.body, &eb); err != nil {
		t.Errorf("refusal body %s: %v", r.body, err)
		return
	}
	if eb.Error.Code != code {
		t.Errorf("code = %q, want %q (message %q)", eb.Error.Code, code, eb.Error.Message)
	}
	for _, w := range want {
		if !strings.Contains(eb.Error.Message, w) {
			t.Errorf("message %q does not name %q", eb.Error.Message, w)
		}
	}
	if eb.Error.RequestID == "" || eb.Error.RequestID != r.header.Get("X-Request-Id") {
		t.Errorf("request_id %q, X-Request-Id %q: want equal, non-empty", eb.Error.RequestID, r.header.Get("X-Request-Id"))
	}
}

// sseEvent is one event or comment read off an SSE stream.
type sseEvent struct {
	id, name, data string
	comment        bool
}

// readSSE reads SSE events and comments from body into a channel until EOF.
func readSSE(body io.Reader) <-chan sseEvent {
	out := make(chan sseEvent, 100)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		has := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if has {
					out <- ev
				}
				ev, has = sseEvent{}, false
			case strings.HasPrefix(line, ":"):
				out <- sseEvent{comment: true, data: strings.TrimSpace(line[1:])}
			default:
				k, v, _ := strings.Cut(line, ":")
				v = strings.TrimPrefix(v, " ")
				switch k {
				case "id":
					ev.id = v
				case "event":
					ev.name = v
				case "data":
					ev.data = v
				}
				has = true
			}
		}
	}()
	return out
}

// openSSE opens the event stream of session as tenant (or a raw token).
func (b *brain) openSSE(ctx context.Context, tenant, session string, hdr ...string) (*http.Response, <-chan sseEvent) {
	b.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.url+"/sessions/"+session+"/events", nil)
	key, ok := apiKeys[tenant]
	if !ok {
		key = tenant
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(res.Body)
		b.t.Fatalf("open SSE: %d %s", res.StatusCode, data)
	}
	return res, readSSE(res.Body)
}

// next returns the next non-comment event, failing after 5 s.
func next(t *testing.T, c <-chan sseEvent) sseEvent {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-c:
			if !ok {
				t.Fatal("SSE stream ended")
			}
			if !ev.comment {
				return ev
			}
		case <-timeout:
			t.Fatal("no SSE event within 5 s")
		}
	}
}

func waitStarted(t *testing.T, ts *toolServer) tool.Request {
	t.Helper()
	select {
	case req := <-ts.started:
		return req
	case <-time.After(5 * time.Second):
		t.Fatal("tool request did not arrive within 5 s")
	}
	return tool.Request{}
}

// newHTTPTestServer serves srv's handler on an httptest server (for tests
// that Close the Server themselves) and returns its URL.
func newHTTPTestServer(t *testing.T, srv *Server) string {
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}
