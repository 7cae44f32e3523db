package tools

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"testing"

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
	b64 := base64.StdEncoding.EncodeToString(data)
	add("1 client marshal request", func() {
		reqBody, _ = json.Marshal(map[string]any{"tenant_id": "t", "session_id": "s", "call_id": "c", "arguments": map[string]any{"key": "k", "data_base64": base64.StdEncoding.EncodeToString(data)}})
	})
	add("2 server decode request", func() { strictjson.Decode(bytes.NewReader(reqBody), 4<<20, &req) })
	add("3 typed decode arguments", func() { strictjson.Unmarshal(req.Arguments, &pa) })
	add("4 base64 decode", func() { base64.StdEncoding.DecodeString(b64) })
	res := &tool.Result{Content: []tool.Content{tool.Text("header"), tool.Text(b64)}}
	add("5 base64 encode", func() { base64.StdEncoding.EncodeToString(data) })
	var out []byte
	add("6 WriteJSON result", func() {
		w := httptest.NewRecorder()
		service.WriteJSON(w, 200, res)
		out = w.Body.Bytes()
	})
	add("7 client decode result", func() { var r fastResult; json.Unmarshal(out, &r) })
	for _, st := range steps {
		b.Run(st.name, func(b *testing.B) {
			for b.Loop() {
				st.f()
			}
		})
	}
}
