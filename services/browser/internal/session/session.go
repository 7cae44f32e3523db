// Package session keeps the browser's sessions: one isolated browser
// context per tenant + session (cookies, storage and cache never shared),
// each with its own egress proxy endpoint, at most MaxPages pages, one
// call at a time, reclaimed when idle for IdleTimeout, when the service
// needs room (MaxSessions) or when Chromium's memory passes MaxMemory
// (least recently used first). When Chromium dies it is started again on
// the next call; the sessions it held are gone and say so.
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/brain-tools/suite/services/browser/internal/chrome"
	"github.com/brain-tools/suite/services/browser/internal/egress"
)

// Key names a session: the tenant_id and session_id of the call body,
// never IDs from the arguments.
type Key struct{ Tenant, Session string }

// Options bound the sessions.
type Options struct {
	Chrome chrome.Options
	// MaxSessions is how many sessions live at once (renders included).
	MaxSessions int
	// MaxPages is how many pages one session may have open.
	MaxPages int
	// IdleTimeout reclaims a session unused for that long.
	IdleTimeout time.Duration
	// PageBytes is the most bytes a session's pages may receive during one
	// call (a load, an action); 0 is no limit.
	PageBytes int64
	// MaxMemory is the most memory (PSS, bytes) Chromium may hold before
	// idle sessions are reclaimed; 0 is no limit.
	MaxMemory int64
	Logger    *slog.Logger
}

// Errors a caller may test with errors.Is.
var (
	ErrBusy    = errors.New("the browser is at its session limit")
	ErrNoPage  = errors.New("no such page")
	ErrTooMany = errors.New("too many pages open")
	ErrRestart = errors.New("the browser restarted")
	ErrClosed  = errors.New("the browser service is shutting down")
	ErrMemory  = errors.New("the browser is over its memory limit")
)

// Manager owns Chromium and the sessions. It is safe for concurrent use.
type Manager struct {
	o     Options
	proxy *egress.Proxy
	log   *slog.Logger

	mu       sync.Mutex
	browser  *chrome.Browser
	deny     *egress.Endpoint
	gen      int // browser generation: sessions of an older one are dead
	sessions map[Key]*Session
	closed   bool
	stop     chan struct{}
	wg       sync.WaitGroup
	peak     int64
}

// New returns a Manager; Chromium starts on first use (Start starts it now).
func New(o Options, proxy *egress.Proxy) *Manager {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Chrome.Logger = o.Logger
	m := &Manager{o: o, proxy: proxy, log: o.Logger, sessions: map[Key]*Session{}, stop: make(chan struct{})}
	m.wg.Add(1)
	go m.janitor()
	return m
}

// Start starts Chromium if it is not running.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, err := m.browserLocked(ctx)
	return err
}

func (m *Manager) browserLocked(ctx context.Context) (*chrome.Browser, error) {
	if m.closed {
		return nil, ErrClosed
	}
	if m.browser != nil {
		select {
		case <-m.browser.Done():
			m.log.Warn("chromium stopped; starting it again", "sessions_lost", len(m.sessions))
			m.dropAllLocked()
			m.browser.Close()
			m.browser = nil
		default:
			return m.browser, nil
		}
	}
	if m.deny == nil {
		d, err := m.proxy.Listen(0, true)
		if err != nil {
			return nil, err
		}
		m.deny = d
	}
	o := m.o.Chrome
	o.DenyProxy = m.deny.URL()
	b, err := chrome.Start(ctx, o)
	if err != nil {
		return nil, err
	}
	m.browser = b
	m.gen++
	m.log.Info("chromium started", "pid", b.PID())
	return b, nil
}

// Browser returns the running browser, or nil.
func (m *Manager) Browser() *chrome.Browser {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.browser
}

// Close ends every session and stops Chromium.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	close(m.stop)
	m.dropAllLocked()
	b := m.browser
	m.browser = nil
	if m.deny != nil {
		m.deny.Close()
	}
	m.mu.Unlock()
	m.wg.Wait()
	if b != nil {
		b.Close()
	}
}

