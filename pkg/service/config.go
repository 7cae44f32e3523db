package service

import (
	"encoding"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/brain-tools/suite/pkg/bearer"
	"github.com/brain-tools/suite/pkg/tool"
)

// Config is the part of a tool service's environment every service shares.
// A service composes it into its own Config struct and parses the whole
// once with ParseEnv. LOG_LEVEL is Main's (Process).
type Config struct {
	// Addr is the listen address, host:port (env ADDR). Each service has
	// its own default port (local 8081 ... webfetch 8085), which its main
	// gives Main (DefaultAddr).
	Addr string `env:"ADDR"`
	// Token is the bearer token brain sends (env BRAIN_TOOLS_KEY). Required
	// unless NoAuth is set.
	Token string `env:"BRAIN_TOOLS_KEY"`
	// NoAuth turns the bearer check off (env INSECURE_NO_AUTH=true). Only for
	// a service that is reachable by nobody but brain.
	NoAuth bool `env:"INSECURE_NO_AUTH"`
	// PublicURL is the base URL under which brain reaches this service
	// (env PUBLIC_URL), used in the bindings GET /tools publishes: an
	// absolute http(s) URL with a host, no query or fragment (a path is
	// kept). Empty means http://<Host header>.
	PublicURL string `env:"PUBLIC_URL"`
	// Tenants fills the tenants of published bindings that name none
	// (env TOOL_TENANTS, comma-separated). An empty entry, one with
	// surrounding spaces or one listed twice is refused at start.
	Tenants []string `env:"TOOL_TENANTS" envSeparator:"," envDefault:"local"`
	// MaxRequestBytes caps a tool request body (env MAX_REQUEST_BYTES);
	// larger bodies get 413. Default 4 MiB.
	MaxRequestBytes int64 `env:"MAX_REQUEST_BYTES" envDefault:"4194304"`
	// ShutdownTimeout is how long in-flight calls may take to finish after
	// SIGTERM before their contexts are cancelled (env SHUTDOWN_TIMEOUT);
	// must be positive.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"10s"`
	// Heartbeat is the interval of SSE comment heartbeats (env
	// SSE_HEARTBEAT); must be positive.
	Heartbeat time.Duration `env:"SSE_HEARTBEAT" envDefault:"15s"`
	// StreamAfter is how long a call may run without progress before its
	// response switches to SSE on its own, so the host's 30 s header limit
	// is met (env SSE_STREAM_AFTER).
	StreamAfter time.Duration `env:"SSE_STREAM_AFTER" envDefault:"10s"`
	// DisableMCP turns the /mcp endpoint off (env DISABLE_MCP=true); it is
	// on by default, behind the same bearer token as the tools.
	DisableMCP bool `env:"DISABLE_MCP"`
}

// Validate reports settings that cannot work, each naming its variable: a
// missing token without NoAuth, an empty ADDR, a non-positive
// MAX_REQUEST_BYTES, SHUTDOWN_TIMEOUT or SSE_HEARTBEAT, SSE_STREAM_AFTER
// outside (0, 30s), a PUBLIC_URL that CheckBaseURL refuses, a TOOL_TENANTS
// entry that is empty, has surrounding spaces or is listed twice.
func (c *Config) Validate() error {
	var errs []error
	if c.Token == "" && !c.NoAuth {
		errs = append(errs, errors.New("BRAIN_TOOLS_KEY is not set: set it to the token brain sends, or set INSECURE_NO_AUTH=true to run without auth"))
	}
	if err := bearer.CheckToken(c.Token); err != nil {
		errs = append(errs, fmt.Errorf("BRAIN_TOOLS_KEY %w", err))
	}
	if err := CheckListenAddr(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("ADDR %q: %w", c.Addr, err))
	}
	if c.MaxRequestBytes <= 0 {
		errs = append(errs, fmt.Errorf("MAX_REQUEST_BYTES must be positive, got %d", c.MaxRequestBytes))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT must be positive, got %s", c.ShutdownTimeout))
	}
	if c.Heartbeat <= 0 {
		errs = append(errs, fmt.Errorf("SSE_HEARTBEAT must be positive, got %s", c.Heartbeat))
	}
	if c.StreamAfter <= 0 || c.StreamAfter >= MaxStreamAfter {
		errs = append(errs, fmt.Errorf("SSE_STREAM_AFTER must be more than 0 and less than %s (the host's header limit), got %s", MaxStreamAfter, c.StreamAfter))
	}
	if c.PublicURL != "" {
		if err := CheckBaseURL(c.PublicURL); err != nil {
			errs = append(errs, fmt.Errorf("PUBLIC_URL %q: %w", c.PublicURL, err))
		}
	}
	if err := checkTenants(c.Tenants); err != nil {
		errs = append(errs, fmt.Errorf("TOOL_TENANTS %q: %w", strings.Join(c.Tenants, ","), err))
	}
	return errors.Join(errs...)
}

