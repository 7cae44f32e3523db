// Package hub fans session events out to live subscribers (the SSE streams
// of GET /sessions/{id}/events).
//
// Publish never blocks: a subscriber whose buffer is full is dropped and its
// channel closed, so one slow reader cannot stall the store's writer. A
// dropped SSE client reconnects with Last-Event-ID and replays the stored
// events it missed (progress is live-only and is not replayed).
package hub

import (
	"sync"

	"github.com/brain-tools/suite/services/brain/internal/store"
)

// DefaultBuffer is the events a subscriber may fall behind before it is
// dropped.
const DefaultBuffer = 256

// Hub routes events by session ID. The zero value is ready to use.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[*Sub]struct{}
}

// Sub is one subscription. C delivers the session's events in publish order
// and is closed when the subscriber is dropped or unsubscribed.
type Sub struct {
	C         <-chan store.Event
	c         chan store.Event
	sessionID string
	closed    bool
}

// Subscribe starts delivering the events of sessionID published from now on;
// buffer <= 0 means DefaultBuffer. Call Unsubscribe when done.
func (h *Hub) Subscribe(sessionID string, buffer int) *Sub {
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	c := make(chan store.Event, buffer)
	s := &Sub{C: c, c: c, sessionID: sessionID}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs == nil {
		h.subs = map[string]map[*Sub]struct{}{}
	}
	if h.subs[sessionID] == nil {
		h.subs[sessionID] = map[*Sub]struct{}{}
	}
	h.subs[sessionID][s] = struct{}{}
	return s
}

// Unsubscribe stops s and closes its channel; calling it again is a no-op.
func (h *Hub) Unsubscribe(s *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(s)
}

func (h *Hub) removeLocked(s *Sub) {
	if s.closed {
		return
	}
	s.closed = true
	close(s.c)
	set := h.subs[s.sessionID]
	delete(set, s)
	if len(set) == 0 {
		delete(h.subs, s.sessionID)
	}
}

// Publish delivers ev to every subscriber of ev.SessionID without blocking;
// subscribers with a full buffer are dropped.
func (h *Hub) Publish(ev store.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[ev.SessionID] {
		select {
		case s.c <- ev:
		default:
			h.removeLocked(s)
		}
	}
}

// Subscribers returns how many subscriptions sessionID has (for tests).
func (h *Hub) Subscribers(sessionID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[sessionID])
}

// Sessions returns the IDs of the sessions that have subscribers.
func (h *Hub) Sessions() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.subs))
	for id := range h.subs {
		out = append(out, id)
	}
	return out
}
