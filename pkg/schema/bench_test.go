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
	b.Run("plan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.ValidateObject("arguments", doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	// full is the same check on the full validator alone, which every
	// call paid before the plan.
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.full("arguments", doc, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
