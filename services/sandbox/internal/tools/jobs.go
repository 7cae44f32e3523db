package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/sandbox/internal/backend"
)

// The job tools follow pkg/jobs (IDs, states, StatusJSON, a job owned by
// its tenant and session), with one addition: a running job's status
// carries its output so far.
//
// Job IDs are the jobs.Manager's: 26 random characters, "_", and the run
// tag of the service process that started the job (jobs.NewID). Jobs live
// in memory, so a restart ends them; a status or cancel call with an ID of
// an earlier run is told so, with unknown_outcome (see jobAnswer).

// jobRetention is how long an ended job (and its output) stays readable:
// the jobs.Manager's Retention and the purge of Service.runs.
const jobRetention = time.Hour

// jobRun is a job's live output, kept for status calls.
type jobRun struct {
	run     *run
	owner   jobs.Owner
	command string
	ended   time.Time // zero while running
}

var jobSpec = jobs.Spec{Prefix: "sandbox", Noun: "command", IDField: "job_id"}

func (s *Service) startTool(handle bool) service.Tool {
	return declare(tool.Binding{
		Name:  "sandbox_start",
		Title: "Start a command",
		// As sandbox_exec: a command may do anything in the workspace.
		Annotations: &tool.Annotations{},
		Description: "Start a long shell command in this session's sandbox and return its job_id at once, without waiting. " +
			"Follow it with sandbox_status (its output so far, and its result once it has ended) and stop it with sandbox_cancel. " +
			fmt.Sprintf("Same arguments and sandbox as sandbox_exec; timeout_seconds defaults to %d here.", int(s.lim.DefaultJobTimeout/time.Second)),
		InputSchema:    s.execSchema("to start", s.lim.DefaultJobTimeout),
		OutputSchema:   jobs.OutputSchema(jobSpec.IDField),
		TimeoutSeconds: 60,
	}, handle, func(ctx context.Context, call *service.Call, args execArgs) (*tool.Result, error) {
		req, bad := s.check(args, s.lim.DefaultJobTimeout)
		if bad != nil {
			return bad, nil
		}
		sc, bad := s.scopeOf(ctx, call, args.Workspace)
		if bad != nil {
			return bad, nil
		}
		if sc.oneShot {
			return tool.Errorf("sandbox_start: this stateless MCP request has no session to keep the command in, so no later call could ask for it: " +
				"open a workspace with sandbox_workspace_open and pass its handle as workspace to sandbox_start, sandbox_status and sandbox_cancel"), nil
		}
		ws, release, bad := s.acquireScope(call, sc)
		if bad != nil {
			return bad, nil
		}
		r := s.newRun()
		jr := &jobRun{run: r, owner: sc.owner, command: req.Command}
		// The job's ID marks its sandbox (ExecRequest.Job); the job may
		// start before Start has returned it.
		idc := make(chan string, 1)
		st, err := s.jobs.Start(jr.owner, func(ctx context.Context) *tool.Result {
			defer release()
			select {
			case req.Job = <-idc:
			case <-ctx.Done():
			}
			res := s.execute(ctx, ws, req, r, nil)
			s.mu.Lock()
			jr.ended = time.Now()
			s.mu.Unlock()
			return res
		})
		if err != nil {
			release()
			if errors.Is(err, jobs.ErrTooManyJobs) {
				return tool.Errorf("sandbox_start: this session already has %d running commands; wait for one or cancel it", s.lim.MaxJobsPerSession), nil
			}
			return tool.Errorf("sandbox_start: %v", err), nil
		}
		s.mu.Lock()
		s.purgeLocked()
		s.runs[st.ID] = jr
		s.mu.Unlock()
		idc <- st.ID
		call.Logger.Info("job started", "job_id", st.ID)
		return jobs.StartedResult(jobSpec, st, map[string]any{"timeout_seconds": int(req.Timeout / time.Second)}), nil
	})

}

