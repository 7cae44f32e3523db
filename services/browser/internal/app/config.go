// Package app is the browser tool service: its configuration, the tools
// browser_open, browser_act, browser_screenshot and browser_pages, the
// /render route the web fetcher renders through, and the server.
package app

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/netguard"
	"github.com/brain-tools/suite/pkg/service"
)

// DefaultAddr is where the service listens when ADDR is unset.
const DefaultAddr = "127.0.0.1:8086"

// Config is the browser service's environment (see README.md). The guard
// settings mean what the web fetcher's do: only public addresses on ports
// 80 and 443 unless the operator allows more.
type Config struct {
	service.Config
	// Allow is the operator allow-list (BROWSER_ALLOW): comma-separated
	// CIDRs, addresses and host names the browser may reach although they
	// are not public; as WEBFETCH_ALLOW. The only way to loopback or
	// private networks, for pages and for every request they make.
	Allow string `env:"BROWSER_ALLOW"`
	// Ports are the destination ports allowed for every request
	// (BROWSER_PORTS), allow-listed destinations included; as
	// WEBFETCH_PORTS.
	Ports string `env:"BROWSER_PORTS" envDefault:"80,443"`
	// Chromium is the browser binary (BROWSER_CHROMIUM); empty finds
	// chromium on PATH.
	Chromium string `env:"BROWSER_CHROMIUM"`
	// MaxSessions is how many browsing sessions (tenant + session) live at
	// once (BROWSER_MAX_SESSIONS); past it the least recently used idle
	// one is reclaimed.
	MaxSessions int `env:"BROWSER_MAX_SESSIONS" envDefault:"16"`
	// MaxPages is how many pages one session may have open
	// (BROWSER_MAX_PAGES).
	MaxPages int `env:"BROWSER_MAX_PAGES" envDefault:"4"`
	// IdleTimeout reclaims a session unused for that long, with its pages,
	// cookies and storage (BROWSER_IDLE_TIMEOUT).
	IdleTimeout time.Duration `env:"BROWSER_IDLE_TIMEOUT" envDefault:"10m"`
	// MaxPageBytes is the page weight: the most bytes a session's pages may
	// download during one call, every request counted; past it the
	// session's connections are cut (BROWSER_MAX_PAGE_BYTES).
	MaxPageBytes int64 `env:"BROWSER_MAX_PAGE_BYTES" envDefault:"33554432"`
	// MaxMemoryMB is the memory (PSS of every Chromium process, MiB) past
	// which idle sessions are reclaimed, least recently used first, and new
	// sessions refused (BROWSER_MAX_MEMORY_MB).
	MaxMemoryMB int64 `env:"BROWSER_MAX_MEMORY_MB" envDefault:"2048"`
	// JSHeapMB caps each renderer's JavaScript heap, in MiB: a runaway
	// script ends its own tab (BROWSER_JS_HEAP_MB).
	JSHeapMB int `env:"BROWSER_JS_HEAP_MB" envDefault:"512"`
	// LoadTimeout bounds the wait for a page's load event; a page still
	// loading then is read as it is (BROWSER_LOAD_TIMEOUT).
	LoadTimeout time.Duration `env:"BROWSER_LOAD_TIMEOUT" envDefault:"20s"`
	// SettleTimeout bounds the wait after load for the network to go
	// quiet, so content that scripts fetch is there (BROWSER_SETTLE_TIMEOUT).
	SettleTimeout time.Duration `env:"BROWSER_SETTLE_TIMEOUT" envDefault:"3s"`
	// ActionTimeout bounds the wait for an action's element or text
	// (BROWSER_ACTION_TIMEOUT).
	ActionTimeout time.Duration `env:"BROWSER_ACTION_TIMEOUT" envDefault:"10s"`
	// MaxHTMLBytes caps the rendered DOM read from a page, in bytes
	// (BROWSER_MAX_HTML_BYTES).
	MaxHTMLBytes int `env:"BROWSER_MAX_HTML_BYTES" envDefault:"10485760"`
	// Viewport is the pages' viewport, WIDTHxHEIGHT in CSS pixels
	// (BROWSER_VIEWPORT).
	Viewport string `env:"BROWSER_VIEWPORT" envDefault:"1280x800"`
}

