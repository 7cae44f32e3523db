package schema

import (
	"fmt"
	"maps"
	"slices"
	"strings"

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
// document with its dynamic anchor, where it leads during validation from
// an outer schema that has that anchor. So a loop at the static target
// that only such an outer schema breaks would be refused although
// validation from the outside ends; the metaschemas have none (their
// $dynamicRef steps into a property or an item), and a schema that relies
// on one fails every validation that starts at its static target.
func refCycle(root *jsonschema.Schema) []*jsonschema.Schema {
	const (
		unseen = iota
		onPath
		done
	)
	anchors := map[string][]*jsonschema.Schema{}
	walk(root, map[*jsonschema.Schema]bool{}, func(s *jsonschema.Schema) bool {
		if s.DynamicAnchor != "" {
			anchors[s.DynamicAnchor] = append(anchors[s.DynamicAnchor], s)
		}
		return true
	})
	state := map[*jsonschema.Schema]int{}
	var path, cycle []*jsonschema.Schema
	var visit func(s *jsonschema.Schema) bool
	visit = func(s *jsonschema.Schema) bool {
		state[s] = onPath
		path = append(path, s)
		next := sameValue(s)
		if s.DynamicRef != nil && s.DynamicRef.Anchor != "" {
			next = append(next, anchors[s.DynamicRef.Anchor]...)
		}
		for _, n := range next {
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

// subschemas returns the schemas s applies through any keyword: to the
// value it checks itself (sameValue), then to the value's properties and
// items, in a fixed order; nil ones left out.
func subschemas(s *jsonschema.Schema) []*jsonschema.Schema {
	next := sameValue(s)
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
// items take a minute; required names reached along 900 paths, 25 s).
func work(s *jsonschema.Schema) int {
	n := 1 + len(s.Required)
	if s.Enum != nil {
		n += len(s.Enum.Values)
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

// applied counts the steps (work) validating a value against root takes,
// root included, along every path: a subschema reached along two paths (a
// $ref from two places, an allOf naming the same $ref twice) counts twice,
// as the validator runs it twice. That count is what a validation costs,
// and it can grow as two to the power of the schema's size: thirty $defs,
// each an allOf of two $refs to the next, make a 2 KB schema whose every
// validation takes minutes. A reference back to a schema being counted (a
// recursive tree: refCycle refused every other loop, so it stepped into a
// property or an item on its way round) counts once: what it applies is
// applied to a value one level deeper, which MaxValueDepth bounds. The
// count stops past limit (it returns limit+1), so its cost is bounded by
// the schema's size, not by the count.
func applied(root *jsonschema.Schema, limit int) int {
	counted := map[*jsonschema.Schema]int{}
	onPath := map[*jsonschema.Schema]bool{}
	var count func(s *jsonschema.Schema) int
	count = func(s *jsonschema.Schema) int {
		if n, ok := counted[s]; ok {
			return n
		}
		if onPath[s] {
			return 1
		}
		onPath[s] = true
		n := min(work(s), limit+1)
		for _, c := range subschemas(s) {
			if n += count(c); n > limit {
				n = limit + 1
				break
			}
		}
		delete(onPath, s)
		counted[s] = n
		return n
	}
	return count(root)
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// counter counts the steps of a validation (steps), with what it needs
// of each schema reachable from the root worked out once, at Compile.
type counter struct {
	same map[*jsonschema.Schema][]*jsonschema.Schema // sameValue
	// scalar is the steps for a value with no properties or items (a
	// string, a number, ...): the schema's work and, along every path,
	// that of what it applies to the same value. Saturated at MaxSteps+1.
	scalar map[*jsonschema.Schema]int
}

func newCounter(root *jsonschema.Schema) *counter {
	c := &counter{same: map[*jsonschema.Schema][]*jsonschema.Schema{}, scalar: map[*jsonschema.Schema]int{}}
	walk(root, map[*jsonschema.Schema]bool{}, func(s *jsonschema.Schema) bool {
		c.same[s] = sameValue(s)
		return true
	})
	var scalar func(s *jsonschema.Schema) int
	scalar = func(s *jsonschema.Schema) int { // no loop: refCycle refused them
		if n, ok := c.scalar[s]; ok {
			return n
		}
		n := min(work(s), MaxSteps+1)
		for _, d := range c.same[s] {
			n = min(n+scalar(d), MaxSteps+1)
		}
		c.scalar[s] = n
		return n
	}
	for s := range c.same {
		scalar(s)
	}
	return c
}

// steps counts, up to limit+1, the steps (work) validating value v
// against s takes, or more: every subschema that may apply to a value
// counts, whether or not it does (each patternProperties schema for every
// property, then and else both, every branch of anyOf). It stops past
// limit, so its cost is bounded by limit, not by the count.
func (c *counter) steps(s *jsonschema.Schema, v any, limit int) int {
	n := 0
	var visit func(s *jsonschema.Schema, v any) bool // false once past limit
	visit = func(s *jsonschema.Schema, v any) bool {
		switch v.(type) {
		case map[string]any, []any:
		default: // no properties or items: worked out once
			n += c.scalar[s]
			return n <= limit
		}
		if n += work(s); n > limit {
			return false
		}
		for _, d := range c.same[s] {
			if !visit(d, v) {
				return false
			}
		}
		switch v := v.(type) {
		case map[string]any:
			for name, pv := range v {
				if s.PropertyNames != nil {
					if n += c.scalar[s.PropertyNames]; n > limit {
						return false
					}
				}
				if d := s.Properties[name]; d != nil && !visit(d, pv) {
					return false
				}
				for _, d := range s.PatternProperties {
					if !visit(d, pv) {
						return false
					}
				}
				if d, ok := s.AdditionalProperties.(*jsonschema.Schema); ok && !visit(d, pv) {
					return false
				}
				if d := s.UnevaluatedProperties; d != nil && !visit(d, pv) {
					return false
				}
			}
		case []any:
			for i, item := range v {
				if i < len(s.PrefixItems) && !visit(s.PrefixItems[i], item) {
					return false
				}
				switch items := s.Items.(type) {
				case *jsonschema.Schema:
					if !visit(items, item) {
						return false
					}
				case []*jsonschema.Schema:
					if i < len(items) && !visit(items[i], item) {
						return false
					}
				}
				if d, ok := s.AdditionalItems.(*jsonschema.Schema); ok && !visit(d, item) {
					return false
				}
				for _, d := range []*jsonschema.Schema{s.Items2020, s.Contains, s.UnevaluatedItems} {
					if d != nil && !visit(d, item) {
						return false
					}
				}
			}
		}
		return true
	}
	visit(s, v)
	return n
}
