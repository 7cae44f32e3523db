package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/output"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// execArgs are the arguments of sandbox_exec and sandbox_start.
type execArgs struct {
	Command        string            `json:"command"`
	Cwd            string            `json:"cwd,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Stdin          *string           `json:"stdin,omitempty"`
	TimeoutSeconds *int              `json:"timeout_seconds,omitempty"`
	Workspace      *string           `json:"workspace,omitempty"`
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// check validates what the schema (execSchema) cannot say against the
// limits, and builds the request: a command of more than spaces, byte
// (not character) lengths, NUL bytes, the working directory. Errors are
// is_error results naming the field.
func (s *Service) check(args execArgs, defaultTimeout time.Duration) (backend.ExecRequest, *tool.Result) {
	l := s.lim
	var req backend.ExecRequest
	switch {
	case strings.TrimSpace(args.Command) == "":
		return req, fieldErr("command", "required: a shell command line")
	case len(args.Command) > l.MaxCommandBytes:
		return req, fieldErr("command", "%d bytes is over the limit of %d; write a script with sandbox_write_file and run it", len(args.Command), l.MaxCommandBytes)
	case strings.IndexByte(args.Command, 0) >= 0:
		return req, fieldErr("command", "contains a NUL byte")
	}
	dir, err := backend.CleanPath(args.Cwd)
	if err != nil {
		return req, fieldErr("cwd", "%v", err)
	}
	// The schema holds the count of variables and their names.
	envBytes := 0
	for k, v := range args.Env {
		if strings.IndexByte(v, 0) >= 0 {
			return req, fieldErr("env."+k, "contains a NUL byte")
		}
		envBytes += len(k) + len(v)
	}
	if envBytes > l.MaxEnvBytes {
		return req, fieldErr("env", "%d bytes is over the limit of %d", envBytes, l.MaxEnvBytes)
	}
	timeout := defaultTimeout
	if args.TimeoutSeconds != nil {
		timeout = time.Duration(*args.TimeoutSeconds) * time.Second // 1 to MaxTimeout: the schema's
	}
	req = backend.ExecRequest{Command: args.Command, Dir: dir, Env: args.Env, Timeout: timeout}
	if args.Stdin != nil {
		if len(*args.Stdin) > l.MaxStdinBytes {
			return req, fieldErr("stdin", "%d bytes is over the limit of %d", len(*args.Stdin), l.MaxStdinBytes)
		}
		req.Stdin = []byte(*args.Stdin)
	}
	return req, nil
}

// errTimedOut is the cause of a command's context when its timeout ends it.
var errTimedOut = errors.New("command timed out")

// run is one command's output and end, shared by sandbox_exec and jobs.
type run struct {
	started time.Time
	stdout  *output.Buffer
	stderr  *output.Buffer

	pmu     sync.Mutex
	dec     [3]output.Decoder
	pending [3]strings.Builder
	skipped [3]int64
	resync  [3]bool
}

func (s *Service) newRun() *run {
	return &run{
		started: time.Now(),
		stdout:  output.New(s.lim.HeadBytes, s.lim.TailBytes),
		stderr:  output.New(s.lim.HeadBytes, s.lim.TailBytes),
	}
}

// sink returns the OutputFunc that fills r; with progress set, it also
// keeps the text for the next progress event.
func (r *run) sink(progress bool, maxBytes int) backend.OutputFunc {
	return func(st backend.Stream, p []byte) {
		if st == backend.Stderr {
			_, _ = r.stderr.Write(p)
		} else {
			st = backend.Stdout
			_, _ = r.stdout.Write(p)
		}
		if !progress {
			return
		}
		r.pmu.Lock()
		defer r.pmu.Unlock()
		r.addProgress(st, p, maxBytes)
	}
}

// addProgress keeps p's text for the next progress event of stream st, up
// to maxBytes per event. Only what can fit is decoded, so a flood of output
// costs no more than the bytes an event carries; after a skip, decoding
// resumes at the next character start.
func (r *run) addProgress(st backend.Stream, p []byte, maxBytes int) {
	b := &r.pending[st]
	room := maxBytes - b.Len()
	if room <= 0 {
		r.skipped[st] += int64(len(p))
		r.resync[st] = true
		return
	}
	q := p[:min(len(p), room+utf8.UTFMax)]
	if r.resync[st] {
		n := 0
		for n < len(q) && n < utf8.UTFMax && !utf8.RuneStart(q[n]) {
			n++
		}
		r.skipped[st] += int64(n)
		q, p = q[n:], p[n:]
		r.resync[st] = false
	}
	text := r.dec[st].Decode(q)
	keep := validPrefix(text, room)
	b.WriteString(keep)
	if len(q) < len(p) || len(keep) < len(text) {
		r.skipped[st] += int64(len(p) - len(keep))
		r.dec[st] = output.Decoder{}
		r.resync[st] = true
	}
}

// validPrefix returns the longest prefix of s of at most n bytes that does
// not end inside a character.
func validPrefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// takeProgress returns the pending progress event, or nil when nothing was
// written since the last one.
func (r *run) takeProgress() map[string]any {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	ev := map[string]any{}
	for _, st := range []backend.Stream{backend.Stdout, backend.Stderr} {
		if r.pending[st].Len() > 0 {
			ev[st.String()] = r.pending[st].String()
			r.pending[st].Reset()
		}
		if r.skipped[st] > 0 {
			ev[st.String()+"_skipped_bytes"] = r.skipped[st]
			r.skipped[st] = 0
		}
	}
	if len(ev) == 0 {
		return nil
	}
	ev["elapsed_ms"] = time.Since(r.started).Milliseconds()
	return ev
}

// execResult is the structured_content of a finished command.
type execResult struct {
	ExitCode           int    `json:"exit_code"`
	Stdout             string `json:"stdout"`
	Stderr             string `json:"stderr"`
	TimedOut           bool   `json:"timed_out"`
	Cancelled          bool   `json:"cancelled"`
	DurationMS         int64  `json:"duration_ms"`
	StdoutDroppedBytes int64  `json:"stdout_dropped_bytes"`
	StderrDroppedBytes int64  `json:"stderr_dropped_bytes"`
	StdoutBytes        int64  `json:"stdout_bytes"`
	StderrBytes        int64  `json:"stderr_bytes"`
	Note               string `json:"note,omitempty"`
	// WorkspaceBytes and QuotaBytes are the workspace's disk use after the
	// command and its quota, from a backend that enforces one (local).
	WorkspaceBytes *int64 `json:"workspace_bytes,omitempty"`
	QuotaBytes     *int64 `json:"quota_bytes,omitempty"`
}

// execute runs req in ws until it ends, its timeout passes or ctx ends.
// With progress set, output goes out as progress events at most every
// ProgressInterval.
func (s *Service) execute(ctx context.Context, ws *workspace.Workspace, req backend.ExecRequest, r *run, progress func(any) error) *tool.Result {
	ctx, cancel := context.WithTimeoutCause(ctx, req.Timeout, errTimedOut)
	defer cancel()

	var wg sync.WaitGroup
	stop := make(chan struct{})
	if progress != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(s.lim.ProgressInterval)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					if ev := r.takeProgress(); ev != nil {
						if err := progress(ev); err != nil {
							return
						}
					}
				}
			}
		}()
	}
	res, err := s.be.Exec(ctx, ws, req, r.sink(progress != nil, s.lim.ProgressBytes))
	close(stop)
	wg.Wait()
	duration := time.Since(r.started)

	if err != nil {
		if errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrNotDir) {
			return tool.Errorf("sandbox: %v", err)
		}
		if errors.Is(err, backend.ErrNotStarted) {
			// Not the command's failure, and certainly no outcome: the
			// sandbox's own message, never an exit code. The operator has
			// to fix this host, so it is logged as an error too.
			s.log.Error("sandbox did not start", "backend", s.be.Name(), "err", err)
			return tool.Errorf("sandbox: %v", err)
		}
		// The provider failed mid-way: the command may have run.
		s.log.Error("exec", "backend", s.be.Name(), "err", err)
		return &tool.Result{Content: []tool.Content{tool.Text(fmt.Sprintf("sandbox: run the command: %v", err))}, IsError: true, UnknownOutcome: true}
	}
	out, errText := r.stdout.Text(), r.stderr.Text()
	er := execResult{
		ExitCode: res.ExitCode, Stdout: out.String(), Stderr: errText.String(),
		DurationMS:         duration.Milliseconds(),
		StdoutDroppedBytes: out.Dropped, StderrDroppedBytes: errText.Dropped,
		StdoutBytes: out.Total, StderrBytes: errText.Total,
	}
	var notes []string
	if res.Killed {
		switch {
		case res.Reason != "":
			er.Note = "killed: " + res.Reason
		case errors.Is(context.Cause(ctx), errTimedOut):
			er.TimedOut = true
			er.Note = fmt.Sprintf("killed after the timeout of %s, with every process it started", req.Timeout)
		default:
			er.Cancelled = true
			er.Note = "killed: the call was cancelled"
		}
	} else {
		er.Note = exitNote(res.ExitCode)
	}
	if er.Note != "" {
		notes = append(notes, er.Note)
	}
	if mk := res.Memory; mk != nil {
		notes = append(notes, fmt.Sprintf("killed by the session's memory bound: this session's processes together reached their limit of %s (SANDBOX_SESSION_MEMORY_BYTES), and the kernel ended %d of them", backend.Bytes(mk.Limit), mk.Kills))
	}
	if d := res.Disk; d != nil {
		if d.After >= 0 {
			er.WorkspaceBytes = &d.After
		}
		er.QuotaBytes = &d.Quota
		if n := diskNote(d); n != "" {
			notes = append(notes, n)
		}
	}
	er.Note = strings.Join(notes, "; ")
	result, jerr := tool.StructuredResult(er, renderExec(er))
	if jerr != nil {
		return tool.Errorf("sandbox: %v", jerr)
	}
	// A command that ran to its end is a successful call whatever its exit
	// code; one the service had to kill did not do what was asked, and
	// one that left its workspace over the disk quota broke a limit the
	// caller has to act on: the session's commands cannot write to files
	// until it deletes some. So did one whose processes the session's
	// memory bound killed.
	result.IsError = res.Killed || res.Disk.Over() || res.Memory != nil
	return result
}

// diskNote explains the disk quota's part in a command's end: the
// workspace over its quota (with the usage, the quota and what to do), or
// back under it after a command that ran without the right to write.
func diskNote(d *backend.DiskUse) string {
	switch {
	case d.After < 0:
		return fmt.Sprintf("the workspace's disk use could not be measured (%v), so it counts as over its quota of %s: commands cannot write to files and sandbox_write_file is refused until it can be; make every directory readable (chmod -R u+rwX /workspace)", d.Err, backend.Bytes(d.Quota))
	case d.After > d.Quota:
		var b strings.Builder
		fmt.Fprintf(&b, "disk quota exceeded: the workspace uses %s, over its quota of %s", backend.Bytes(d.After), backend.Bytes(d.Quota))
		if d.NoWrite {
			b.WriteString("; it was already over its quota when this command started, so the command ran without the right to write to files (writes fail with \"File too large\")")
		}
		fmt.Fprintf(&b, ". Delete at least %s of files (rm, or truncate logs) to get under the quota: until then every command runs without the right to write to files and sandbox_write_file is refused", backend.Bytes(d.After-d.Quota))
		return b.String()
	case d.NoWrite:
		return fmt.Sprintf("the workspace was over its disk quota when this command started, so the command ran without the right to write to files; it now uses %s of its quota of %s, so commands can write again", backend.Bytes(d.After), backend.Bytes(d.Quota))
	}
	return ""
}

// exitNote explains exit codes that mean a sandbox limit hit.
func exitNote(code int) string {
	switch code {
	case 137:
		return "exit 137: killed by SIGKILL (the CPU time limit, or a kill)"
	case 152:
		return "exit 152: killed by SIGXCPU, the CPU time limit"
	case 153:
		return "exit 153: killed by SIGXFSZ, the file size limit"
	case 127:
		return "exit 127: command not found"
	}
	return ""
}

func renderExec(er execResult) string {
	var b strings.Builder
	switch {
	case er.TimedOut:
		fmt.Fprintf(&b, "timed out after %d ms", er.DurationMS)
	case er.Cancelled:
		fmt.Fprintf(&b, "cancelled after %d ms", er.DurationMS)
	default:
		fmt.Fprintf(&b, "exit code %d (%d ms)", er.ExitCode, er.DurationMS)
	}
	if er.Note != "" {
		b.WriteString("; " + er.Note)
	}
	if er.Stdout != "" {
		b.WriteString("\nstdout:\n" + er.Stdout)
	}
	if er.Stderr != "" {
		if !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
		b.WriteString("stderr:\n" + er.Stderr)
	}
	return b.String()
}

const execDescription = "Run a shell command (bash -c) in this session's sandbox and return its exit code, stdout and stderr. " +
	"The working directory is the session's workspace (/workspace), which keeps its files across calls of the session; /tmp is scratch space cleared after each call. " +
	"There is no network. Output streams as progress; long output keeps its head and tail with a count of the bytes dropped between them. " +
	"The command and every process it starts are killed at timeout_seconds (default 60, at most 3600). For longer work use sandbox_start."

func (s *Service) execSchema(what string, defaultTimeout time.Duration) json.RawMessage {
	return mustJSON(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"command": map[string]any{"type": "string", "minLength": 1, "maxLength": s.lim.MaxCommandBytes, "description": "The shell command line " + what + ", run with bash -c. Heredocs and pipes work."},
			"cwd":     map[string]any{"type": "string", "maxLength": 4096, "description": "Working directory, relative to the workspace or absolute under /workspace. Default: the workspace."},
			"env": map[string]any{
				"type": "object", "maxProperties": s.lim.MaxEnvVars,
				"propertyNames":        map[string]any{"pattern": envNameRE.String()},
				"additionalProperties": map[string]any{"type": "string"},
				"description":          "Environment variables for the command. The environment is otherwise empty apart from PATH, HOME and LANG.",
			},
			"stdin":           map[string]any{"type": "string", "maxLength": s.lim.MaxStdinBytes, "description": "Text for the command's standard input. Without it stdin is empty."},
			"timeout_seconds": map[string]any{"type": "integer", "minimum": 1, "maximum": int(s.lim.MaxTimeout / time.Second), "description": fmt.Sprintf("Kill the command after this many seconds. Default %d.", int(defaultTimeout/time.Second))},
		},
		"required":             []string{"command"},
		"additionalProperties": false,
	})
}

var execOutputSchema = mustJSON(map[string]any{
	"type": "object",
	"properties": map[string]any{
		"exit_code":            map[string]any{"type": "integer", "description": "The exit status; 128+n for signal n; -1 when the service killed the command."},
		"stdout":               map[string]any{"type": "string"},
		"stderr":               map[string]any{"type": "string"},
		"timed_out":            map[string]any{"type": "boolean"},
		"cancelled":            map[string]any{"type": "boolean"},
		"duration_ms":          map[string]any{"type": "integer"},
		"stdout_dropped_bytes": map[string]any{"type": "integer"},
		"stderr_dropped_bytes": map[string]any{"type": "integer"},
		"stdout_bytes":         map[string]any{"type": "integer"},
		"stderr_bytes":         map[string]any{"type": "integer"},
		"note":                 map[string]any{"type": "string"},
		"workspace_bytes":      map[string]any{"type": "integer", "description": "The workspace's disk use when the command ended (local sandbox)."},
		"quota_bytes":          map[string]any{"type": "integer", "description": "The workspace's disk quota (local sandbox). A command that leaves the workspace over it is an error."},
	},
	"required": []string{"exit_code", "stdout", "stderr", "timed_out", "cancelled", "duration_ms", "stdout_dropped_bytes", "stderr_dropped_bytes"},
})

func (s *Service) execTool(handle bool) service.Tool {
	return declare(tool.Binding{
		Name:        "sandbox_exec",
		Title:       "Run a command",
		Description: execDescription,
		// A command may change or delete anything in the workspace, and
		// reach the network where the backend allows it: every MCP
		// default (destructive, not idempotent, open world).
		Annotations:  &tool.Annotations{},
		InputSchema:  s.execSchema("to run", s.lim.DefaultTimeout),
		OutputSchema: execOutputSchema,
		// The command may run for MaxTimeout; the answer needs a moment
		// more to come back.
		TimeoutSeconds: int(s.lim.MaxTimeout/time.Second) + 60,
	}, handle, func(ctx context.Context, call *service.Call, args execArgs) (*tool.Result, error) {
		req, bad := s.check(args, s.lim.DefaultTimeout)
		if bad != nil {
			return bad, nil
		}
		ws, release, bad := s.acquire(ctx, call, args.Workspace)
		if bad != nil {
			return bad, nil
		}
		defer release()
		return s.execute(ctx, ws, req, s.newRun(), call.Progress), nil
	})

}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
