// Package app assembles the sandbox service from its environment: the
// config, the backend it names, the workspaces, the tools, and the
// runtime of pkg/service. main only calls Run; tests call Build and serve
// the handler on 127.0.0.1:0.
package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/daytona"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/e2b"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/local"
	"github.com/brain-tools/suite/services/sandbox/internal/backend/modal"
	"github.com/brain-tools/suite/services/sandbox/internal/cgroup"
	"github.com/brain-tools/suite/services/sandbox/internal/reaper"
	"github.com/brain-tools/suite/services/sandbox/internal/tools"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// Config is the sandbox service's environment. README.md lists every
// variable with its default.
type Config struct {
	service.Config

	// Backend is local (default), e2b, daytona or modal.
	Backend string `env:"SANDBOX_BACKEND" envDefault:"local"`
	// Root holds the workspaces.
	Root string `env:"SANDBOX_ROOT" envDefault:"/var/lib/brain-sandbox"`
	// Quota is each workspace's disk quota in bytes (local backend; the
	// remote ones have their providers' disks).
	Quota int64 `env:"SANDBOX_QUOTA_BYTES" envDefault:"1073741824"`
	// Idle is how long a session's workspace (and remote sandbox) lives
	// after its last call.
	Idle time.Duration `env:"SANDBOX_IDLE" envDefault:"30m"`
	// MaxWorkspaces caps the workspaces of brain's sessions that exist at
	// once.
	MaxWorkspaces int `env:"SANDBOX_MAX_WORKSPACES" envDefault:"1000"`
	// MCPMaxWorkspaces caps those of MCP clients without brain's identity
	// (their MCP sessions, workspace handles, stateless one-shot calls):
	// a quota of their own, so MCP traffic cannot lock brain's sessions
	// out.
	MCPMaxWorkspaces int `env:"SANDBOX_MCP_MAX_WORKSPACES" envDefault:"100"`
	// UIDBase is the first host uid of session sandboxes (local backend,
	// service running as root); 0 runs them as the service's own uid.
	UIDBase int `env:"SANDBOX_UID_BASE" envDefault:"200000"`

	// Output and call limits.

	// DefaultTimeout is the sandbox_exec timeout when the call gives none,
	// 1s to 1h.
	DefaultTimeout time.Duration `env:"SANDBOX_DEFAULT_TIMEOUT" envDefault:"60s"`
	// DefaultJobTimeout is the sandbox_start timeout when the call gives
	// none, 1s to 1h.
	DefaultJobTimeout time.Duration `env:"SANDBOX_DEFAULT_JOB_TIMEOUT" envDefault:"600s"`
	// HeadBytes is how much of the start of each output stream is kept;
	// head and tail together are capped so an answer fits 1 MiB.
	HeadBytes int `env:"SANDBOX_OUTPUT_HEAD_BYTES" envDefault:"16384"`
	// TailBytes is how much of the end of each output stream is kept.
	TailBytes int `env:"SANDBOX_OUTPUT_TAIL_BYTES" envDefault:"16384"`
	// MaxJobsPerSession caps the running jobs of one session.
	MaxJobsPerSession int `env:"SANDBOX_MAX_JOBS_PER_SESSION" envDefault:"8"`

	// Local backend.

	// Bwrap is the bubblewrap binary (local backend); empty finds bwrap
	// on PATH.
	Bwrap string `env:"SANDBOX_BWRAP"`
	// Shell is the shell inside the sandbox (local backend); empty means
	// /bin/bash.
	Shell string `env:"SANDBOX_SHELL"`
	// ReadOnly are the host paths the sandbox sees read-only (local
	// backend); empty means /usr,/bin,/sbin,/lib,/lib32,/lib64,/libx32,/etc.
	ReadOnly []string `env:"SANDBOX_RO_PATHS" envSeparator:","`
	// TmpBytes is the size of the sandbox's /tmp, held in memory (local
	// backend).
	TmpBytes int64 `env:"SANDBOX_TMP_BYTES" envDefault:"67108864"`
	// LimitCPU is RLIMIT_CPU per process, in seconds (local backend).
	LimitCPU int `env:"SANDBOX_LIMIT_CPU_SECONDS" envDefault:"3600"`
	// LimitAS is RLIMIT_AS per process, in bytes (local backend).
	LimitAS int64 `env:"SANDBOX_LIMIT_AS_BYTES" envDefault:"4294967296"`
	// LimitProcs is RLIMIT_NPROC for the session's uid (local backend).
	LimitProcs int `env:"SANDBOX_LIMIT_PROCS" envDefault:"256"`
	// LimitFSize is RLIMIT_FSIZE, the largest file in bytes, at most the
	// quota (local backend); 0 means the quota.
	LimitFSize int64 `env:"SANDBOX_LIMIT_FSIZE_BYTES"`
	// LimitNoFile is RLIMIT_NOFILE (local backend).
	LimitNoFile int `env:"SANDBOX_LIMIT_NOFILE" envDefault:"1024"`
	// SandboxUID is the uid and gid inside the sandbox (local backend).
	SandboxUID int `env:"SANDBOX_INNER_UID" envDefault:"1000"`
	// QuotaEvery is how often a running command's workspace is measured
	// against the quota, 10ms to 10s (local backend).
	QuotaEvery time.Duration `env:"SANDBOX_QUOTA_INTERVAL" envDefault:"50ms"`
	// Cgroup chooses how per-session bounds are set (local backend, as
	// root): auto, v2, v1 or off.
	Cgroup string `env:"SANDBOX_CGROUP" envDefault:"auto"`
	// SessionMemory bounds the memory of all of a session's processes
	// together, in bytes (local backend, through its cgroup).
	SessionMemory int64 `env:"SANDBOX_SESSION_MEMORY_BYTES" envDefault:"2147483648"`
	// SessionPids bounds the processes and threads of a session together.
	SessionPids int `env:"SANDBOX_SESSION_PIDS" envDefault:"256"`
	// SessionCPUs bounds the CPU time of a session, in CPUs.
	SessionCPUs float64 `env:"SANDBOX_SESSION_CPUS" envDefault:"1"`

	E2B     e2b.Config
	Daytona daytona.Config
	Modal   modal.Config
}

