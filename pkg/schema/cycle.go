package schema

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"reflect"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxCycleSteps is the most schemas a reference-cycle error lists.
const maxCycleSteps = 8

// refCycle returns the schemas of a reference cycle in s, each once and
// the first again at the end, or nil when it has none. A cycle is a chain
// of keywords that apply a schema to the very value it is checking —
// $ref, allOf, anyOf, oneOf, not, if, then, else, dependentSchemas (and
// draft-07 dependencies) — that leads back to where it started. No value
// that reaches one can be validated: jsonschema finds the loop only then,
// and fails the call with a "reference cycle" error (kind.RefCycle), so a
// schema with one can never be used as it was written. JSON Schema 2020-12
// (core, section 9.4.1) calls the behaviour of such schemas undefined. A
// recursive schema that steps into a property or an item on its way round
// (a tree) checks a smaller value each time and is not a cycle.
//
// $dynamicRef and $recursiveRef are followed to the schema they name where
// they stand (their static target), which is where they lead when
// validation starts there, and a $dynamicRef also to every schema of the
// document with its dynamic anchor (anchors), where it leads during validation from
// an outer schema that has that anchor. So a loop at the static target
// that only such an outer schema breaks would be refused although
// validation from the outside ends; the metaschemas have none (their
// $dynamicRef steps into a property or an item), and a schema that relies
// on one fails every validation that starts at its static target.
func refCycle(root *jsonschema.Schema, anchors anchorIndex) []*jsonschema.Schema {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[*jsonschema.Schema]int{}
	var path, cycle []*jsonschema.Schema
	var visit func(s *jsonschema.Schema) bool
	visit = func(s *jsonschema.Schema) bool {
		state[s] = onPath
		path = append(path, s)
		for _, n := range anchors.sameValue(s) {
			switch state[n] {
			case onPath:
				i := slices.Index(path, n)
				cycle = append(slices.Clone(path[i:]), n)
				return true
			case unseen:
				if visit(n) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		state[s] = done
		return false
	}
	found := false
	walk(root, map[*jsonschema.Schema]bool{}, func(s *jsonschema.Schema) bool {
		if state[s] == unseen && visit(s) {
			found = true
		}
		return !found
	})
	return cycle
}

// cycleError words the cycle refCycle found in the schema of field,
// compiled at loc, as a schema error.
func cycleError(field, loc string, cycle []*jsonschema.Schema) error {
	steps := make([]string, 0, len(cycle))
	for _, s := range cycle {
		steps = append(steps, relLocation(loc, s.Location))
	}
	if len(steps) > maxCycleSteps {
		steps = append(steps[:maxCycleSteps-1], "…", steps[len(steps)-1])
	}
	return fmt.Errorf("%s: reference cycle: %s applies to the same value again without end, so no value that reaches it can be validated; "+
		"a recursive schema must step into a property or an item before it refers back", field, strings.Join(steps, " → "))
}

// relLocation is location within the document compiled at loc, as a
// fragment ("#/$defs/a"; "#" for the root).
func relLocation(loc, location string) string {
	rest, ok := strings.CutPrefix(location, loc)
	if !ok {
		return location // another resource: a metaschema
	}
	return "#" + strings.TrimPrefix(rest, "#")
}

// sameValue returns the subschemas s applies to the value it checks
// itself, in a fixed order.
func sameValue(s *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	add := func(ss ...*jsonschema.Schema) {
		for _, c := range ss {
			if c != nil {
				out = append(out, c)
			}
		}
	}
	add(s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else)
	if s.DynamicRef != nil {
		add(s.DynamicRef.Ref)
	}
	add(s.AllOf...)
	add(s.AnyOf...)
	add(s.OneOf...)
	for _, k := range sortedKeys(s.DependentSchemas) {
		add(s.DependentSchemas[k])
	}
	for _, k := range sortedKeys(s.Dependencies) {
		if d, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			add(d)
		}
	}
	return out
}

// walk calls f on every schema reachable from s through any keyword, each
// once, until f returns false.
func walk(s *jsonschema.Schema, seen map[*jsonschema.Schema]bool, f func(*jsonschema.Schema) bool) bool {
	if s == nil || seen[s] {
		return true
	}
	seen[s] = true
	if !f(s) {
		return false
	}
	for _, c := range subschemas(s) {
		if !walk(c, seen, f) {
			return false
		}
	}
	return true
}

// anchorIndex is the schemas of a document by their $dynamicAnchor,
// where a $dynamicRef to it may lead at run time (from an outer resource
// that has one), whether or not any keyword reaches them otherwise.
type anchorIndex map[string][]*jsonschema.Schema

// dynamicAnchors indexes the schemas with a $dynamicAnchor: those
// reachable from root, and those doc (decoded, compiled at loc by c) has
// anywhere else, such as in $defs nothing refers to.
func dynamicAnchors(c *jsonschema.Compiler, loc string, doc any, root *jsonschema.Schema) anchorIndex {
	a := anchorIndex{}
	seen := map[*jsonschema.Schema]bool{}
	add := func(s *jsonschema.Schema) bool {
		if s.DynamicAnchor != "" && !seen[s] {
			seen[s] = true
			a[s.DynamicAnchor] = append(a[s.DynamicAnchor], s)
		}
		return true
	}
	walk(root, map[*jsonschema.Schema]bool{}, add)
	var find func(v any, at []string)
	find = func(v any, at []string) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["$dynamicAnchor"].(string); ok {
				if s, err := c.Compile(loc + "#" + jsonPointer(at)); err == nil {
					add(s)
				}
			}
			for k, e := range v {
				find(e, append(at, k))
			}
		case []any:
			for i, e := range v {
				find(e, append(at, strconv.Itoa(i)))
			}
		}
	}
	find(doc, nil)
	return a
}

