package approval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/brain-tools/suite/pkg/pgbound"
	"github.com/brain-tools/suite/pkg/service"
)

// Config is the approval part of the local service's environment.
type Config struct {
	// DataDir holds approvals.db (env APPROVAL_DATA_DIR, default ./data).
	// Unused with APPROVAL_DATABASE_URL.
	DataDir string `env:"APPROVAL_DATA_DIR" envDefault:"data"`
	// DatabaseURL, a postgres:// (or postgresql://) URL, keeps the
	// approvals in PostgreSQL instead of SQLite, shared by any number of
	// local replicas (env APPROVAL_DATABASE_URL).
	DatabaseURL string `env:"APPROVAL_DATABASE_URL"`
	// DatabaseTimeout bounds each PostgreSQL statement, each taking of a
	// pooled connection and each new connection when the URL sets no
	// connect_timeout: a database that stops answering fails a page or an
	// answer with 503, a tool call with "did not answer; retry shortly",
	// after it instead of holding them (env APPROVAL_DATABASE_TIMEOUT;
	// unused on SQLite; 0 is 10s, otherwise 100ms to 10m).
	DatabaseTimeout time.Duration `env:"APPROVAL_DATABASE_TIMEOUT" envDefault:"10s"`
	// Retention, when set, removes approvals that ended longer ago than
	// this, with their decision log, in batches (env APPROVAL_RETENTION;
	// 0, the default, keeps them; otherwise at least a minute). The audit
	// log keeps every decision.
	Retention time.Duration `env:"APPROVAL_RETENTION" envDefault:"0"`
	// RetentionInterval is how often retention sweeps (not from the
	// environment: DefaultRetentionInterval unless a test sets it).
	RetentionInterval time.Duration
	// PageURL is the base URL at which operators reach the approval page
	// (env APPROVAL_PAGE_URL), used for the url in progress events and
	// webhooks: an absolute http(s) URL with a host, no query or fragment.
	// Default: PUBLIC_URL, else http://ADDR.
	PageURL string `env:"APPROVAL_PAGE_URL"`
	// WebhookURL, when set, receives a POST for each new pending approval
	// (env APPROVAL_WEBHOOK_URL).
	WebhookURL string `env:"APPROVAL_WEBHOOK_URL"`
	// WebhookSecret, when set, signs each webhook body with HMAC-SHA256 in
	// the X-Approval-Signature header (env APPROVAL_WEBHOOK_SECRET).
	WebhookSecret string `env:"APPROVAL_WEBHOOK_SECRET"`
	// SweepInterval is how often pending approvals past their expiry are
	// expired when no stream waits on them (env APPROVAL_SWEEP_INTERVAL).
	SweepInterval time.Duration `env:"APPROVAL_SWEEP_INTERVAL" envDefault:"1s"`
	// MaxPendingPerTenant caps one tenant's pending approvals (env
	// APPROVAL_MAX_PENDING_PER_TENANT); a request past it is refused with
	// is_error. 0 means no cap.
	MaxPendingPerTenant int `env:"APPROVAL_MAX_PENDING_PER_TENANT" envDefault:"5000"`
	// ReattachGrace is how long a pending approval stays pending after the
	// last request_approval stream waiting on it dropped, for the caller to
	// send the same call again (brain does after a dropped connection or
	// its own restart); with no stream back in time it is cancelled (env
	// APPROVAL_REATTACH_GRACE, default 30s; 0 cancels at once).
	ReattachGrace time.Duration `env:"APPROVAL_REATTACH_GRACE" envDefault:"30s"`

	// pageURLFrom names where WithPageURLDefault took PageURL from when
	// APPROVAL_PAGE_URL is unset, so an error blames the variable the
	// operator set.
	pageURLFrom string
}

// Sources of a defaulted PageURL. One from ADDR is not checked: an ADDR
// such as ":8081" gives "http://:8081", accepted as before.
const (
	pageURLFromPublicURL = "PUBLIC_URL (the default of APPROVAL_PAGE_URL)"
	pageURLFromAddr      = "ADDR"
)

