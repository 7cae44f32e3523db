package jobs

import (
	"sync"

	"github.com/brain-tools/suite/pkg/metrics"
)

// Count returns how many of m's jobs are running and how many have ended
// and are kept for status (until Options.Retention).
func (m *Manager) Count() (running, finished int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purgeLocked()
	for _, j := range m.jobs {
		if j.status.State.Final() {
			finished++
		} else {
			running++
		}
	}
	return running, finished
}

// Observe counts m's jobs in the jobs gauge of s (metrics.Jobs, by state),
// added to those of the other Managers observed on the same Set. Tools
// does it for the trio of a Manager; a service that runs a Manager of its
// own calls it once.
func (m *Manager) Observe(s *metrics.Set) {
	observedMu.Lock()
	defer observedMu.Unlock()
	if observed == nil {
		observed = map[*metrics.Set][]*Manager{}
	}
	ms, ok := observed[s]
	for _, o := range ms {
		if o == m {
			return
		}
	}
	observed[s] = append(ms, m)
	if ok {
		return
	}
	s.Gauges(metrics.Jobs, func(emit func(float64, ...string)) {
		observedMu.Lock()
		ms := append([]*Manager(nil), observed[s]...)
		observedMu.Unlock()
		var running, finished int
		for _, m := range ms {
			r, f := m.Count()
			running, finished = running+r, finished+f
		}
		emit(float64(running), "running")
		emit(float64(finished), "finished")
	})
}

var (
	observedMu sync.Mutex
	observed   map[*metrics.Set][]*Manager
)
