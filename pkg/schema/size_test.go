package schema

import (
	"fmt"
	"strings"
	"testing"
)

// nested is a schema whose objects and arrays nest depth levels deep:
// allOf chains, two levels a step, ending in {} or in {"enum":[1]}.
func nested(depth int) string {
	inner, pairs := `{}`, (depth-1)/2
	if depth%2 == 0 {
		inner, pairs = `{"enum":[1]}`, (depth-2)/2
	}
	return strings.Repeat(`{"allOf":[`, pairs) + inner + strings.Repeat(`]}`, pairs)
}

// wide is an object schema of n objects and arrays in all: the root, its
// properties object and n-2 property schemas.
func wide(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n - 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string"}`, i)
	}
	b.WriteString(`}}`)
	return b.String()
}

// TestCompileSizeLimits: the schema compiler's time grows faster than a
// schema's size (with its nesting and, past some thousands, with the
// square of its subschemas), and a schema is any tenant's input, so
// Compile refuses one deeper than MaxDepth or larger than MaxNodes before
// compiling it, at the edge, naming the field and the limit.
func TestCompileSizeLimits(t *testing.T) {
	tests := []struct {
		name, doc, wantErr string
	}{
		{"depth at the limit", nested(MaxDepth), ""},
		{"one level deeper", nested(MaxDepth + 1), fmt.Sprintf("input_schema: nests objects and arrays more than %d levels deep, the limit", MaxDepth)},
		{"one level deeper, even", nested(MaxDepth + 2), fmt.Sprintf("more than %d levels deep", MaxDepth)},
		{"very deep", nested(5000), fmt.Sprintf("more than %d levels deep", MaxDepth)},
		{"nodes at the limit", wide(MaxNodes), ""},
		{"one node more", wide(MaxNodes + 1), fmt.Sprintf("input_schema: has more than %d objects and arrays", MaxNodes)},
		{"far more nodes", wide(100000), fmt.Sprintf("more than %d objects and arrays", MaxNodes)},
		{"an array counts", `{"enum":[` + strings.Repeat(`[],`, MaxNodes-1) + `[]]}`, fmt.Sprintf("more than %d objects and arrays", MaxNodes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile("input_schema", []byte(tt.doc))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), "input_schema: ") || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestValidateDepthLimit: a document nested deeper than MaxValueDepth is
// refused before the full validator, whose time on a failing one grows
// with the square of its depth; at the limit it is validated as usual.
func TestValidateDepthLimit(t *testing.T) {
	s, err := Compile("input_schema", []byte(`{"type":"object","properties":{"c":{"$ref":"#"},"n":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	doc := func(levels int, leaf string) string {
		return strings.Repeat(`{"c":`, levels-1) + `{"n":` + leaf + `}` + strings.Repeat(`}`, levels-1)
	}
	tooDeep := fmt.Sprintf("arguments: nests objects and arrays more than %d levels deep, the most the validator takes", MaxValueDepth)
	for _, tt := range []struct {
		name, doc, want string // want "" to pass
	}{
		{"valid at the limit", doc(MaxValueDepth, "1"), ""},
		{"invalid at the limit", doc(MaxValueDepth, `"x"`), "arguments: at \"/c/c/"},
		{"valid, one deeper", doc(MaxValueDepth+1, "1"), tooDeep},
		{"invalid, far deeper", doc(9000, `"x"`), tooDeep},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Validate("arguments", []byte(tt.doc))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %.300v, want %q", err, tt.want)
			}
		})
	}
}

// BenchmarkCompileAtLimits is what one schema at the limits costs to
// compile: the most one tenant's schema can cost brain.
func BenchmarkCompileAtLimits(b *testing.B) {
	chain := nested(MaxDepth - 2)
	var deep strings.Builder
	deep.WriteString(`{"allOf":[`)
	for i := 0; i < (MaxNodes-2)/(MaxDepth-2); i++ {
		if i > 0 {
			deep.WriteByte(',')
		}
		deep.WriteString(chain)
	}
	deep.WriteString(`]}`)
	for _, bc := range []struct{ name, doc string }{{"wide", wide(MaxNodes)}, {"deep", deep.String()}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Compile("input_schema", []byte(bc.doc)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