// Validate checks the settings that pkg/service does not.
func (c *Config) Validate() error {
	var errs []error
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	switch c.Backend {
	case "local", "e2b", "daytona", "modal":
	default:
		errs = append(errs, fmt.Errorf("SANDBOX_BACKEND must be local, e2b, daytona or modal, got %q", c.Backend))
	}
	if c.Quota <= 0 {
		errs = append(errs, fmt.Errorf("SANDBOX_QUOTA_BYTES must be positive, got %d", c.Quota))
	}
	switch c.Cgroup {
	case "auto", "v2", "v1", "off":
	default:
		errs = append(errs, fmt.Errorf("SANDBOX_CGROUP must be auto, v2, v1 or off, got %q", c.Cgroup))
	}
	if c.SessionMemory < 16<<20 {
		errs = append(errs, fmt.Errorf("SANDBOX_SESSION_MEMORY_BYTES must be at least 16 MiB (16777216), got %d", c.SessionMemory))
	}
	if c.SessionPids < 16 {
		errs = append(errs, fmt.Errorf("SANDBOX_SESSION_PIDS must be at least 16, got %d", c.SessionPids))
	}
	if c.SessionCPUs < 0.01 || c.SessionCPUs > 1024 {
		errs = append(errs, fmt.Errorf("SANDBOX_SESSION_CPUS must be from 0.01 to 1024, got %g", c.SessionCPUs))
	}
	if c.QuotaEvery < 10*time.Millisecond || c.QuotaEvery > 10*time.Second {
		errs = append(errs, fmt.Errorf("SANDBOX_QUOTA_INTERVAL must be from 10ms to 10s, got %s", c.QuotaEvery))
	}
	if c.MaxWorkspaces < 1 {
		errs = append(errs, fmt.Errorf("SANDBOX_MAX_WORKSPACES must be at least 1, got %d", c.MaxWorkspaces))
	}
	if c.MCPMaxWorkspaces < 1 {
		errs = append(errs, fmt.Errorf("SANDBOX_MCP_MAX_WORKSPACES must be at least 1, got %d", c.MCPMaxWorkspaces))
	}
	if c.Idle < time.Minute {
		errs = append(errs, fmt.Errorf("SANDBOX_IDLE must be at least 1m, got %s", c.Idle))
	}
	if c.DefaultTimeout < time.Second || c.DefaultTimeout > time.Hour {
		errs = append(errs, fmt.Errorf("SANDBOX_DEFAULT_TIMEOUT must be from 1s to 1h, got %s", c.DefaultTimeout))
	}
	if c.DefaultJobTimeout < time.Second || c.DefaultJobTimeout > time.Hour {
		errs = append(errs, fmt.Errorf("SANDBOX_DEFAULT_JOB_TIMEOUT must be from 1s to 1h, got %s", c.DefaultJobTimeout))
	}
	// Both streams, in the text block and the structured content, with
	// JSON escaping of up to 6 bytes per byte, within the host's default
	// max_output_bytes of 1 MiB.
	if c.HeadBytes < 0 || c.TailBytes < 0 || 2*2*6*(c.HeadBytes+c.TailBytes) > 1<<20 {
		errs = append(errs, fmt.Errorf("SANDBOX_OUTPUT_HEAD_BYTES + SANDBOX_OUTPUT_TAIL_BYTES must be at most %d so a result fits 1 MiB, got %d", (1<<20)/24, c.HeadBytes+c.TailBytes))
	}
	return errors.Join(errs...)
}