// sameValue is sameValue(s), and for a $dynamicRef every other schema
// with its anchor too (its static target among them is counted once: the
// spec's own tree, whose items $dynamicRef its root, doubled at each
// level).
func (a anchorIndex) sameValue(s *jsonschema.Schema) []*jsonschema.Schema {
	next := sameValue(s)
	if s.DynamicRef != nil && s.DynamicRef.Anchor != "" {
		for _, d := range a[s.DynamicRef.Anchor] {
			if !slices.Contains(next, d) {
				next = append(next, d)
			}
		}
	}
	return next
}

// subschemas returns the schemas s applies through any keyword: to the
// value it checks itself (sameValue), then to the value's properties and
// items, in a fixed order; nil ones left out.
func subschemas(s *jsonschema.Schema) []*jsonschema.Schema {
	return append(sameValue(s), children(s)...)
}

// children returns the schemas s applies to the properties and items of
// the value it checks, in a fixed order.
func children(s *jsonschema.Schema) []*jsonschema.Schema {
	var next []*jsonschema.Schema
	for _, c := range []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema} {
		if c != nil {
			next = append(next, c)
		}
	}
	for _, k := range sortedKeys(s.Properties) {
		next = append(next, s.Properties[k])
	}
	pats := slices.SortedFunc(maps.Keys(s.PatternProperties), func(a, b jsonschema.Regexp) int { return strings.Compare(a.String(), b.String()) })
	for _, p := range pats {
		next = append(next, s.PatternProperties[p])
	}
	next = append(next, s.PrefixItems...)
	for _, v := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			next = append(next, v)
		case []*jsonschema.Schema:
			next = append(next, v...)
		}
	}
	return next
}

// work is what applying s alone to a value costs the validator, in
// steps: one, and one more for each value of its enum and each name of its
// required, dependentRequired and (draft-07) dependencies lists, which it
// goes through one by one (a tester's enum of 10,000 strings made 20,000
// items take a minute; required names reached along 900 paths, 25 s); an
// enum or const value costs by its size (valueWork); a bound or
// multipleOf, numberWork for its own number (the number checked pays for
// itself: numberKeywords).
func work(s *jsonschema.Schema) int {
	n := 1 + len(s.Required)
	if s.Enum != nil {
		// A short string, a boolean or null is compared in ~20-50 ns: four
		// of them are a step.
		short := 0
		for _, v := range s.Enum.Values {
			if w := valueWork(v); w == 1 {
				short++
			} else {
				n += w
			}
		}
		n += (short + 3) / 4
	}
	if s.Const != nil {
		n += valueWork(*s.Const)
	}
	for _, r := range []*big.Rat{s.Minimum, s.Maximum, s.ExclusiveMinimum, s.ExclusiveMaximum, s.MultipleOf} {
		if r != nil {
			n += numberWork + ratSize(r)/2
		}
	}
	for _, names := range s.DependentRequired {
		n += len(names)
	}
	for _, d := range s.Dependencies {
		if names, ok := d.([]string); ok {
			n += len(names)
		}
	}
	return n
}

