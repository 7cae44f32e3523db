package approval

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brain-tools/suite/pkg/metrics"
)

// Removed counts what one DeleteEnded removed.
type Removed struct {
	Approvals, Decisions int64
}

// DeleteEnded removes up to limit approvals that ended (any final status)
// before `before`, oldest first, with their decision log rows, in one short
// transaction, so that retention never holds writers up for long; it
// returns what it removed (zero: nothing is left to remove). The audit log
// keeps every decision for good. Replicas removing at once take different
// approvals (PostgreSQL: SKIP LOCKED).
func (s *Store) DeleteEnded(ctx context.Context, before time.Time, limit int) (Removed, error) {
	if limit <= 0 {
		return Removed{}, fmt.Errorf("delete ended approvals: limit must be positive, got %d", limit)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Removed{}, fmt.Errorf("delete ended approvals: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, s.d.bind(`SELECT id FROM approvals WHERE status != 'pending' AND decided_at < ?
		ORDER BY decided_at LIMIT ?`+s.d.skipLocked), before.UnixMilli(), limit)
	if err != nil {
		return Removed{}, fmt.Errorf("delete ended approvals: %w", err)
	}
	var ids []any
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return Removed{}, fmt.Errorf("delete ended approvals: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Removed{}, fmt.Errorf("delete ended approvals: %w", err)
	}
	if len(ids) == 0 {
		return Removed{}, nil
	}
	in := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
	// The approvals first: the decision log refuses to lose a row of an
	// approval that exists, and its reference is checked at commit.
	var rm Removed
	res, err := tx.ExecContext(ctx, s.d.bind(`DELETE FROM approvals WHERE id IN `+in), ids...)
	if err == nil {
		rm.Approvals, err = res.RowsAffected()
	}
	if err != nil {
		return Removed{}, fmt.Errorf("delete ended approvals: %w", err)
	}
	res, err = tx.ExecContext(ctx, s.d.bind(`DELETE FROM decisions WHERE approval_id IN `+in), ids...)
	if err == nil {
		rm.Decisions, err = res.RowsAffected()
	}
	if err != nil {
		return Removed{}, fmt.Errorf("delete ended approvals: decision log: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Removed{}, fmt.Errorf("delete ended approvals: commit: %w", err)
	}
	return rm, nil
}

// DefaultRetentionInterval is how often retention sweeps, and
// retentionBatch how many approvals one transaction removes at most.
const (
	DefaultRetentionInterval = time.Minute
	retentionBatch           = 500
)

// newRemovedCounter is the catalogue's retention_removed_total (kind:
// approval, decision), made with the service before Observe registers it,
// since the sweeper may count before.
func newRemovedCounter() *prometheus.CounterVec {
	d := metrics.RetentionRemoved
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Name, Help: d.Help}, d.Labels)
	for _, kind := range []string{"approval", "decision"} {
		c.WithLabelValues(kind) // served as 0 before the first sweep removes anything
	}
	return c
}

// retentionLoop removes approvals that ended longer ago than the
// retention, a batch per transaction until none is left, every
// retentionEvery until the service stops.
func (s *Service) retentionLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.retentionEvery)
	defer t.Stop()
	for {
		s.sweepRetention()
		select {
		case <-s.life.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Service) sweepRetention() {
	for s.life.Err() == nil {
		rm, err := s.store.DeleteEnded(s.life, time.Now().Add(-s.retention), retentionBatch)
		if err != nil {
			if s.life.Err() == nil {
				s.logger.Warn("approval retention", "err", err)
			}
			return
		}
		s.removed.WithLabelValues("approval").Add(float64(rm.Approvals))
		s.removed.WithLabelValues("decision").Add(float64(rm.Decisions))
		if rm.Approvals < retentionBatch {
			return
		}
	}
}
