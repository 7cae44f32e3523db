package server

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
)

// TestOutcomeTableThroughBrain drives one call per row of the contract's
// outcome table ("Handle errors, timeouts, and long jobs") through a real
// brain and a real tool server on 127.0.0.1, and checks is_error and
// unknown_outcome on the ToolCall, on its result, and on the recorded
// tool.result event. internal/invoke's TestOutcomeTable covers every
// variant of each row; this checks the rows end to end.
func TestOutcomeTableThroughBrain(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools/denied", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"content":[{"type":"text","text":"the operator said no"}],"is_error":true}`))
	})
	mux.HandleFunc("POST /tools/status500", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"content":[{"type":"text","text":"ignored"}]}`))
	})
	mux.HandleFunc("POST /tools/wrongtype", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<p>hello</p>`))
	})
	mux.HandleFunc("POST /tools/noresult", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("event: progress\ndata: {}\n\n"))
	})
	mux.HandleFunc("POST /tools/dropped", func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	mux.HandleFunc("POST /tools/strict", func(w http.ResponseWriter, r *http.Request) {
		t.Error("a call whose arguments fail the schema reached the tool")
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/tools/refused"
	ln.Close()

	binding := func(name, url string) map[string]any {
		return map[string]any{"name": name, "description": name, "url": url, "tenants": []string{"t1"},
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}}
	}
	doc := map[string]any{
		"tools": []any{
			binding("denied", ts.URL+"/tools/denied"),
			binding("strict", ts.URL+"/tools/strict"),
			binding("refused", closed),
			binding("dropped", ts.URL+"/tools/dropped"),
			binding("status500", ts.URL+"/tools/status500"),
			binding("wrongtype", ts.URL+"/tools/wrongtype"),
			binding("noresult", ts.URL+"/tools/noresult"),
		},
		"api_keys": []any{map[string]string{"env": "KEY_ONE", "tenant": "t1"}},
	}
	data, _ := json.Marshal(doc)
	cfg, err := config.Parse(data, func(k string) string { return map[string]string{"KEY_ONE": apiKeys["t1"]}[k] })
	if err != nil {
		t.Fatal(err)
	}
	b := startBrain(t, func(o *Options) { o.Config = cfg })
	s := b.session("t1", "denied", "strict", "refused", "dropped", "status500", "wrongtype", "noresult")

	tests := []struct {
		row         string
		tool        string
		args        any
		wantCode    string
		wantUnknown bool
	}{
		{"the tool returned a result with is_error", "denied", map[string]any{}, "tool_error", false},
		{"brain refused before sending: arguments fail validation", "strict", map[string]any{"n": "not a number"}, "invalid_arguments", false},
		{"the connection failed", "refused", map[string]any{}, "connection_failed", true},
		{"the connection dropped", "dropped", map[string]any{}, "connection_failed", true},
		{"the tool returned a non-2xx status", "status500", map[string]any{}, "http_status", true},
		{"the response had the wrong content type", "wrongtype", map[string]any{}, "bad_content_type", true},
		{"the stream had no result event", "noresult", map[string]any{}, "no_result_event", true},
	}
	for _, tt := range tests {
		t.Run(tt.row, func(t *testing.T) {
			status, c := b.call("t1", s.ID, tt.tool, tt.args, 30)
			if status != http.StatusOK || c.Status != "failed" {
				t.Fatalf("HTTP %d, call status %q", status, c.Status)
			}
			if c.ErrorCode == nil || *c.ErrorCode != tt.wantCode || c.UnknownOutcome != tt.wantUnknown {
				t.Fatalf("error_code %v unknown_outcome %v, want %s %v", c.ErrorCode, c.UnknownOutcome, tt.wantCode, tt.wantUnknown)
			}
			r, err := tool.DecodeResult(c.Result)
			if err != nil {
				t.Fatal(err)
			}
			if !r.IsError || r.UnknownOutcome != tt.wantUnknown {
				t.Fatalf("result is_error %v unknown_outcome %v, want true %v", r.IsError, r.UnknownOutcome, tt.wantUnknown)
			}
			var found bool
			for _, e := range b.events("t1", s.ID) {
				if e.Type != "tool.result" || e.CallID != c.ID {
					continue
				}
				found = true
				var d struct {
					Result tool.Result `json:"result"`
				}
				if err := json.Unmarshal(e.Data, &d); err != nil {
					t.Fatal(err)
				}
				if !d.Result.IsError || d.Result.UnknownOutcome != tt.wantUnknown {
					t.Fatalf("tool.result event %s", e.Data)
				}
			}
			if !found {
				t.Fatal("no tool.result event for the call")
			}
		})
	}
}