// purgeLocked forgets the output of jobs that ended over jobRetention ago,
// as the jobs.Manager forgets the jobs.
func (s *Service) purgeLocked() {
	cutoff := time.Now().Add(-jobRetention)
	for id, jr := range s.runs {
		if !jr.ended.IsZero() && jr.ended.Before(cutoff) {
			delete(s.runs, id)
		}
	}
}

type jobIDArgs struct {
	JobID       string  `json:"job_id"`
	WaitSeconds *int    `json:"wait_seconds,omitempty"`
	Workspace   *string `json:"workspace,omitempty"`
}

func (s *Service) statusTool(handle bool) service.Tool {
	maxWait := int(jobs.DefaultMaxWait / time.Second)
	return declare(tool.Binding{
		Name:        "sandbox_status",
		Title:       "Command status",
		Annotations: tool.ReadOnly(),
		Description: "Tell the state of a command started with sandbox_start: running (with its output so far), succeeded, failed or cancelled (with its result). " +
			fmt.Sprintf("Set wait_seconds (at most %d) to wait for it to end first.", maxWait),
		InputSchema: mustJSON(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"job_id":       map[string]any{"type": "string", "pattern": jobs.IDPattern, "description": "The job_id sandbox_start returned."},
				"wait_seconds": map[string]any{"type": "integer", "minimum": 0, "maximum": maxWait, "description": "Wait up to this many seconds for the command to end. Default 0."},
			},
			"required":             []string{"job_id"},
			"additionalProperties": false,
		}),
		OutputSchema:   jobs.OutputSchema(jobSpec.IDField),
		TimeoutSeconds: 60,
	}, handle, func(ctx context.Context, call *service.Call, args jobIDArgs) (*tool.Result, error) {
		wait := time.Duration(0)
		if args.WaitSeconds != nil {
			wait = time.Duration(*args.WaitSeconds) * time.Second
		}
		sc, bad := s.jobScope(ctx, call, args.Workspace)
		if bad != nil {
			return bad, nil
		}
		st, err := s.jobs.Status(ctx, sc.owner, args.JobID, wait)
		return s.jobAnswer("status", args.JobID, st, err, call, sc), nil
	})

}

func (s *Service) cancelTool(handle bool) service.Tool {
	return declare(tool.Binding{
		Name:  "sandbox_cancel",
		Title: "Cancel a command",
		// Killing stops the work (destructive); cancelling again changes
		// nothing; the job is the service's own.
		Annotations: &tool.Annotations{IdempotentHint: true, OpenWorldHint: new(bool)},
		Description: "Kill a command started with sandbox_start, with every process it started, and tell its state afterwards. Cancelling a command that has already ended changes nothing.",
		InputSchema: mustJSON(map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"job_id": map[string]any{"type": "string", "pattern": jobs.IDPattern, "description": "The job_id sandbox_start returned."}},
			"required":             []string{"job_id"},
			"additionalProperties": false,
		}),
		OutputSchema:   jobs.OutputSchema(jobSpec.IDField),
		TimeoutSeconds: 30,
	}, handle, func(ctx context.Context, call *service.Call, args jobIDArgs) (*tool.Result, error) {
		sc, bad := s.jobScope(ctx, call, args.Workspace)
		if bad != nil {
			return bad, nil
		}
		st, err := s.jobs.Cancel(ctx, sc.owner, args.JobID)
		return s.jobAnswer("cancel", args.JobID, st, err, call, sc), nil
	})

}

