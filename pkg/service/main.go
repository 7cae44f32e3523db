package service

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// RunFunc is a service's whole life: parse config from environ, build,
// serve until ctx is cancelled, return nil after a clean shutdown.
type RunFunc func(ctx context.Context, environ map[string]string, logger *slog.Logger) error

// Main runs run with a context cancelled by SIGINT or SIGTERM, the process
// environment and a JSON logger at LOG_LEVEL, then exits once: 0 on nil, 1
// after logging the error.
//
// With the single argument -healthcheck (HealthCheckFlag) it runs nothing
// but HealthCheck against ADDR (the container images set it) and exits 0
// when the running service answers 200 on /healthz, 1 otherwise.
func Main(run RunFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	environ := Environ()
	if len(os.Args) == 2 && os.Args[1] == HealthCheckFlag {
		code := runHealthCheck(ctx, environ["ADDR"], os.Stdout)
		stop()
		os.Exit(code)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(environ["LOG_LEVEL"])); err != nil {
		level = slog.LevelInfo
	}
	logger := NewLogger(os.Stderr, level)
	err := run(ctx, environ, logger)
	stop()
	if err != nil {
		logger.Error("exit", "err", err)
		os.Exit(1)
	}
}

// NewLogger returns a JSON slog logger writing to w at level.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// discard is the logger used when a nil one is given.
var discard = slog.New(slog.DiscardHandler)

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return discard
	}
	return l
}