// Service is the approvals of one local service: the store, the waiters on
// each approval, the operator page's subscribers, expiry and the webhook.
type Service struct {
	store   *Store
	logger  *slog.Logger
	pageURL string
	webhook *webhook
	sweep   time.Duration
	maxPend int
	grace   time.Duration

	retention      time.Duration
	retentionEvery time.Duration
	removed        *prometheus.CounterVec

	// life ends when the local service shuts down: streams then answer at
	// once and leave their approvals pending for after the restart.
	life     context.Context
	stopLife context.CancelFunc
	wg       sync.WaitGroup

	// deep carries store calls to the storeWorkers goroutines (see
	// onStoreStack).
	deep chan func()

	mu      sync.Mutex
	changed map[string]*watch // per approval, replaced at each change
	streams map[string]int    // request_approval streams attached
	// withdraw holds, per approval whose last stream dropped, the timer
	// that cancels it at the end of the grace (ReattachGrace); attach
	// stops it, Close drops them all.
	withdraw map[string]*withdrawal
	subs     map[chan struct{}]func(tenant string) bool
}

// WithPageURLDefault is c with PageURL filled when APPROVAL_PAGE_URL is
// unset: publicURL (the service's PUBLIC_URL), else http://addr (its
// ADDR), so that an error blames the variable the operator set.
func (c Config) WithPageURLDefault(addr, publicURL string) Config {
	switch {
	case c.PageURL != "":
	case publicURL != "":
		c.PageURL, c.pageURLFrom = publicURL, pageURLFromPublicURL
	default:
		c.PageURL, c.pageURLFrom = "http://"+addr, pageURLFromAddr
	}
	return c
}

// New opens the store under the data directory and starts the expiry
// sweeper; Close stops it. ctx is the service's life: when it
// ends, streams stop waiting (their approvals stay pending in the store).
func New(ctx context.Context, cfg Config, logger *slog.Logger) (*Service, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.pageURLFrom != pageURLFromAddr {
		if err := service.CheckBaseURL(cfg.PageURL); err != nil {
			from := cfg.pageURLFrom
			if from == "" {
				from = "APPROVAL_PAGE_URL"
			}
			return nil, fmt.Errorf("approvals: %s %q: %w", from, cfg.PageURL, err)
		}
	}
	switch {
	case cfg.SweepInterval <= 0:
		return nil, fmt.Errorf("approvals: APPROVAL_SWEEP_INTERVAL must be positive, got %s", cfg.SweepInterval)
	case cfg.MaxPendingPerTenant < 0:
		return nil, fmt.Errorf("approvals: APPROVAL_MAX_PENDING_PER_TENANT must not be negative, got %d", cfg.MaxPendingPerTenant)
	case cfg.ReattachGrace < 0:
		return nil, fmt.Errorf("approvals: APPROVAL_REATTACH_GRACE must be 0 (cancel at once) or positive, got %s", cfg.ReattachGrace)
	case cfg.Retention != 0 && cfg.Retention < time.Minute:
		return nil, fmt.Errorf("approvals: APPROVAL_RETENTION must be 0 (keep every approval) or at least 1m, got %s", cfg.Retention)
	case cfg.DatabaseTimeout != 0 && (cfg.DatabaseTimeout < 100*time.Millisecond || cfg.DatabaseTimeout > 10*time.Minute):
		return nil, fmt.Errorf("approvals: APPROVAL_DATABASE_TIMEOUT must be 0 (10s) or 100ms..10m, got %s", cfg.DatabaseTimeout)
	}
	if cfg.DatabaseURL != "" {
		if err := pgbound.CheckURL("APPROVAL_DATABASE_URL", cfg.DatabaseURL); err != nil {
			return nil, fmt.Errorf("approvals: %w", err)
		}
	}
	wh, err := newWebhook(cfg.WebhookURL, cfg.WebhookSecret, logger)
	if err != nil {
		return nil, err
	}
	// When ctx ends (SIGTERM), waiting streams answer at once and leave
	// their approvals pending, so the shutdown is not held up by them.
	life, stop := context.WithCancel(context.Background())
	context.AfterFunc(ctx, stop)
	s := &Service{
		logger: logger, pageURL: strings.TrimRight(cfg.PageURL, "/"), webhook: wh, sweep: cfg.SweepInterval, maxPend: cfg.MaxPendingPerTenant, grace: cfg.ReattachGrace,
		retention: cfg.Retention, retentionEvery: cfg.RetentionInterval, removed: newRemovedCounter(),
		life: life, stopLife: stop,
		changed: map[string]*watch{}, streams: map[string]int{}, withdraw: map[string]*withdrawal{}, subs: map[chan struct{}]func(string) bool{},
		deep: make(chan func()),
	}
	if s.retentionEvery <= 0 {
		s.retentionEvery = DefaultRetentionInterval
	}
	if cfg.DatabaseURL != "" {
		// The service exists before its store, so that a change another
		// replica commits while the store opens finds it.
		s.store, err = OpenPostgres(ctx, PostgresOptions{URL: cfg.DatabaseURL, OnChange: s.remote, Logger: logger, StatementTimeout: cfg.DatabaseTimeout})
		if err != nil {
			stop()
			return nil, fmt.Errorf("APPROVAL_DATABASE_URL: %w", err)
		}
	} else if s.store, err = OpenSQLite(ctx, strings.TrimRight(cfg.DataDir, "/")+"/approvals.db"); err != nil {
		stop()
		return nil, fmt.Errorf("APPROVAL_DATA_DIR %q: %w", cfg.DataDir, err)
	}
	// Approvals that expired while the service was down are expired before
	// anything is served: no page offers them, no status reads pending.
	if _, err := s.store.ExpireDue(ctx); err != nil {
		stop()
		s.store.Close()
		return nil, fmt.Errorf("approvals: expire after restart: %w", err)
	}
	s.wg.Add(1 + storeWorkers)
	go s.sweeper()
	for range storeWorkers {
		go s.storeWorker()
	}
	if s.retention > 0 {
		s.wg.Add(1)
		go s.retentionLoop()
	}
	return s, nil
}