func (m *Manager) dropAllLocked() {
	for k, s := range m.sessions {
		delete(m.sessions, k)
		go s.close()
	}
}

// Session is one tenant + session's browser context and pages.
type Session struct {
	m      *Manager
	key    Key
	gen    int
	ctx    *chrome.Context
	Egress *egress.Endpoint
	// lock serializes the session's calls (a channel, so waiting can be
	// cancelled).
	lock chan struct{}

	mu       sync.Mutex
	pages    map[string]*Page
	order    []string
	next     int
	lastUsed time.Time
	busy     bool
	closed   bool
}

// Page is one open page of a session, with the last text read from it.
type Page struct {
	ID   string
	Page *chrome.Page
	// Snapshot is what the last read extracted, for start_index reads.
	Snapshot any
}

// Acquire returns the session for k, created if needed, locked for the
// caller until Release. It waits (within ctx) for the session's previous
// call to end.
func (m *Manager) Acquire(ctx context.Context, k Key) (*Session, error) {
	for {
		s, err := m.get(ctx, k)
		if err != nil {
			return nil, err
		}
		select {
		case s.lock <- struct{}{}:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			<-s.lock
			if s.gen != m.generation() {
				return nil, fmt.Errorf("%w: the session's pages were closed", ErrRestart)
			}
			continue // reclaimed while we waited: make a new one
		}
		s.busy = true
		s.lastUsed = time.Now()
		s.mu.Unlock()
		s.Egress.Reset()
		return s, nil
	}
}

func (m *Manager) generation() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen
}

// Existing returns k's session if there is one, without creating it.
func (m *Manager) Existing(k Key) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.sessions[k]
	return ok
}

func (m *Manager) get(ctx context.Context, k Key) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := m.browserLocked(ctx)
	if err != nil {
		return nil, err
	}
	if s, ok := m.sessions[k]; ok {
		return s, nil
	}
	if len(m.sessions) >= m.o.MaxSessions && !m.evictLocked() {
		return nil, fmt.Errorf("%w (%d sessions, all busy): try again shortly", ErrBusy, m.o.MaxSessions)
	}
	if m.o.MaxMemory > 0 {
		if mem := b.Memory(); mem > m.o.MaxMemory {
			for mem > m.o.MaxMemory && m.evictLocked() {
				mem = b.Memory()
			}
			if mem > m.o.MaxMemory {
				return nil, fmt.Errorf("%w (%d MiB in use, limit %d MiB): try again shortly", ErrMemory, mem>>20, m.o.MaxMemory>>20)
			}
		}
	}
	ep, err := m.proxy.Listen(m.o.PageBytes, false)
	if err != nil {
		return nil, err
	}
	bc, err := b.NewContext(ctx, ep.URL())
	if err != nil {
		ep.Close()
		return nil, err
	}
	s := &Session{m: m, key: k, gen: m.gen, ctx: bc, Egress: ep, lock: make(chan struct{}, 1), pages: map[string]*Page{}, lastUsed: time.Now()}
	m.sessions[k] = s
	return s, nil
}

// evictLocked closes the least recently used session that is not busy,
// and reports whether there was one.
func (m *Manager) evictLocked() bool {
	var victim *Session
	var victimUsed time.Time
	for _, s := range m.sessions {
		s.mu.Lock()
		busy, used := s.busy, s.lastUsed
		s.mu.Unlock()
		if busy {
			continue
		}
		if victim == nil || used.Before(victimUsed) {
			victim, victimUsed = s, used
		}
	}
	if victim == nil {
		return false
	}
	delete(m.sessions, victim.key)
	m.log.Info("browser session reclaimed for room", "tenant_id", victim.key.Tenant, "session_id", victim.key.Session)
	victim.close()
	return true
}

