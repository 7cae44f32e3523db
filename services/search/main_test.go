package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

// serve starts the service from environ on 127.0.0.1 and returns its URL.
func serve(t *testing.T, environ map[string]string) string {
	t.Helper()
	environ["BRAIN_TOOLS_KEY"] = "tok"
	srv, err := newServer(environ, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- service.Serve(ctx, ln, srv) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("no shutdown")
		}
	})
	return "http://" + ln.Addr().String()
}

func webSearch(t *testing.T, base, args string) *tool.Result {
	t.Helper()
	body := fmt.Sprintf(`{"tenant_id":"local","session_id":"s","call_id":"c","arguments":%s}`, args)
	req, _ := http.NewRequest(http.MethodPost, base+"/tools/web_search", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %s: %s", resp.Status, data)
	}
	r, err := tool.DecodeResult(bytes.TrimSpace(data))
	if err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return r
}

func health(t *testing.T, base string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// Without a key the service starts, says so on /healthz and answers every
// call with an is_error that says how to configure it.
func TestUnconfigured(t *testing.T) {
	base := serve(t, map[string]string{"SEARCH_PROVIDER": "brave"})
	code, h := health(t, base)
	if code != http.StatusOK || h["status"] != "unconfigured" {
		t.Fatalf("healthz %d %v", code, h)
	}
	r := webSearch(t, base, `{"query":"golang"}`)
	if !r.IsError || r.UnknownOutcome || !strings.Contains(r.Content[0].Text, "set BRAVE_API_KEY or TAVILY_API_KEY") {
		t.Fatalf("%+v", r)
	}
}

// Both providers configured, their base URLs pointed at local servers that
// answer in each provider's wire format; the default and the provider
// argument both work end to end.
func TestBothProviders(t *testing.T) {
	brave := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/res/v1/web/search" || r.Header.Get("X-Subscription-Token") != "brave-key" {
			w.WriteHeader(422)
			io.WriteString(w, `{"type":"ErrorResponse","error":{"status":422,"code":"SUBSCRIPTION_TOKEN_INVALID","detail":"The provided subscription token is invalid."}}`)
			return
		}
		w.Header().Set("X-RateLimit-Limit", "20, 15000")
		w.Header().Set("X-RateLimit-Remaining", "19, 14999")
		w.Header().Set("X-RateLimit-Reset", "1, 100000")
		io.WriteString(w, `{"type":"search","web":{"results":[{"title":"B <strong>one</strong>","url":"https://b.example/1","description":"from brave","page_age":"2024-01-02T00:00:00","profile":{"name":"B Site"}}]}}`)
	}))
	defer brave.Close()
	tavily := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.Header.Get("Authorization") != "Bearer tvly-key" {
			w.WriteHeader(401)
			io.WriteString(w, `{"detail":{"error":"Unauthorized: missing or invalid API key."}}`)
			return
		}
		io.WriteString(w, `{"query":"q","answer":"T answer","results":[{"title":"T one","url":"https://t.example/1","content":"from tavily","score":0.9}],"response_time":"0.8","request_id":"r"}`)
	}))
	defer tavily.Close()
	base := serve(t, map[string]string{
		"BRAVE_API_KEY": "brave-key", "BRAVE_BASE_URL": brave.URL + "/res/v1",
		"TAVILY_API_KEY": "tvly-key", "TAVILY_BASE_URL": tavily.URL,
		"SEARCH_PROVIDER": "tavily",
	})
	code, h := health(t, base)
	if code != http.StatusOK || h["status"] != "ok" || h["default"] != "tavily" {
		t.Fatalf("healthz %d %v", code, h)
	}
	for _, tc := range []struct{ args, provider, title, answer string }{
		{`{"query":"q","include_answer":true}`, "tavily", "T one", "T answer"},
		{`{"query":"q","provider":"brave"}`, "brave", "B one", ""},
	} {
		r := webSearch(t, base, tc.args)
		if r.IsError {
			t.Fatal(r.Content[0].Text)
		}
		var out struct {
			Provider string
			Answer   string
			Results  []struct{ Title, URL, Snippet, Published, Source string }
		}
		json.Unmarshal(r.StructuredContent, &out)
		if out.Provider != tc.provider || len(out.Results) != 1 || out.Results[0].Title != tc.title || out.Answer != tc.answer {
			t.Fatalf("%s: %+v", tc.args, out)
		}
		if !strings.Contains(r.Content[0].Text, tc.title) {
			t.Fatalf("text: %s", r.Content[0].Text)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SEARCH_PROVIDER": "bing"}, "SEARCH_PROVIDER"},
		{map[string]string{"SEARCH_PROVIDER": "tavily", "BRAVE_API_KEY": "k"}, "SEARCH_PROVIDER"},
		{map[string]string{"BRAVE_API_KEY": "k", "BRAVE_BASE_URL": "not a url"}, "BRAVE_BASE_URL"},
		{map[string]string{"TAVILY_API_KEY": "k", "TAVILY_SEARCH_DEPTH": "deep"}, "TAVILY_SEARCH_DEPTH"},
		{map[string]string{"SEARCH_MAX_OUTPUT_BYTES": "100"}, "SEARCH_MAX_OUTPUT_BYTES"},
		{map[string]string{"BRAVE_RATE_PER_SECOND": "fast"}, "BRAVE_RATE_PER_SECOND"},
	} {
		if _, err := newServer(tc.env, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %s", tc.env, err, tc.want)
		}
	}
	if _, err := newServer(map[string]string{}, nil); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}
