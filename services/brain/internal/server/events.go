package server

import (
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/sse"
	"github.com/brain-tools/suite/services/brain/internal/hub"
	"github.com/brain-tools/suite/services/brain/internal/store"
	"github.com/julienschmidt/httprouter"
)

// Limits of GET /sessions/{id}/events.
const (
	DefaultEventPage = 100
	// replayPage is how many stored events an SSE stream reads at a time.
	replayPage = 500
)

// events answers GET /sessions/{id}/events: an SSE stream (stored events
// after Last-Event-ID or ?after=, then live ones, with heartbeat comments),
// or with Accept: application/json one page {"events":[...],"has_more":bool}
// (after Last-Event-ID or ?after=, up to ?limit=). The caller is the
// session's tenant or holds an inspection token issued for this session;
// such a stream ends when the token's call returns. See stream for when a
// stream ends.
func (s *Server) events(w http.ResponseWriter, r *http.Request, p httprouter.Params) error {
	id := p.ByName("id")
	tenant, g, err := s.eventsAuth(r, id)
	if err != nil {
		return err
	}
	asJSON := wantsJSON(r)
	allowed := []string{"after"}
	if asJSON {
		allowed = append(allowed, "limit")
	}
	if !asJSON && r.URL.Query().Has("limit") {
		return httpapi.BadRequest("limit: only the JSON page takes it (send Accept: application/json); an event stream sends every event after ?after= or Last-Event-ID")
	}
	q, err := query(r, allowed...)
	if err != nil {
		return err
	}
	var after int64
	if q.Has("after") {
		if after, err = eventID("after", q.Get("after")); err != nil {
			return err
		}
	}
	// Both forms read Last-Event-ID, which wins over ?after= (a client
	// that reconnects sends the newest it saw).
	if vs := r.Header.Values("Last-Event-ID"); len(vs) > 1 {
		return httpapi.BadRequest("last-event-id: sent %d times; send one", len(vs))
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		if after, err = eventID("last-event-id", v); err != nil {
			return err
		}
	}
	if _, err := s.session(r.Context(), tenant, id); err != nil {
		return err
	}
	if asJSON {
		limit, err := intParam(q, "limit", 1, store.MaxListLimit, DefaultEventPage)
		if err != nil {
			return err
		}
		evs, err := s.store.Events(r.Context(), id, after, int(limit)+1)
		if err != nil {
			return fmt.Errorf("list events: %w", err)
		}
		more := len(evs) > int(limit)
		if more {
			evs = evs[:limit]
		}
		out := make([]EventJSON, 0, len(evs))
		for _, ev := range evs {
			out = append(out, eventJSON(ev))
		}
		httpapi.WriteJSON(w, http.StatusOK, map[string]any{"events": out, "has_more": more})
		return nil
	}
	return s.stream(w, r, tenant, id, after, g)
}

// eventID parses v, the value of the parameter or header name, as an event
// ID to resume after: a non-negative integer (0 = from the start).
func eventID(name, v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	// As the stream writes IDs: no sign, no leading zero ("+3", "03").
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != v {
		return 0, httpapi.BadRequest("%s: want an event id (a non-negative integer; 0 = from the start), got %q", name, v)
	}
	return n, nil
}

// wantsJSON reports whether the client asked for the JSON page: Accept names
// application/json and not text/event-stream.
func wantsJSON(r *http.Request) bool {
	json, es := false, false
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		json = json || mt == "application/json"
		es = es || mt == "text/event-stream"
	}
	return json && !es
}

// stream subscribes first, then replays stored events after `after`, then
// forwards live events, skipping those already replayed (by ID). Progress
// events have no ID and are forwarded as they come.
//
// The stream of a closed session ends cleanly once session.closed is sent
// (live or replayed); opened on a closed session, it replays what comes after
// `after` and ends, and with nothing left to replay it answers 204 No
// Content, which tells SSE clients (EventSource) to stop reconnecting. The
// stream of an interrupted session stays open: session.closed can still
// follow.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, tenant, id string, after int64, g *grant) error {
	sub := s.hub.Subscribe(id, hub.DefaultBuffer)
	defer s.hub.Unsubscribe(sub)
	ctx := r.Context()
	// Read after subscribing: the cache says closed only once session.closed
	// has committed, so the replay below reaches everything there will be;
	// a close committed later arrives live.
	sess, err := s.session(ctx, tenant, id)
	if err != nil {
		return err
	}
	closed := sess.Status == store.SessionClosed
	evs, err := s.store.Events(ctx, id, after, replayPage)
	if err != nil {
		return fmt.Errorf("replay events: %w", err)
	}
	if closed && len(evs) == 0 {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	sw := sse.NewWriter(w)
	if err := sw.Start(); err != nil {
		return nil
	}
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()
	last := after
	// ended: the stream is over — the session closed, or the call of the
	// inspection token the stream was opened with returned.
	ended := false
	write := func(ev store.Event) bool {
		if sw.EventWithID(ev.Type, strconv.FormatInt(ev.ID, 10), eventJSON(ev)) != nil {
			return false
		}
		last = ev.ID
		ended = ended || ev.Type == store.EventSessionClosed ||
			g != nil && ev.CallID == g.callID && ev.Type == store.EventToolResult
		return true
	}
	// fill sends the stored events after last up to upTo (all there are for
	// hintAll); false: the client went away or the store failed.
	fill := func(upTo int64) bool {
		for !ended && last < upTo {
			evs, err := s.store.Events(ctx, id, last, replayPage)
			if err != nil {
				s.log.ErrorContext(ctx, "replay events", "session_id", id, "err", err)
				return false
			}
			for _, ev := range evs {
				if !write(ev) {
					return false
				}
				if ended {
					break
				}
			}
			if len(evs) < replayPage {
				return true
			}
		}
		return true
	}
	for _, ev := range evs {
		if !write(ev) {
			return nil
		}
		if ended {
			return nil
		}
	}
	if len(evs) == replayPage && (!fill(hintAll) || ended) {
		return nil
	}
	if closed {
		// Read closed before the replay: it reached session.closed.
		return nil
	}
	var revoked <-chan struct{}
	if g != nil {
		revoked = g.revoked
	}
	// send writes one live event; false ends the stream: the client went
	// away, the session closed, or the token's call returned. A stored
	// event that does not follow the last one sent (another replica's,
	// which arrives as a hint with no type; or one overtaken on the way)
	// is read from the store with every event before it, so the stream
	// has no gap and no duplicate.
	send := func(ev store.Event) bool {
		if ev.ID == 0 { // live-only progress
			return sw.EventWithID(ev.Type, "", eventJSON(ev)) == nil
		}
		if ev.ID <= last {
			return true
		}
		if ev.Type == "" || ev.ID > last+1 {
			return fill(ev.ID) && !ended
		}
		return write(ev) && !ended
	}
	tick := time.NewTicker(s.heartbeat)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-sub.C:
			// !ok: dropped for falling behind; the client reconnects with
			// Last-Event-ID and replays what it missed.
			if !ok || !send(ev) {
				return nil
			}
		case <-tick.C:
			if sw.Comment("heartbeat") != nil {
				return nil
			}
		case <-revoked:
			return nil
		case <-ctx.Done():
			return nil
		case <-s.waitsEnd:
			// At shutdown the calls in flight record their results before
			// request contexts end: deliver what was published by then,
			// which select may not have picked before this case.
			for {
				select {
				case ev, ok := <-sub.C:
					if !ok || !send(ev) {
						return nil
					}
				default:
					return nil
				}
			}
		}
	}
}
