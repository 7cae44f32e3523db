package echo

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

func TestEcho(t *testing.T) {
	cfg, err := service.ParseEnv[service.Config](map[string]string{"ADDR": "127.0.0.1:0", "BRAIN_TOOLS_KEY": "tok"})
	if err != nil {
		t.Fatal(err)
	}
	srv := &service.Server{Name: "local", Config: cfg, Tools: []service.Tool{Tool()}}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	body := func(args string) string {
		return `{"tenant_id":"local","session_id":"s","call_id":"c","arguments":` + args + `}`
	}
	maxText := strings.Repeat("é", MaxTextLength)
	tests := []struct {
		name    string
		body    string
		token   string
		status  int
		want    string
		isError bool
	}{
		{name: "hello", body: body(`{"text":"hello"}`), status: 200, want: "hello"},
		{name: "empty text", body: body(`{"text":""}`), status: 200, want: ""},
		{name: "4096 two-byte characters", body: body(`{"text":"` + maxText + `"}`), status: 200, want: maxText},
		{name: "4097 characters", body: body(`{"text":"` + maxText + `a"}`), status: 200, want: `invalid arguments: at "/text": maxLength: got 4097, want 4096`, isError: true},
		{name: "missing text", body: body(`{}`), status: 200, want: "invalid arguments: at (root): missing property 'text'", isError: true},
		{name: "text not a string", body: body(`{"text":["a"]}`), status: 200, want: `invalid arguments: at "/text": got array, want string`, isError: true},
		{name: "unknown argument", body: body(`{"text":"a","loud":true}`), status: 200, want: "invalid arguments: at (root): additional properties 'loud' not allowed", isError: true},
		{name: "malformed JSON", body: `{"tenant_id":`, status: 400, want: "malformed JSON"},
		{name: "unknown field", body: `{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{},"x":1}`, status: 400, want: "x: unknown field"},
		{name: "wrong token", body: body(`{"text":"a"}`), token: "nope", status: 401, want: "invalid bearer token"},
		{name: "oversized body", body: body(`{"text":"` + strings.Repeat("a", 4<<20) + `"}`), status: 413, want: "larger than the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, ts.URL+"/tools/echo", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			token := tt.token
			if token == "" {
				token = "tok"
			}
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, data)
			}
			if tt.status != 200 {
				if !strings.Contains(string(data), tt.want) {
					t.Fatalf("body %s, want %q", data, tt.want)
				}
				return
			}
			r, err := tool.DecodeResult(data)
			if err != nil {
				t.Fatal(err)
			}
			if r.IsError != tt.isError || len(r.Content) != 1 {
				t.Fatalf("result %+v", r)
			}
			if tt.isError && !strings.Contains(r.Content[0].Text, tt.want) || !tt.isError && r.Content[0].Text != tt.want {
				t.Fatalf("text %q, want %q", r.Content[0].Text, tt.want)
			}
		})
	}
}

// TestBindingIsTheContractExample: echo's binding is the contract's
// example, its input_schema inferred from Args, plus the title and the
// annotations MCP hosts read.
func TestBindingIsTheContractExample(t *testing.T) {
	want := `{"name":"echo","title":"Echo","description":"Echo text through an external tool service.","annotations":{"readOnlyHint":true,"openWorldHint":false},"input_schema":{"type":"object","properties":{"text":{"type":"string","maxLength":4096}},"required":["text"],"additionalProperties":false},"url":"http://127.0.0.1:8081/tools/echo","tenants":["local"],"token_env":"BRAIN_TOOLS_KEY","timeout_seconds":300,"max_output_bytes":1048576}`
	b := Tool().Binding
	b.URL, b.Tenants, b.TokenEnv = "http://127.0.0.1:8081/tools/echo", []string{"local"}, "BRAIN_TOOLS_KEY"
	got, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("binding\n%s\nwant\n%s", got, want)
	}
}
