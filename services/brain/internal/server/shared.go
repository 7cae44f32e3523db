package server

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/store"
)

// Several replicas on one database (Options.DatabaseURL). Any replica
// serves any request; what one replica cannot see in its own memory it
// learns from the store, and the store's signals (LISTEN/NOTIFY) tell it
// when to look:
//
//   - a call runs on the replica that created it (its owner, under a lease
//     the owner renews); a cancel, interrupt or close through another
//     replica is a signal the owner acts on, and the replica that took the
//     request waits in the store for the call's final state;
//   - every event another replica commits arrives as a hint (its session
//     and ID); an event stream reads what the hint names from the store,
//     so it delivers every event in order, with no gap or duplicate,
//     whichever replica wrote it (see stream);
//   - tool.progress, never stored, travels in a signal of its own;
//   - inspection tokens are kept (as their SHA-256) in the store, so any
//     replica honours them;
//   - when a replica dies its leases run out and another one takes its
//     calls up: running ones end failed, brain_restarted, unknown_outcome —
//     never sent again; waiting ones (requires_input, queued) wait again
//     on the replica that took them;
//   - a binding's max_concurrency queue is per replica: N replicas run up
//     to N × max_concurrency calls of a binding and tenant at once.

// hintAll is the ID of a hint that tells every stream of a session to
// re-read the store (the listener reconnected and may have missed some).
const hintAll = math.MaxInt64

// onSignal handles a signal from another replica. It must not block: it
// runs on the store's listener.
func (s *Server) onSignal(sig store.Signal) {
	switch sig.Kind {
	case store.SignalEvent:
		// A hint: no type, no data; a stream reads the event from the store.
		s.hub.Publish(store.Event{ID: sig.Seq, SessionID: sig.SessionID})
	case store.SignalResync:
		for _, id := range s.hub.Sessions() {
			s.hub.Publish(store.Event{ID: hintAll, SessionID: id})
		}
		s.dropToolSets() // a replaced tool set may have gone unsaid
	case store.SignalSessionTools:
		s.dropToolSets(sig.SessionID)
	case store.SignalProgress:
		s.hub.Publish(store.Event{Type: store.EventToolProgress, SessionID: sig.SessionID, CallID: sig.CallID,
			Time: time.Now().UTC(), Data: sig.Data})
	case store.SignalCancel:
		if rc, ok := s.lookupRunning(sig.CallID); ok {
			rc.cancel(errCallCancelled)
		}
	case store.SignalEndSession:
		s.mu.Lock()
		s.remoteEnding[sig.SessionID] = time.Now().Add(s.endWait())
		var calls []*running
		for _, rc := range s.bySession[sig.SessionID] {
			calls = append(calls, rc)
		}
		s.mu.Unlock()
		for _, rc := range calls {
			rc.cancel(errSessionEnded)
		}
	}
}

// endWait bounds how long ending a session waits for calls that run on
// other replicas: a dead replica's calls are ended by the lease loop within
// about two leases.
func (s *Server) endWait() time.Duration { return 2*s.lease + shutdownGrace }

// remotelyEnding reports whether another replica is ending session id.
// Called with s.mu held.
func (s *Server) remotelyEnding(id string) bool {
	until, ok := s.remoteEnding[id]
	if ok && time.Now().After(until) {
		delete(s.remoteEnding, id)
		return false
	}
	return ok
}

// notify sends sig to the other replicas, if there are any; a failure is
// logged (the store stays the truth, and waits re-read it).
func (s *Server) notify(ctx context.Context, sig store.Signal) {
	if s.shared == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.shared.Notify(ctx, sig); err != nil {
		if errors.Is(err, store.ErrSignalTooLarge) {
			s.log.Debug("signal not sent to other replicas", "kind", sig.Kind, "call_id", sig.CallID, "err", err)
			return
		}
		s.log.Warn("signal other replicas", "kind", sig.Kind, "err", err)
	}
}

// leaseLoop renews this replica's leases and takes up the calls of
// replicas whose lease ran out (running ones end brain_restarted, waiting
// ones wait again here), every third of a lease, until ctx ends.
func (s *Server) leaseLoop(ctx context.Context) {
	t := time.NewTicker(s.lease / 3)
	defer t.Stop()
	for {
		now := time.Now()
		if err := s.shared.RenewLeases(ctx, now.Add(s.lease)); err != nil && ctx.Err() == nil {
			s.log.Error("renew call leases", "err", err)
		}
		for ctx.Err() == nil {
			calls, err := s.shared.ClaimExpired(ctx, now, now.Add(s.lease), 100)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Error("claim calls of stopped replicas", "err", err)
				}
				break
			}
			if err := s.takeUp(ctx, calls); err != nil && ctx.Err() == nil {
				s.log.Error("take up the calls of a stopped replica", "err", err)
			}
			if len(calls) < 100 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// waitStored waits up to d for the tenant's call id — running on another
// replica, or on none — to reach a final state, reading it from the store
// whenever an event of its session commits (and every second, should a
// signal be lost), and returns it as it is then.
func (s *Server) waitStored(ctx context.Context, tenant, id string, d time.Duration) (*store.Call, error) {
	c, err := s.call(ctx, tenant, id)
	if err != nil || store.Terminal(c.Status) || d <= 0 {
		return c, err
	}
	sub := s.hub.Subscribe(c.SessionID, 0)
	defer func() { s.hub.Unsubscribe(sub) }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		// Read after subscribing: a result committed before is seen here,
		// one committed after arrives on sub.
		if c, err = s.call(ctx, tenant, id); err != nil || store.Terminal(c.Status) {
			return c, err
		}
		select {
		case _, ok := <-sub.C:
			if !ok { // dropped for falling behind: subscribe again
				sub = s.hub.Subscribe(c.SessionID, 0)
			}
		case <-tick.C:
		case <-timer.C:
			return c, nil
		case <-ctx.Done():
			if s.isDraining() {
				return nil, errShuttingDown()
			}
			return nil, ctx.Err()
		}
	}
}

// progressSignal is what execute tells the other replicas of a call's
// progress, so that their streams forward it live too.
func progressSignal(c *store.Call, data json.RawMessage) store.Signal {
	return store.Signal{Kind: store.SignalProgress, SessionID: c.SessionID, CallID: c.ID, Data: data}
}