// jobAnswer renders a job's status, adding the output so far while it runs.
// The errors it answers:
//
//   - an ID of an earlier run of the service (jobs.InstanceError): is_error
//     with unknown_outcome, saying the service restarted after the command
//     started, so the command, if still running, was stopped with it (local
//     backend) or is out of reach (remote ones), and its outcome is unknown;
//   - an ID of this run that is not this session's or was forgotten
//     (jobs.ErrNotFound): is_error "no command <id> in this session", with
//     the retention rule. Both cases read the same for every session.
func (s *Service) jobAnswer(op, id string, st jobs.Status, err error, call *service.Call, sc scope) *tool.Result {
	if errors.Is(err, jobs.ErrNotFound) {
		where, hint := "this session", ""
		switch {
		case sc.owner.Handle != "":
			where = "this workspace"
		case sc.oneShot:
			hint = "; a stateless MCP request has no session of its own: pass the workspace handle the command was started with"
		}
		return tool.Errorf("sandbox_%s: no command %s in %s: either it is not this %s's, or it ended more than %s ago and was forgotten (a command is kept until %s after it ends)%s",
			op, id, where, strings.TrimPrefix(where, "this "), forHumans(jobRetention), forHumans(jobRetention), hint)
	}
	var ie *jobs.InstanceError
	if errors.As(err, &ie) {
		return &tool.Result{Content: []tool.Content{tool.Text(fmt.Sprintf("sandbox_%s: %s", op, ie.Explain("command", "the sandbox service", s.ifRunningAtRestart(id))))}, IsError: true, UnknownOutcome: true}
	}
	if err != nil {
		call.Logger.Error("job "+op, "job_id", id, "err", err)
		return &tool.Result{Content: []tool.Content{tool.Text(fmt.Sprintf("sandbox_%s %s: internal error", op, id))}, IsError: true, UnknownOutcome: op == "cancel"}
	}
	m := jobs.StatusJSON(jobSpec.IDField, st)
	text := jobs.StatusText(jobSpec.Noun, st)
	s.mu.Lock()
	jr := s.runs[id]
	s.mu.Unlock()
	if jr != nil {
		m["command"] = jr.command
	}
	if st.State == jobs.Running && jr != nil {
		out, errText := jr.run.stdout.Text(), jr.run.stderr.Text()
		m["output"] = map[string]any{
			"stdout": out.String(), "stderr": errText.String(),
			"stdout_dropped_bytes": out.Dropped, "stderr_dropped_bytes": errText.Dropped,
			"elapsed_ms": time.Since(jr.run.started).Milliseconds(),
		}
		var b strings.Builder
		b.WriteString(text)
		if o := out.String(); o != "" {
			b.WriteString("\nstdout so far:\n" + o)
		}
		if e := errText.String(); e != "" {
			b.WriteString("\nstderr so far:\n" + e)
		}
		text = b.String()
	}
	return mustResult(tool.StructuredResult(m, text))
}

// leftoverReporter is a backend that looks for what earlier runs left
// running when it starts (local).
type leftoverReporter interface{ Leftovers() backend.Leftovers }

// ifRunningAtRestart says what became of job id if it was still running
// when the service's earlier run ended. A local command runs in a
// bubblewrap sandbox started with --die-with-parent, so it died with the
// service — unless its sandbox was still being set up then and outlived
// the service, in which case this run found it at its start and killed it
// (the backend's Leftovers), which the answer says. A remote backend's
// sandbox lives at its provider, which this run no longer reaches (a
// session gets a new sandbox after a restart).
func (s *Service) ifRunningAtRestart(id string) string {
	if name := s.be.Name(); name != "local" {
		return fmt.Sprintf("it may still be running in the session's earlier %s sandbox, which this service can no longer reach or stop, until %s removes that sandbox", name, name)
	}
	if lr, ok := s.be.(leftoverReporter); ok {
		if left := lr.Leftovers(); left.Jobs[id] {
			return fmt.Sprintf("it outlived the service (its sandbox was still being set up when the service died), and this run found it still running at its start and killed it at %s, with every process it started",
				left.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
		}
	}
	return "it was killed with the service, with every process it started"
}

// forHumans writes d as "1 hour", "90 minutes" or, for other lengths, as
// time.Duration.String does.
func forHumans(d time.Duration) string {
	unit, n := "", int64(0)
	switch {
	case d > 0 && d%time.Hour == 0:
		unit, n = "hour", int64(d/time.Hour)
	case d > 0 && d%time.Minute == 0:
		unit, n = "minute", int64(d/time.Minute)
	default:
		return d.String()
	}
	if n != 1 {
		unit += "s"
	}
	return fmt.Sprintf("%d %s", n, unit)
}
