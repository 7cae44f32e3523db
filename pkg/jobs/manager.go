package jobs

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brain-tools/suite/pkg/tool"
)

// Func is the work of one job. It runs in its own goroutine with a context
// that is cancelled when the job is cancelled or the Manager closes, and
// returns the job's result: is_error false ends the job succeeded, true
// failed. A nil result counts as a failure. A Func must return soon after
// its context ends; its result then becomes the cancelled job's result.
type Func func(ctx context.Context) *tool.Result

// Options configure a Manager. Zero values take the defaults.
type Options struct {
	// Retention is how long an ended job stays readable. Default 1 hour.
	Retention time.Duration
	// MaxRunningPerOwner caps the running jobs of one Owner (one session).
	// Default 64.
	MaxRunningPerOwner int
	// CancelWait is how long Cancel waits for the job's Func to return so
	// that its own result (partial output, say) is reported. Default 5 s.
	CancelWait time.Duration
}

// Manager runs jobs in memory. The zero value is not usable; use
// NewManager. Jobs do not survive the process; their IDs carry the
// Manager's run tag (see NewID), so that the Manager of a later process
// answers ErrOtherInstance for them, not ErrNotFound.
type Manager struct {
	opts   Options
	now    func() time.Time
	start  time.Time // when the Manager was made, in its run tag
	tag    string    // run tag of its job IDs
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	jobs   map[string]*job
	closed bool
}

type job struct {
	owner    Owner
	status   Status
	cancel   context.CancelFunc
	done     chan struct{} // closed when the Func has returned
	finished chan struct{} // closed when the job reached a final state
}

var _ Backend = (*Manager)(nil)

// NewManager returns a Manager with opts applied over the defaults.
func NewManager(opts Options) *Manager {
	if opts.Retention <= 0 {
		opts.Retention = time.Hour
	}
	if opts.MaxRunningPerOwner <= 0 {
		opts.MaxRunningPerOwner = 64
	}
	if opts.CancelWait <= 0 {
		opts.CancelWait = 5 * time.Second
	}
	ctx, stop := context.WithCancel(context.Background())
	start := instanceStart()
	return &Manager{opts: opts, now: time.Now, start: start, tag: encodeTag(start.UnixMilli()), ctx: ctx, stop: stop, jobs: map[string]*job{}}
}

// lastStart is the latest start (Unix ms) given to a Manager of this
// process, so that no two of them share a run tag.
var lastStart atomic.Int64

// instanceStart returns now to the millisecond, or the millisecond after
// the last Manager's start if that is not earlier.
func instanceStart() time.Time {
	for {
		prev := lastStart.Load()
		ms := max(time.Now().UnixMilli(), prev+1, 0)
		if ms >= 1<<tagBits {
			panic("jobs: clock past the year 3084, beyond a run tag")
		}
		if lastStart.CompareAndSwap(prev, ms) {
			return time.UnixMilli(ms)
		}
	}
}

// StartedAt is when m was made, to the millisecond: the start its job IDs
// carry in their run tag.
func (m *Manager) StartedAt() time.Time { return m.start }

// Retention is how long m keeps an ended job readable (Options.Retention).
func (m *Manager) Retention() time.Duration { return m.opts.Retention }