// numberKeywords is how many of minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, multipleOf and type "integer" s has: each takes the
// number checked as an exact rational and pays for its size (numberSize;
// a tester's 400-digit numbers through 4,096 "integer" checks each took
// 12 s a 91 KB document).
func numberKeywords(s *jsonschema.Schema) int {
	n := 0
	if s.Types != nil && slices.Contains(s.Types.ToStrings(), "integer") {
		n++
	}
	for _, r := range []*big.Rat{s.Minimum, s.Maximum, s.ExclusiveMinimum, s.ExclusiveMaximum, s.MultipleOf} {
		if r != nil {
			n++
		}
	}
	return n
}

// numberWork is what a bound or multipleOf costs on a number of the usual
// size, in steps: the validator prints the number and parses it into a
// rational for each (~1-2 µs); a number with many digits or a large
// exponent pays numberSize/2 more (1.5e-400 against multipleOf 1e-400
// took up to 53 µs).
const numberWork = 8

// numberSize is the size of number literal v in decimal digits, as exact
// arithmetic sees it: its length and its exponent's magnitude (1.5e-300
// is a rational with a 300-digit denominator). Within MaxNumberLength and
// MaxNumberExponent it is at most 800.
func numberSize(v string) int {
	n := len(v)
	if i := strings.IndexAny(v, "eE"); i >= 0 {
		if e, err := strconv.Atoi(strings.TrimPrefix(v[i+1:], "+")); err == nil {
			n += max(e, -e)
		}
	}
	return n
}

// ratSize is numberSize for a schema's own number, compiled to r.
func ratSize(r *big.Rat) int { return (r.Num().BitLen() + r.Denom().BitLen()) * 3 / 10 }

// valueWork is what comparing a value with an enum value or const v costs,
// in steps: 1 for each string, boolean, null, array or object in it, 32
// for each number (compared as exact rationals after printing, ~7 µs, up
// to 8.5 µs for 400 digits), and a string's bytes over 1024 (a const
// array of 200,000 zeros took 70 ms a comparison).
func valueWork(v any) int {
	switch v := v.(type) {
	case string:
		return 1 + len(v)/1024 // Go compares lengths first, then ~32 bytes a ns
	case bool, nil:
		return 1
	case []any:
		n := 1
		for _, e := range v {
			n += valueWork(e)
		}
		return n
	case map[string]any:
		n := 1
		for k, e := range v {
			n += len(k)/32 + valueWork(e)
		}
		return n
	}
	return 32
}

// regexCost is the size of pattern's compiled program: Go's regexp matches
// in time proportional to it times the length of the string (a tester's
// a{0,1000}b, ~2,000 instructions, took 23 s on a 1 MB string).
func regexCost(pattern string) int {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 1
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 1
	}
	return len(prog.Inst)
}

// byteCost is what applying s to a string costs per byte of it, in
// 1/1024 steps (stringWork): the validator copies every string it applies
// a schema to (for the content keywords: 1); minLength and maxLength count
// its runes (8; a tester's 8,100 applications of maxLength to 1 MB took
// 12 s); a format parses it (64: uri ~2.4 ms a megabyte; those that split
// the string, json-pointer on "////…" and the like, ~15 ms),
// format "regex" compiles it (65,536: up to 11 µs a byte, for a{1000};
// Go's regexp allows no larger repeat); a pattern runs its program over
// it (32 an instruction).
func byteCost(s *jsonschema.Schema) int {
	n := 1
	if s.MinLength != nil || s.MaxLength != nil {
		n += 8
	}
	if s.Format != nil {
		if s.Format.Name == "regex" {
			n += formatRegexCost
		} else {
			n += 64
		}
	}
	if s.Pattern != nil {
		n += 32 * regexCost(s.Pattern.String())
	}
	return n
}

// formatRegexCost is byteCost's charge for format "regex".
const formatRegexCost = 64 << 10

