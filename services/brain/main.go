// Command brain is the agent tool host: it loads a host config of tool
// bindings, serves the catalog, sessions, ToolCall resources and session
// events over HTTP, and calls tool services as the tool contract says.
//
//	brain -config brain.json [-check]
//	brain -healthcheck       GET /healthz of the brain running at BRAIN_ADDR; exit 0 if 200 (container health check)
//	brain mcp discover URL [--token-env NAME]   print bindings for an MCP server's tools
//	brain -version           print the version (as build_info on /metrics reports it), exit 0
//	brain migrate            apply the store's schema versions it has not had yet, and exit
//	brain backup FILE        consistent copy of the SQLite store, running or not (VACUUM INTO)
//	brain -h                 usage on stdout, exit 0
//
// An unknown flag or a stray argument prints the error and the usage on
// stderr and exits 2 (as pkg/service.Main); any other error exits 1.
//
// Environment: BRAIN_ADDR (listen address, default 127.0.0.1:8080),
// BRAIN_DATA_DIR (SQLite state, default ./data), BRAIN_PUBLIC_URL (brain_url
// sent to tools with inspect_session; default http://<listen address>),
// BRAIN_SQLITE_SYNC (NORMAL or FULL, default NORMAL), LOG_LEVEL (default
// info), BRAIN_SECRETS_KEY, BRAIN_TENANT_URL_ALLOW, BRAIN_CONFIG_POLL,
// plus the env vars the host config names (API keys, token_env).
//
// SIGHUP (and a change of the -config file) reloads the host config: it is
// checked first, and a bad one is refused and logged, the running one
// staying.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/brain-tools/suite/pkg/bearer"
	"github.com/brain-tools/suite/pkg/netguard"
	"github.com/brain-tools/suite/pkg/pgbound"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tracing"
	"github.com/brain-tools/suite/pkg/version"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/brain-tools/suite/services/brain/internal/mcpcall"
	"github.com/brain-tools/suite/services/brain/internal/seal"
	"github.com/brain-tools/suite/services/brain/internal/server"
	"github.com/brain-tools/suite/services/brain/internal/store/sqlite"
)

