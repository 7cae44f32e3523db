package server

import (
	"encoding/json"
	"testing"

	"github.com/brain-tools/suite/pkg/tool"
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
		for _, c := range []CallJSON{
			{},
			{ID: s, SessionID: s, TenantID: s, Tool: s, Status: s, Arguments: raw, CallerType: s, CreatedAt: s,
				ResponseSchema: json.RawMessage("null"), Result: json.RawMessage("null")},
			{ID: "call_1", SessionID: "ses_1", TenantID: "t1", Tool: "echo", Status: "failed", Arguments: raw,
				ParentID: sp(s), SpanID: sp("0123456789abcdef"), CallerType: "api", Prompt: sp(s), ResponseSchema: raw,
				ResponseExpiresAt: sp(s), QueuePosition: ip(i - 3), CreatedAt: s, StartedAt: sp(s), FinishedAt: sp(s),
				ErrorCode: sp(s), ErrorMessage: sp(s), UnknownOutcome: true, Retryable: bp(i%2 == 1), ResultAvailable: true,
				Result: raw, RevisionID: sp(s)},
		} {
			got, err := c.AppendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := string(mustJSON(c)); string(got) != want {
				t.Errorf("CallJSON %+v:\n%s\nwant\n%s", c, got, want)
			}
		}
	}
}
