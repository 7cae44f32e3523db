package schema

import (
	"runtime"
	"strings"
	"testing"
)

// TestFailingEverywhere: a document that fails every keyword it meets,
// within MaxSteps, is answered without keeping an error per failure (a
// tester's 224 KB made the validator hold 4.25 GB): past MaxWordSteps it
// is refused unnamed, within them its failures are named.
func TestFailingEverywhere(t *testing.T) {
	leaf := `{"allOf":[` + strings.TrimSuffix(strings.Repeat(`{"minLength":2,"maxLength":0,"pattern":"^a"},`, 32), ",") + `]}`
	inner := leaf
	for range 28 {
		inner = `{"items":` + inner + `}`
	}
	s, err := Compile("input_schema", []byte(`{"type":"object","properties":{"a":`+inner+`}}`))
	if err != nil {
		t.Fatal(err)
	}
	doc := func(n int) string {
		return `{"a":` + strings.Repeat("[", 28) + strings.TrimSuffix(strings.Repeat(`"!",`, n), ",") + strings.Repeat("]", 28) + `}`
	}
	tests := []struct {
		n    int
		want string
	}{
		{56000, "does not match the schema; it is too large to say where"},
		{10, `at "/a/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0/0"`},
	}
	for _, tt := range tests {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := s.ValidateObject("arguments", []byte(doc(tt.n)))
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%d failing strings: err = %.300v, want %q", tt.n, err, tt.want)
		}
		if mb := (after.TotalAlloc - before.TotalAlloc) >> 20; mb > 256 {
			t.Errorf("%d failing strings: allocated %d MB checking them", tt.n, mb)
		}
	}
}