// storeWorkers is how many goroutines run the Service's store calls: as
// many as the larger store has connections (PostgreSQL 10; SQLite 4, one
// writer and three readers), so no call waits for a worker while a
// connection is free.
const storeWorkers = 10

// onStoreStack runs f, a store call, on one of the storeWorkers goroutines
// and waits for it; after shutdown began it runs f on the caller's
// goroutine. A store call runs the database driver (SQLite is C translated
// to Go, modernc.org/sqlite), whose frames take the goroutine's stack past
// 8 KiB; Go does not shrink a stack while its goroutine still uses a
// quarter of it, so a request_approval stream that made the call itself
// would wait for its operator on a 16 KiB stack, 8 MB across 1,000
// streams. Here the deep stacks are the workers'.
func (s *Service) onStoreStack(f func()) {
	done := make(chan struct{})
	var panicked any
	job := func() {
		defer close(done)
		defer func() { panicked = recover() }()
		f()
	}
	select {
	case s.deep <- job:
		<-done
		if panicked != nil {
			panic(panicked) // on the caller's goroutine, as if f had run there
		}
	case <-s.life.Done():
		f()
	}
}

func (s *Service) storeWorker() {
	defer s.wg.Done()
	for {
		select {
		case job := <-s.deep:
			job()
		case <-s.life.Done():
			return
		}
	}
}

// Close stops the sweeper, answers waiting streams (their approvals stay
// pending in the store), drops the withdrawals waiting for their grace to
// end (those approvals stay pending too), lets webhooks in flight finish
// and closes the store.
func (s *Service) Close() error {
	s.stopLife()
	s.mu.Lock()
	for id, wd := range s.withdraw {
		wd.t.Stop()
		delete(s.withdraw, id)
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.webhook.wait()
	return s.store.Close()
}

// Store returns the service's store, for the operator page.
func (s *Service) Store() *Store { return s.store }

// PageURL returns the operator page's base URL (APPROVAL_PAGE_URL).
func (s *Service) PageURL() string { return s.pageURL }

// URL returns the operator page's link to approval id.
func (s *Service) URL(id string) string { return s.pageURL + "/approval/" + id }

// Health reports whether the store answers and how many approvals wait.
func (s *Service) Health(ctx context.Context) (map[string]any, error) {
	n, err := s.store.CountPending(ctx)
	if err != nil {
		return nil, fmt.Errorf("approvals store: %w", err)
	}
	return map[string]any{"pending_approvals": n}, nil
}

// watch is one change of an approval to come: ch is closed when it
// happens, and final is set first when the change is a decision, so that a
// thousand waiters woken by decisions do not each read the store again.
// n counts the waiters holding it, so that the last one to give up removes
// it (a wait on an unknown ID must not leave an entry behind).
type watch struct {
	ch    chan struct{}
	final *Approval
	n     int
}

// watch returns the next change of approval id. Take it before reading the
// approval so no change is missed between the two, and give it back with
// unwatch.
func (s *Service) watch(id string) *watch {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.changed[id]
	if !ok {
		w = &watch{ch: make(chan struct{})}
		s.changed[id] = w
	}
	w.n++
	return w
}

func (s *Service) unwatch(id string, w *watch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.n--
	if w.n <= 0 && s.changed[id] == w {
		delete(s.changed, id)
	}
}

// notify wakes the waiters of the given approvals and the page's
// subscribers that see their tenants. decided carries approvals that
// reached a final status, created ones just recorded.
func (s *Service) notify(decided []Approval, created ...Approval) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range decided {
		if w, ok := s.changed[decided[i].ID]; ok {
			w.final = &decided[i]
			close(w.ch)
			delete(s.changed, decided[i].ID)
		}
	}
	for _, a := range created {
		if w, ok := s.changed[a.ID]; ok {
			close(w.ch)
			delete(s.changed, a.ID)
		}
	}
	for sub, sees := range s.subs {
		if !seesAny(sees, decided) && !seesAny(sees, created) {
			continue // a change this subscriber may not know of
		}
		select {
		case sub <- struct{}{}:
		default: // a change is already signalled
		}
	}
}

