package schema

import "testing"

// BenchmarkValidateEchoArgs is the cost of checking one echo call's
// arguments against its input schema, as brain and a declared tool do on
// every call.
func BenchmarkValidateEchoArgs(b *testing.B) {
	s, err := Compile("input_schema", []byte(`{"type":"object","properties":{"text":{"type":"string","maxLength":4096}},"required":["text"],"additionalProperties":false}`))
	if err != nil {
		b.Fatal(err)
	}
	doc := []byte(`{"text":"hello from the benchmark"}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.ValidateObject("arguments", doc); err != nil {
			b.Fatal(err)
		}
	}
}
