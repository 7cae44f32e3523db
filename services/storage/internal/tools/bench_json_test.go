package tools

import (
	"bytes"
	"net/http/httptest"
	"testing"

	b64 "github.com/segmentio/asm/base64"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
)

// BenchmarkEncodingOverhead times, without any S3 call, each encoding step
// a storage_put + storage_get pair of a 256 KiB object costs through the
// service on top of the direct SDK calls: where BenchmarkPutGet256KiB's
// difference goes. Steps 2, 3 and 6 run in pkg/service.
func BenchmarkEncodingOverhead(b *testing.B) {
	data := randomBytes(benchObjectBytes)
	type step struct {
		name string
		f    func()
	}
	var steps []step
	add := func(name string, f func()) { steps = append(steps, step{name, f}); f() }
	var reqBody []byte
	var req tool.Request
	var pa putArgs
	b64s := b64.StdEncoding.EncodeToString(data)
	add("1 client encode request", func() {
		args := []byte(`{"key":"k","data_base64":"` + b64.StdEncoding.EncodeToString(data) + `"}`)
		reqBody, _ = (&tool.Request{TenantID: "t", SessionID: "s", CallID: "c", Arguments: args}).AppendJSON(nil)
	})
	add("2 server decode request", func() { strictjson.Decode(bytes.NewReader(reqBody), 4<<20, &req) })
	add("3 typed decode arguments", func() { strictjson.Unmarshal(req.Arguments, &pa) })
	add("4 base64 decode", func() { b64.StdEncoding.DecodeString(b64s) })
	res := &tool.Result{Content: []tool.Content{tool.Text("header"), tool.Text(b64s)}}
	add("5 base64 encode", func() { b64.StdEncoding.EncodeToString(data) })
	var out []byte
	add("6 WriteJSON result", func() {
		w := httptest.NewRecorder()
		service.WriteJSON(w, 200, res)
		out = w.Body.Bytes()
	})
	add("7 client decode result", func() { tool.DecodeResult(out) })
	for _, st := range steps {
		b.Run(st.name, func(b *testing.B) {
			for b.Loop() {
				st.f()
			}
		})
	}
}