// stringWork is what a string of n bytes costs at cost (byteCost) a
// byte, in steps.
func stringWork(n, cost int) int { return 1 + n*cost/1024 }

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// counter counts the steps of a validation (steps), with what it needs
// of each schema reachable from the root worked out once, at Compile.
type counter struct {
	same map[*jsonschema.Schema][]*jsonschema.Schema // anchorIndex.sameValue
	// scalar is the steps for a value with no properties or items (a
	// number, a boolean, ...): the schema's work and, along every path,
	// that of what it applies to the same value. Saturated at MaxSteps+1.
	scalar map[*jsonschema.Schema]int
	// bytes is, along the same paths, the cost (byteCost) a string pays
	// per byte.
	bytes map[*jsonschema.Schema]int
	// numbers is, along the same paths, how many bounds and multipleOf a
	// number meets (numberKeywords): each pays for the number's size.
	numbers map[*jsonschema.Schema]int
	// apps is how many schemas applying s applies to the same value, s
	// included, and chain the longest line of them: each application
	// walks the validator's scopes above it (scopeWork).
	apps, chain map[*jsonschema.Schema]int
	// keyCost is the cost of each patternProperties key's regex.
	keyCost map[jsonschema.Regexp]int
	// most is the greatest scalar: the most steps checking one value
	// against one schema of the document takes, along every path its
	// references lead, before the value's own properties or items.
	most int
}

func newCounter(root *jsonschema.Schema, anchors anchorIndex) *counter {
	c := &counter{same: map[*jsonschema.Schema][]*jsonschema.Schema{}, scalar: map[*jsonschema.Schema]int{},
		bytes: map[*jsonschema.Schema]int{}, numbers: map[*jsonschema.Schema]int{}, keyCost: map[jsonschema.Regexp]int{},
		apps: map[*jsonschema.Schema]int{}, chain: map[*jsonschema.Schema]int{}}
	var all []*jsonschema.Schema
	add := func(s *jsonschema.Schema) bool {
		if _, ok := c.same[s]; !ok {
			all = append(all, s)
			c.same[s] = anchors.sameValue(s)
		}
		return true
	}
	walk(root, map[*jsonschema.Schema]bool{}, add)
	for _, ss := range anchors { // targets no keyword reaches but a $dynamicRef
		for _, s := range ss {
			walk(s, map[*jsonschema.Schema]bool{}, add)
		}
	}
	for _, s := range all {
		for re := range s.PatternProperties {
			c.keyCost[re] = 32 * regexCost(re.String())
		}
	}
	var scalar func(s *jsonschema.Schema) int
	scalar = func(s *jsonschema.Schema) int { // no loop: refCycle refused them
		if n, ok := c.scalar[s]; ok {
			return n
		}
		n, b, k, a, ch := min(work(s), MaxSteps+1), byteCost(s), numberKeywords(s), 1, 1
		for _, d := range c.same[s] {
			n = min(n+scalar(d), MaxSteps+1)
			b, k = min(b+c.bytes[d], MaxSteps+1), min(k+c.numbers[d], MaxSteps+1)
			a, ch = min(a+c.apps[d], MaxSteps+1), max(ch, 1+c.chain[d])
		}
		c.scalar[s], c.bytes[s], c.numbers[s], c.apps[s], c.chain[s] = n, b, k, a, ch
		return n
	}
	for _, s := range all {
		c.most = max(c.most, scalar(s))
	}
	return c
}

// str is the steps checking string v against s takes: its scalar steps
// and its byte cost over its length.
func (c *counter) str(s *jsonschema.Schema, v string) int {
	return c.scalar[s] + stringWork(len(v), c.bytes[s]) - 1
}

// uniqueWork is what uniqueItems costs array v of the given size
// (valueSizes), in steps: the validator hashes every value in it, each
// number printed and parsed as a rational (150,000 numbers, 100 ms), every
// time the keyword applies; an array of 20 items or fewer it compares pair
// by pair instead, each item with every later one (20 items alike but for
// their last number, 3.3 s a megabyte).
func uniqueWork(v []any, size int) int {
	if len(v) <= 20 {
		return 4 * (len(v) + 1) / 2 * size
	}
	return size
}