// remote wakes, for a change another replica committed, the waiters of
// its approval (they read it again: the table is the truth) and the page's
// subscribers that see its tenant; for ChangeResync every waiter and
// subscriber. It runs on the store's listener and does not block.
func (s *Service) remote(c Change) {
	if c.Kind != ChangeResync && c.TenantID == "" {
		// The tenant did not fit the notification: read it, off the
		// listener.
		go func() {
			ctx, cancel := context.WithTimeout(s.life, 10*time.Second)
			defer cancel()
			if a, err := s.store.Get(ctx, c.ID); err == nil {
				c.TenantID = a.TenantID
				s.remote(c)
			}
		}()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, w := range s.changed {
		if c.Kind == ChangeResync || id == c.ID {
			close(w.ch)
			delete(s.changed, id)
		}
	}
	for sub, sees := range s.subs {
		if c.Kind != ChangeResync && !sees(c.TenantID) {
			continue
		}
		select {
		case sub <- struct{}{}:
		default:
		}
	}
}

func seesAny(sees func(string) bool, as []Approval) bool {
	for _, a := range as {
		if sees(a.TenantID) {
			return true
		}
	}
	return false
}

// Subscribe returns a channel that receives a value after approvals of a
// tenant that sees accepts change (coalesced: one value may stand for many
// changes), and a function that ends the subscription. The operator
// page's live list uses it; another tenant's changes never reach an
// operator who may not see them, not even as a signal.
func (s *Service) Subscribe(sees func(tenant string) bool) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs[ch] = sees
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.subs, ch)
		s.mu.Unlock()
	}
}

// ExpireIfDue expires a pending approval that is past expires_at (the
// sweeper may not have run yet, after a restart say) and returns it as it
// then stands, so a page never offers an answer the store would refuse.
func (s *Service) ExpireIfDue(ctx context.Context, a Approval) (Approval, error) {
	if a.Status.Final() || time.Now().Before(a.ExpiresAt) {
		return a, nil
	}
	got, err := s.Decide(ctx, a.ID, Expired, SystemOperator, "no answer before the approval expired")
	if errors.Is(err, ErrDecided) {
		err = nil
	}
	return got, err
}

// Life returns a context that ends when the service shuts down, for
// long-lived page streams.
func (s *Service) Life() context.Context { return s.life }

// Request records the approval of one tool call, or finds the one already
// recorded for the same tenant, session and call (created false). A call
// sent again with a different action or details is refused: one call, one
// approval, for exactly what was shown.
func (s *Service) Request(ctx context.Context, n NewApproval) (Approval, bool, error) {
	var a Approval
	var created bool
	var err error
	s.onStoreStack(func() { a, created, err = s.store.Create(ctx, n, s.maxPend) })
	if err != nil {
		return Approval{}, false, err
	}
	if !created && a.DetailsHash != HashDetails(n.Action, n.Details) {
		return a, false, fmt.Errorf("call %s of session %s: %w %s for a different action or details", n.CallID, n.SessionID, ErrOtherRequest, a.ID)
	}
	if created {
		s.logger.Info("approval requested", "approval_id", a.ID, "tenant_id", a.TenantID, "session_id", a.SessionID,
			"call_id", a.CallID, "origin", a.Origin, "expires_at", a.ExpiresAt)
		s.notify(nil, a)
		s.webhook.send(a, s.URL(a.ID))
	}
	return a, created, nil
}

// Decide records an operator's or the system's decision on approval id and
// wakes its waiters. See Store.Decide for the first-answer-wins rule.
func (s *Service) Decide(ctx context.Context, id string, decision Status, operator, comment string) (Approval, error) {
	var a Approval
	var changed bool
	var err error
	s.onStoreStack(func() { a, changed, err = s.store.Decide(ctx, id, decision, operator, comment) })
	if changed {
		s.logger.Info("approval decided", "approval_id", a.ID, "tenant_id", a.TenantID, "decision", a.Status, "operator", a.Operator)
		s.notify([]Approval{a})
	}
	return a, err
}

