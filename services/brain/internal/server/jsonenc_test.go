package server

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/store"
)

// The hand-written encoders write exactly what json.Marshal writes.
func TestEncodersMatchEncodingJSON(t *testing.T) {
	strs := []string{"", "echo", `quote " and \ back`, "<b>&amp;</b>", "tab\tnl\nret\r\b\f\x00\x1f", "é ü 日本",
		"line\u2028para\u2029", "bad \xff utf8 \xe2\x80", "\x7f del"}
	raws := []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(`{"text":"hello"}`),
		json.RawMessage(" { \"a\" : [1, 2 ,\n3], \"b\":\t\"x y\" } "), json.RawMessage(`{"h":"<script>&</script>"}`),
		json.RawMessage(`{"s":"a` + "\u2028" + `b"}`), json.RawMessage(`[null,true,false,1.5e3,"é"]`)}
	sp := func(s string) *string { return &s }
	bp := func(v bool) *bool { return &v }
	ip := func(v int) *int { return &v }
	for _, s := range strs {
		if got, want := string(appendString(nil, s)), string(mustJSON(s)); got != want {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
	for _, raw := range raws {
		if got, want := string(appendRaw(nil, raw)), string(mustJSON(raw)); got != want {
			t.Errorf("appendRaw(%q) = %s, want %s", raw, got, want)
		}
	}
	for i, s := range strs {
		raw := raws[i%len(raws)]
		for _, d := range []toolCallData{
			{Tool: s, Arguments: raw},
			{Tool: "echo", Arguments: raw, CallerType: s, ParentID: sp(s), RevisionID: sp("rev_" + s)},
		} {
			if got, want := string(d.appendJSON(nil)), string(mustJSON(d)); got != want {
				t.Errorf("toolCallData %+v: %s, want %s", d, got, want)
			}
		}
		for _, d := range []toolResultData{
			{Tool: s, Status: "succeeded", Result: raw, DurationMS: int64(i)},
			{Tool: "echo", Status: s, ErrorCode: sp(s), Retryable: bp(i%2 == 0), Result: raw, DurationMS: -int64(i) * 1e9},
		} {
			if got, want := string(d.appendJSON(nil)), string(mustJSON(d)); got != want {
				t.Errorf("toolResultData %+v: %s, want %s", d, got, want)
			}
		}
		for _, r := range []tool.Result{
			{Content: []tool.Content{tool.Text(s)}},
			{Content: []tool.Content{tool.Text(s), tool.Image([]byte(s), "image/png")}, IsError: true, UnknownOutcome: true},
			{StructuredContent: json.RawMessage(`{"s":` + string(mustJSON(s)) + ` }`)},
		} {
			if got, want := string(encodeResult(&r)), string(mustJSON(&r)); got != want {
				t.Errorf("result %+v: %s, want %s", r, got, want)
			}
		}
		at := time.Date(2026, 1, 2, 3, 4, 5, i*123456789, time.FixedZone("x", 3600*i))
		for _, c := range []store.Call{
			{},
			{ID: s, SessionID: s, TenantID: s, Tool: s, Status: s, Arguments: raw, CallerType: s, CreatedAt: at},
			{ID: "call_1", SessionID: "ses_1", TenantID: "t1", Tool: "echo", Status: "failed", Arguments: raw,
				ParentID: s, SpanID: "0123456789abcdef", CallerType: "api", Prompt: s, ResponseSchema: raw,
				ResponseExpiresAt: at.Add(time.Hour), CreatedAt: at, StartedAt: at.Add(time.Millisecond), FinishedAt: at.Add(time.Second),
				ErrorCode: s, ErrorMessage: s, UnknownOutcome: true, Retryable: bp(i%2 == 1), Result: raw, RevisionID: s},
		} {
			for _, pos := range []*int{nil, ip(i - 3)} {
				got, err := callAnswer{&c, pos}.AppendJSON(nil)
				if err != nil {
					t.Fatal(err)
				}
				if want := string(mustJSON(callJSON(&c, pos))); string(got) != want {
					t.Errorf("call %+v:\n%s\nwant\n%s", c, got, want)
				}
			}
		}
	}
}

// The fast decoder of POST /sessions/{id}/tool_calls reads what the strict
// decoder reads, and leaves everything else to it.
func TestDecodeCallFast(t *testing.T) {
	for _, tc := range []struct {
		body string
		fast bool
	}{
		{`{"tool":"echo","arguments":{"text":"hello"},"wait_seconds":10}`, true},
		{` { "wait_seconds" : 0 , "tool" : "e\u0063ho" , "arguments" : { "a" : [1, 2] } } `, true},
		{`{"tool":"echo"}`, true},
		{`{"tool":"echo","arguments":null}`, true},
		{`{"tool":"echo","arguments":[1]}`, true},
		{`{"tool":"echo","arguments":"x"}`, true},
		{`{"tool":"echo","wait_seconds":-1}`, true},
		{`{}`, true},
		{`{"tool":"echo","wait_seconds":1e1}`, false},
		{`{"tool":"echo","wait_seconds":2.0}`, false},
		{`{"tool":"echo","wait_seconds":99999999999999999999}`, false},
		{`{"tool":"echo","wait_seconds":null}`, false},
		{`{"tool":"echo","wait_seconds":"1"}`, false},
		{`{"tool":null}`, false},
		{`{"tool":1}`, false},
		{`{"tool":"a","tool":"b"}`, false},
		{`{"tool":"echo","extra":1}`, false},
		{`{"tool":"echo"} {}`, false},
		{`{"tool":"echo"`, false},
		{`{"tool":"\xff"}`, false},
		{`[]`, false},
		{`null`, false},
		{``, false},
	} {
		got, ok := decodeCallFast([]byte(tc.body))
		if ok != tc.fast {
			t.Errorf("%s: fast %v, want %v", tc.body, ok, tc.fast)
		}
		if !ok {
			continue
		}
		var want createCallRequest
		if err := httpapi.DecodeObject([]byte(tc.body), &want); err != nil {
			t.Errorf("%s: the fast decoder took what the strict one refuses: %v", tc.body, err)
			continue
		}
		if got.Tool != want.Tool || string(got.Arguments) != string(want.Arguments) ||
			(got.WaitSeconds == nil) != (want.WaitSeconds == nil) || (got.WaitSeconds != nil && *got.WaitSeconds != *want.WaitSeconds) {
			t.Errorf("%s: fast %+v, strict %+v", tc.body, got, want)
		}
	}
}

// FuzzDecodeCallFast: whatever the fast decoder of a create-call body
// takes, the strict decoder takes too and reads the same.
func FuzzDecodeCallFast(f *testing.F) {
	for _, s := range []string{
		`{"tool":"echo","arguments":{"text":"hello"},"wait_seconds":10}`,
		` { "wait_seconds" : 0 , "tool" : "e\u0063ho" , "arguments" : { "a" : [1, 2] } } `,
		`{"tool":"echo","arguments":null}`, `{"tool":"echo","wait_seconds":-1}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := decodeCallFast(body)
		if !ok {
			return
		}
		var want createCallRequest
		if err := httpapi.DecodeObject(body, &want); err != nil {
			t.Fatalf("%q: the fast decoder took what the strict one refuses: %v", body, err)
		}
		if got.Tool != want.Tool || string(got.Arguments) != string(want.Arguments) ||
			(got.WaitSeconds == nil) != (want.WaitSeconds == nil) || (got.WaitSeconds != nil && *got.WaitSeconds != *want.WaitSeconds) {
			t.Fatalf("%q: fast %+v, strict %+v", body, got, want)
		}
	})
}

// FuzzEncoders: the hand-written encoders write what json.Marshal writes,
// for any string and any valid JSON value.
func FuzzEncoders(f *testing.F) {
	f.Add("echo", []byte(`{"text":"hello"}`))
	f.Add("<b>\u2028\xff", []byte(" [1, \"<&>\" ,\n{}] "))
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		if got, want := string(appendString(nil, s)), string(mustJSON(s)); got != want {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
		if !json.Valid(raw) {
			return
		}
		if got, want := string(appendRaw(nil, raw)), string(mustJSON(json.RawMessage(raw))); got != want {
			t.Fatalf("appendRaw(%q) = %s, want %s", raw, got, want)
		}
		d := toolCallData{Tool: s, Arguments: raw, CallerType: s, ParentID: &s}
		if got, want := string(d.appendJSON(nil)), string(mustJSON(d)); got != want {
			t.Fatalf("toolCallData %+v: %s, want %s", d, got, want)
		}
	})
}
