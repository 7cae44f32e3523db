package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/services/brain/internal/invoke"
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
//     on the replica that took them; the withdrawals it had pending on
//     approval calls that ended (store.Call.WithdrawUntil) are sent by the
//     replica that took them;
//   - a replica that was only paused (SIGSTOP, a VM stall, cut off from
//     the database) past its lease finds its calls taken over when it goes
//     on: the store refuses each of its writes for them (store.ErrNotOwner:
//     they are fenced by the owner column), and its next renewal names
//     them; either way it stops them here at once (takeOver), recording
//     and sending nothing more for them;
//   - an answer (respond) through a replica that does not run the call is
//     stored and signalled; the call's replica offers it to the call and
//     settles it (see respondRemote);
//   - a binding's max_concurrency slots are rows' state in the store,
//     handed out in one transaction to the calls stored first, whichever
//     replica runs them (sharedQueue): the cap holds across replicas.

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
		go func() {
			ctx, cancel := context.WithTimeout(s.callsCtx, storeWait)
			defer cancel()
			s.takePendingAnswers(ctx)
			s.admitShared()
		}()
	case store.SignalSessionTools:
		s.dropToolSets(sig.SessionID)
	case store.SignalAnswer:
		if _, ok := s.lookupRunning(sig.CallID); ok {
			go s.takeAnswers(sig.CallID)
		}
	case store.SignalAnswerSettled:
		var id string
		if json.Unmarshal(sig.Data, &id) == nil {
			s.answerSettled(id)
		}
	case store.SignalSlots:
		s.onSlots(sig.SessionID, sig.CallID, sig.Data)
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

// sessionEnding reports whether session id is being interrupted or
// closed, on this replica or another.
func (s *Server) sessionEnding(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.ending[id]
	return ok || s.remotelyEnding(id)
}

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

// takenOver reports whether err, a store's refusal of a write for rc, says
// that another replica owns rc's call now, and then stops rc here
// (takeOver).
func (s *Server) takenOver(rc *running, err error) bool {
	if !errors.Is(err, store.ErrNotOwner) {
		return false
	}
	s.takeOver(rc, "the store refused a write for it")
	return true
}

// takeOver stops call rc here, once: another replica owns it now (it
// claimed the call once this replica's lease on it ran out, and took it
// up or ended it). Its goroutine and its request to the tool are
// cancelled, and nothing more is recorded or sent for it (execute). It
// asks for a renewal at once, which finds the other calls taken over with
// it.
func (s *Server) takeOver(rc *running, how string) {
	if rc.takenOver.Swap(true) {
		return
	}
	c := rc.snapshot()
	s.log.Warn("stopped a call here without recording or sending anything more for it: another brain replica took it over once this replica's lease on it ran out (this replica was paused or cut off from the database for longer than the lease)",
		"call_id", c.ID, "tool", c.Tool, "session_id", c.SessionID, "status", c.Status, "found", how)
	rc.cancel(invoke.ErrTakenOver)
	select {
	case s.renewNow <- struct{}{}:
	default:
	}
}

