package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/brain-tools/suite/pkg/tool"
)

// FuzzResponse feeds arbitrary response bodies, as JSON and as an event
// stream, through the host's classification (pkg/tool has FuzzDecodeResult
// for the result decoder alone). Whatever the tool sends, the outcome must
// be a valid result, classified consistently, and never a panic.
func FuzzResponse(f *testing.F) {
	for _, seed := range []struct {
		sse  bool
		body string
	}{
		{false, okResult},
		{false, `{"structured_content":{"echo":"x"}}`},
		{false, `{"content":[{"type":"image","data":"AAAA","mime_type":"image/png"}],"is_error":true}`},
		{false, `{"content":[{"type":"text","text":"x"}],"extra":1}`},
		{true, "event: progress\ndata: {\"a\":1}\n\n: c\n\nevent: result\ndata: " + okResult + "\n\n"},
		{true, "event: progress\ndata: nope\n\n"},
		{true, "data: x\n\n"},
		{true, "event: result\r\ndata: {\"structured_content\":[1]}\r\n\r\n"},
	} {
		f.Add(seed.sse, []byte(seed.body))
	}
	tl := newTool(f, "http://127.0.0.1:1/tools/echo", func(b map[string]any) {
		b["max_output_bytes"] = 4096
		b["output_schema"] = json.RawMessage(`{"type":"object","properties":{"echo":{"type":"string"}}}`)
	})
	c := New(Options{})
	f.Fuzz(func(t *testing.T, sse bool, body []byte) {
		ct := "application/json"
		if sse {
			ct = "text/event-stream"
		}
		resp := &http.Response{
			StatusCode:    200,
			Header:        http.Header{"Content-Type": {ct}},
			Body:          io.NopCloser(bytes.NewReader(body)),
			ContentLength: -1,
		}
		progress := 0
		reqCtx, cancelReq := context.WithCancelCause(context.Background())
		defer cancelReq(nil)
		o := c.readResponse(context.Background(), reqCtx, cancelReq, tl, resp, func(data json.RawMessage) {
			progress++
			if !json.Valid(data) {
				t.Fatalf("progress payload is not JSON: %q", data)
			}
		})
		if err := o.Result.Validate(); err != nil {
			t.Fatalf("outcome result invalid: %v (%+v)", err, o)
		}
		switch {
		case o.ErrorCode == "":
			if o.Status != StatusSucceeded || o.Result.IsError || len(o.Result.Content) == 0 {
				t.Fatalf("success outcome inconsistent: %+v", o)
			}
		case o.ErrorCode == CodeToolError:
			if o.Status != StatusFailed || !o.Result.IsError {
				t.Fatalf("tool error outcome inconsistent: %+v", o)
			}
		default:
			if o.Status != StatusFailed || !o.Result.IsError || !o.Result.UnknownOutcome || o.ErrorMessage == "" {
				t.Fatalf("failure outcome inconsistent: %+v", o)
			}
		}
		if len(body) > 4096 && o.ErrorCode == "" && !sse {
			t.Fatalf("accepted a %d-byte JSON body over max_output_bytes 4096", len(body))
		}
	})
}

// BenchmarkCall measures one JSON echo call through a Caller to an
// httptest tool server on 127.0.0.1: argument validation, request, header
// wait, capped read, strict decode and classification.
func BenchmarkCall(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req tool.Request
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var args struct {
			Text string `json:"text"`
		}
		json.Unmarshal(req.Arguments, &args)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(tool.TextResult("%s", args.Text))
	}))
	b.Cleanup(srv.Close)
	c := New(Options{})
	tl := newTool(b, srv.URL+"/tools/echo", nil)
	req := testRequest()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		o := c.Call(ctx, tl, req, nil)
		if o.Status != StatusSucceeded {
			b.Fatalf("call: %+v", o)
		}
	}
}
