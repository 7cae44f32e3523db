package webfetch

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/brain-tools/suite/pkg/tool"
)

// TestBadInput sends every kind of bad request to every endpoint: each
// gets a clear 4xx naming the problem, or (for bad arguments, which the
// contract treats as the tool's own failure) a 200 is_error result naming
// the field.
func TestBadInput(t *testing.T) {
	h := newHarness(t, map[string]string{"MAX_REQUEST_BYTES": "65536"})
	call := func(args string) string {
		return `{"tenant_id":"local","session_id":"s1","call_id":"c1","arguments":` + args + `}`
	}
	long := strings.Repeat("a", 9000)
	tests := []struct {
		name        string
		path        string
		contentType string
		token       string
		body        string
		status      int
		want        string // in the error message or the is_error text
	}{
		{"no token", "/tools/web_fetch", "application/json", "", call(`{"url":"http://x.test/"}`), 401, ""},
		{"wrong token", "/tools/web_fetch", "application/json", "wrong", call(`{"url":"http://x.test/"}`), 401, ""},
		{"wrong content type", "/tools/web_fetch", "text/plain", testToken, call(`{"url":"http://x.test/"}`), 415, "Content-Type must be application/json"},
		{"malformed JSON", "/tools/web_fetch", "application/json", testToken, `{"tenant_id":`, 400, "request body"},
		{"not an object", "/tools/web_fetch", "application/json", testToken, `[1,2]`, 400, "request body"},
		{"unknown field", "/tools/web_fetch", "application/json", testToken, `{"tenant_id":"local","session_id":"s1","call_id":"c1","arguments":{},"extra":1}`, 400, "extra"},
		{"missing tenant_id", "/tools/web_fetch", "application/json", testToken, `{"session_id":"s1","call_id":"c1","arguments":{}}`, 400, "tenant_id"},
		{"wrong type of session_id", "/tools/web_fetch", "application/json", testToken, `{"tenant_id":"local","session_id":7,"call_id":"c1","arguments":{}}`, 400, "session_id"},
		{"arguments not an object", "/tools/web_fetch", "application/json", testToken, `{"tenant_id":"local","session_id":"s1","call_id":"c1","arguments":"x"}`, 400, "arguments"},
		{"trailing data", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/"}`) + `{}`, 400, "unexpected data after the JSON value"},
		{"oversized body", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/` + strings.Repeat("a", 70000) + `"}`), 413, "65536"},
		{"unknown tool", "/tools/fetch_all", "application/json", testToken, call(`{}`), 404, "fetch_all"},
		{"unknown argument", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/","raw":true}`), 200, "raw"},
		{"url missing", "/tools/web_fetch", "application/json", testToken, call(`{}`), 200, `at (root): missing property 'url'`},
		{"url wrong type", "/tools/web_fetch", "application/json", testToken, call(`{"url":42}`), 200, "url"},
		{"url relative", "/tools/web_fetch", "application/json", testToken, call(`{"url":"/etc/passwd"}`), 200, `url: must be an absolute http:// or https:// URL`},
		{"url not a URL", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://exa mple.test/"}`), 200, "url: not a valid URL"},
		{"url without host", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http:///path"}`), 200, "url: has no host"},
		{"url too long", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/` + long + `"}`), 200, `at "/url": maxLength: got 9014, want 8192`},
		{"format unknown", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/","format":"pdf"}`), 200, `at "/format": value must be one of 'markdown', 'text', 'html'`},
		{"format wrong type", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/","format":1}`), 200, "format"},
		{"max_length zero", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/","max_length":0}`), 200, `at "/max_length": minimum: got 0, want 1`},
		{"max_length over the limit", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/","max_length":100001}`), 200, `at "/max_length": maximum: got 100001, want 100000`},
		{"max_length fraction", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/","max_length":1.5}`), 200, "max_length"},
		{"max_length string", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/","max_length":"5000"}`), 200, "max_length"},
		{"start_index negative", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/","start_index":-1}`), 200, `at "/start_index": minimum: got -1, want 0`},
		{"main_content wrong type", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/","main_content":"yes"}`), 200, "main_content"},
		{"selector invalid", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/","selector":"div["}`), 200, "selector: not a valid CSS selector"},
		{"selector too long", "/tools/web_fetch", "application/json", testToken, call(`{"url":"http://x.test/","selector":"` + strings.Repeat("p", 1025) + `"}`), 200, `at "/selector": maxLength: got 1025, want 1024`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := h.post(tc.path, tc.contentType, tc.token, []byte(tc.body))
			t.Logf("%d %s", resp.StatusCode, data)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, data)
			}
			if tc.status == http.StatusOK {
				r, err := tool.DecodeResult(data)
				if err != nil {
					t.Fatal(err)
				}
				if !r.IsError || !strings.Contains(text(r), tc.want) || !strings.HasPrefix(text(r), "invalid arguments: ") {
					t.Fatalf("result %s, want is_error naming %q", data, tc.want)
				}
				return
			}
			var e struct {
				Error struct{ Code, Message string }
			}
			if tc.status != http.StatusUnauthorized {
				if err := json.Unmarshal(data, &e); err != nil || e.Error.Code == "" || !strings.Contains(e.Error.Message, tc.want) {
					t.Fatalf("error body %s, want a message containing %q", data, tc.want)
				}
			}
		})
	}
	if d := h.dials(); len(d) != 0 {
		t.Fatalf("bad input led to dials: %v", d)
	}
}

// TestOtherEndpoints covers GET /tools, /healthz, /metrics and wrong
// methods.
func TestOtherEndpoints(t *testing.T) {
	h := newHarness(t, nil)
	get := func(path, token string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, h.svc.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	if resp, _ := get("/tools", ""); resp.StatusCode != 401 {
		t.Fatalf("GET /tools without token: %d", resp.StatusCode)
	}
	if resp, _ := get("/tools", "wrong"); resp.StatusCode != 401 {
		t.Fatalf("GET /tools with a wrong token: %d", resp.StatusCode)
	}
	resp, body := get("/tools", testToken)
	var list struct{ Tools []tool.Binding }
	if resp.StatusCode != 200 || json.Unmarshal(body, &list) != nil || len(list.Tools) != 1 {
		t.Fatalf("GET /tools: %d %s", resp.StatusCode, body)
	}
	b := list.Tools[0]
	if err := b.Validate(); err != nil || b.Name != Name || b.URL != h.svc.URL+"/tools/web_fetch" || b.TokenEnv != "BRAIN_TOOLS_KEY" {
		t.Fatalf("binding %+v: %v", b, err)
	}
	if resp, body := get("/tools/web_fetch", testToken); resp.StatusCode != 405 || !strings.Contains(string(body), "GET is not allowed") {
		t.Fatalf("GET /tools/web_fetch: %d %s", resp.StatusCode, body)
	}
	if resp, body := get("/healthz", ""); resp.StatusCode != 200 || !strings.Contains(string(body), `"status":"ok"`) {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}
	h.call(map[string]any{"url": "http://10.0.0.1/"})
	if resp, body := get("/metrics", ""); resp.StatusCode != 200 || !strings.Contains(string(body), `webfetch_fetches_total{outcome="refused",service="webfetch"} 1`) {
		t.Fatalf("metrics: %d", resp.StatusCode)
	}
}

func TestConfig(t *testing.T) {
	base := map[string]string{"BRAIN_TOOLS_KEY": "k"}
	cfg, err := ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != DefaultAddr || cfg.Allow != "" || cfg.Ports != "80,443" || !cfg.Robots || cfg.MaxBodyBytes != 10<<20 || cfg.CacheTTL.String() != "5m0s" {
		t.Fatalf("defaults %+v", cfg)
	}
	for env, want := range map[string]string{
		"WEBFETCH_ALLOW":          "WEBFETCH_ALLOW: allow-list entry 1",
		"WEBFETCH_PORTS":          "WEBFETCH_PORTS: port",
		"WEBFETCH_MAX_BODY_BYTES": "WEBFETCH_MAX_BODY_BYTES: out of range",
		"WEBFETCH_MAX_REDIRECTS":  "WEBFETCH_MAX_REDIRECTS: out of range",
	} {
		m := map[string]string{"BRAIN_TOOLS_KEY": "k", env: map[string]string{
			"WEBFETCH_ALLOW": "10.0.0.0/99", "WEBFETCH_PORTS": "0", "WEBFETCH_MAX_BODY_BYTES": "0", "WEBFETCH_MAX_REDIRECTS": "-1",
		}[env]}
		if _, err := ParseConfig(m); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", env, err, want)
		}
	}
	if _, err := ParseConfig(map[string]string{}); err == nil || !strings.Contains(err.Error(), "BRAIN_TOOLS_KEY is not set") {
		t.Errorf("no token: %v", err)
	}
	if _, err := ParseConfig(map[string]string{"BRAIN_TOOLS_KEY": "k", "WEBFETCH_TIMEOUT": "soon"}); err == nil || !strings.Contains(err.Error(), "WEBFETCH_TIMEOUT") {
		t.Errorf("bad duration: %v", err)
	}
}

// TestArgumentEdges: the largest url and selector are accepted.
func TestArgumentEdges(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><body><p>edge</p></body></html>"))
	}))
	defer srv.Close()
	h := newHarness(t, nil, srv)
	u := srv.URL + "/"
	u += strings.Repeat("a", MaxURLLength-len(u))
	sel := "p" + strings.Repeat(",p", (MaxSelectorLength-1)/2)
	sel += strings.Repeat(" ", MaxSelectorLength-len(sel))
	if len(u) != MaxURLLength || len(sel) != MaxSelectorLength {
		t.Fatalf("lengths %d %d", len(u), len(sel))
	}
	for _, args := range []map[string]any{{"url": u}, {"url": srv.URL, "selector": sel, "max_length": 1}, {"url": srv.URL, "max_length": MaxMaxLength}} {
		r := h.call(args)
		if r.IsError || !strings.HasPrefix(r.Content[0].Text, "e") {
			t.Fatalf("%v: %s", args["max_length"], text(r))
		}
	}
}
