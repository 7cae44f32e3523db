package tools

import (
	"io"
	"net/http/httptest"
	"testing"

	b64 "github.com/segmentio/asm/base64"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
)

// BenchmarkEncodingOverhead times, without any S3 call, each encoding step
// a storage_put + storage_get pair of a 256 KiB object costs through the
// service on top of the direct SDK calls: where BenchmarkPutGet256KiB's
// difference goes. The caller's steps are brain's (Request.Body, the
// result read and decoded); steps 2 and 4 are the service's: the request
// decoded in one pass with the arguments in their type (NewTool), which
// includes the base64 decode, and the result encoded (WriteJSON).
func BenchmarkEncodingOverhead(b *testing.B) {
	data := randomBytes(benchObjectBytes)
	type step struct {
		name string
		f    func()
	}
	var steps []step
	add := func(name string, f func()) { steps = append(steps, step{name, f}); f() }
	b64s := b64.StdEncoding.EncodeToString(data)
	args := []byte(`{"key":"k","data_base64":"` + b64s + `"}`)
	var reqBody []byte
	add("1 client encode request", func() {
		body, _, _ := (&tool.Request{TenantID: "t", SessionID: "s", CallID: "c", Arguments: args}).Body()
		reqBody, _ = io.ReadAll(body)
	})
	add("2 server decode request and arguments", func() {
		var req struct {
			TenantID  string  `json:"tenant_id"`
			SessionID string  `json:"session_id"`
			CallID    string  `json:"call_id"`
			Arguments putArgs `json:"arguments"`
		}
		if err := strictjson.Unmarshal(reqBody, &req); err != nil {
			b.Fatal(err)
		}
		req.Arguments.DataBase64.release()
	})
	res := &tool.Result{Content: []tool.Content{tool.Text("header"), tool.Text(b64s)}}
	add("3 base64 encode", func() { b64.StdEncoding.Encode(make([]byte, len(b64s)), data) })
	var out []byte
	add("4 WriteJSON result", func() {
		w := httptest.NewRecorder()
		httpapi.WriteJSON(w, 200, res)
		out = w.Body.Bytes()
	})
	add("5 client decode result", func() { tool.DecodeResult(out) })
	for _, st := range steps {
		b.Run(st.name, func(b *testing.B) {
			for b.Loop() {
				st.f()
			}
		})
	}
}
