// Command storage is the tool service for object storage: storage_put,
// storage_get, storage_head, storage_list, storage_delete and
// storage_presign over AWS S3, Cloudflare R2 or any S3-compatible server,
// each tenant (or session) confined to its own key prefix.
package main

import (
	"context"
	"log/slog"

	"github.com/brain-tools/suite/pkg/service"

	"github.com/brain-tools/suite/services/storage/internal/objects"
	"github.com/brain-tools/suite/services/storage/internal/tools"
)

// Config is the storage service's environment, parsed once: see README.md.
type Config struct {
	Service service.Config
	S3      objects.Config
	Tools   tools.Config
}

func main() { service.Main(run, service.DefaultAddr("127.0.0.1:8083")) }

// run is the service's life: the server built from environ, served until
// ctx ends.

func run(ctx context.Context, environ map[string]string, logger *slog.Logger) error {
	srv, err := newServer(ctx, environ, logger)
	if err != nil {
		return err
	}
	return service.Run(ctx, srv)
}

// newServer builds the service from environ; tests serve it on :0.
func newServer(ctx context.Context, environ map[string]string, logger *slog.Logger) (*service.Server, error) {
	cfg, err := service.ParseEnv[Config](environ)
	if err != nil {
		return nil, err
	}
	// Checked before the store is built: a put limit the request cap
	// cannot carry would answer every large put with a refusal.
	if err := tools.CheckCarried(cfg.Tools.MaxPutBytes, cfg.Service.MaxRequestBytes); err != nil {
		return nil, err
	}
	store, err := objects.New(ctx, cfg.S3, nil)
	if err != nil {
		return nil, err
	}
	ts, err := tools.New(store, cfg.Tools)
	if err != nil {
		return nil, err
	}
	return &service.Server{
		Name:   "storage",
		Config: cfg.Service,
		Logger: logger,
		Tools:  ts.List(),
		Health: func(ctx context.Context) (map[string]any, error) {
			return map[string]any{"bucket": store.Bucket()}, store.Check(ctx)
		},
	}, nil
}