// leaseLoop renews this replica's leases (renewLoop, on a goroutine of its
// own) and takes up the calls of replicas whose lease ran out (running ones
// end brain_restarted, waiting ones wait again here), every third of a
// lease, until ctx ends. A take-up may take long — many calls, a session
// tool set slow to compile — and the renewals go on meanwhile: they cover
// the calls being taken up too (this replica owns them once claimed), so
// no other replica ends a call this one runs, or takes one up twice.
func (s *Server) leaseLoop(ctx context.Context) {
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		s.renewLoop(ctx)
	}()
	defer func() { <-renewing }()
	t := time.NewTicker(s.lease / 3)
	defer t.Stop()
	// The claims of calls not taken up that a release has yet to give up.
	var unreleased []string
	for {
		if s.leaseHook != nil {
			s.leaseHook(ctx, false)
		}
		unreleased = s.releaseClaims(ctx, append(unreleased, s.takeUpExpired(ctx)...))
		// Signals lost on the way are made up here.
		s.takePendingAnswers(ctx)
		s.admitShared()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renewLoop extends this replica's leases by a lease every third of one
// (and at once when asked on s.renewNow), until ctx ends, and stops here
// the calls it runs that another replica owns now (takeOver). A renewal
// that takes longer than a lease is given up (the next one tries again): a
// lease it did not extend in time is lost anyway.
func (s *Server) renewLoop(ctx context.Context) {
	t := time.NewTicker(s.lease / 3)
	defer t.Stop()
	for {
		if s.leaseHook != nil {
			s.leaseHook(ctx, true)
		}
		now := time.Now()
		rctx, cancel := context.WithTimeout(ctx, s.lease)
		lost, err := s.shared.RenewLeases(rctx, now.Add(s.lease), s.inflightIDs())
		switch {
		case err != nil && ctx.Err() == nil:
			s.logStoreFailure("renew call leases", err)
			s.healthySince.Store(0)
		case err == nil && s.healthySince.Load() == 0:
			s.healthySince.Store(now.UnixNano())
		}
		cancel()
		for _, id := range lost {
			// A call that finished here a moment ago is no longer owned
			// either; one whose result is being recorded finds out there.
			if rc, ok := s.lookupRunning(id); ok && !rc.finishing.Load() {
				s.takeOver(rc, "the renewal of its lease")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.renewNow:
		}
	}
}

// inflightIDs lists the calls in flight here (some perhaps not stored
// yet, which the store leaves out).
func (s *Server) inflightIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.inflight))
}

// takeUpExpired claims the calls whose lease ran out, a hundred at a time
// (once this replica has renewed its own leases for a lease without a
// failure), takes them up, and returns the IDs of those it could not take
// up, whose
// claims are to be given up once it is through (not before: the next batch
// would claim them again), so that a later round, of this replica or
// another, takes them up again.
func (s *Server) takeUpExpired(ctx context.Context) (skipped []string) {
	// A lease that ran out while this replica could not reach the store
	// either may be a live replica's that could not renew: after an
	// outage every replica gets a lease to renew before any claims
	// (else the first back ends the others' calls brain_restarted).
	if since := s.healthySince.Load(); since == 0 || time.Since(time.Unix(0, since)) < s.lease {
		return nil
	}
	for ctx.Err() == nil {
		now := time.Now()
		calls, err := s.shared.ClaimExpired(ctx, now, now.Add(s.lease), 100)
		if err != nil {
			if ctx.Err() == nil {
				s.logStoreFailure("claim calls of stopped replicas", err)
			}
			return skipped
		}
		if s.takeUpHook != nil && len(calls) > 0 {
			s.takeUpHook(ctx, calls)
		}
		ids, err := s.takeUp(ctx, calls)
		if err != nil && ctx.Err() == nil {
			s.logStoreFailure("take up the calls of a stopped replica; those not taken up are released for the next round", err, "calls", len(ids))
		}
		skipped = append(skipped, ids...)
		if len(calls) < 100 {
			return skipped
		}
	}
	return skipped
}

// releaseClaims gives up this replica's claim on calls ids, which it could
// not take up, and returns them when that fails, for the next round to try
// again (a claim it keeps is renewed, and nobody would run the call).
func (s *Server) releaseClaims(ctx context.Context, ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	// At shutdown too: the next replica need not wait for the lease.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.lease)
	defer cancel()
	if err := s.shared.ReleaseClaims(rctx, ids); err != nil {
		s.logStoreFailure("release the claims of calls not taken up; tried again at the next round", err, "calls", len(ids))
		return ids
	}
	return nil
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
		case <-s.waitsEnd:
			return nil, errShuttingDown()
		case <-ctx.Done():
			if s.isDraining() {
				return nil, errShuttingDown()
			}
			return nil, ctx.Err()
		}
	}
}

// publishProgress forwards a tool.progress of call callID (live only,
// never stored) to this replica's event streams and tells the other
// replicas, so that theirs forward it too.
func (s *Server) publishProgress(ctx context.Context, sessionID, callID string, data json.RawMessage) {
	s.hub.Publish(store.Event{Type: store.EventToolProgress, SessionID: sessionID, CallID: callID,
		Time: time.Now().UTC(), Data: data})
	s.notify(ctx, store.Signal{Kind: store.SignalProgress, SessionID: sessionID, CallID: callID, Data: data})
}