// scopeWork is what the validator's scope walks cost a schema applied
// depth schemas deep (along its references, across the values above),
// in steps: each application looks for a cycle among the scopes above it
// on the same value and a $dynamicRef among all of them (a $ref chain of
// 960 before 4,096 leaves, 3 µs an application); a failing one copies
// its value's location.
func scopeWork(depth int) int { return depth / 32 }

// valueSizes memoizes valueSize for the arrays and objects of one
// document, so that a value uniqueItems meets along many paths, or at
// every level of a nesting, is measured once.
type valueSizes map[unsafe.Pointer]int

// of is the size of v: one for each value in it, nested ones too, a
// string's or a name's bytes over 32, and a number 8 and its numberSize
// over 8 (printed and parsed to be hashed or compared).
func (m valueSizes) of(v any) int {
	var p unsafe.Pointer
	switch v := v.(type) {
	case string:
		return 1 + len(v)/32
	case json.Number:
		return 8 + numberSize(string(v))/8
	case []any:
		p = unsafe.Pointer(unsafe.SliceData(v))
	case map[string]any:
		p = reflect.ValueOf(v).UnsafePointer()
	default:
		return 1
	}
	if n, ok := m[p]; ok && p != nil {
		return n
	}
	n := 1
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			n += m.of(e)
		}
	case map[string]any:
		for k, e := range v {
			n += len(k)/32 + m.of(e)
		}
	}
	if p != nil {
		m[p] = n
	}
	return n
}

func (c *counter) steps(s *jsonschema.Schema, v any, limit int) int {
	n := 0
	sizes := valueSizes{}
	var visit func(s *jsonschema.Schema, v any, depth int) bool // false once past limit
	visit = func(s *jsonschema.Schema, v any, depth int) bool {
		switch v.(type) {
		case map[string]any, []any:
			n += scopeWork(depth)
		default: // every schema applied to a scalar, worked out once
			n += c.apps[s] * scopeWork(depth+c.chain[s])
		}
		switch v := v.(type) {
		case map[string]any:
			if s.UnevaluatedProperties != nil {
				n += len(v) * c.scalar[s]
			}
		case []any:
			if s.UnevaluatedItems != nil {
				n += len(v) * c.scalar[s]
			}
			if s.UniqueItems {
				n += uniqueWork(v, sizes.of(v))
			}
		case string:
			n += c.str(s, v)
			return n <= limit
		case json.Number:
			n += c.scalar[s] + c.numbers[s]*numberSize(string(v))/2
			return n <= limit
		default: // no properties or items: worked out once
			n += c.scalar[s]
			return n <= limit
		}
		if n += work(s); n > limit {
			return false
		}
		for _, d := range c.same[s] {
			if !visit(d, v, depth+1) {
				return false
			}
		}
		switch v := v.(type) {
		case map[string]any:
			for name, pv := range v {
				if s.PropertyNames != nil {
					if n += c.str(s.PropertyNames, name); n > limit {
						return false
					}
				}
				if d := s.Properties[name]; d != nil && !visit(d, pv, depth+1) {
					return false
				}
				for re, d := range s.PatternProperties {
					if n += stringWork(len(name), c.keyCost[re]); !visit(d, pv, depth+1) {
						return false
					}
				}
				if d, ok := s.AdditionalProperties.(*jsonschema.Schema); ok && !visit(d, pv, depth+1) {
					return false
				}
				if d := s.UnevaluatedProperties; d != nil && !visit(d, pv, depth+1) {
					return false
				}
			}
		case []any:
			for i, item := range v {
				if i < len(s.PrefixItems) && !visit(s.PrefixItems[i], item, depth+1) {
					return false
				}
				switch items := s.Items.(type) {
				case *jsonschema.Schema:
					if !visit(items, item, depth+1) {
						return false
					}
				case []*jsonschema.Schema:
					if i < len(items) && !visit(items[i], item, depth+1) {
						return false
					}
				}
				if d, ok := s.AdditionalItems.(*jsonschema.Schema); ok && !visit(d, item, depth+1) {
					return false
				}
				for _, d := range []*jsonschema.Schema{s.Items2020, s.Contains, s.UnevaluatedItems} {
					if d != nil && !visit(d, item, depth+1) {
						return false
					}
				}
			}
		}
		return n <= limit
	}
	visit(s, v, 0)
	return n
}
