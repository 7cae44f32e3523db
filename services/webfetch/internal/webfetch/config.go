package webfetch

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/brain-tools/suite/pkg/netguard"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/services/webfetch/internal/fetch"
)

// DefaultAddr is where the service listens when ADDR is unset.
const DefaultAddr = "127.0.0.1:8085"

// Config is the web fetch service's environment (see README.md). The
// allow-list is empty by default: only public addresses on ports 80 and
// 443 are fetched.
type Config struct {
	service.Config
	// Allow is the operator allow-list (WEBFETCH_ALLOW): comma-separated
	// CIDRs, addresses and host names fetched although not public. The
	// only way to reach loopback or private networks.
	Allow string `env:"WEBFETCH_ALLOW"`
	// Ports are the destination ports allowed (WEBFETCH_PORTS), for every
	// destination, allow-listed or not.
	Ports string `env:"WEBFETCH_PORTS" envDefault:"80,443"`
	// UserAgent is sent with every request; its first product token is the
	// name robots.txt groups are matched against (WEBFETCH_USER_AGENT).
	UserAgent string `env:"WEBFETCH_USER_AGENT" envDefault:"brain-webfetch/1.0 (+https://github.com/brain-tools/suite)"`
	// Robots makes the service honour robots.txt (WEBFETCH_ROBOTS).
	Robots bool `env:"WEBFETCH_ROBOTS" envDefault:"true"`
	// MaxBodyBytes caps a body after content decoding (WEBFETCH_MAX_BODY_BYTES).
	MaxBodyBytes int64 `env:"WEBFETCH_MAX_BODY_BYTES" envDefault:"10485760"`
	// Timeout limits a whole fetch: robots.txt, redirects, body (WEBFETCH_TIMEOUT).
	Timeout time.Duration `env:"WEBFETCH_TIMEOUT" envDefault:"30s"`
	// HopTimeout limits one request of a fetch (WEBFETCH_HOP_TIMEOUT).
	HopTimeout time.Duration `env:"WEBFETCH_HOP_TIMEOUT" envDefault:"15s"`
	// RobotsTimeout limits the robots.txt request; no answer in time means
	// disallow (WEBFETCH_ROBOTS_TIMEOUT).
	RobotsTimeout time.Duration `env:"WEBFETCH_ROBOTS_TIMEOUT" envDefault:"5s"`
	// MaxRedirects is how many redirects are followed (WEBFETCH_MAX_REDIRECTS).
	MaxRedirects int `env:"WEBFETCH_MAX_REDIRECTS" envDefault:"5"`
	// CacheTTL is how long a fetched page is reused; 0 turns the cache off
	// (WEBFETCH_CACHE_TTL).
	CacheTTL time.Duration `env:"WEBFETCH_CACHE_TTL" envDefault:"5m"`
	// CacheEntries caps the cache (WEBFETCH_CACHE_ENTRIES).
	CacheEntries int `env:"WEBFETCH_CACHE_ENTRIES" envDefault:"64"`
	// BrowserURL is the browser service web_fetch renders pages through
	// (WEBFETCH_BROWSER_URL, e.g. http://127.0.0.1:8086): render=always,
	// and render=auto for a page whose static text is near empty while it
	// has scripts. Empty: pages are never rendered.
	BrowserURL string `env:"WEBFETCH_BROWSER_URL"`
	// BrowserToken is the bearer token sent to the browser service
	// (WEBFETCH_BROWSER_TOKEN); empty sends BRAIN_TOOLS_KEY.
	BrowserToken string `env:"WEBFETCH_BROWSER_TOKEN"`
	// BrowserTimeout limits one render (WEBFETCH_BROWSER_TIMEOUT).
	BrowserTimeout time.Duration `env:"WEBFETCH_BROWSER_TIMEOUT" envDefault:"45s"`
	// CacheMaxBytes caps the text of the pages kept for start_index calls,
	// whatever their bodies' size, in bytes (WEBFETCH_CACHE_MAX_BYTES).
	CacheMaxBytes int64 `env:"WEBFETCH_CACHE_MAX_BYTES" envDefault:"67108864"`
}

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
		errs = append(errs, fmt.Errorf("WEBFETCH_ALLOW: %w", err))
	}
	if _, err := netguard.ParsePorts(c.Ports); err != nil {
		errs = append(errs, fmt.Errorf("WEBFETCH_PORTS: %w", err))
	}
	if c.BrowserURL != "" {
		if err := service.CheckBaseURL(c.BrowserURL); err != nil {
			errs = append(errs, fmt.Errorf("WEBFETCH_BROWSER_URL %q: %w", c.BrowserURL, err))
		}
	}
	if c.UserAgent == "" {
		errs = append(errs, errors.New("WEBFETCH_USER_AGENT is empty"))
	}
	positive := []struct {
		name string
		ok   bool
		val  any
	}{
		{"WEBFETCH_MAX_BODY_BYTES", c.MaxBodyBytes > 0, c.MaxBodyBytes},
		{"WEBFETCH_TIMEOUT", c.Timeout > 0, c.Timeout},
		{"WEBFETCH_HOP_TIMEOUT", c.HopTimeout > 0, c.HopTimeout},
		{"WEBFETCH_ROBOTS_TIMEOUT", c.RobotsTimeout > 0, c.RobotsTimeout},
		{"WEBFETCH_MAX_REDIRECTS", c.MaxRedirects >= 0 && c.MaxRedirects <= 20, c.MaxRedirects},
		{"WEBFETCH_CACHE_TTL", c.CacheTTL >= 0, c.CacheTTL},
		{"WEBFETCH_CACHE_ENTRIES", c.CacheEntries > 0, c.CacheEntries},
		{"WEBFETCH_CACHE_MAX_BYTES", c.CacheMaxBytes > 0, c.CacheMaxBytes},
		{"WEBFETCH_BROWSER_TIMEOUT", c.BrowserTimeout > 0, c.BrowserTimeout},
	}
	for _, p := range positive {
		if !p.ok {
			errs = append(errs, fmt.Errorf("%s: out of range: %v", p.name, p.val))
		}
	}
	return errors.Join(errs...)
}

// Deps are what tests inject: a resolver for host names and a hook that
// sees (and may veto) every dial.
type Deps struct {
	Resolver   netguard.Resolver
	BeforeDial func(network string, addr netip.AddrPort) error
}

// fetchOptions maps the configuration onto the fetch client's options.
func (c *Config) fetchOptions(g *netguard.Guard) fetch.Options {
	o := fetch.Options{
		Guard:         g,
		UserAgent:     c.UserAgent,
		MaxBodyBytes:  c.MaxBodyBytes,
		Timeout:       c.Timeout,
		HopTimeout:    c.HopTimeout,
		MaxRedirects:  c.MaxRedirects,
		Robots:        c.Robots,
		RobotsTimeout: c.RobotsTimeout,
		CacheTTL:      c.CacheTTL,
		CacheEntries:  c.CacheEntries,
	}
	if c.MaxRedirects == 0 {
		o.MaxRedirects = -1
	}
	if c.CacheTTL == 0 {
		o.CacheTTL = -1
	}
	return o
}
