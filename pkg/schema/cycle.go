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
// validation starts there. During validation from an outer schema with the
// same dynamic anchor they lead to that one instead, so a loop at the
// static target that only such an outer schema breaks would be refused
// although validation from the outside ends; the metaschemas have none (their
// $dynamicRef steps into a property or an item), and a schema that relies
// on one fails every validation that starts at its static target.
func refCycle(root *jsonschema.Schema) []*jsonschema.Schema {
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
		for _, n := range sameValue(s) {
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
	next := append(sameValue(s), s.PropertyNames, s.UnevaluatedProperties, s.Contains,
		s.Items2020, s.UnevaluatedItems, s.ContentSchema)
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
	for _, c := range next {
		if !walk(c, seen, f) {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
