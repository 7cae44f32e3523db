// Package tools implements the sandbox service's tools on top of a
// backend and the workspace manager:
//
//	sandbox_exec        run a command, stream its output as progress, answer with the result
//	sandbox_start       start a long command as a job and answer with its job ID at once
//	sandbox_status      the job's state, its output so far, its result once it has ended
//	sandbox_cancel      kill the job's command and every process it started
//	sandbox_write_file  write a file in the workspace
//	sandbox_read_file   read (part of) a file in the workspace
//	sandbox_list_files  list a directory of the workspace
//
// Every tool works in the workspace of the request body's tenant_id and
// session_id, never of anything the arguments say (the tool contract's
// "Authorize with the session's identity"), and so does every job: a job
// of another session is "not found".
package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/metrics"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// Limits bound what one call may ask and answer. Zero fields take the
// defaults of DefaultLimits.
type Limits struct {
	// DefaultTimeout is sandbox_exec's timeout when the call sets none.
	DefaultTimeout time.Duration
	// DefaultJobTimeout is sandbox_start's timeout when the call sets none.
	DefaultJobTimeout time.Duration
	// MaxTimeout is the largest timeout_seconds a call may set.
	MaxTimeout time.Duration
	// HeadBytes and TailBytes are kept of each output stream; the middle is
	// dropped and counted. Both streams, twice (text and structured), with
	// JSON escaping must fit the host's max_output_bytes (1 MiB default).
	HeadBytes, TailBytes int
	// MaxCommandBytes caps the command line.
	MaxCommandBytes int
	// MaxStdinBytes caps stdin.
	MaxStdinBytes int
	// MaxEnvVars and MaxEnvBytes cap the environment a call adds.
	MaxEnvVars, MaxEnvBytes int
	// MaxWriteBytes caps one sandbox_write_file (decoded content).
	MaxWriteBytes int
	// DefaultReadBytes and MaxReadBytes are sandbox_read_file's max_bytes
	// default and cap.
	DefaultReadBytes, MaxReadBytes int
	// DefaultListEntries and MaxListEntries, MaxListDepth bound
	// sandbox_list_files.
	DefaultListEntries, MaxListEntries, MaxListDepth int
	// ProgressInterval is the least time between two progress events of
	// one call (the "at most about 10 a second").
	ProgressInterval time.Duration
	// ProgressBytes caps each stream's text in one progress event; what
	// does not fit is counted as skipped (the result still has it).
	ProgressBytes int
	// MaxJobsPerSession caps running jobs of one session.
	MaxJobsPerSession int
	// Tenants are the tenants whose calls are served (TOOL_TENANTS); a call
	// of any other tenant is refused. Empty serves none.
	Tenants []string
}

// DefaultLimits are used for the zero fields of Limits.
var DefaultLimits = Limits{
	DefaultTimeout:     60 * time.Second,
	DefaultJobTimeout:  600 * time.Second,
	MaxTimeout:         3600 * time.Second,
	HeadBytes:          16 << 10,
	TailBytes:          16 << 10,
	MaxCommandBytes:    64 << 10,
	MaxStdinBytes:      1 << 20,
	MaxEnvVars:         64,
	MaxEnvBytes:        32 << 10,
	MaxWriteBytes:      2 << 20,
	DefaultReadBytes:   64 << 10,
	MaxReadBytes:       256 << 10,
	DefaultListEntries: 200,
	MaxListEntries:     1000,
	MaxListDepth:       10,
	ProgressInterval:   100 * time.Millisecond,
	ProgressBytes:      4 << 10,
	MaxJobsPerSession:  8,
}

func (l *Limits) applyDefaults() {
	d := DefaultLimits
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	setD := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	setD(&l.DefaultTimeout, d.DefaultTimeout)
	setD(&l.DefaultJobTimeout, d.DefaultJobTimeout)
	setD(&l.MaxTimeout, d.MaxTimeout)
	set(&l.HeadBytes, d.HeadBytes)
	set(&l.TailBytes, d.TailBytes)
	set(&l.MaxCommandBytes, d.MaxCommandBytes)
	set(&l.MaxStdinBytes, d.MaxStdinBytes)
	set(&l.MaxEnvVars, d.MaxEnvVars)
	set(&l.MaxEnvBytes, d.MaxEnvBytes)
	set(&l.MaxWriteBytes, d.MaxWriteBytes)
	set(&l.DefaultReadBytes, d.DefaultReadBytes)
	set(&l.MaxReadBytes, d.MaxReadBytes)
	set(&l.DefaultListEntries, d.DefaultListEntries)
	set(&l.MaxListEntries, d.MaxListEntries)
	set(&l.MaxListDepth, d.MaxListDepth)
	setD(&l.ProgressInterval, d.ProgressInterval)
	set(&l.ProgressBytes, d.ProgressBytes)
	set(&l.MaxJobsPerSession, d.MaxJobsPerSession)
}

// Service holds what the tools share.
type Service struct {
	lim  Limits
	ws   *workspace.Manager
	be   backend.Backend
	jobs *jobs.Manager
	log  *slog.Logger

	tenants map[string]bool

	mu   sync.Mutex
	runs map[string]*jobRun // live output of jobs, by job ID
}

// New returns the tools over backend be and workspaces ws.
func New(lim Limits, ws *workspace.Manager, be backend.Backend, logger *slog.Logger) *Service {
	lim.applyDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tenants := map[string]bool{}
	for _, t := range lim.Tenants {
		tenants[t] = true
	}
	return &Service{
		lim: lim, ws: ws, be: be, log: logger, tenants: tenants,
		jobs: jobs.NewManager(jobs.Options{MaxRunningPerOwner: lim.MaxJobsPerSession, Retention: jobRetention}),
		runs: map[string]*jobRun{},
	}
}

// Limits returns the limits in force.
func (s *Service) Limits() Limits { return s.lim }

// Close kills every running job and waits for them, or for ctx.
func (s *Service) Close(ctx context.Context) error { return s.jobs.Close(ctx) }

// Observe counts the service's jobs in the jobs gauge of m.
func (s *Service) Observe(m *metrics.Set) { s.jobs.Observe(m) }

// Tools returns the service's tools, as POST /tools/<name> serves them.
// Each refuses a tenant outside Limits.Tenants.
func (s *Service) Tools() []service.Tool { return s.tools(false) }

// tools are the seven tools; with handle, their schemas take the
// workspace argument of MCP clients (MCPTools).
func (s *Service) tools(handle bool) []service.Tool {
	return s.guard([]service.Tool{
		s.execTool(handle),
		s.startTool(handle),
		s.statusTool(handle),
		s.cancelTool(handle),
		s.writeFileTool(handle),
		s.readFileTool(handle),
		s.listFilesTool(handle),
	})
}

// fileError turns a backend file error into an is_error result.
func fileError(op string, err error, call *service.Call) *tool.Result {
	for _, known := range []error{backend.ErrNotFound, backend.ErrIsDir, backend.ErrNotDir, backend.ErrOutside, backend.ErrQuota} {
		if errors.Is(err, known) {
			return tool.Errorf("%s: %v", op, err)
		}
	}
	call.Logger.Error(op, "err", err)
	return tool.Errorf("%s: %v", op, err)
}

func mustResult(r *tool.Result, err error) *tool.Result {
	if err != nil {
		return tool.Errorf("%v", err)
	}
	return r
}

func fieldErr(field, format string, args ...any) *tool.Result {
	return tool.Errorf("invalid arguments: %s: %s", field, fmt.Sprintf(format, args...))
}
