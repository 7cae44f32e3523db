package server

import (
	"context"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/store"
)

// Retention (Options.Retention) removes ended sessions with their calls and
// events once they are older than the retention, in batches small enough
// that the callers a batch shares the store with barely notice it.
const (
	// retentionBatch is the most rows one batch removes.
	retentionBatch = 500
	// retentionPause is the pause between two batches of one sweep: the
	// store's writers get it to themselves.
	retentionPause = 20 * time.Millisecond
)

// DefaultRetentionInterval is Options.RetentionInterval when unset.
const DefaultRetentionInterval = time.Minute

// retentionLoop sweeps every s.retentionEvery until ctx ends.
func (s *Server) retentionLoop(ctx context.Context) {
	t := time.NewTicker(s.retentionEvery)
	defer t.Stop()
	for {
		s.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep removes, batch after batch, what ended before now less the
// retention, counting it in retention_removed_total.
func (s *Server) sweep(ctx context.Context) {
	before := time.Now().Add(-s.retention)
	for ctx.Err() == nil {
		rm, err := s.store.DeleteEnded(ctx, before, retentionBatch)
		if err != nil {
			if ctx.Err() == nil {
				s.logStoreFailure("retention: remove ended sessions", err)
			}
			return
		}
		s.metrics.removed.WithLabelValues("session").Add(float64(rm.Sessions))
		s.metrics.removed.WithLabelValues("tool_call").Add(float64(rm.Calls))
		s.metrics.removed.WithLabelValues("event").Add(float64(rm.Events))
		if rm.Total() == 0 {
			return
		}
		if rm.Sessions > 0 {
			s.forgetSessions()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retentionPause):
		}
	}
}

// forgetSessions drops the cached sessions that ended, so that a removed
// session reads as not found rather than from the cache.
func (s *Server) forgetSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, sess := range s.sessions {
		if _, busy := s.ending[id]; !busy && sess.Status != store.SessionActive {
			delete(s.sessions, id)
		}
	}
}
