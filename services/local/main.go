// Command local is the tool service for tools that need no outside
// provider: echo, session inspection and operator approval, plus the
// operator approval page.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/services/local/internal/approval"
	"github.com/brain-tools/suite/services/local/internal/echo"
	"github.com/brain-tools/suite/services/local/internal/inspect"
	"github.com/brain-tools/suite/services/local/internal/operator"
)

// Config is the local service's environment, parsed once: see README.md.
type Config struct {
	Service service.Config
	// InspectBrainURLs are the brain base URLs inspect_session may send
	// its inspection token to, comma-separated without spaces
	// (http://brain:8080,http://127.0.0.1:8080); a call
	// naming another brain_url is refused. Empty: any http(s) brain_url,
	// since only a holder of BRAIN_TOOLS_KEY can send one.
	InspectBrainURLs []string `env:"INSPECT_BRAIN_URLS" envSeparator:","`
	Approval         approval.Config
	Operator         operator.Config
}

func main() { service.Main(run, service.DefaultAddr("127.0.0.1:8081")) }

// defaultGCPercent is the GC target of the local service when GOGC is
// unset: its memory is mostly approval streams that wait for an operator,
// idle, so collecting at 50% growth instead of Go's 100% costs little CPU
// and lowers the peak of 1,000 held streams by about 12 MB
// (BenchmarkApprovalStreams).
const defaultGCPercent = 50

// run is the service's life: every setting checked, the listener taken,
// then the approval store opened and the tools served until ctx ends.
func run(ctx context.Context, environ map[string]string, logger *slog.Logger) error {
	if _, set := environ["GOGC"]; !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	cfg, err := service.ParseEnv[Config](environ)
	if err != nil {
		return err
	}
	// The shared settings first: APPROVAL_PAGE_URL defaults from
	// PUBLIC_URL, whose own error names it. All of them are checked
	// before the approval store opens: a bad setting touches no file.
	if err := cfg.Service.Validate(); err != nil {
		return err
	}
	if err := inspect.CheckBrainURLs(cfg.InspectBrainURLs); err != nil {
		return fmt.Errorf("INSPECT_BRAIN_URLS: %w", err)
	}
	if err := cfg.Operator.Check(); err != nil {
		return err
	}
	// Listen before the store opens: a busy address leaves no file.
	ln, err := service.Listen(cfg.Service, logger)
	if err != nil {
		return err
	}
	approvals, err := approval.New(ctx, cfg.Approval.WithPageURLDefault(cfg.Service.Addr, cfg.Service.PublicURL), logger)
	if err != nil {
		return errors.Join(err, ln.Close())
	}
	defer approvals.Close()
	page, err := operator.New(ctx, cfg.Operator, approvals, logger)
	if err != nil {
		return errors.Join(err, ln.Close())
	}
	srv := &service.Server{
		Name:   "local",
		Config: cfg.Service,
		Logger: logger,
		Tools:  append([]service.Tool{echo.Tool(), inspect.Tool(inspect.Options{BrainURLs: cfg.InspectBrainURLs})}, approvals.Tools()...),
		Routes: page.Routes,
		Health: approvals.Health,
	}
	approvals.Observe(srv.Metrics())
	return service.Serve(ctx, ln, srv)
}
