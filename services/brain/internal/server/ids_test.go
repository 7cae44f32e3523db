package server

import (
	"regexp"
	"slices"
	"testing"
	"time"
)

// TestNewIDOrdered: IDs are prefix_ and 26 lower-case base32 characters,
// all different, and an ID made in a later millisecond sorts after every
// earlier one (the tables keyed by ID append instead of writing random
// pages; BenchmarkCallWritesParallel measures the difference).
func TestNewIDOrdered(t *testing.T) {
	shape := regexp.MustCompile(`^call_[a-z2-7]{26}$`)
	var ids []string
	seen := map[string]bool{}
	for round := range 5 {
		if round > 0 {
			time.Sleep(2 * time.Millisecond)
		}
		first := len(ids)
		for range 1000 {
			id := newID("call")
			if !shape.MatchString(id) || seen[id] {
				t.Fatalf("%q: malformed or repeated", id)
			}
			seen[id] = true
			ids = append(ids, id)
		}
		if first > 0 && slices.Max(ids[:first]) >= slices.Min(ids[first:]) {
			t.Fatalf("round %d: an ID made later sorts before one made earlier", round)
		}
	}
}