// Answers through any replica. POST /tool_calls/{id}/respond on a replica
// that does not run the call checks the body as the call's own replica
// would, stores it (store.Shared.PutAnswer, which signals), and waits for
// the verdict: the replica running the call takes the answer, offers it to
// the call — the first answer wins there, whichever way it came — and
// settles it accepted or refused. A call whose replica died is taken over
// after its lease with its pending answers. answerPoll bounds how long a
// lost signal delays either side.
const answerPoll = 250 * time.Millisecond

// respondRemote answers respond for stored call c, run by another replica
// (or by none until its lease runs out), for tenant with API key key.
func (s *Server) respondRemote(w http.ResponseWriter, r *http.Request, tenant, key string, c *store.Call) error {
	if c.Status != store.CallRequiresInput {
		return notWaiting(c.ID, c.Status)
	}
	if err := httpapi.CheckJSON(r); err != nil {
		return err
	}
	data, err := httpapi.ReadBody(r, s.maxBody)
	if err != nil {
		return err
	}
	t, _, err := s.toolForCall(r.Context(), c)
	if err != nil {
		return fmt.Errorf("respond: the call's tool: %w", err)
	}
	if _, err := parseAnswer(t, c.InputKind, key, data); err != nil {
		return err
	}
	ctx := r.Context()
	a := &store.Answer{ID: newID("ans"), CallID: c.ID, Body: data, APIKey: key, CreatedAt: time.Now().UTC()}
	settled := s.awaitSettled(a.ID)
	defer s.forgetSettled(a.ID)
	if err := s.shared.PutAnswer(ctx, a); err != nil {
		var se *store.StateError
		switch {
		case errors.Is(err, store.ErrNotFound):
			return httpapi.NotFound("tool call %q not found", c.ID)
		case errors.As(err, &se):
			return notWaiting(c.ID, se.Status)
		}
		return fmt.Errorf("store the answer of tool call %s: %w", c.ID, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.shared.DeleteAnswer(dctx, a.ID); err != nil {
			s.log.Warn("remove a settled answer", "call_id", c.ID, "err", err)
		}
	}()
	// Past this, nobody took the answer: the call's replica is gone and
	// its lease has not run out in twice its length.
	giveUp := time.NewTimer(s.endWait())
	defer giveUp.Stop()
	tick := time.NewTicker(answerPoll)
	defer tick.Stop()
	for {
		got, err := s.shared.GetAnswer(ctx, a.ID)
		if err != nil {
			return fmt.Errorf("read the answer of tool call %s: %w", c.ID, err)
		}
		switch got.Status {
		case store.AnswerAccepted:
			cur, err := s.call(ctx, tenant, c.ID)
			if err != nil {
				return err
			}
			writeCall(w, cur, s.queuePosition(cur))
			return nil
		case store.AnswerRefused:
			return httpapi.Conflict("tool call %q %s", c.ID, got.Reason)
		case store.AnswerPending:
			// The call went on without taking it (another answer, its
			// expiry, a cancel): withdraw it and say so.
			if cur, err := s.call(ctx, tenant, c.ID); err == nil && cur.Status != store.CallRequiresInput {
				if ok, err := s.shared.WithdrawAnswer(ctx, a.ID); err == nil && ok {
					return notWaiting(c.ID, cur.Status)
				}
			}
		}
		select {
		case <-settled:
		case <-tick.C:
		case <-giveUp.C:
			if ok, err := s.shared.WithdrawAnswer(ctx, a.ID); err == nil && ok {
				return httpapi.Unavailable("tool call %q: no brain replica took the answer within %s; answer again", c.ID, s.endWait())
			}
		case <-s.waitsEnd:
			// This replica is stopping: the answer is withdrawn, unless a
			// replica settled it meanwhile (the next read says how).
			if ok, err := s.shared.WithdrawAnswer(ctx, a.ID); err != nil || ok {
				return errShuttingDown()
			}
		case <-ctx.Done():
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if _, err := s.shared.WithdrawAnswer(wctx, a.ID); err != nil {
				// The call's replica may still take it; the client is gone.
				s.log.Warn("withdraw an answer whose client left", "call_id", c.ID, "err", err)
			}
			cancel()
			if s.isDraining() {
				return errShuttingDown()
			}
			return ctx.Err()
		}
	}
}

// notWaiting is respond's 409 for call id in status, as the call's own
// replica words it: a finished call takes no answer.
func notWaiting(id, status string) error {
	if store.Terminal(status) {
		return httpapi.Conflict("tool call %q is already %s; it takes no answer", id, status)
	}
	return httpapi.Conflict("tool call %q is %s, not waiting for input (requires_input)", id, status)
}

// awaitSettled returns a channel closed when answer id is settled
// (SignalAnswerSettled); forgetSettled drops it.
func (s *Server) awaitSettled(id string) <-chan struct{} {
	ch := make(chan struct{})
	s.mu.Lock()
	s.settled[id] = ch
	s.mu.Unlock()
	return ch
}

func (s *Server) forgetSettled(id string) {
	s.mu.Lock()
	delete(s.settled, id)
	s.mu.Unlock()
}

func (s *Server) answerSettled(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.settled[id]; ok {
		close(ch)
		delete(s.settled, id)
	}
}

// takeAnswers offers the answers stored for call callID to it, when this
// replica runs it, oldest first, and settles each: accepted when it was
// the first answer and is recorded, refused (with why) otherwise.
func (s *Server) takeAnswers(callID string) {
	rc, ok := s.lookupRunning(callID)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(s.callsCtx, storeWait)
	defer cancel()
	answers, err := s.shared.TakeAnswers(ctx, callID)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("take stored answers", "call_id", callID, "err", err)
		}
		return
	}
	for _, sa := range answers {
		status, reason := s.offerStored(rc, sa)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeWait)
		if err := s.shared.SettleAnswer(sctx, sa.ID, callID, status, reason); err != nil {
			s.log.Warn("settle a stored answer", "call_id", callID, "err", err)
		}
		cancel()
	}
}

