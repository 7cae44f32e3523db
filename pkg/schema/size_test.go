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

// doubling is a schema that applies 3+2n subschemas per level of its
// $defs chain, levels deep: l0 is {"type":"object"}, each next level an
// allOf of two $refs to the one before, so l_i applies 2^(i+2)-3 in all.
// The root is an allOf of one $ref to the top level and pad {}s: it
// applies 2^(levels+2)-1+pad.
func doubling(levels, pad int) string {
	var b strings.Builder
	b.WriteString(`{"allOf":[`)
	fmt.Fprintf(&b, `{"$ref":"#/$defs/l%d"}`, levels)
	b.WriteString(strings.Repeat(`,{}`, pad))
	b.WriteString(`],"$defs":{"l0":{"type":"object"}`)
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, `,"l%d":{"allOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]}`, i, i-1, i-1)
	}
	b.WriteString(`}}`)
	return b.String()
}

// list is format written with 0, 1, …, n-1, joined by commas.
func list(n int, format string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, format, i)
	}
	return b.String()
}

// enumOf is {"enum":["0", "1", …, "n-1"]}: one step, and n/4 more.
func enumOf(n int) string { return `{"enum":[` + list(n, `"%d"`) + `]}` }

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
		// Validation applies a part once per path that reaches it: a
		// small schema can make every call take minutes.
		{"applied at the limit", doubling(12, MaxApplied-(1<<14)+1), ""},
		{"one applied more", doubling(12, MaxApplied-(1<<14)+2), fmt.Sprintf("input_schema: checking one value against it would take more than %d steps once its references are followed, the limit", MaxApplied)},
		{"2 KB, 2^32 applied", doubling(30, 0), fmt.Sprintf("would take more than %d steps", MaxApplied)},
		// Each required name is a step of its own, and each four short
		// enum values: the validator goes through them one by one.
		{"an enum at the limit", enumOf(4 * (MaxApplied - 1)), ""},
		{"an enum one value longer", enumOf(4*(MaxApplied-1) + 1), fmt.Sprintf("would take more than %d steps", MaxApplied)},
		{"required names along 900 paths", `{"$defs":{"r":{"required":[` + list(50, `"p%d"`) + `]}},"allOf":[` +
			strings.TrimSuffix(strings.Repeat(`{"$ref":"#/$defs/r"},`, 900), ",") + `]}`, fmt.Sprintf("would take more than %d steps", MaxApplied)},
		{"a recursive tree is counted once a level", `{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}},"n":{"allOf":[{"$ref":"#/$defs/n"},{"$ref":"#/$defs/n"}]}},"$defs":{"n":{"type":"integer"}}}`, ""},
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

// TestValidateStepLimit: the full validator's time is the document's
// values times the subschemas each meets, so a document that would take
// more than MaxSteps applications is refused before it starts; the count
// is exact at its edge, and bounded by the limit, not by the document.
func TestValidateStepLimit(t *testing.T) {
	// An array's items each meet a $ref and what it leads to: l8 of the
	// doubling chain, 2^10-3 = 1021 applications, 1022 with the $ref.
	const perItem = 1022
	s, err := Compile("input_schema", []byte(`{"type":"object","properties":{"a":{"type":"array","items":{"$ref":"#/$defs/l8"}},"b":{"enum":["x"]}},"$defs":`+
		doubling(8, 0)[strings.Index(doubling(8, 0), `"$defs":`)+len(`"$defs":`):]))
	if err != nil {
		t.Fatal(err)
	}
	doc := func(items int) string {
		return `{"b":"x","a":[` + strings.TrimSuffix(strings.Repeat(`{},`, items), ",") + `]}`
	}
	// The root, the array, "b" (its enum's one value a step more), then
	// each item.
	count := func(items int) int { return 4 + items*perItem }
	for _, items := range []int{0, 1, 7, 100} {
		v, err := decodeJSON([]byte(doc(items)))
		if err != nil {
			t.Fatal(err)
		}
		n := count(items)
		if got := s.count.steps(s.s, v, n); got != n {
			t.Errorf("%d items, limit %d: steps = %d, want %d (at the limit)", items, n, got, n)
		}
		if got := s.count.steps(s.s, v, n-1); got != n {
			t.Errorf("%d items, limit %d: steps = %d, want %d (one past it)", items, n-1, got, n)
		}
	}
	under := (MaxSteps - 4) / perItem
	tooMany := fmt.Sprintf("arguments: checking it would take more than %d steps", MaxSteps)
	for _, tt := range []struct {
		name  string
		items int
		want  string
	}{
		{"under the limit", under, ""},
		{"over it", under + 1, tooMany},
		{"far over it", 300000, tooMany},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Validate("arguments", []byte(doc(tt.items)))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %.300v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("err = %.300v, want %q", err, tt.want)
			}
		})
	}
}

