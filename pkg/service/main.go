package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/brain-tools/suite/pkg/tracing"
	"github.com/brain-tools/suite/pkg/version"
)

// RunFunc is a service's whole life: parse config from environ, build,
// serve until ctx is cancelled, return nil after a clean shutdown.
type RunFunc func(ctx context.Context, environ map[string]string, logger *slog.Logger) error

// RunTools is the RunFunc of a service that is nothing but its tools: the
// shared Config from the environment (ParseEnv), then Run of a Server
// named name with them. Main(RunTools("customtool", tools...)) is a whole
// service.
func RunTools(name string, tools ...Tool) RunFunc {
	return func(ctx context.Context, environ map[string]string, logger *slog.Logger) error {
		cfg, err := ParseEnv[Config](environ)
		if err != nil {
			return err
		}
		return Run(ctx, &Server{Name: name, Config: cfg, Logger: logger, Tools: tools})
	}
}

// MainOption adjusts Main: see DefaultAddr.
type MainOption func(*mainOptions)

type mainOptions struct {
	defaultAddr string
}

// DefaultAddr is the service's listen address when ADDR is unset, stated
// once: Main puts it in the environment run gets (so the service's Config
// reads it as ADDR), the health-check mode asks it and -help names it.
func DefaultAddr(addr string) MainOption {
	return func(o *mainOptions) { o.defaultAddr = addr }
}

// Process is the part of the environment Main reads itself, before the
// service's run func: how it logs.
type Process struct {
	// LogLevel is debug, info, warn or error (env LOG_LEVEL); logs are
	// JSON on stderr.
	LogLevel slog.Level `env:"LOG_LEVEL" envDefault:"info"`
}

// Main runs run with a context cancelled by SIGINT or SIGTERM, the process
// environment (ADDR defaulted by the DefaultAddr option) and a JSON logger
// at LOG_LEVEL (Process), then exits once: 0 on nil, 1 after logging the
// error. A LOG_LEVEL it cannot read exits 1 before run, naming it.
//
// The command line is parsed with the flag package. Configuration is by
// environment only; the flags are:
//
//   - -healthcheck (or --healthcheck, HealthCheckFlag): run nothing but
//     HealthCheck against ADDR (the container images set it; unset, the
//     DefaultAddr option's address) and exit 0 when the running service
//     answers 200 on /healthz, 1 otherwise.
//   - -version: print the binary's name and version (package
//     pkg/version: module version, VCS revision, Go version; the same the
//     build_info metric reports) on stdout and exit 0.
//   - -h, -help: print the usage on stdout and exit 0.
//
// Any other flag or any positional argument prints the error and the usage
// on stderr and exits 2, without starting the service.
func Main(run RunFunc, opts ...MainOption) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := mainCode(ctx, filepath.Base(os.Args[0]), os.Args[1:], Environ(), os.Stdout, os.Stderr, run, opts...)
	stop()
	os.Exit(code)
}

// mainCode is Main without the process: it parses args, runs the health
// check or run, and returns the exit status.
func mainCode(ctx context.Context, name string, args []string, environ map[string]string, stdout, stderr io.Writer, run RunFunc, opts ...MainOption) int {
	var o mainOptions
	for _, opt := range opts {
		opt(&o)
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed below, on stdout for -help
	healthcheck := fs.Bool(HealthCheckFlag[1:], false, "check the service running at ADDR (GET /healthz) and exit 0 if it answers 200, 1 otherwise (container health check)")
	showVersion := fs.Bool("version", false, version.FlagUsage)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout, fs, o)
		return 0
	case err != nil:
		// fs has printed the error on stderr.
		printUsage(stderr, fs, o)
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q: configuration is by environment variables\n", name, fs.Arg(0))
		printUsage(stderr, fs, o)
		return 2
	}
	if *showVersion {
		if err := version.Print(stdout, name); err != nil {
			return 1
		}
		return 0
	}
	if environ["ADDR"] == "" && o.defaultAddr != "" {
		environ = maps.Clone(environ)
		environ["ADDR"] = o.defaultAddr
	}
	if *healthcheck {
		return runHealthCheck(ctx, environ["ADDR"], stdout)
	}
	p, err := ParseEnv[Process](environ)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v (want debug, info, warn or error)\n", name, err)
		return 1
	}
	logger := NewLogger(stderr, p.LogLevel)
	getenv := func(k string) string { return environ[k] }
	if err := tracing.Run(ctx, name, getenv, logger, func() error { return run(ctx, environ, logger) }); err != nil {
		logger.Error("exit", "err", err)
		return 1
	}
	return 0
}

// printUsage writes the command line, the flags and where the
// configuration comes from.
func printUsage(w io.Writer, fs *flag.FlagSet, o mainOptions) {
	name := fs.Name()
	fmt.Fprintf(w, "Usage: %s [-healthcheck | -version]\n\n", name)
	fmt.Fprintf(w, "%s is configured by environment variables, not flags: ADDR (listen address", name)
	if o.defaultAddr != "" {
		fmt.Fprintf(w, ", default %s", o.defaultAddr)
	}
	fmt.Fprintf(w, "), BRAIN_TOOLS_KEY (bearer token brain sends) and the service's own;\n")
	fmt.Fprintf(w, "see services/%s/README.md and deploy/README.md.\n\nFlags:\n", name)
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
	fmt.Fprintln(w, "  -h, -help\n    \tprint this help and exit")
}

// NewLogger returns a JSON slog logger writing to w at level; a record
// logged with the context of a request carries its request_id, and of a
// traced request its trace_id and span_id too (tracing.LogHandler), as
// does every line a tool logs with its call.Logger.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
}

// discard is the logger used when a nil one is given.
var discard = slog.New(slog.DiscardHandler)

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return discard
	}
	return l
}