// offerStored offers stored answer sa to rc as respond would, and returns
// the verdict: store.AnswerAccepted once the answer is recorded, or
// store.AnswerRefused with why, after `tool call "ID" `.
func (s *Server) offerStored(rc *running, sa *store.Answer) (status, reason string) {
	cur := rc.snapshot()
	if cur.Status != store.CallRequiresInput {
		if store.Terminal(cur.Status) {
			return store.AnswerRefused, fmt.Sprintf("is already %s; it takes no answer", cur.Status)
		}
		return store.AnswerRefused, fmt.Sprintf("is %s, not waiting for input (requires_input)", cur.Status)
	}
	a, err := parseAnswer(rc.t, cur.InputKind, sa.APIKey, sa.Body)
	if err != nil {
		return store.AnswerRefused, "was not answered: " + err.Error()
	}
	if won, standing := rc.offer(a); !won {
		return store.AnswerRefused, standing.why()
	}
	<-a.done
	if a.err != nil {
		return store.AnswerRefused, "was not answered: brain could not record the answer: " + a.err.Error()
	}
	return store.AnswerAccepted, ""
}

// takePendingAnswers offers every stored answer to the calls this replica
// runs: after a lost signal, and at each pass of the lease loop.
func (s *Server) takePendingAnswers(ctx context.Context) {
	ids, err := s.shared.PendingAnswers(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.logStoreFailure("list stored answers", err)
		}
		return
	}
	for _, id := range ids {
		if _, ok := s.lookupRunning(id); ok {
			go s.takeAnswers(id)
		}
	}
}

// admitShared asks the store, for each shared queue with calls waiting
// here, whether they hold slots now: after a lost signal, and at each pass
// of the lease loop.
func (s *Server) admitShared() {
	s.mu.Lock()
	var qs []*sharedQueue
	for _, q := range s.queues {
		if sq, ok := q.(*sharedQueue); ok && sq.hasWaiting() {
			qs = append(qs, sq)
		}
	}
	s.mu.Unlock()
	for _, q := range qs {
		q.admit("")
	}
}

// onSlots handles SignalSlots: the calls of queue tenant/tool named in
// data hold slots now (data empty: ask the store).
func (s *Server) onSlots(tenant, tool string, data json.RawMessage) {
	s.mu.Lock()
	q, _ := s.queues[tenant+"\x00"+tool].(*sharedQueue)
	s.mu.Unlock()
	if q == nil || !q.hasWaiting() {
		return
	}
	var ids []string
	if len(data) == 0 || json.Unmarshal(data, &ids) != nil {
		go q.admit("")
		return
	}
	q.grant(ids)
}
