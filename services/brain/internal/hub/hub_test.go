package hub

import (
	"testing"

	"github.com/brain-tools/suite/services/brain/internal/store"
)

func TestHub(t *testing.T) {
	tests := []struct {
		name      string
		buffer    int
		publish   []store.Event
		wantIDs   []int64
		wantAlive bool
	}{
		{"delivers own session only", 4,
			[]store.Event{{ID: 1, SessionID: "a"}, {ID: 2, SessionID: "b"}, {ID: 3, SessionID: "a"}},
			[]int64{1, 3}, true},
		{"drops a full subscriber", 2,
			[]store.Event{{ID: 1, SessionID: "a"}, {ID: 2, SessionID: "a"}, {ID: 3, SessionID: "a"}},
			[]int64{1, 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Hub
			s := h.Subscribe("a", tt.buffer)
			for _, ev := range tt.publish {
				h.Publish(ev)
			}
			var got []int64
			for len(got) < len(tt.wantIDs) {
				got = append(got, (<-s.C).ID)
			}
			for i := range got {
				if got[i] != tt.wantIDs[i] {
					t.Fatalf("ids = %v, want %v", got, tt.wantIDs)
				}
			}
			if alive := h.Subscribers("a") == 1; alive != tt.wantAlive {
				t.Errorf("subscriber alive = %v, want %v", alive, tt.wantAlive)
			}
			h.Unsubscribe(s)
			h.Unsubscribe(s)
			if _, ok := <-s.C; ok {
				t.Error("channel open after Unsubscribe")
			}
		})
	}
}