// Release ends the caller's turn on the session.
func (s *Session) Release() {
	s.mu.Lock()
	s.busy = false
	s.lastUsed = time.Now()
	s.mu.Unlock()
	<-s.lock
	s.m.checkMemory()
}

// End closes the session: all its pages, its context, its proxy endpoint.
// The caller holds the session (Acquire) and must still Release it.
func (s *Session) End() {
	s.m.mu.Lock()
	if s.m.sessions[s.key] == s {
		delete(s.m.sessions, s.key)
	}
	s.m.mu.Unlock()
	s.close()
}

func (s *Session) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	pages := s.pages
	s.pages = map[string]*Page{}
	s.order = nil
	s.mu.Unlock()
	for _, p := range pages {
		p.Page.Close()
	}
	s.ctx.Close()
	s.Egress.Close()
}

// NewPage opens a page in the session, refusing past MaxPages. When ctx
// ends first, no page is left behind.
func (s *Session) NewPage(ctx context.Context, width, height int) (*Page, error) {
	s.mu.Lock()
	n := len(s.pages)
	s.mu.Unlock()
	if n >= s.m.o.MaxPages {
		return nil, fmt.Errorf("%w: this session has %d pages open, the limit; close one with browser_pages", ErrTooMany, n)
	}
	cp, err := s.ctx.NewPage(ctx, width, height)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	p := &Page{ID: "p" + strconv.Itoa(s.next), Page: cp}
	s.pages[p.ID] = p
	s.order = append(s.order, p.ID)
	return p, nil
}

// Page returns the page with id.
func (s *Session) Page(id string) (*Page, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pages[id]
	if !ok {
		return nil, fmt.Errorf("%w %q in this session (open: %s)", ErrNoPage, id, s.listLocked())
	}
	select {
	case <-p.Page.Done():
		delete(s.pages, id)
		s.order = slices.DeleteFunc(s.order, func(x string) bool { return x == id })
		return nil, fmt.Errorf("%w %q: it was closed (its renderer ended)", ErrNoPage, id)
	default:
	}
	return p, nil
}

func (s *Session) listLocked() string {
	if len(s.order) == 0 {
		return "none"
	}
	return fmt.Sprint(s.order)
}

// Pages lists the session's open pages in the order they were opened.
func (s *Session) Pages() []*Page {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Page, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.pages[id])
	}
	return out
}

// ClosePage closes one page.
func (s *Session) ClosePage(id string) error {
	s.mu.Lock()
	p, ok := s.pages[id]
	if ok {
		delete(s.pages, id)
		s.order = slices.DeleteFunc(s.order, func(x string) bool { return x == id })
	}
	list := s.listLocked()
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w %q in this session (open: %s)", ErrNoPage, id, list)
	}
	p.Page.Close()
	return nil
}

// Count is the number of live sessions.
func (m *Manager) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// Peak is the most memory (PSS) Chromium was seen to hold, in bytes.
func (m *Manager) Peak() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

// checkMemory measures Chromium and reclaims idle sessions past MaxMemory.
func (m *Manager) checkMemory() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.browser == nil {
		return
	}
	mem := m.browser.Memory()
	if mem > m.peak {
		m.peak = mem
	}
	for m.o.MaxMemory > 0 && mem > m.o.MaxMemory && m.evictLocked() {
		mem = m.browser.Memory()
	}
}

// janitor reclaims idle sessions.
func (m *Manager) janitor() {
	defer m.wg.Done()
	every := max(m.o.IdleTimeout/4, 50*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.mu.Lock()
		for k, s := range m.sessions {
			s.mu.Lock()
			idle := !s.busy && time.Since(s.lastUsed) > m.o.IdleTimeout
			s.mu.Unlock()
			if idle {
				delete(m.sessions, k)
				m.log.Info("browser session reclaimed when idle", "tenant_id", k.Tenant, "session_id", k.Session)
				go s.close()
			}
		}
		m.mu.Unlock()
		m.checkMemory()
	}
}