// Start runs fn as a new job of owner and returns its running status at
// once. It fails with ErrTooManyJobs when the owner is at its cap, for an
// owner without a tenant or a session (or handle), and after Close.
func (m *Manager) Start(owner Owner, fn Func) (Status, error) {
	if err := owner.check(); err != nil {
		return Status{}, fmt.Errorf("start job: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Status{}, fmt.Errorf("start job: manager is closed")
	}
	m.purgeLocked()
	running := 0
	for _, j := range m.jobs {
		if j.owner == owner && !j.status.State.Final() {
			running++
		}
	}
	if running >= m.opts.MaxRunningPerOwner {
		return Status{}, fmt.Errorf("start job: %w (limit %d)", ErrTooManyJobs, m.opts.MaxRunningPerOwner)
	}
	ctx, cancel := context.WithCancel(m.ctx)
	j := &job{
		owner:    owner,
		status:   Status{ID: NewID() + "_" + m.tag, State: Running, CreatedAt: m.now()},
		cancel:   cancel,
		done:     make(chan struct{}),
		finished: make(chan struct{}),
	}
	m.jobs[j.status.ID] = j
	m.wg.Add(1)
	go m.run(context.WithValue(ctx, reporterKey{}, reporter{m, j}), j, fn)
	return j.status, nil
}

func (m *Manager) run(ctx context.Context, j *job, fn Func) {
	defer m.wg.Done()
	defer j.cancel()
	res := safeCall(ctx, fn)
	m.mu.Lock()
	defer m.mu.Unlock()
	close(j.done)
	switch {
	case j.status.State == Cancelled:
		// Cancel already ended the job; the Func's own account of how far
		// it got (an is_error result) replaces the generic one.
		if res.IsError {
			j.status.Result = res
		}
	case ctx.Err() != nil:
		// The Manager closed under the job.
		m.finishLocked(j, Cancelled, cancelledResult(j.status.ID, res))
	case res.IsError:
		m.finishLocked(j, Failed, res)
	default:
		m.finishLocked(j, Succeeded, res)
	}
}

func safeCall(ctx context.Context, fn Func) (res *tool.Result) {
	defer func() {
		if p := recover(); p != nil {
			res = tool.Errorf("job panicked: %v", p)
		}
	}()
	res = fn(ctx)
	if res == nil {
		res = tool.Errorf("job ended without a result")
	}
	return res
}

func cancelledResult(id string, res *tool.Result) *tool.Result {
	if res != nil && res.IsError && len(res.Content) > 0 {
		return res
	}
	return &tool.Result{Content: []tool.Content{tool.Text(fmt.Sprintf("job %s was cancelled", id))}, IsError: true}
}

func (m *Manager) finishLocked(j *job, s State, res *tool.Result) {
	j.status.State = s
	j.status.FinishedAt = m.now()
	j.status.Result = res
	close(j.finished)
}

// firstTagged is when runs began to tag their job IDs: a tag naming an
// earlier time (or one more than an hour ahead of this run's clock) was
// issued by no run, and its ID is answered as unknown.
var firstTagged = time.Date(2026, time.November, 1, 0, 0, 0, 0, time.UTC)

// lookupLocked finds owner's job id: ErrNotFound for a malformed ID or one
// of m's that is unknown or another owner's, *InstanceError for a
// well-formed ID that m did not issue (whatever the owner).
func (m *Manager) lookupLocked(owner Owner, id string) (*job, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	if _, tag, _ := strings.Cut(id, "_"); tag != m.tag {
		issuer, tagged := IssuerStart(id)
		if tagged && (issuer.Before(firstTagged) || issuer.After(m.now().Add(time.Hour))) {
			// No run started then: a made-up tag, not an earlier run.
			return nil, ErrNotFound
		}
		return nil, &InstanceError{ID: id, IssuerStart: issuer, Start: m.start}
	}
	m.purgeLocked()
	j, ok := m.jobs[id]
	if !ok || j.owner != owner {
		return nil, ErrNotFound
	}
	return j, nil
}

// purgeLocked forgets ended jobs past their retention.
func (m *Manager) purgeLocked() {
	cutoff := m.now().Add(-m.opts.Retention)
	for id, j := range m.jobs {
		if j.status.State.Final() && j.status.FinishedAt.Before(cutoff) {
			delete(m.jobs, id)
		}
	}
}

// Status returns owner's job id, waiting up to wait for it to end first.
// ErrNotFound for unknown IDs and for jobs of other owners (another
// session of the same tenant included); an *InstanceError
// (ErrOtherInstance) for an ID that m did not issue.
func (m *Manager) Status(ctx context.Context, owner Owner, id string, wait time.Duration) (Status, error) {
	m.mu.Lock()
	j, err := m.lookupLocked(owner, id)
	m.mu.Unlock()
	if err != nil {
		return Status{}, err
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-j.finished:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return j.status, nil
}

// Cancel ends owner's running job id as cancelled and cancels the
// context of its Func, then waits up to the CancelWait option (or until ctx
// ends) for the Func to return so that its result is the one reported.
// Cancelling an ended job returns its status unchanged. Errors as Status.
func (m *Manager) Cancel(ctx context.Context, owner Owner, id string) (Status, error) {
	m.mu.Lock()
	j, err := m.lookupLocked(owner, id)
	if err != nil {
		m.mu.Unlock()
		return Status{}, err
	}
	if !j.status.State.Final() {
		m.finishLocked(j, Cancelled, cancelledResult(id, nil))
		j.cancel()
	}
	m.mu.Unlock()
	t := time.NewTimer(m.opts.CancelWait)
	select {
	case <-j.done:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	m.mu.Lock()
	defer m.mu.Unlock()
	return j.status, nil
}

// Close cancels every running job and waits for their Funcs to return or
// for ctx to end. Start fails afterwards; Status and Cancel keep working.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stop()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close jobs: %w", ctx.Err())
	}
}
