// Command local is the tool service for tools that need no outside
// provider: echo, session inspection and operator approval.
package main

import (
	"context"
	"log/slog"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/services/local/internal/echo"
)

// Config is the local service's environment.
type Config struct {
	service.Config
}

func main() { service.Main(run) }

func run(ctx context.Context, environ map[string]string, logger *slog.Logger) error {
	cfg, err := service.ParseEnv[Config](environ)
	if err != nil {
		return err
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8081"
	}
	srv := &service.Server{
		Name:   "local",
		Config: cfg.Config,
		Logger: logger,
		Tools:  []service.Tool{echo.Tool()},
	}
	return service.Run(ctx, srv)
}