// envConfig is brain's process configuration.
type envConfig struct {
	// Addr is the listen address, host:port.
	Addr string `env:"BRAIN_ADDR" envDefault:"127.0.0.1:8080"`
	// DataDir is the directory of the SQLite database brain.db and its
	// lock file; one brain process per directory (a second one refuses
	// to start). Unused when DatabaseURL is set.
	DataDir string `env:"BRAIN_DATA_DIR" envDefault:"./data"`
	// DatabaseURL, a postgres:// (or postgresql://) URL, keeps brain's
	// state in PostgreSQL instead: any number of brain replicas may share
	// it. Empty: SQLite in DataDir.
	DatabaseURL string `env:"BRAIN_DATABASE_URL"`
	// DatabaseTimeout bounds each PostgreSQL statement, each taking of a
	// pooled connection and each connecting (a migration's statements
	// excepted): a database that stops answering fails the requests that
	// need it with 503 after this instead of holding them; a URL's own
	// connect_timeout bounds its connecting instead. 0 means 10s;
	// otherwise 100ms to 10m.
	DatabaseTimeout time.Duration `env:"BRAIN_DATABASE_TIMEOUT" envDefault:"10s"`
	// Lease is how long a replica's claim on its calls holds without
	// renewal (PostgreSQL): the calls of a replica that dies end
	// brain_restarted within about this long. 3s to 10m.
	Lease time.Duration `env:"BRAIN_LEASE" envDefault:"15s"`
	// Retention removes ended (interrupted or closed) sessions with their
	// calls and events once they ended longer ago than this; 0 (the
	// default) keeps everything. At least 1m when set.
	Retention time.Duration `env:"BRAIN_RETENTION" envDefault:"0"`
	// PublicURL is the brain_url sent to tools with inspect_session: an
	// absolute http(s) URL with a host, no query or fragment; empty means
	// http://<listen address>.
	PublicURL string `env:"BRAIN_PUBLIC_URL"`
	// SQLiteSync is SQLite's synchronous setting, NORMAL or FULL (any
	// case): NORMAL keeps every
	// committed write across a crash of the process, FULL also across
	// power loss (one fsync per commit).
	SQLiteSync string `env:"BRAIN_SQLITE_SYNC" envDefault:"NORMAL"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `env:"LOG_LEVEL" envDefault:"info"`
	// MaxRequestBytes caps every request body brain reads, in bytes, 1 to
	// 67108864 (64 MiB); a larger body is refused with 413. A tool call's
	// arguments travel in this body: raise it for tools that take large
	// arguments (storage_put accepts up to 2 MiB of data, about 2.8 MB as
	// base64 JSON).
	MaxRequestBytes int64 `env:"BRAIN_MAX_REQUEST_BYTES" envDefault:"1048576"`
	// SecretsKey seals tenant secrets and a session's MCP credentials in
	// the store: at least 32 bytes; required with BRAIN_DATABASE_URL, the
	// same on every replica. Empty on SQLite: a key file (secrets.key, 32
	// random bytes) in BRAIN_DATA_DIR, made on first start. Either way a
	// copy of the database alone does not reveal the secrets.
	SecretsKey string `env:"BRAIN_SECRETS_KEY"`
	// TenantURLAllow is the operator's allow-list for the urls tenants
	// give (custom tools, a session's MCP servers): comma-separated CIDRs,
	// addresses or host names that may be reached although they are not
	// public (loopback, private, link-local, metadata…). Empty: only
	// public addresses. The host config's own bindings are not checked.
	TenantURLAllow string `env:"BRAIN_TENANT_URL_ALLOW"`
	// ConfigPoll is how often brain looks at the host config file for a
	// change (and reloads it); 0 turns polling off. SIGHUP reloads at once.
	ConfigPoll time.Duration `env:"BRAIN_CONFIG_POLL" envDefault:"2s"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := exitCode(run(ctx, os.Args[1:], service.Environ(), os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// usageError is a command line brain does not accept (unknown flag, stray
// argument): the error and the usage are already on stderr; exit 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// exitCode maps run's error to the process exit status, as the tool
// services' command line does (pkg/service.Main): 0 on nil and for -h/-help
// (usage on stdout), 2 for a command line brain does not accept (error and
// usage on stderr), 1 for any other error, which it prints on stderr.
func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		return 2
	}
	fmt.Fprintln(stderr, "brain:", err)
	return 1
}

// The usage lines of brain's subcommands, in brain's usage and their own.
const (
	migrateUsage = "brain migrate                       bring the store (BRAIN_DATA_DIR's SQLite or BRAIN_DATABASE_URL's PostgreSQL) to this build's schema version"
	backupUsage  = "brain backup FILE                   write a consistent copy of the SQLite store in BRAIN_DATA_DIR, running or not, to FILE (a new file; PostgreSQL: pg_dump)"
)

// usage prints brain's command lines, flags and where the rest of its
// configuration comes from, on w.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Usage:
  brain -config brain.json [-check]   serve the host config (or only validate it)
  brain -healthcheck                  GET /healthz of the brain at BRAIN_ADDR; exit 0 if 200
  brain -version                      print the version and exit
  brain mcp discover URL [--token-env NAME]   print bindings for an MCP server's tools
  `+migrateUsage+`
  `+backupUsage+`

The rest of the configuration is by environment variables: BRAIN_ADDR
(default 127.0.0.1:8080), BRAIN_DATA_DIR or BRAIN_DATABASE_URL,
BRAIN_PUBLIC_URL, BRAIN_SQLITE_SYNC, BRAIN_DATABASE_TIMEOUT, BRAIN_LEASE,
BRAIN_RETENTION, BRAIN_MAX_REQUEST_BYTES, LOG_LEVEL, BRAIN_SECRETS_KEY,
BRAIN_TENANT_URL_ALLOW, BRAIN_CONFIG_POLL and those the host config names;
SIGHUP reloads the host config. See
services/brain/README.md and deploy/README.md.

Flags:
`)
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
	fmt.Fprintln(w, "  -h, -help\n    \tprint this help and exit")
}

// validate checks the settings env cannot, naming each variable, and
// returns the log level.
func (ec *envConfig) validate() (slog.Level, error) {
	var errs []error
	var level slog.Level
	if err := level.UnmarshalText([]byte(ec.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("LOG_LEVEL: want debug, info, warn or error, got %q", ec.LogLevel))
	}
	switch strings.ToUpper(ec.SQLiteSync) {
	case "NORMAL", "FULL":
	default:
		errs = append(errs, fmt.Errorf("BRAIN_SQLITE_SYNC: want NORMAL or FULL, got %q", ec.SQLiteSync))
	}
	if ec.PublicURL != "" {
		if err := service.CheckBaseURL(ec.PublicURL); err != nil {
			errs = append(errs, fmt.Errorf("BRAIN_PUBLIC_URL %q: %w", ec.PublicURL, err))
		}
	}
	if err := service.CheckListenAddr(ec.Addr); err != nil {
		errs = append(errs, fmt.Errorf("BRAIN_ADDR %q: %w", ec.Addr, err))
	}
	if ec.DatabaseURL != "" {
		if err := pgbound.CheckURL("BRAIN_DATABASE_URL", ec.DatabaseURL); err != nil {
			errs = append(errs, err)
		}
	}
	if ec.DatabaseTimeout != 0 && (ec.DatabaseTimeout < 100*time.Millisecond || ec.DatabaseTimeout > 10*time.Minute) {
		errs = append(errs, fmt.Errorf("BRAIN_DATABASE_TIMEOUT: want 0 (10s) or 100ms..10m, got %s", ec.DatabaseTimeout))
	}
	if ec.Lease < 3*time.Second || ec.Lease > 10*time.Minute {
		errs = append(errs, fmt.Errorf("BRAIN_LEASE: want 3s..10m, got %s", ec.Lease))
	}
	if ec.Retention != 0 && ec.Retention < time.Minute {
		errs = append(errs, fmt.Errorf("BRAIN_RETENTION: want 0 (keep everything) or at least 1m, got %s", ec.Retention))
	}
	if ec.MaxRequestBytes < 1 || ec.MaxRequestBytes > server.MaxRequestBytesLimit {
		errs = append(errs, fmt.Errorf("BRAIN_MAX_REQUEST_BYTES: want 1..%d, got %d", server.MaxRequestBytesLimit, ec.MaxRequestBytes))
	}
	if ec.SecretsKey != "" && len(ec.SecretsKey) < seal.MinKeyBytes {
		errs = append(errs, fmt.Errorf("BRAIN_SECRETS_KEY: want at least %d bytes (a random one: head -c 32 /dev/urandom | base64), got %d", seal.MinKeyBytes, len(ec.SecretsKey)))
	}
	if _, _, err := netguard.ParseAllowList(ec.TenantURLAllow); err != nil {
		errs = append(errs, fmt.Errorf("BRAIN_TENANT_URL_ALLOW: %w", err))
	}
	if ec.ConfigPoll < 0 {
		errs = append(errs, fmt.Errorf("BRAIN_CONFIG_POLL: must not be negative (0 turns polling off), got %s", ec.ConfigPoll))
	}
	return level, errors.Join(errs...)
}

// guard is the SSRF guard of the urls tenants give: any port (tool
// services listen on their own), public addresses and the operator's
// allow-list.
func (ec *envConfig) guard() *netguard.Guard {
	prefixes, hosts, _ := netguard.ParseAllowList(ec.TenantURLAllow) // validate checked it
	return netguard.New(netguard.Options{AnyPort: true, AllowPrefixes: prefixes, AllowHosts: hosts})
}

// shortSecrets names the secrets of cfg shorter than bearer.MinTokenBytes:
// API keys ("api_keys: BRAIN_API_KEY") and, once each, the tokens brain
// sends ("token_env: BRAIN_TOOLS_KEY").
func shortSecrets(cfg *config.Config) []string {
	var out []string
	for _, k := range cfg.APIKeys {
		if k.Short() {
			out = append(out, "api_keys: "+k.Env)
		}
	}
	seen := map[string]bool{}
	for _, t := range cfg.Tools {
		if t.ShortToken() && !seen[t.TokenEnv] {
			seen[t.TokenEnv] = true
			out = append(out, "token_env: "+t.TokenEnv)
		}
	}
	return out
}

// run is brain's whole life: flags, env config, host config, store, serve
// until ctx ends. It prints "brain listening on ADDR" to stdout once it
// accepts connections (tests on 127.0.0.1:0 read the port from it).
// For -h or -help it prints the usage on stdout and returns flag.ErrHelp;
// for a command line it does not accept it prints the error and the usage
// on stderr and returns a *usageError (exitCode maps both).
func run(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	if len(args) >= 2 && args[0] == "mcp" && args[1] == "discover" {
		return mcpcall.RunDiscover(ctx, args[2:], func(k string) string { return environ[k] }, stdout, stderr)
	}
	if len(args) >= 1 && args[0] == "migrate" {
		return runMigrate(ctx, args[1:], environ, stdout, stderr)
	}
	if len(args) >= 1 && args[0] == "backup" {
		return runBackup(ctx, args[1:], environ, stdout, stderr)
	}
	fs := flag.NewFlagSet("brain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "host config file (JSON): tool bindings and API keys")
	check := fs.Bool("check", false, "validate the host config and exit")
	healthcheck := fs.Bool("healthcheck", false, "check the brain running at BRAIN_ADDR (GET /healthz) and exit 0 if it answers 200 (container health check)")
	showVersion := fs.Bool("version", false, version.FlagUsage)
	fs.Usage = func() {} // printed below, on stdout for -help
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		usage(stdout, fs)
		return err
	case err != nil:
		// fs has printed the error on stderr.
		usage(stderr, fs)
		return &usageError{err}
	case fs.NArg() > 0:
		err := fmt.Errorf("unexpected argument %q", fs.Arg(0))
		fmt.Fprintf(stderr, "brain: %v\n", err)
		usage(stderr, fs)
		return &usageError{err}
	}
	if *showVersion {
		return version.Print(stdout, "brain")
	}
	if *healthcheck {
		ec, err := service.ParseEnv[envConfig](environ)
		if err != nil {
			return fmt.Errorf("env %w", err) // "env config: BRAIN_...: ..."
		}
		if err := service.HealthCheck(ctx, ec.Addr, service.HealthCheckTimeout); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "healthy")
		return nil
	}
	if *configPath == "" {
		return errors.New("-config: required (brain -config brain.json)")
	}
	ec, err := service.ParseEnv[envConfig](environ)
	if err != nil {
		return fmt.Errorf("env %w", err) // "env config: BRAIN_...: ..."
	}
	level, err := ec.validate()
	if err != nil {
		return fmt.Errorf("env config: %w", err)
	}
	getenv := func(k string) string { return environ[k] }
	if *check {
		cfg, err := config.Load(*configPath, getenv)
		if err != nil {
			return err
		}
		for _, w := range shortSecrets(cfg) {
			fmt.Fprintf(stderr, "brain: warning: %s is shorter than %d bytes; use a random one\n", w, bearer.MinTokenBytes)
		}
		fmt.Fprintf(stdout, "%s: ok (%d tools, %d API keys)\n", *configPath, len(cfg.Tools), len(cfg.APIKeys))
		return nil
	}
	// The host config reloads on SIGHUP and when the file changes.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	watcher := &config.Watcher{Path: *configPath, Getenv: getenv, Interval: ec.ConfigPoll, Signals: hup}
	cfg, err := watcher.Load()
	if err != nil {
		return err
	}
	logger := service.NewLogger(stderr, level)
	defer server.TuneGC()()
	for _, w := range shortSecrets(cfg) {
		logger.Warn("short secret: use a random one", "secret", w, "min_bytes", bearer.MinTokenBytes)
	}
	// Traces go where the OTEL_* variables say (pkg/tracing), or nowhere.
	return tracing.Run(ctx, "brain", getenv, logger, func() error {
		// Listen first: a busy or unusable address then leaves no data
		// dir, store or lock file behind.
		ln, err := net.Listen("tcp", ec.Addr)
		if err != nil {
			return fmt.Errorf("listen on BRAIN_ADDR %q: %w", ec.Addr, err)
		}
		var secretsKey []byte
		if ec.SecretsKey != "" {
			secretsKey = []byte(ec.SecretsKey)
		}
		srv, err := server.New(ctx, server.Options{
			Config: cfg, DataDir: ec.DataDir, Synchronous: ec.SQLiteSync, PublicURL: ec.PublicURL, Logger: logger,
			MaxRequestBytes: ec.MaxRequestBytes, DatabaseURL: ec.DatabaseURL, StatementTimeout: ec.DatabaseTimeout, Lease: ec.Lease, Retention: ec.Retention,
			Guard: ec.guard(), SecretsKey: secretsKey,
		})
		if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
			// A signal while the store opened (migrations, recovery):
			// stop as a later one stops brain, not as a failure. A start-up
			// that failed for a reason of its own still fails below.
			logger.Info("brain stopped by a signal during start-up")
			if err == nil {
				return errors.Join(srv.Close(), ln.Close())
			}
			return ln.Close()
		}
		if err != nil {
			return errors.Join(ec.databaseHint(err), ln.Close())
		}
		watcher.Logger, watcher.Refused = logger, func(error) { srv.ReloadRefused() }
		watcher.Apply = func(c *config.Config) {
			for _, w := range shortSecrets(c) {
				logger.Warn("short secret: use a random one", "secret", w, "min_bytes", bearer.MinTokenBytes)
			}
			srv.Reload(c)
		}
		watchCtx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go watcher.Run(watchCtx)
		fmt.Fprintf(stdout, "brain listening on %s\n", ln.Addr())
		logger.Info("brain listening", "addr", ln.Addr().String(), "store", storeName(ec), "tools", len(cfg.Tools), "tracing", tracing.Enabled())
		err = srv.Serve(ctx, ln)
		err = errors.Join(err, srv.Close())
		if err != nil {
			logger.Error("brain stopped", "err", err)
		} else {
			logger.Info("brain stopped")
		}
		return err
	})
}

// subcommandHelp prints usage (a command's usage line) on stdout when args
// ask for help (-h, -help, --help), and says so.
func subcommandHelp(args []string, stdout io.Writer, usage string) bool {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprintf(stdout, "Usage:\n  %s\n", usage)
		return true
	}
	return false
}

// usageFailure prints err and usage (a command's usage line) on stderr and
// returns err as a *usageError.
func usageFailure(stderr io.Writer, err error, usage string) error {
	fmt.Fprintf(stderr, "brain: %v\nUsage:\n  %s\n", err, usage)
	return &usageError{err}
}

// runMigrate is `brain migrate`: it applies the schema versions the store
// has not had yet and prints what it did; run again, it applies nothing.
// It takes no flags or arguments.
func runMigrate(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	if subcommandHelp(args, stdout, migrateUsage) {
		return flag.ErrHelp
	}
	if len(args) > 0 {
		return usageFailure(stderr, fmt.Errorf("migrate: unexpected argument %q (brain migrate takes none)", args[0]), migrateUsage)
	}
	ec, err := service.ParseEnv[envConfig](environ)
	if err != nil {
		return fmt.Errorf("env %w", err)
	}
	if _, err := ec.validate(); err != nil {
		return fmt.Errorf("env config: %w", err)
	}
	applied, version, err := server.Migrate(ctx, server.Options{DataDir: ec.DataDir, DatabaseURL: ec.DatabaseURL, StatementTimeout: ec.DatabaseTimeout})
	if err != nil {
		return ec.databaseHint(err)
	}
	if len(applied) == 0 {
		fmt.Fprintf(stdout, "store is up to date at schema version %d\n", version)
		return nil
	}
	vs := make([]string, len(applied))
	for i, v := range applied {
		vs[i] = fmt.Sprint(v)
	}
	fmt.Fprintf(stdout, "applied schema versions %s; store is at version %d\n", strings.Join(vs, ", "), version)
	return nil
}

// databaseHint adds to err, when it is PostgreSQL not answering in time,
// which bound ran out.
func (ec *envConfig) databaseHint(err error) error {
	if ec.DatabaseURL == "" || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	bound := ec.DatabaseTimeout
	if bound == 0 {
		bound = pgbound.Default
	}
	return fmt.Errorf("%w (the database did not answer within BRAIN_DATABASE_TIMEOUT, %s, or the URL's connect_timeout)", err, bound)
}

// storeName says where brain keeps its state, for the start-up log: the
// data dir, or "postgres" (the URL may hold a password).
func storeName(ec envConfig) string {
	if ec.DatabaseURL != "" {
		return "postgres"
	}
	return "sqlite:" + ec.DataDir
}

// runBackup is `brain backup FILE`: a consistent copy of the SQLite store
// in BRAIN_DATA_DIR, taken while brain runs or not (VACUUM INTO, one read
// transaction: writers go on). FILE must not exist. Restore by stopping
// brain and putting FILE in place of brain.db (README). On PostgreSQL it
// refuses and names pg_dump.
func runBackup(ctx context.Context, args []string, environ map[string]string, stdout, stderr io.Writer) error {
	if subcommandHelp(args, stdout, backupUsage) {
		return flag.ErrHelp
	}
	switch {
	case len(args) != 1 || strings.HasPrefix(args[0], "-"):
		return usageFailure(stderr, errors.New("backup: want one argument, the file to write"), backupUsage)
	case args[0] == "":
		return usageFailure(stderr, errors.New("backup: the file to write is empty"), backupUsage)
	}
	ec, err := service.ParseEnv[envConfig](environ)
	if err != nil {
		return fmt.Errorf("env %w", err)
	}
	if ec.DatabaseURL != "" {
		return errors.New("backup: brain's store is PostgreSQL (BRAIN_DATABASE_URL): back it up with pg_dump, see services/brain/README.md")
	}
	if err := sqlite.Backup(ctx, filepath.Join(ec.DataDir, "brain.db"), args[0]); err != nil {
		if errors.Is(err, sqlite.ErrNoDatabase) {
			return fmt.Errorf("%w; is BRAIN_DATA_DIR right?", err)
		}
		return err
	}
	fmt.Fprintf(stdout, "backed up %s to %s\n", filepath.Join(ec.DataDir, "brain.db"), args[0])
	return nil
}