// DefaultAddr is where the service listens when ADDR is unset: main gives
// it to service.Main, which puts it in the environment Run gets.
const DefaultAddr = "127.0.0.1:8082"

// ParseConfig reads Config from environ, parsed once, and checks it.
func ParseConfig(environ map[string]string) (Config, error) {
	cfg, err := service.ParseEnv[Config](environ)
	if err != nil {
		return cfg, err
	}
	if cfg.LimitFSize <= 0 {
		cfg.LimitFSize = cfg.Quota
	}
	return cfg, cfg.Validate()
}

// Service is the assembled sandbox service.
type Service struct {
	Server     *service.Server
	Tools      *tools.Service
	Workspaces *workspace.Manager
	Backend    backend.Backend
}

// Build makes the backend the config names (probing it: a local backend
// that cannot run bwrap is an error that says what is missing), the
// workspaces and the tools.
func Build(ctx context.Context, cfg Config, logger *slog.Logger) (*Service, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	uidBase := cfg.UIDBase
	if cfg.Backend != "local" || os.Geteuid() != 0 {
		uidBase = 0
	}
	// The workspaces come first: their root is checked (and created)
	// before the local backend's probe runs a sandbox in it.
	var be backend.Backend
	wsm, err := workspace.New(workspace.Options{
		Root: cfg.Root, Quota: cfg.Quota, Idle: cfg.Idle, UIDBase: uidBase,
		MaxWorkspaces: cfg.MaxWorkspaces, MaxMCPWorkspaces: cfg.MCPMaxWorkspaces,
		OnRemove: func(ctx context.Context, ws *workspace.Workspace) error { return be.Release(ctx, ws) },
		Logger:   logger,
	})
	if err != nil {
		return nil, fmt.Errorf("SANDBOX_ROOT: %w", err)
	}
	switch cfg.Backend {
	case "local":
		probeUID := -1
		var uids [2]int
		if uidBase > 0 {
			probeUID = uidBase + wsm.Slots()
			uids = [2]int{uidBase, probeUID}
		}
		be, err = local.New(ctx, local.Config{
			Tag: RootTag(wsm.Root()), UIDs: uids, Cgroup: cgroup.Mode(cfg.Cgroup),
			Session: cgroup.Limits{Memory: cfg.SessionMemory, Pids: cfg.SessionPids, CPU: cfg.SessionCPUs},
			Bwrap:   cfg.Bwrap, Shell: cfg.Shell, ReadOnly: cfg.ReadOnly, TmpSize: cfg.TmpBytes,
			Limits: local.Limits{
				CPUSeconds: cfg.LimitCPU, AddressSpace: cfg.LimitAS, Processes: cfg.LimitProcs,
				FileSize: cfg.LimitFSize, OpenFiles: cfg.LimitNoFile,
			},
			SandboxUID: cfg.SandboxUID, Quota: cfg.Quota, QuotaInterval: cfg.QuotaEvery,
			ProbeUID: probeUID, ProbeDir: wsm.Root(), Logger: logger,
		})
	case "e2b":
		be, err = e2b.New(cfg.E2B, cfg.Idle, logger)
	case "daytona":
		be, err = daytona.New(cfg.Daytona, cfg.Idle, logger)
	case "modal":
		be, err = modal.NewFromConfig(ctx, cfg.Modal, cfg.Idle, logger)
	}
	if err != nil {
		wsm.Close()
		return nil, err
	}
	ts := tools.New(tools.Limits{
		DefaultTimeout: cfg.DefaultTimeout, DefaultJobTimeout: cfg.DefaultJobTimeout,
		HeadBytes: cfg.HeadBytes, TailBytes: cfg.TailBytes, MaxJobsPerSession: cfg.MaxJobsPerSession,
		Tenants: cfg.Tenants,
	}, wsm, be, logger)
	srv := &service.Server{
		Name: "sandbox", Config: cfg.Config, Logger: logger, Tools: ts.Tools(),
		Health: func(ctx context.Context) (map[string]any, error) {
			n, busy := wsm.CountIn(workspace.Sessions)
			mn, mbusy := wsm.CountIn(workspace.MCP)
			detail := map[string]any{"backend": be.Name(), "workspaces": n, "workspaces_in_use": busy, "mcp_workspaces": mn, "mcp_workspaces_in_use": mbusy,
				"reaper": map[string]any{"running": reaper.Running(), "pid_1": os.Getpid() == 1, "orphans_reaped": reaper.Reaped()}}
			if lb, ok := be.(*local.Backend); ok {
				detail["session_bounds"] = lb.Bounds()
			}
			return detail, be.Check(ctx)
		},
	}
	// The same tools, for MCP clients, at /mcp behind the same bearer
	// check, with workspace handles for clients without sessions.
	srv.MCP = service.MCPOptions{Tools: ts.MCPTools()}
	if err := srv.CheckMCP(); err != nil {
		wsm.Close()
		return nil, err
	}
	srv.Metrics().GaugeFunc(metrics.Workspaces, func() float64 { return float64(wsm.Count()) })
	ts.Observe(srv.Metrics())
	return &Service{Server: srv, Tools: ts, Workspaces: wsm, Backend: be}, nil
}

