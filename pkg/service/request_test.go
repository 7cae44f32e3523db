package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
)

// sameAsStrict checks decodeRequest against strictjson.Unmarshal, the rule
// it must agree with: the same request, or an error where it errs.
func sameAsStrict(t *testing.T, data []byte) {
	t.Helper()
	var want tool.Request
	wantErr := strictjson.Unmarshal(data, &want)
	got, _, argErr, err := decodeRequest(data, nil)
	if argErr != nil {
		// A problem inside the arguments: the strict decoder refuses the
		// whole body there, and names a field under arguments.
		var fe *strictjson.FieldError
		if !errors.As(wantErr, &fe) || !strings.HasPrefix(fe.Field, "arguments") {
			t.Fatalf("%q: argument error %v, but strictjson says %v", data, argErr, wantErr)
		}
		return
	}
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: decodeRequest err %v, strictjson err %v", data, err, wantErr)
	}
	if err != nil {
		// The same error, unless the strict decoder stopped inside the
		// arguments and the envelope then failed on its own (both 400s).
		var fe *strictjson.FieldError
		inside := errors.As(wantErr, &fe) && insideArguments(fe)
		if !inside && err.Error() != wantErr.Error() {
			t.Fatalf("%q: error %q, want %q", data, err, wantErr)
		}
		return
	}
	if !bytes.Equal(bytes.TrimSpace(got.Arguments), bytes.TrimSpace(want.Arguments)) {
		t.Fatalf("%q: arguments %q, want %q", data, got.Arguments, want.Arguments)
	}
	if got.TenantID != want.TenantID || got.SessionID != want.SessionID || got.CallID != want.CallID ||
		got.InspectionToken != want.InspectionToken || got.BrainURL != want.BrainURL {
		t.Fatalf("%q: decoded %+v, want %+v", data, got, want)
	}
}

func TestDecodeRequestAgreesWithStrict(t *testing.T) {
	for _, body := range []string{
		goodBody,
		` {"arguments" : {"text":"a"} , "tenant_id":"t","session_id":"s","call_id":"c"} `,
		`{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"nested":{"a":[1,2,{"b":null}]}},"inspection_token":"x","brain_url":"http://127.0.0.1:1"}`,
		`{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"text":"\u00e9\n\"q\""}}`,
		`{"tenant_id":"t","tenant_id":"u","session_id":"s","call_id":"c","arguments":{}}`,
		`{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"a":1,"a":2}}`,
		`{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{}} {}`,
		`{"tenant_id":"t","session_id":"s","call_id":"c","arguments":"x"}`,
		`{"tenant_id":"t","session_id":"s","call_id":"c","arguments":null}`,
		`{"tenant_id":null,"session_id":"s","call_id":"c","arguments":{}}`,
		`{"tenant_id":5,"session_id":"s","call_id":"c","arguments":{}}`,
		`{"Tenant_id":"t","session_id":"s","call_id":"c","arguments":{}}`,
		`{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{},"extra":1}`,
		"{\"tenant_id\":\"t\xff\",\"session_id\":\"s\",\"call_id\":\"c\",\"arguments\":{}}",
		`{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"text":`,
		`[]`, `null`, ``, `{}`,
	} {
		sameAsStrict(t, []byte(body))
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(goodBody))
	f.Add([]byte(`{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"a":[1,{"b":"c"}]},"brain_url":"u","inspection_token":"k"}`))
	f.Add([]byte(`{"arguments":{},"arguments":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) { sameAsStrict(t, data) })
}

// TestNewToolDecodesOnce: a tool declared with NewTool gets its arguments
// decoded in the same pass as the request body, with the refusals naming
// the field; the raw arguments stay available to it.
func TestNewToolDecodesOnce(t *testing.T) {
	type args struct {
		Text string `json:"text"`
	}
	var raw json.RawMessage
	srv := &Server{Name: "t", Config: Config{NoAuth: true, MaxRequestBytes: 1 << 20}, Tools: []Tool{
		NewTool(tool.Binding{Name: "shout", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(_ context.Context, call *Call, a args) (*tool.Result, error) {
				raw = call.Arguments
				return tool.TextResult("%s!", strings.ToUpper(a.Text)), nil
			}),
	}}
	h := srv.Handler()
	for _, tc := range []struct{ body, want string }{
		{`{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"text":"hi"}}`, `"HI!"`},
		{`{"tenant_id":"t","session_id":"s","call_id":"c","arguments": {"text":"hi"} }`, `"HI!"`},
		{`{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"text":1}}`, `invalid arguments: text: wrong type: got number, want string`},
		{`{"tenant_id":"t","session_id":"s","call_id":"c","arguments":{"Text":"hi"}}`, `did you mean \"text\"`},
	} {
		rec := httptest.NewRecorder()
		req, _ := http.NewRequest(http.MethodPost, "/tools/shout", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: %d %s, want 200 with %s", tc.body, rec.Code, rec.Body, tc.want)
		}
	}
	if string(raw) != `{"text":"hi"}` {
		t.Errorf("call.Arguments = %q, want the raw arguments", raw)
	}
}
