package server

import (
	"testing"

	"github.com/brain-tools/suite/services/brain/internal/store"
)

// TestQueueStoredOrder: a call queued while calls that took a slot are
// still being stored may be stored only once they all are, so that its
// ord comes after theirs; with none being stored it may be stored at once.
func TestQueueStoredOrder(t *testing.T) {
	t.Parallel()
	isClosed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	newRC := func() *running { return newRunning(store.Call{ID: newID("call")}, nil, func(error) {}) }
	for _, tc := range []struct {
		name  string
		taken int // of the 2 calls that took a slot, those not stored yet
	}{
		{"none being stored", 0},
		{"one being stored", 1},
		{"two being stored", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &queue{max: 2}
			for range q.max {
				if sl, _ := q.take(newRC(), 10); sl != slotTaken {
					t.Fatalf("take with a slot free: %v, want slotTaken", sl)
				}
			}
			for range q.max - tc.taken {
				q.stored()
			}
			sl, settled := q.take(newRC(), 10)
			if sl != slotQueued {
				t.Fatalf("take with no slot free: %v, want slotQueued", sl)
			}
			for i := range tc.taken {
				if isClosed(settled) {
					t.Fatalf("the queued call may be stored with %d earlier calls not stored", tc.taken-i)
				}
				q.stored()
			}
			if !isClosed(settled) {
				t.Fatal("every earlier call is stored, and the queued call still may not be")
			}
		})
	}
}