// RootTag names the sandboxes of the service whose workspaces are under
// root: 12 hex digits of SHA-256 of the path. A later run on the same root
// finds what an earlier one left by it; services on other roots are not
// touched.
func RootTag(root string) string {
	sum := sha256.Sum256([]byte(root))
	return hex.EncodeToString(sum[:6])
}

// Run is the service's whole life (service.RunFunc): config, reap orphans
// (as a child subreaper, or PID 1), build, sweep idle workspaces, serve
// until ctx ends, then kill running jobs.
func Run(ctx context.Context, environ map[string]string, logger *slog.Logger) error {
	cfg, err := ParseConfig(environ)
	if err != nil {
		return err
	}
	// Reap before anything is started, so that what Build kills of an
	// earlier run, reparented to this process when it is PID 1, is reaped.
	if err := reaper.Become(); err != nil {
		logger.Warn("orphans of sandboxes are left to the host's init", "err", err)
	}
	reapCtx, stopReaping := context.WithCancel(context.Background())
	defer stopReaping()
	go reaper.Run(reapCtx, logger, nil)
	// Listen before Build makes SANDBOX_ROOT: a busy address leaves no
	// directory behind.
	ln, err := service.Listen(cfg.Config, logger)
	if err != nil {
		return err
	}
	s, err := Build(ctx, cfg, logger)
	if err != nil {
		return errors.Join(err, ln.Close())
	}
	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	go s.Workspaces.Run(sweepCtx)
	logger.Info("sandbox ready", "backend", s.Backend.Name(), "root", s.Workspaces.Root(), "idle", cfg.Idle.String())
	if lb, ok := s.Backend.(*local.Backend); ok {
		logger.Info("per-session bounds", "bounds", lb.Bounds())
	}
	serveErr := service.Serve(ctx, ln, s.Server)
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(closeCtx); err != nil {
		logger.Warn("stop", "err", err)
	}
	return serveErr
}

// Close stops the service's work: it kills running jobs (waiting for them
// or for ctx), stops handing out workspaces, and removes the local
// backend's session cgroups.
func (s *Service) Close(ctx context.Context) error {
	var errs []error
	if err := s.Tools.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stop running jobs: %w", err))
	}
	s.Workspaces.Close()
	if lb, ok := s.Backend.(*local.Backend); ok {
		if err := lb.Close(); err != nil {
			errs = append(errs, fmt.Errorf("remove session cgroups: %w", err))
		}
	}
	return errors.Join(errs...)
}