// Limits of what the configuration may say.
const (
	maxViewport = 3840
	minViewport = 100
)

// ParseConfig reads the configuration from environ and checks it; ADDR
// defaults to DefaultAddr.
func ParseConfig(environ map[string]string) (Config, error) {
	cfg, err := service.ParseEnv[Config](environ)
	if err != nil {
		return cfg, err
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	return cfg, cfg.Validate()
}

// Validate reports every setting that cannot work, naming its variable.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, _, err := netguard.ParseAllowList(c.Allow); err != nil {
		errs = append(errs, fmt.Errorf("BROWSER_ALLOW: %w", err))
	}
	if _, err := netguard.ParsePorts(c.Ports); err != nil {
		errs = append(errs, fmt.Errorf("BROWSER_PORTS: %w", err))
	}
	if _, _, err := parseViewport(c.Viewport); err != nil {
		errs = append(errs, fmt.Errorf("BROWSER_VIEWPORT: %w", err))
	}
	ranges := []struct {
		name string
		ok   bool
		val  any
	}{
		{"BROWSER_MAX_SESSIONS", c.MaxSessions >= 1 && c.MaxSessions <= 1000, c.MaxSessions},
		{"BROWSER_MAX_PAGES", c.MaxPages >= 1 && c.MaxPages <= 100, c.MaxPages},
		{"BROWSER_IDLE_TIMEOUT", c.IdleTimeout >= time.Second, c.IdleTimeout},
		{"BROWSER_MAX_PAGE_BYTES", c.MaxPageBytes >= 0, c.MaxPageBytes},
		{"BROWSER_MAX_MEMORY_MB", c.MaxMemoryMB >= 0, c.MaxMemoryMB},
		{"BROWSER_JS_HEAP_MB", c.JSHeapMB >= 0, c.JSHeapMB},
		{"BROWSER_LOAD_TIMEOUT", c.LoadTimeout > 0 && c.LoadTimeout <= 5*time.Minute, c.LoadTimeout},
		{"BROWSER_SETTLE_TIMEOUT", c.SettleTimeout >= 0 && c.SettleTimeout <= time.Minute, c.SettleTimeout},
		{"BROWSER_ACTION_TIMEOUT", c.ActionTimeout > 0 && c.ActionTimeout <= 5*time.Minute, c.ActionTimeout},
		{"BROWSER_MAX_HTML_BYTES", c.MaxHTMLBytes >= 1024 && c.MaxHTMLBytes <= 64<<20, c.MaxHTMLBytes},
	}
	for _, r := range ranges {
		if !r.ok {
			errs = append(errs, fmt.Errorf("%s: out of range: %v", r.name, r.val))
		}
	}
	return errors.Join(errs...)
}

// parseViewport reads WIDTHxHEIGHT.
func parseViewport(s string) (int, int, error) {
	w, h, ok := strings.Cut(strings.ToLower(s), "x")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want WIDTHxHEIGHT, such as 1280x800", s)
	}
	wi, err1 := strconv.Atoi(w)
	hi, err2 := strconv.Atoi(h)
	if err1 != nil || err2 != nil || wi < minViewport || hi < minViewport || wi > maxViewport || hi > maxViewport {
		return 0, 0, fmt.Errorf("%q: width and height must be numbers from %d to %d", s, minViewport, maxViewport)
	}
	return wi, hi, nil
}

// guard builds the SSRF guard from BROWSER_ALLOW and BROWSER_PORTS.
func (c *Config) guard(d Deps) (*netguard.Guard, error) {
	prefixes, hosts, err := netguard.ParseAllowList(c.Allow)
	if err != nil {
		return nil, fmt.Errorf("BROWSER_ALLOW: %w", err)
	}
	ports, err := netguard.ParsePorts(c.Ports)
	if err != nil {
		return nil, fmt.Errorf("BROWSER_PORTS: %w", err)
	}
	return netguard.New(netguard.Options{AllowPrefixes: prefixes, AllowHosts: hosts, Ports: ports, Resolver: d.Resolver, BeforeDial: d.BeforeDial}), nil
}

// Deps are what tests inject: a resolver for host names and a hook that
// sees (and may veto) every dial the browser's proxy makes.
type Deps struct {
	Resolver   netguard.Resolver
	BeforeDial func(network string, addr netip.AddrPort) error
}