// reasonWithdrawn is the comment of an approval its caller withdrew with
// approval_cancel.
const reasonWithdrawn = "withdrawn by the caller with approval_cancel"

// Withdraw is the caller's withdrawal of approval id (approval_cancel): a
// pending approval is cancelled. One an operator already approved or
// denied stays so (first answer wins, *DecidedError) and is marked as
// withdrawn after its decision (Store.MarkWithdrawn): the caller had
// stopped waiting, so the decision was not used. The first such
// withdrawal is logged and shown on the page; a withdrawal sent again
// changes nothing. An expired or cancelled approval is left as it is.
func (s *Service) Withdraw(ctx context.Context, id string) (Approval, error) {
	a, err := s.Decide(ctx, id, Cancelled, CallerOperator, reasonWithdrawn)
	var de *DecidedError
	if !errors.As(err, &de) || (a.Status != Approved && a.Status != Denied) {
		return a, err
	}
	var marked bool
	var merr error
	got := a
	s.onStoreStack(func() { got, marked, merr = s.store.MarkWithdrawn(ctx, id) })
	if merr != nil {
		return a, merr
	}
	if marked {
		s.logger.Warn("approval withdrawn by its caller after an operator decided it: the decision was not used",
			"approval_id", got.ID, "tenant_id", got.TenantID, "operator", got.Operator, "status", got.Status,
			"decided_at", got.DecidedAt, "withdrawn_at", got.WithdrawnAt)
		s.notify([]Approval{got})
	}
	return got, &DecidedError{Current: got}
}

// Wait blocks until approval id of tenant is decided, ctx ends, or the
// service shuts down, and returns the approval as it then stands. A pending
// approval past its expiry is expired on the way.
func (s *Service) Wait(ctx context.Context, tenant, id string) (Approval, error) {
	a, err := s.wait(ctx, tenant, id)
	return *a, err
}

// wait is Wait with the approval on the heap (never nil; the zero
// Approval with an error Wait answers so). A request_approval stream
// spends its life in wait and sleep, so their frames are kept small: the
// store calls run on the store's workers (onStoreStack) and the select in
// a frame of its own.
func (s *Service) wait(ctx context.Context, tenant, id string) (*Approval, error) {
	st := &waitState{s: s, ctx: ctx, tenant: tenant, id: id, a: new(Approval)}
	st.w = s.watch(id)
	defer st.unwatch()
	st.get()
	for {
		if done, a, err := st.check(); done {
			return a, err
		}
		switch s.sleep(ctx, st.w, st.a.ExpiresAt) {
		case woken:
			st.woken()
		case expiring:
		case cancelled:
			return st.a, ctx.Err()
		case stopping:
			return st.a, errShuttingDown
		}
	}
}

// waitState is one wait's state, on the heap, and its steps, in frames of
// their own: what wait keeps on its stack while it sleeps is a pointer.
type waitState struct {
	s          *Service
	ctx        context.Context
	tenant, id string
	w          *watch
	a          *Approval
	err        error
}

func (st *waitState) unwatch() { st.s.unwatch(st.id, st.w) }

//go:noinline
func (st *waitState) get() {
	st.s.onStoreStack(func() { *st.a, st.err = st.s.store.GetForTenant(st.ctx, st.tenant, st.id) })
}

// check reports whether the wait is over, and how: an error, a final
// status; a pending approval past its expiry is expired on the way (and
// checked again).
//
//go:noinline
func (st *waitState) check() (bool, *Approval, error) {
	for {
		if st.err != nil {
			return true, new(Approval), st.err
		}
		if st.a.Status.Final() {
			return true, st.a, nil
		}
		if time.Now().Before(st.a.ExpiresAt) {
			return false, nil, nil
		}
		*st.a, st.err = st.s.Decide(st.ctx, st.id, Expired, SystemOperator, "no answer before the approval expired")
		if errors.Is(st.err, ErrDecided) {
			st.err = nil // a holds the approval as it stands
		}
	}
}

// woken takes a change of the approval: the decision the watch carries,
// or the approval read again under a new watch.
//
//go:noinline
func (st *waitState) woken() {
	if st.w.final != nil {
		*st.a = *st.w.final
		return
	}
	st.s.unwatch(st.id, st.w)
	st.w = st.s.watch(st.id)
	st.get()
}

