package approval

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brain-tools/suite/pkg/metrics"
)

// scrapeTimeout bounds the count a scrape of /metrics reads.
const scrapeTimeout = 2 * time.Second

// Observe registers the approvals_pending gauge on m: the approvals
// waiting for an operator, counted in the store at each scrape (-1 when
// the store does not answer in time, so a broken store is not read as an
// empty queue).
//
// It registers retention_removed_total (kind approval or decision) on m
// too, with m's service label.
func (s *Service) Observe(m *metrics.Set) {
	prometheus.WrapRegistererWith(prometheus.Labels{"service": m.Service}, m.Registry).MustRegister(s.removed)
	m.GaugeFunc(metrics.ApprovalsPending, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
		defer cancel()
		n, err := s.store.CountPending(ctx)
		if err != nil {
			return -1
		}
		return float64(n)
	})
}