// MaxStreamAfter bounds SSE_STREAM_AFTER from above: the host waits at most
// tool.HeaderTimeout (30 s) for response headers.
const MaxStreamAfter = tool.HeaderTimeout

// CheckBaseURL checks a base URL a service is reached at (PUBLIC_URL,
// brain's BRAIN_PUBLIC_URL, local's APPROVAL_PAGE_URL): an absolute http or
// https URL with a host and a valid port, no credentials, query or
// fragment; a path is allowed. The error says what is wrong, for the
// caller to prefix with the variable's name.
func CheckBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must be an absolute http:// or https:// URL")
	case u.Opaque != "" || u.Hostname() == "":
		return errors.New("has no host")
	case strings.HasSuffix(u.Host, ":"):
		return errors.New("has an empty port")
	case u.Port() != "" && !validPort(u.Port()):
		return fmt.Errorf("port %q is not a number from 1 to 65535", u.Port())
	case u.User != nil:
		return errors.New("must not contain credentials")
	case u.RawQuery != "" || u.ForceQuery:
		return errors.New("must not contain a query")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("must not contain a fragment")
	}
	return nil
}

// CheckListenAddr checks a listen address (ADDR, brain's BRAIN_ADDR) before
// anything is opened, so that a typo fails at start with the variable named
// instead of after a data file was created: host:port, the host possibly
// empty (all interfaces), the port a decimal number from 0 (any free port)
// to 65535. The error says what is wrong, for the caller to prefix with the
// variable's name.
func CheckListenAddr(addr string) error {
	if addr == "" {
		return errors.New("is empty")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port: %w", err)
	}
	if strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("host %q contains a space or a control character", host)
	}
	if port != "0" && !validPort(port) {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == p
}

// checkTenants checks the tenant names a service publishes in its bindings
// (TOOL_TENANTS; unset, it is "local"; a Config built in code may leave
// it empty when every tool names its own tenants): each non-empty (tool.Binding.Validate
// refuses an empty one), without surrounding spaces ("a, b" would publish
// " b", which no tenant_id matches) and listed once (brain refuses a
// binding that lists a tenant twice).
func checkTenants(tenants []string) error {
	seen := make(map[string]bool, len(tenants))
	for i, t := range tenants {
		switch {
		case t == "":
			return fmt.Errorf("entry %d is empty", i+1)
		case strings.TrimSpace(t) != t:
			return fmt.Errorf("entry %d %q has surrounding spaces", i+1, t)
		case seen[t]:
			return fmt.Errorf("%q is listed twice", t)
		}
		seen[t] = true
	}
	return nil
}

// ParseEnv fills a service's Config struct T from environ (a map, so tests
// never touch the process environment) with github.com/caarlos0/env/v11.
// Errors name the variable.
func ParseEnv[T any](environ map[string]string) (T, error) {
	var cfg T
	err := env.ParseWithOptions(&cfg, env.Options{Environment: environ})
	if err == nil {
		return cfg, nil
	}
	// env reports Go field names; operators know the variables.
	var agg env.AggregateError
	if errors.As(err, &agg) {
		msgs := make([]error, 0, len(agg.Errors))
		for _, e := range agg.Errors {
			var pe env.ParseError
			if errors.As(e, &pe) {
				name := envName(reflect.TypeOf(cfg), pe.Name)
				switch {
				case name == "":
				case reflect.PointerTo(pe.Type).Implements(textUnmarshaler):
					// A type of the service's own says what it wants.
					msgs = append(msgs, fmt.Errorf("%s: %w", name, pe.Err))
					continue
				default:
					msgs = append(msgs, fmt.Errorf("%s: cannot parse as %s: %w", name, pe.Type, pe.Err))
					continue
				}
			}
			msgs = append(msgs, e)
		}
		err = errors.Join(msgs...)
	}
	return cfg, fmt.Errorf("config: %w", err)
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// envName finds the env tag of the field called field in t, looking into
// embedded and nested structs.
func envName(t reflect.Type, field string) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return ""
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Name == field {
			name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
			return name
		}
		if f.Type.Kind() == reflect.Struct {
			if name := envName(f.Type, field); name != "" {
				return name
			}
		}
	}
	return ""
}

// Environ returns the process environment as a map.
func Environ() map[string]string {
	m := make(map[string]string)
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}
