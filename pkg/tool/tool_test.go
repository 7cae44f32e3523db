package tool

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/brain-tools/suite/pkg/strictjson"
)

func TestDecodeResult(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    *Result
		wantErr string
	}{
		{name: "text", body: `{"content":[{"type":"text","text":"hello"}]}`,
			want: &Result{Content: []Content{Text("hello")}}},
		{name: "empty text is a block", body: `{"content":[{"type":"text","text":""}]}`,
			want: &Result{Content: []Content{Text("")}}},
		{name: "image", body: `{"content":[{"type":"image","data":"iVBORw==","mime_type":"image/png"}]}`,
			want: &Result{Content: []Content{{Type: "image", Data: "iVBORw==", MIMEType: "image/png"}}}},
		{name: "structured only", body: `{"structured_content":{"n":1}}`,
			want: &Result{StructuredContent: json.RawMessage(`{"n":1}`)}},
		{name: "structured scalar", body: `{"structured_content":0}`,
			want: &Result{StructuredContent: json.RawMessage(`0`)}},
		{name: "error flags", body: `{"content":[{"type":"text","text":"no"}],"is_error":true,"unknown_outcome":true}`,
			want: &Result{Content: []Content{Text("no")}, IsError: true, UnknownOutcome: true}},
		{name: "neither content nor structured", body: `{"is_error":true}`, wantErr: "neither content nor structured_content"},
		{name: "empty content and null structured", body: `{"content":[],"structured_content":null}`, wantErr: "neither content nor structured_content: content is an empty list; give it at least 1 block"},
		{name: "unknown field", body: `{"content":[{"type":"text","text":"a"}],"extra":1}`, wantErr: `extra: unknown field`},
		{name: "unknown content type", body: `{"content":[{"type":"audio","data":"AA=="}]}`, wantErr: `content[0].type: unknown content type "audio"`},
		{name: "content without type", body: `{"content":[{"text":"a"}]}`, wantErr: `content[0].type: required`},
		{name: "text block with image field", body: `{"content":[{"type":"text","text":"a","data":"AA=="}]}`, wantErr: `content[0].data: unknown field`},
		{name: "text block without text", body: `{"content":[{"type":"text"}]}`, wantErr: `content[0].text: required`},
		{name: "image without data", body: `{"content":[{"type":"image","mime_type":"image/png"}]}`, wantErr: `content[0].data: required`},
		{name: "image bad base64", body: `{"content":[{"type":"image","data":"***","mime_type":"image/png"}]}`, wantErr: `content[0].data: not valid base64`},
		{name: "image non-image mime", body: `{"content":[{"type":"image","data":"AA==","mime_type":"text/plain"}]}`, wantErr: `content[0].mime_type`},
		{name: "second block bad", body: `{"content":[{"type":"text","text":"a"},{"type":"video"}]}`, wantErr: `content[1].type`},
		{name: "is_error wrong type", body: `{"content":[{"type":"text","text":"a"}],"is_error":"yes"}`, wantErr: `is_error: wrong type`},
		{name: "trailing data", body: `{"content":[{"type":"text","text":"a"}]} {}`, wantErr: `unexpected data after`},
		{name: "not json", body: `hello`, wantErr: `malformed JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeResult([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("result mismatch (-want +got):\n%s", d)
			}
		})
	}
}

func TestResultRoundTrip(t *testing.T) {
	r, err := StructuredResult(map[string]int{"a": 1}, "a is 1")
	if err != nil {
		t.Fatal(err)
	}
	r.Content = append(r.Content, Image([]byte{1, 2, 3}, "image/png"), Text(""))
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeResult(data)
	if err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	if d := cmp.Diff(r, back); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if got := string(data); !strings.Contains(got, `{"type":"text","text":""}`) || strings.Contains(got, `"is_error"`) {
		t.Errorf("marshalled %s", got)
	}
}

func TestRequestValidate(t *testing.T) {
	ok := Request{TenantID: "t", SessionID: "s", CallID: "c", Arguments: json.RawMessage(`{}`)}
	tests := []struct {
		name    string
		mutate  func(*Request)
		wantErr string
	}{
		{name: "ok", mutate: func(*Request) {}},
		{name: "no tenant", mutate: func(r *Request) { r.TenantID = "" }, wantErr: "tenant_id: required"},
		{name: "no session", mutate: func(r *Request) { r.SessionID = "" }, wantErr: "session_id: required"},
		{name: "no call", mutate: func(r *Request) { r.CallID = "" }, wantErr: "call_id: required"},
		{name: "no arguments", mutate: func(r *Request) { r.Arguments = nil }, wantErr: "arguments: required"},
		{name: "array arguments", mutate: func(r *Request) { r.Arguments = json.RawMessage(`[]`) }, wantErr: "arguments: required: must be a JSON object"},
		{name: "token without url", mutate: func(r *Request) { r.InspectionToken = "x" }, wantErr: "brain_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ok
			tt.mutate(&r)
			err := r.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestRequestNeverPrintsToken(t *testing.T) {
	r := Request{TenantID: "t", SessionID: "s", CallID: "c", InspectionToken: "SECRET", BrainURL: "http://x", Arguments: json.RawMessage(`{"p":"SECRET2"}`)}
	for _, s := range []string{r.String(), r.LogValue().String()} {
		if strings.Contains(s, "SECRET") {
			t.Errorf("%q leaks a secret", s)
		}
	}
}

func TestBindingValidate(t *testing.T) {
	valid := func() Binding {
		return Binding{Name: "echo", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), URL: "http://127.0.0.1:8081/tools/echo", Tenants: []string{"local"}}
	}
	tests := []struct {
		name    string
		mutate  func(*Binding)
		wantErr string
	}{
		{name: "ok", mutate: func(*Binding) {}},
		{name: "max name", mutate: func(b *Binding) { b.Name = "a" + strings.Repeat("b", 63) }},
		{name: "name too long", mutate: func(b *Binding) { b.Name = "a" + strings.Repeat("b", 64) }, wantErr: "name:"},
		{name: "name starts with digit", mutate: func(b *Binding) { b.Name = "1echo" }, wantErr: "name:"},
		{name: "name with dash", mutate: func(b *Binding) { b.Name = "e-cho" }, wantErr: "name:"},
		{name: "no description", mutate: func(b *Binding) { b.Description = "" }, wantErr: "description: required"},
		{name: "no input schema", mutate: func(b *Binding) { b.InputSchema = nil }, wantErr: "input_schema: required"},
		{name: "schema not object", mutate: func(b *Binding) { b.InputSchema = json.RawMessage(`true`) }, wantErr: "input_schema:"},
		{name: "output schema not object", mutate: func(b *Binding) { b.OutputSchema = json.RawMessage(`[]`) }, wantErr: "output_schema:"},
		{name: "no tenants", mutate: func(b *Binding) { b.Tenants = nil }, wantErr: "tenants: required"},
		{name: "empty tenant", mutate: func(b *Binding) { b.Tenants = []string{"a", ""} }, wantErr: "tenants[1]"},
		{name: "timeout 1", mutate: func(b *Binding) { b.TimeoutSeconds = 1 }},
		{name: "timeout max", mutate: func(b *Binding) { b.TimeoutSeconds = 86400 }},
		{name: "timeout over", mutate: func(b *Binding) { b.TimeoutSeconds = 86401 }, wantErr: "timeout_seconds"},
		{name: "timeout negative", mutate: func(b *Binding) { b.TimeoutSeconds = -1 }, wantErr: "timeout_seconds"},
		{name: "output max", mutate: func(b *Binding) { b.MaxOutputBytes = 2 << 20 }},
		{name: "output over", mutate: func(b *Binding) { b.MaxOutputBytes = 2<<20 + 1 }, wantErr: "max_output_bytes"},
		{name: "required without mcp_tool", mutate: func(b *Binding) { b.Required = true }, wantErr: "required: only applies to a binding with mcp_tool"},
		{name: "required with mcp_tool", mutate: func(b *Binding) { b.Required = true; b.MCPTool = "search" }},
		{name: "no url", mutate: func(b *Binding) { b.URL = "" }, wantErr: `url: required (or "type": "function" for a tool the application answers itself)`},
		{name: "function tool", mutate: func(b *Binding) { b.URL, b.Type = "", TypeFunction }},
		{name: "function tool with url", mutate: func(b *Binding) { b.Type = TypeFunction }, wantErr: "url: a function tool is answered by the application"},
		{name: "function tool with token_env", mutate: func(b *Binding) { b.URL, b.Type, b.TokenEnv = "", TypeFunction, "KEY" }, wantErr: "token_env: a function tool"},
		{name: "function tool with mcp_tool", mutate: func(b *Binding) { b.URL, b.Type, b.MCPTool = "", TypeFunction, "x" }, wantErr: "mcp_tool: a function tool"},
		{name: "function tool with inspect_session", mutate: func(b *Binding) { b.URL, b.Type, b.InspectSession = "", TypeFunction, true }, wantErr: "inspect_session: a function tool"},
		{name: "function tool gated", mutate: func(b *Binding) { b.URL, b.Type, b.RequireApproval = "", TypeFunction, ApprovalAlways }, wantErr: "require_approval: a function tool cannot be gated"},
		{name: "function tool never gated", mutate: func(b *Binding) { b.URL, b.Type, b.RequireApproval = "", TypeFunction, ApprovalNever }},
		{name: "function tool with max_concurrency", mutate: func(b *Binding) { b.URL, b.Type, b.MaxConcurrency = "", TypeFunction, 3 }},
		{name: "unknown type", mutate: func(b *Binding) { b.Type = "http" }, wantErr: `type: must be "function" (a tool the application answers) or omitted (a tool called at url), got "http"`},
		{name: "type in capitals", mutate: func(b *Binding) { b.URL, b.Type = "", "Function" }, wantErr: `type: must be "function"`},
		{name: "require_approval always", mutate: func(b *Binding) { b.RequireApproval = ApprovalAlways }},
		{name: "require_approval never", mutate: func(b *Binding) { b.RequireApproval = ApprovalNever }},
		{name: "require_approval other", mutate: func(b *Binding) { b.RequireApproval = "sometimes" }, wantErr: `require_approval: must be "always" or "never", got "sometimes"`},
		{name: "require_approval true", mutate: func(b *Binding) { b.RequireApproval = "true" }, wantErr: `require_approval: must be "always" or "never"`},
		{name: "max_concurrency 1", mutate: func(b *Binding) { b.MaxConcurrency = 1 }},
		{name: "max_concurrency max", mutate: func(b *Binding) { b.MaxConcurrency = MaxConcurrencyLimit }},
		{name: "max_concurrency over", mutate: func(b *Binding) { b.MaxConcurrency = MaxConcurrencyLimit + 1 }, wantErr: "max_concurrency: must be from 1 to 10000 (omit it for no cap), got 10001"},
		{name: "max_concurrency negative", mutate: func(b *Binding) { b.MaxConcurrency = -1 }, wantErr: "max_concurrency: must be from 1 to 10000"},
		{name: "ftp url", mutate: func(b *Binding) { b.URL = "ftp://x/y" }, wantErr: "url: scheme"},
		{name: "credentials", mutate: func(b *Binding) { b.URL = "http://u:p@x/y" }, wantErr: "url: must not contain credentials"},
		{name: "fragment", mutate: func(b *Binding) { b.URL = "http://x/y#f" }, wantErr: "url: must not contain a fragment"},
		{name: "empty fragment", mutate: func(b *Binding) { b.URL = "http://x/y#" }, wantErr: "url: must not contain a fragment"},
		{name: "no host", mutate: func(b *Binding) { b.URL = "http:///y" }, wantErr: "url: has no host"},
		{name: "port only", mutate: func(b *Binding) { b.URL = "https://:443/x" }, wantErr: "url: has no host"},
		{name: "port too big", mutate: func(b *Binding) { b.URL = "http://127.0.0.1:99999/x" }, wantErr: `url: port "99999"`},
		{name: "port zero", mutate: func(b *Binding) { b.URL = "http://127.0.0.1:0/x" }, wantErr: `url: port "0"`},
		{name: "empty port", mutate: func(b *Binding) { b.URL = "http://127.0.0.1:/x" }, wantErr: "url: has an empty port"},
		{name: "mcp_tool with a space", mutate: func(b *Binding) { b.MCPTool = "get docs" }, wantErr: "mcp_tool:"},
		{name: "mcp_tool with a newline", mutate: func(b *Binding) { b.MCPTool = "a\nb" }, wantErr: "mcp_tool:"},
		{name: "mcp_tool of 129", mutate: func(b *Binding) { b.MCPTool = strings.Repeat("a", 129) }, wantErr: "mcp_tool:"},
		{name: "mcp_tool of 128 with dots and slashes", mutate: func(b *Binding) { b.MCPTool = "ns/tool.v2-" + strings.Repeat("a", 117) }},
		{name: "port max", mutate: func(b *Binding) { b.URL = "http://127.0.0.1:65535/x" }},
		{name: "ipv6 host", mutate: func(b *Binding) { b.URL = "http://[::1]:8081/x" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := valid()
			tt.mutate(&b)
			err := b.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestBindingDefaults(t *testing.T) {
	var b Binding
	if b.Timeout().Seconds() != 300 || b.OutputLimit() != 1<<20 {
		t.Fatalf("defaults: %v %d", b.Timeout(), b.OutputLimit())
	}
}

// FuzzDecodeResult checks that any input either decodes to a result that
// passes Validate and survives a marshal round trip, or fails cleanly.
func FuzzDecodeResult(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"hello"}]}`,
		`{"structured_content":{"a":[1,2]},"is_error":true}`,
		`{"content":[{"type":"image","data":"AA==","mime_type":"image/png"}],"unknown_outcome":true}`,
		`{"content":[{"type":"audio"}]}`, `{}`, `null`, `{"content":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeResult(data)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded result fails Validate: %v", err)
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if _, err := DecodeResult(out); err != nil {
			t.Fatalf("round trip of %s: %v", out, err)
		}
	})
}

func TestAppendJSONMatchesMarshal(t *testing.T) {
	results := []*Result{
		{Content: []Content{Text("héllo \"quoted\" <tag> \u2028 \x01"), Image([]byte{0, 1, 2}, "image/png"), Text("")}},
		{StructuredContent: json.RawMessage("{\n \"a\": [1, 2]\n}"), IsError: true, UnknownOutcome: true},
		{Content: []Content{Text("x")}, StructuredContent: json.RawMessage(`"s"`)},
	}
	for i, r := range results {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		got, err := r.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%d: AppendJSON\n%s\nwant\n%s", i, got, want)
		}
	}
	if got, _ := (&Result{Content: []Content{Text("a<b>&c")}}).AppendJSON(nil); !bytes.Contains(got, []byte(`"a<b>&c"`)) {
		t.Errorf("HTML characters escaped: %s", got)
	}
	if _, err := (&Result{Content: []Content{{Type: "audio"}}}).AppendJSON(nil); err == nil {
		t.Error("unknown content type encoded")
	}
}

func BenchmarkResultEncoding(b *testing.B) {
	r := &Result{Content: []Content{Text(strings.Repeat("lorem ipsum dolor sit amet ", 13000))}}
	b.Run("json.Marshal", func(b *testing.B) {
		b.SetBytes(int64(len(r.Content[0].Text)))
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.SetBytes(int64(len(r.Content[0].Text)))
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = r.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// stdString is encoding/json's encoding of s without HTML escaping: the
// bytes appendString must produce.
func stdString(t testing.TB, s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	long := strings.Repeat("QUJDREVGR0hJSktMTU5PUFFS+/=", 100)
	for _, s := range []string{
		"", "a", "plain ascii text", long, long + "\"" + long, "\x00\x01\x1f\x7f",
		"tab\tnew\nline\rcr\bback\fform", `quote " backslash \ slash /`, "<html>&amp;</html>",
		"héllo wörld ✓ 日本語 🎉", "\u2028\u2029 separators", "bad \xff utf8 \xc3", "\xed\xa0\x80 surrogate",
		"12345678\"12345678", "1234567\x80", strings.Repeat("é", 9) + "\x00",
	} {
		got, err := appendString(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		if want := stdString(t, s); string(got) != want {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "abc", "\"\\\n", "héllo \xff", "\u2028", strings.Repeat("x", 17) + "\x01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, _ := appendString(nil, s)
		if want := stdString(t, s); string(got) != want {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func TestDecodeResultBlockErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"content":["text"]}`, "content[0]: wrong type: got string, want object"},
		{`{"content":[{"text":"a"}]}`, "content[0].type: required"},
		{`{"content":[{"type":"text"}]}`, "content[0].text: required in a text block"},
		{`{"content":[{"type":"text","text":"a","mime_type":"image/png"}]}`, "content[0].mime_type: unknown field"},
		{`{"content":[{"type":"text","text":"a","zzz":1,"extra":2}]}`, "content[0].extra: unknown field"},
		{`{"content":[{"type":"image","data":"AA==","mime_type":"image/png","text":"a"}]}`, "content[0].text: unknown field"},
		{`{"content":[{"type":"image","data":"AA=","mime_type":"image/png"}]}`, "content[0].data: not valid base64"},
		{`{"content":[{"type":"video","foo":1}]}`, `content[0].type: unknown content type "video"`},
		{`{"content":[{"type":"text","text":"a","text":"b"}]}`, "content[0].text: duplicate field"},
	} {
		_, err := DecodeResult([]byte(tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.body, err, tc.want)
		}
	}
}

func TestRequestAppendJSON(t *testing.T) {
	for _, r := range []Request{
		{TenantID: "t", SessionID: "s", CallID: "c", Arguments: json.RawMessage(`{"text":"<b>héllo</b>\n"}`)},
		{TenantID: "t\"q", SessionID: "s", CallID: "c", Arguments: json.RawMessage(" {\"a\": [1, 2]}\n"), InspectionToken: "tok", BrainURL: "http://127.0.0.1:8080"},
		{TenantID: "t", SessionID: "s", CallID: "c", Arguments: json.RawMessage(`{}`)},
		{TenantID: "t", SessionID: "s", CallID: "c", Arguments: json.RawMessage(`{"a":"` + strings.Repeat("x", SmallBody-64) + `"}`)},
		{TenantID: "t", SessionID: "s", CallID: "c", Arguments: json.RawMessage(`{"a":"` + strings.Repeat("x", SmallBody) + `"}`)},
	} {
		got, err := r.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if body, n, err := r.Body(); err != nil {
			t.Fatal(err)
		} else {
			// net/http sends headers and body in one write only for a
			// reader it knows holds the body in memory.
			if _, one := body.(*bytes.Reader); one != (n <= SmallBody) {
				t.Errorf("Body of %d bytes is %T, want one *bytes.Reader exactly up to %d", n, body, SmallBody)
			}
			if b, _ := io.ReadAll(body); !bytes.Equal(b, got) || n != int64(len(got)) {
				t.Errorf("Body = %.80s (n=%d), AppendJSON = %.80s", b, n, got)
			}
		}
		var back Request
		if err := strictjson.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		want, _ := json.Marshal(r)
		var a, b any
		_ = json.Unmarshal(got, &a)
		_ = json.Unmarshal(want, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("AppendJSON = %s, json.Marshal = %s", got, want)
		}
	}
	deep := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, args := range []string{deep(9999), deep(5000), `{"a":[` + strings.Repeat("[],", 20000) + `[]]}`} {
		if _, err := (&Request{TenantID: "t", SessionID: "s", CallID: "c", Arguments: json.RawMessage(args)}).AppendJSON(nil); err != nil {
			t.Errorf("%.20s… (%d bytes): %v", args, len(args), err)
		}
	}
	for _, args := range []string{``, deep(10001), strings.Repeat("[", 1_000_000), `{"a":`, "{\"a\":\"\xff\"}", `{} {}`, `{}, "tenant_id": "other"`, `{"a":1}}`, "{\"a\":\"\xed\xa0\x80\"}"} {
		r := Request{TenantID: "t", SessionID: "s", CallID: "c", Arguments: json.RawMessage(args)}
		if _, err := r.AppendJSON(nil); err == nil || !strings.Contains(err.Error(), "arguments") {
			t.Errorf("arguments %q: err %v, want one naming arguments", args, err)
		}
	}
}

// FuzzRequestAppendJSON: AppendJSON accepts exactly the arguments that are
// one JSON value in valid UTF-8 (encoding/json's Valid and utf8.Valid are
// the oracle), and what it writes is an envelope whose identity fields are
// the request's and whose arguments are the input: no argument can reach
// outside its member.
func FuzzRequestAppendJSON(f *testing.F) {
	for _, s := range []string{`{}`, ` {"a": [1, 2]} `, `{"a":1,"a":2}`, `{}, "tenant_id": "other"`, `{"a":"\ud800"}`, "\"\xff\"", `{} {}`, `[1,]`, `"x"`, `{"a":1}}`, `01`, "{\"a\":\"\xed\xa0\x80\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		r := Request{TenantID: "t", SessionID: "s", CallID: "c", Arguments: args}
		out, err := r.AppendJSON(nil)
		if want := json.Valid(args) && utf8.Valid(args); (err == nil) != want {
			t.Fatalf("%q: AppendJSON err %v, but encoding/json and utf8 say valid=%v", args, err, want)
		}
		body, n, berr := r.Body()
		if (berr == nil) != (err == nil) {
			t.Fatalf("%q: Body err %v, AppendJSON err %v", args, berr, err)
		}
		if err != nil {
			return
		}
		if b, _ := io.ReadAll(body); !bytes.Equal(b, out) || int64(len(b)) != n {
			t.Fatalf("%q: Body gives %q (n=%d), AppendJSON %q", args, b, n, out)
		}
		var env map[string]json.RawMessage
		if err := json.Unmarshal(out, &env); err != nil || len(env) != 4 {
			t.Fatalf("%q: envelope %s: %v", args, out, err)
		}
		if string(env["tenant_id"]) != `"t"` || string(env["session_id"]) != `"s"` || string(env["call_id"]) != `"c"` || string(env["arguments"]) != string(bytes.TrimSpace(args)) {
			t.Fatalf("%q: envelope %s", args, out)
		}
	})
}

// TestDecodeResultKeepsNothingOfData: the result shares no memory with the
// bytes it was decoded from, so a caller may reuse them (brain recycles
// its read buffers).
func TestDecodeResultKeepsNothingOfData(t *testing.T) {
	const doc = `{"content":[{"type":"text","text":"hello"},{"type":"image","data":"iVBORw0KGgo=","mime_type":"image/png"}],"structured_content":{"a":[1,"x"]},"is_error":true}`
	data := []byte(doc)
	r, err := DecodeResult(data)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(r)
	for i := range data {
		data[i] = 'X'
	}
	if got, _ := json.Marshal(r); !bytes.Equal(got, want) {
		t.Fatalf("after the input was overwritten the result reads %s, was %s", got, want)
	}
}

// The fast path of DecodeResult takes only what the strict decoder takes,
// and makes the same result of it.
func TestDecodeResultFast(t *testing.T) {
	for _, tc := range []struct {
		body string
		fast bool
	}{
		{`{"content":[{"type":"text","text":"hello"}]}`, true},
		{` { "content" : [ { "text" : "a\nb \u00e9 \ud83d\ude00" , "type" : "text" } , {"type":"text","text":""} ] , "is_error" : true , "unknown_outcome" : false } `, true},
		{`{"structured_content":{ "n" : [1, 2] }}`, true},
		{`{"structured_content":0,"content":[]}`, true},
		{`{"content":[{"type":"text","text":"a"}],"structured_content":null}`, true},
		{`{"is_error":false,"content":[{"type":"text","text":"x"}],"unknown_outcome":true}`, true},
		{`{"content":[{"type":"image","data":"iVBORw==","mime_type":"image/png"}]}`, false},
		{`{"content":[{"type":"text","text":"a"}],"extra":1}`, false},
		{`{"content":[{"type":"text","text":"a","data":"AA=="}]}`, false},
		{`{"content":[{"type":"text"}]}`, false},
		{`{"content":[{"text":"a"}]}`, false},
		{`{"content":[{"type":"text","text":null}]}`, false},
		{`{"content":[{"type":"text","type":"text","text":"a"}]}`, false},
		{`{"content":[{"type":"text","text":"a"}],"content":[]}`, false},
		{`{"content":[{"type":"text","text":"a"}],"is_error":null}`, false},
		{`{"content":[{"type":"text","text":"a"}],"is_error":"yes"}`, false},
		{`{"content":null,"structured_content":1}`, false},
		{`{"content":[],"structured_content":null}`, false},
		{`{"is_error":true}`, false},
		{`{"content":[{"type":"text","text":"a"}]} {}`, false},
		{`{"content":[{"type":"text","text":"\xff"}]}`, false},
		{`{"structured_content":{"a":}}`, false},
		{`hello`, false},
		{``, false},
	} {
		got, ok := decodeResultFast([]byte(tc.body))
		if ok != tc.fast {
			t.Errorf("%s: fast %v, want %v", tc.body, ok, tc.fast)
		}
		if !ok {
			continue
		}
		want, err := decodeResultStrict([]byte(tc.body))
		if err != nil {
			t.Errorf("%s: the fast path took what the strict decoder refuses: %v", tc.body, err)
			continue
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: (-strict +fast):\n%s", tc.body, d)
		}
	}
}

// FuzzDecodeResultFast: whatever the fast path takes, the strict decoder
// takes too and makes the same result of.
func FuzzDecodeResultFast(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"hello"}]}`,
		` { "content" : [ { "text" : "a\nb \u00e9" , "type" : "text" } ] , "is_error" : true } `,
		`{"structured_content":{ "n" : [1, 2] },"unknown_outcome":true}`,
		`{"content":[{"type":"text","text":"a"}],"structured_content":null}`,
		`{"content":[],"structured_content":0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := decodeResultFast(data)
		if !ok {
			return
		}
		want, err := decodeResultStrict(data)
		if err != nil {
			t.Fatalf("%q: the fast path took what the strict decoder refuses: %v", data, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("%q: (-strict +fast):\n%s", data, d)
		}
	})
}
