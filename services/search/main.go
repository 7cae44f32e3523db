// Command search is the tool service for web search: web_search through
// Brave or Tavily (either or both configured, one the default). Without an
// API key it still starts, reports itself unconfigured on /healthz and
// answers calls with an is_error that says how to configure it.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/search/internal/brave"
	"github.com/brain-tools/suite/services/search/internal/search"
	"github.com/brain-tools/suite/services/search/internal/tavily"
)

// Config is the search service's environment, parsed once: see README.md.
type Config struct {
	Service service.Config
	Brave   brave.Config
	Tavily  tavily.Config
	// Provider is the default provider, brave or tavily (env
	// SEARCH_PROVIDER); empty picks brave when both are configured.
	Provider string `env:"SEARCH_PROVIDER"`
	// MaxOutputBytes is the binding's max_output_bytes (env
	// SEARCH_MAX_OUTPUT_BYTES).
	MaxOutputBytes int64 `env:"SEARCH_MAX_OUTPUT_BYTES" envDefault:"1048576"`
}

func main() { service.Main(run, service.DefaultAddr("127.0.0.1:8084")) }

// run is the service's life: the server built from environ, served until
// ctx ends.

func run(ctx context.Context, environ map[string]string, logger *slog.Logger) error {
	srv, err := newServer(environ, logger)
	if err != nil {
		return err
	}
	return service.Run(ctx, srv)
}

// newServer builds the service from environ; tests serve it on :0.
func newServer(environ map[string]string, logger *slog.Logger) (*service.Server, error) {
	cfg, err := service.ParseEnv[Config](environ)
	if err != nil {
		return nil, err
	}
	if cfg.Provider != "" && cfg.Provider != "brave" && cfg.Provider != "tavily" {
		return nil, fmt.Errorf("SEARCH_PROVIDER %q: want brave or tavily", cfg.Provider)
	}
	if cfg.MaxOutputBytes < 16<<10 || cfg.MaxOutputBytes > tool.MaxOutputBytesLimit {
		return nil, fmt.Errorf("SEARCH_MAX_OUTPUT_BYTES must be from %d to %d, got %d", 16<<10, tool.MaxOutputBytesLimit, cfg.MaxOutputBytes)
	}
	b, errB := brave.New(cfg.Brave, nil)
	t, errT := tavily.New(cfg.Tavily, nil)
	if err := errors.Join(errB, errT); err != nil {
		return nil, err
	}
	var providers []search.Provider
	if b != nil {
		providers = append(providers, b)
	}
	if t != nil {
		providers = append(providers, t)
	}
	svc, err := search.NewService(cfg.Provider, int(cfg.MaxOutputBytes), providers...)
	if err != nil {
		return nil, err
	}
	svc.SetSecrets(cfg.Brave.APIKey, cfg.Tavily.APIKey, cfg.Service.Token)
	if logger != nil {
		if svc.Default() == "" {
			logger.Warn("web search is not configured: web_search answers is_error until BRAVE_API_KEY or TAVILY_API_KEY is set")
		} else {
			logger.Info("web search", "providers", svc.Configured(), "default", svc.Default())
		}
	}
	return &service.Server{
		Name:   "search",
		Config: cfg.Service,
		Logger: logger,
		Tools:  []service.Tool{svc.Tool()},
		Health: svc.Health,
	}, nil
}
