package webfetch

import (
	"context"
	"log/slog"

	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/pkg/service"
)

// NewServer builds the service around a Fetcher; the caller closes the
// Fetcher when done.
func NewServer(cfg Config, deps Deps, logger *slog.Logger) (*service.Server, *Fetcher, error) {
	f, err := NewFetcher(cfg, deps, logger)
	if err != nil {
		return nil, nil, err
	}
	srv := &service.Server{
		Name:   "webfetch",
		Config: cfg.Config,
		Logger: logger,
		Tools:  []service.Tool{f.Tool()},
	}
	// The outcomes counter, with the service label every metric of the
	// suite carries (pkg/metrics).
	f.outcomes = srv.Metrics().CounterVec(metrics.WebFetches)
	return srv, f, nil
}

// Run is the service's whole life (service.RunFunc): configuration from
// environ, serve on ADDR until ctx ends.
func Run(ctx context.Context, environ map[string]string, logger *slog.Logger) error {
	cfg, err := ParseConfig(environ)
	if err != nil {
		return err
	}
	srv, f, err := NewServer(cfg, Deps{}, logger)
	if err != nil {
		return err
	}
	defer f.Close()
	logger.Info("web fetch policy", "allow", cfg.Allow, "ports", cfg.Ports, "robots", cfg.Robots, "user_agent", cfg.UserAgent)
	return service.Run(ctx, srv)
}