// TestLongEnum: a string enum of 10,000 values against 20,000 items (a
// tester's; a minute of CPU before). Valid items are looked up in the
// plan's set; invalid ones are refused by the step count, before the full
// validator scans the enum for each.
func TestLongEnum(t *testing.T) {
	doc := `{"type":"object","properties":{"a":{"type":"array","items":{"enum":[` + list(10000, `"%d"`) + `]}}}}`
	s, err := Compile("input_schema", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	items := func(v string) string {
		return `{"a":[` + strings.TrimSuffix(strings.Repeat(`"`+v+`",`, 20000), ",") + `]}`
	}
	if err := s.Validate("arguments", []byte(items("9999"))); err != nil {
		t.Errorf("valid items: %.300v", err)
	}
	want := fmt.Sprintf("arguments: checking it would take more than %d steps", MaxSteps)
	if err := s.Validate("arguments", []byte(items("x"))); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("invalid items: err = %.300v, want %q", err, want)
	}
	if err := s.Validate("arguments", []byte(`{"a":["1","x"]}`)); err == nil || !strings.Contains(err.Error(), `at "/a/1"`) {
		t.Errorf("one invalid item: err = %.300v, want it named", err)
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

// BenchmarkValidateAtLimit is what validating a small value against a
// schema that applies MaxApplied subschemas costs: the most one call's
// arguments can cost to validate, per value of the arguments.
func BenchmarkValidateAtLimit(b *testing.B) {
	s, err := Compile("input_schema", []byte(doubling(12, MaxApplied-(1<<14)+1)))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := s.Validate("arguments", []byte(`{"a":1}`)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCostsCounted: what a tester found each keyword costs beyond one
// step is counted, so that a schema or a document that would cost seconds
// to minutes is refused, at compile or before the full validator (and the
// fast path stops when a pattern would cost more than the whole budget).
func TestCostsCounted(t *testing.T) {
	tooMuch := fmt.Sprintf("checking it would take more than %d steps", MaxSteps)
	tooBig := fmt.Sprintf("would take more than %d steps once its references are followed", MaxApplied)
	// A $dynamicRef whose static target is trivial, its outer anchor an
	// enum of 15,000.
	dyn := `{"type":"object","properties":{"x":{"type":"array","items":{"$ref":"b"}}},"$defs":{"big":{"$dynamicAnchor":"T","enum":[` +
		list(15000, `"v%d"`) + `]},"b":{"$id":"b","$defs":{"t":{"$dynamicAnchor":"T"}},"allOf":[` + strings.TrimSuffix(strings.Repeat(`{"$dynamicRef":"#T"},`, 400), ",") + `]}}}`
	nums := `{"enum":[` + list(1000, `%de-400`) + `]}`
	props := func(n int) string { return `{` + list(n, `"p%d":1`) + `}` }
	// dag applies leaf k*k times to property a, in 2k+1 schemas.
	dag := func(k int, leaf string) string {
		refs := func(to string) string {
			return strings.TrimSuffix(strings.Repeat(`{"$ref":"#/$defs/`+to+`"},`, k), ",")
		}
		return `{"type":"object","properties":{"a":{"$ref":"#/$defs/l2"}},"$defs":{"leaf":` + leaf +
			`,"l1":{"allOf":[` + refs("leaf") + `]},"l2":{"allOf":[` + refs("l1") + `]}}}`
	}
	megabyte := `{"a":"` + strings.Repeat("ü", 500000) + `"}`
	numbers := func(n int, num string) string { return `[` + strings.TrimSuffix(strings.Repeat(num+",", n), ",") + `]` }
	beyond := fmt.Sprintf("has an exponent beyond ±%d", MaxNumberExponent)
	// ladder's $defs l0 is leaf, l_i an allOf of l_(i-1) twice: l_k
	// applies the leaf 2^k times. extra adds to $defs; a's items are
	// items.
	ladder := func(k int, leaf, items, extra string) string {
		defs := `"l0":` + leaf
		for i := 1; i <= k; i++ {
			defs += fmt.Sprintf(`,"l%d":{"allOf":[{"$ref":"#/$defs/l%d"},{"$ref":"#/$defs/l%d"}]}`, i, i-1, i-1)
		}
		return `{"type":"object","properties":{"a":{"type":"array","items":` + items + `}},"$defs":{` + defs + extra + `}}`
	}
	chain := ""
	for i := range 960 {
		chain += fmt.Sprintf(`,"c%d":{"$ref":"#/$defs/c%d"}`, i, i+1)
	}
	chain += `,"c960":{"$ref":"#/$defs/l11"}`
	nested := func(d int) string { return `{"a":` + strings.Repeat("[", d) + "0" + strings.Repeat("]", d) + `}` }
	sameButLast := `{"a":[` + list(20, "["+strings.Repeat("1e-400,", 7000)+"%d]") + `]}`
	rows := func(n int) string {
		return `{"rows":[` + list(n, `{"name":"row %d","country":"DE","qty":null}`) + `]}`
	}
	pydantic := `{"type":"object","properties":{"rows":{"type":"array","items":{"$ref":"#/$defs/Row"}}},"$defs":{` +
		`"Country":{"enum":[` + list(250, `"C%d"`) + `,"DE"]},` +
		`"Row":{"type":"object","properties":{"name":{"type":"string"},"country":{"$ref":"#/$defs/Country"},"qty":{"anyOf":[{"type":"integer"},{"type":"null"}]}},"required":["name","country"]}}}`
	for _, tt := range []struct {
		name, schema, doc string
		compileErr, err   string // "" to pass
	}{
		{"a pattern of 2,000 instructions on 200 KB", `{"type":"object","properties":{"x":{"type":"string","pattern":"a{0,1000}b"}}}`,
			`{"x":"` + strings.Repeat("a", 200000) + `b"}`, "", tooMuch},
		{"a plain pattern on 200 KB", `{"type":"object","properties":{"x":{"type":"string","pattern":"^[a-z]+$"}}}`,
			`{"x":"` + strings.Repeat("a", 200000) + `"}`, "", ""},
		{"unevaluatedProperties copied for each of 1,000 schemas", `{"type":"object","unevaluatedProperties":{"type":"integer"},"allOf":[` +
			strings.TrimSuffix(strings.Repeat(`{"$ref":"#/$defs/a"},`, 1000), ",") + `],"$defs":{"a":{"minProperties":1}}}`, props(5000), "", tooMuch},
		{"unevaluatedProperties, a few schemas", `{"type":"object","unevaluatedProperties":{"type":"integer"},"allOf":[{"minProperties":1}]}`, props(5000), "", ""},
		{"a $dynamicRef to an outer anchor's long enum", dyn, `{"x":[]}`, tooBig, ""},
		{"1,000 numbers in an enum", nums, `1`, tooBig, ""},
		{"format regex on 5,000 strings", `{"type":"array","items":{"type":"string","format":"regex"}}`,
			`[` + strings.TrimSuffix(strings.Repeat(`"(?:a{1000}){1}b{1000}",`, 5000), ",") + `]`, "", tooMuch},
		{"format regex on 5,000 short strings", `{"type":"array","items":{"type":"string","format":"regex"}}`,
			`[` + strings.TrimSuffix(strings.Repeat(`"^a$",`, 5000), ",") + `]`, "", ""},
		// The schema's numbers: a million digits cost each comparison
		// 17 ms, each bound 0.1-9 ms, the compiling 20-50 ms.
		{"an enum of million-digit numbers", `{"properties":{"a":{"enum":[1e999999,2]}}}`, `{"a":0}`, beyond, ""},
		{"a million-digit maximum", `{"items":{"maximum":1e999999}}`, `[0]`, beyond, ""},
		{"a million-digit multipleOf", `{"multipleOf":1e-999999}`, `0.5`, beyond, ""},
		{"a million-digit minLength", `{"minLength":1e999999}`, `""`, beyond, ""},
		{"a 401-character const", `{"const":` + strings.Repeat("1", 401) + `}`, `1`, "401 characters long", ""},
		// A string pays by its length for every schema applied to it.
		{"maxLength applied 8,100 times to 1 MB", dag(90, `{"maxLength":100000000}`), megabyte, "", tooMuch},
		{"format uri-reference applied 8,100 times to 1 MB", dag(90, `{"format":"uri-reference"}`), megabyte, "", tooMuch},
		{"applied 8,100 times to 1 MB", dag(90, `{}`), megabyte, "", tooMuch},
		{"format uri on 200 KB", `{"format":"uri"}`, `"http://example.com/` + strings.Repeat("a", 200000) + `"`, "", ""},
		// uniqueItems hashes the whole array each time it applies.
		{"uniqueItems applied 400 times to 150,000 numbers", dag(20, `{"uniqueItems":true}`), `{"a":[` + list(150000, `%d`) + `]}`, "", tooMuch},
		{"uniqueItems on 20,000 numbers", `{"uniqueItems":true}`, `[` + list(20000, `%d`) + `]`, "", ""},
		// An enum or const value costs by its size.
		{"a const of 200,000 zeros", `{"$defs":{"c":{"const":` + numbers(200000, "0") + `}},"allOf":[{"$ref":"#/$defs/c"}]}`, `1`, tooBig, ""},
		{"an enum of 2,000 strings of 300 characters", `{"type":"array","items":{"enum":[` + list(2000, `"%0300d"`) + `]}}`,
			`[` + list(100, `"%0300d"`) + `]`, "", ""},
		{"an enum of 20 small objects", `{"enum":[` + list(20, `{"id":%d,"name":"n","tags":["a","b"]}`) + `]}`, `{"id":3,"name":"n","tags":["a","b"]}`, "", ""},
		// Bounds and multipleOf pay for the number's size.
		{"multipleOf on 100,000 numbers with 300-digit fractions", `{"type":"array","items":{"multipleOf":0.01}}`, numbers(100000, "1.5e-300"), "", tooMuch},
		{"bounds on 100,000 fractions", `{"type":"array","items":{"minimum":0,"maximum":1}}`, numbers(100000, "0.5"), "", ""},
		// A failing application keeps an error with its value's location:
		// 2,048 leaves failing at each of 120 levels held 1.3 GB.
		{"2,048 failing leaves at each of 120 levels", ladder(11, `{"type":"string"}`, `{"$ref":"#/$defs/n"}`,
			`,"n":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/n"}},{"$ref":"#/$defs/l11"}]}`), nested(120), "", tooMuch},
		// type "integer" parses the number (4,096 checks of 230 numbers of
		// 400 digits, 12 s).
		{"type integer on 400-digit numbers along 4,096 paths", ladder(12, `{"type":"integer"}`, `{"$ref":"#/$defs/l12"}`, ``),
			`{"a":` + numbers(230, "1."+strings.Repeat("7", 390)+"e-400") + `}`, "", tooMuch},
		// uniqueItems on 20 items compares them pair by pair (3.3 s).
		{"uniqueItems on 20 items alike but for their last number", `{"properties":{"a":{"uniqueItems":true}}}`, sameButLast, "", tooMuch},
		// Each application walks the scopes above it: a chain of 960 $refs
		// before 2,048 leaves (6 s).
		{"a chain of 960 $refs before 2,048 leaves", ladder(11, `{"type":"number"}`, `{"$ref":"#/$defs/c0"}`, chain), `{"a":` + numbers(455, "1") + `}`, "", tooMuch},
		{"a format that splits, 64 times on 1 MB", `{"properties":{"a":{"allOf":[` + strings.TrimSuffix(strings.Repeat(`{"format":"json-pointer"},`, 64), ",") + `]}}}`,
			`{"a":"` + strings.Repeat("/", 1<<20) + `"}`, "", tooMuch},
		// The spec's tree: items $dynamicRef the root, once a level.
		{"a $dynamicRef tree 40 deep", `{"$dynamicAnchor":"node","type":"object","properties":{"data":true,"children":{"type":"array","items":{"$dynamicRef":"#node"}}}}`,
			strings.Repeat(`{"data":1,"children":[`, 40) + `{"data":1}` + strings.Repeat(`]}`, 40), "", ""},
		// A schema as pydantic writes it: 20,000 rows take 80 ms.
		{"20,000 rows of a pydantic-style schema", pydantic, rows(20000), "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile("input_schema", []byte(tt.schema))
			if tt.compileErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.compileErr) {
					t.Fatalf("Compile: err = %.300v, want %q", err, tt.compileErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			err = s.Validate("arguments", []byte(tt.doc))
			if tt.err == "" {
				if err != nil {
					t.Fatalf("Validate: %.300v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Validate: err = %.300v, want %q", err, tt.err)
			}
		})
	}
}

// TestFailuresWordedOnce: only the first MaxErrors failing values are
// worded (a failing value against a long enum is worded with every
// value); the rest are counted.
func TestFailuresWordedOnce(t *testing.T) {
	s, err := Compile("input_schema", []byte(`{"type":"array","items":{"$ref":"#/$defs/e"},"$defs":{"e":{"enum":["a","b"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Validate("arguments", []byte(`["a","x","y","z","w","v","u","t"]`))
	if err == nil || strings.Count(err.Error(), "at ") != MaxErrors || !strings.HasSuffix(err.Error(), "; and 2 more") {
		t.Fatalf("err = %v", err)
	}
}