// wake is why sleep returned.
type wake int

const (
	woken     wake = iota // w changed
	expiring              // until passed
	cancelled             // ctx ended
	stopping              // the service is shutting down
)

// sleep waits for a change of w, until, the end of ctx or the shutdown.
func (s *Service) sleep(ctx context.Context, w *watch, until time.Time) wake {
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	select {
	case <-w.ch:
		return woken
	case <-timer.C:
		return expiring
	case <-ctx.Done():
		return cancelled
	case <-s.life.Done():
		return stopping
	}
}

var errShuttingDown = errors.New("the local service is shutting down")

// attach counts a request_approval stream waiting on id, and stops the
// withdrawal of id if its last stream had dropped within the grace; detach
// uncounts it and reports whether it was the last one.
func (s *Service) attach(id string) {
	s.mu.Lock()
	s.streams[id]++
	if wd, ok := s.withdraw[id]; ok {
		wd.t.Stop()
		delete(s.withdraw, id)
	}
	s.mu.Unlock()
}

// withdrawal is the cancel of an approval whose last stream dropped, due
// at at unless a stream attaches first.
type withdrawal struct {
	t  *time.Timer
	at time.Time
}

// Withdrawal reports when this replica will cancel pending approval id
// because its caller disconnected, unless the caller comes back first;
// false when no such withdrawal is due here.
func (s *Service) Withdrawal(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wd, ok := s.withdraw[id]; ok {
		return wd.at, true
	}
	return time.Time{}, false
}

func (s *Service) detach(id string) (last bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams[id]--
	if s.streams[id] <= 0 {
		delete(s.streams, id)
		return true
	}
	return false
}

// reasonDropped is the comment of an approval cancelled because its last
// stream dropped and none came back within the grace.
const reasonDropped = "the caller stopped waiting (stream closed)"

// withdrawDropped cancels approval id, whose last stream dropped: at once
// with no grace, else when the grace ends with no stream attached in this
// replica meanwhile and the service not shutting down. It does not wait.
func (s *Service) withdrawDropped(id string, logger *slog.Logger) {
	if s.grace <= 0 {
		s.cancelDropped(id, logger)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[id] > 0 || s.life.Err() != nil {
		return // attached again already, or shutting down: stays pending
	}
	if wd, ok := s.withdraw[id]; ok {
		wd.t.Stop()
	}
	wd := &withdrawal{at: time.Now().Add(s.grace)}
	wd.t = time.AfterFunc(s.grace, func() {
		s.mu.Lock()
		if s.withdraw[id] != wd || s.streams[id] > 0 {
			s.mu.Unlock()
			return // stopped (a stream came back, or Close) after it fired
		}
		delete(s.withdraw, id)
		// Close takes mu before it waits for wg, and dropped this timer
		// from withdraw if it got there first: the Add precedes its Wait.
		s.wg.Add(1)
		s.mu.Unlock()
		defer s.wg.Done()
		s.cancelDropped(id, logger)
	})
	s.withdraw[id] = wd
	logger.Info("approval caller disconnected: withdrawn unless it comes back", "approval_id", id, "grace", s.grace)
}

// cancelDropped cancels approval id for the dropped stream, unless the
// service is shutting down (the approval stays pending for after the
// restart) or it was decided meanwhile.
func (s *Service) cancelDropped(id string, logger *slog.Logger) {
	if s.life.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.life, 10*time.Second)
	defer cancel()
	if _, err := s.Decide(ctx, id, Cancelled, SystemOperator, reasonDropped); err != nil && !errors.Is(err, ErrDecided) && s.life.Err() == nil {
		logger.Error("cancel approval after a dropped stream", "approval_id", id, "err", err)
	}
}

// sweeper expires pending approvals past their expiry, so those nobody
// waits on (approval_start) leave the page's list on time and their status
// reads expired.
func (s *Service) sweeper() {
	defer s.wg.Done()
	t := time.NewTicker(s.sweep)
	defer t.Stop()
	for {
		select {
		case <-s.life.Done():
			return
		case <-t.C:
		}
		expired, err := s.store.ExpireDue(s.life)
		if err != nil && s.life.Err() == nil {
			s.logger.Warn("expire approvals", "err", err)
		}
		for _, a := range expired {
			s.logger.Info("approval expired", "approval_id", a.ID, "tenant_id", a.TenantID)
		}
		if len(expired) > 0 {
			s.notify(expired)
		}
	}
}
