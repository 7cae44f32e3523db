// Package daytona runs sandbox commands on Daytona (daytona.io) through
// its REST API with plain net/http. One Daytona sandbox serves one
// session: created on the session's first call, reused by its later
// calls, deleted when the session's workspace expires (and stopped by
// Daytona itself after autoStopInterval if this service is gone).
//
// API (https://app.daytona.io/api, Authorization: Bearer <key>):
// POST /sandbox → {id, state, toolboxProxyUrl}, GET /sandbox/{id} until
// state is "started", DELETE /sandbox/{id}, GET /sandbox.
// Toolbox (<toolboxProxyUrl>/<id>): each command runs in a session of its
// own — POST /process/session {sessionId}, POST /process/session/{sid}/exec
// {command, runAsync: true} → {cmdId}, GET .../command/{cmdId} until
// exitCode is set, GET .../command/{cmdId}/logs, DELETE the session. The
// daemon does not run a shell, so the command goes as `bash -c` of a
// base64 script. A timeout or cancel kills the command's processes through
// POST /process/execute. Files: GET /files/download, POST /files/upload
// (multipart "file"), POST /files/folder, GET /files (one level),
// GET /files/info, GET /work-dir. Source: shared/design/PROVIDERS.md and
// the Daytona daemon's toolbox routes.
//
// Daytona's session logs hold stdout and stderr merged, and come after the
// command ends (following them live needs a WebSocket), so output is not
// streamed as progress and stderr arrives inside stdout.
package daytona

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/brain-tools/suite/pkg/tracing"
	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// Config configures the Daytona backend (env vars in README.md).
type Config struct {
	// APIKey authenticates every call. Required.
	APIKey string `env:"DAYTONA_API_KEY"`
	// APIURL is the API base.
	APIURL string `env:"DAYTONA_API_URL" envDefault:"https://app.daytona.io/api"`
	// Snapshot is the snapshot sandboxes start from; empty is Daytona's
	// default.
	Snapshot string `env:"DAYTONA_SNAPSHOT"`
	// Workdir is the workspace inside the sandbox; empty means
	// "workspace" under the daemon's working directory (GET /work-dir).
	Workdir string `env:"DAYTONA_WORKDIR"`
	// AllowInternet gives sandboxes network access (networkBlockAll off).
	AllowInternet bool `env:"DAYTONA_ALLOW_INTERNET" envDefault:"false"`
}

// Backend is the Daytona client. Create it with New.
type Backend struct {
	cfg      Config
	api      string
	autoStop int // minutes
	http     *http.Client
	log      *slog.Logger
	poll     time.Duration // first command status poll interval

	mu        sync.Mutex
	sandboxes map[string]*sandbox // by workspace ID

	checkMu sync.Mutex
	checkAt time.Time
	checkOK error
}

type sandbox struct {
	mu   sync.Mutex
	conn conn
}

// conn reaches one sandbox's toolbox; a copy, so a replaced sandbox does
// not change a call in flight.
type conn struct {
	id      string
	toolbox string // <toolboxProxyUrl>/<id>
	workdir string
}

var _ backend.Backend = (*Backend)(nil)

// New returns a Daytona backend; sandboxes stop on their own after idle
// plus a margin without use.
func New(cfg Config, idle time.Duration, logger *slog.Logger) (*Backend, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("daytona backend: DAYTONA_API_KEY is not set")
	}
	if cfg.APIURL == "" {
		cfg.APIURL = "https://app.daytona.io/api"
	}
	if _, err := url.Parse(cfg.APIURL); err != nil {
		return nil, fmt.Errorf("daytona backend: DAYTONA_API_URL: %w", err)
	}
	if cfg.Workdir != "" && !path.IsAbs(cfg.Workdir) {
		return nil, fmt.Errorf("daytona backend: DAYTONA_WORKDIR must be an absolute path, got %q", cfg.Workdir)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Backend{
		cfg: cfg, api: strings.TrimRight(cfg.APIURL, "/"), autoStop: int((idle + 5*time.Minute) / time.Minute),
		http: &http.Client{Transport: tracing.Transport(http.DefaultTransport, "daytona")}, log: logger, poll: 50 * time.Millisecond,
		sandboxes: map[string]*sandbox{},
	}, nil
}

// Name returns "daytona".
func (b *Backend) Name() string { return "daytona" }

// APIError is a non-2xx answer of the API or the toolbox.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message) }

func apiError(status int, body []byte) *APIError {
	var m struct {
		Message json.RawMessage `json:"message"`
		Error   string          `json:"error"`
	}
	e := &APIError{Status: status}
	if json.Unmarshal(body, &m) == nil {
		var msg string
		if json.Unmarshal(m.Message, &msg) == nil && msg != "" {
			e.Message = msg
		} else if len(m.Message) > 0 && string(m.Message) != "null" {
			e.Message = string(m.Message) // NestJS validation: a list
		} else if m.Error != "" {
			e.Message = m.Error
		}
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 300 {
			e.Message = e.Message[:300] + "..."
		}
	}
	return e
}

// do sends a request with the API key and returns the body of a 2xx
// answer.
func (b *Backend) do(ctx context.Context, method, u string, body io.Reader, contentType string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+b.cfg.APIKey)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, nil, apiError(resp.StatusCode, data)
	}
	return data, resp.Header, nil
}

func (b *Backend) doJSON(ctx context.Context, method, u string, in, out any) error {
	var rd io.Reader
	ct := ""
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		rd, ct = bytes.NewReader(data), "application/json"
	}
	data, _, err := b.do(ctx, method, u, rd, ct)
	if err != nil {
		return err
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		return json.Unmarshal(data, out)
	}
	return nil
}

// Check lists sandboxes to prove the key works, cached for a minute.
func (b *Backend) Check(ctx context.Context) error {
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	if time.Since(b.checkAt) < time.Minute {
		return b.checkOK
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := b.doJSON(ctx, http.MethodGet, b.api+"/sandbox", nil, nil)
	if err != nil {
		err = fmt.Errorf("daytona: list sandboxes: %w", err)
	}
	b.checkAt, b.checkOK = time.Now(), err
	return err
}

type sandboxInfo struct {
	ID              string `json:"id"`
	State           string `json:"state"`
	ToolboxProxyURL string `json:"toolboxProxyUrl"`
	ErrorReason     string `json:"errorReason"`
}

// sandboxFor returns the session's sandbox, creating it on first use.
func (b *Backend) sandboxFor(ctx context.Context, ws *workspace.Workspace) (conn, error) {
	b.mu.Lock()
	sb := b.sandboxes[ws.ID]
	if sb == nil {
		sb = &sandbox{}
		b.sandboxes[ws.ID] = sb
	}
	b.mu.Unlock()
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.conn.id != "" {
		return sb.conn, nil
	}
	body := map[string]any{
		"env":              map[string]string{},
		"labels":           map[string]string{"tenant_id": ws.Owner.Tenant, "session_id": ws.SessionName(), "workspace": ws.Key},
		"autoStopInterval": b.autoStop,
		"networkBlockAll":  !b.cfg.AllowInternet,
	}
	if b.cfg.Snapshot != "" {
		body["snapshot"] = b.cfg.Snapshot
	}
	var info sandboxInfo
	if err := b.doJSON(ctx, http.MethodPost, b.api+"/sandbox", body, &info); err != nil {
		return conn{}, fmt.Errorf("daytona: create sandbox: %w", err)
	}
	if info.ID == "" {
		return conn{}, errors.New("daytona: create sandbox: answer without an id")
	}
	fail := func(err error) (conn, error) {
		b.deleteSandbox(info.ID)
		return conn{}, err
	}
	// Wait for it to start.
	for delay := 100 * time.Millisecond; info.State != "started"; delay = min(delay*2, 2*time.Second) {
		switch info.State {
		case "error", "build_failed", "destroyed", "destroying":
			return fail(fmt.Errorf("daytona: sandbox %s is %s: %s", info.ID, info.State, info.ErrorReason))
		}
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("daytona: wait for sandbox %s to start: %w", info.ID, ctx.Err()))
		case <-time.After(delay):
		}
		if err := b.doJSON(ctx, http.MethodGet, b.api+"/sandbox/"+url.PathEscape(info.ID), nil, &info); err != nil {
			return fail(fmt.Errorf("daytona: sandbox %s: %w", info.ID, err))
		}
	}
	proxy := info.ToolboxProxyURL
	if proxy == "" {
		proxy = b.api + "/toolbox"
	}
	c := conn{id: info.ID, toolbox: strings.TrimRight(proxy, "/") + "/" + url.PathEscape(info.ID)}
	c.workdir = b.cfg.Workdir
	if c.workdir == "" {
		var wd struct {
			Dir string `json:"dir"`
		}
		if err := b.doJSON(ctx, http.MethodGet, c.toolbox+"/work-dir", nil, &wd); err != nil || !path.IsAbs(wd.Dir) {
			wd.Dir = "/home/daytona"
		}
		c.workdir = path.Join(wd.Dir, "workspace")
	}
	if err := b.mkdir(ctx, c, c.workdir); err != nil {
		return fail(fmt.Errorf("daytona: create the workspace directory: %w", err))
	}
	sb.conn = c
	b.log.Info("daytona sandbox created", "sandbox_id", c.id, "tenant_id", ws.Owner.Tenant, "session_id", ws.SessionName())
	return c, nil
}

func (b *Backend) mkdir(ctx context.Context, c conn, dir string) error {
	q := url.Values{"path": {dir}, "mode": {"755"}}
	_, _, err := b.do(ctx, http.MethodPost, c.toolbox+"/files/folder?"+q.Encode(), nil, "")
	return err
}

// Release deletes the session's sandbox.
func (b *Backend) Release(ctx context.Context, ws *workspace.Workspace) error {
	b.mu.Lock()
	sb := b.sandboxes[ws.ID]
	delete(b.sandboxes, ws.ID)
	b.mu.Unlock()
	if sb == nil {
		return nil
	}
	sb.mu.Lock()
	id := sb.conn.id
	sb.conn = conn{}
	sb.mu.Unlock()
	if id == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := b.doJSON(ctx, http.MethodDelete, b.api+"/sandbox/"+url.PathEscape(id), nil, nil)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("daytona: delete sandbox %s: %w", id, err)
	}
	return nil
}

func (b *Backend) deleteSandbox(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.doJSON(ctx, http.MethodDelete, b.api+"/sandbox/"+url.PathEscape(id), nil, nil); err != nil {
		b.log.Warn("daytona: delete sandbox", "sandbox_id", id, "err", err)
	}
}

func (c conn) abs(rel string) string { return path.Join(c.workdir, rel) }

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// wrapForShell returns a line for a session, whose shell runs it: bash -c
// of a base64 script, so no quoting is at anyone's mercy. The script is an
// argument, not bash's stdin, so it may redirect stdin freely.
func wrapForShell(script string) string {
	return `bash -c "$(echo ` + base64.StdEncoding.EncodeToString([]byte(script)) + ` | base64 -d)"`
}

// wrapNoShell returns a line for /process/execute, which runs no shell
// and only splits the line at spaces outside quotes: bash -c of a pipeline
// that feeds the base64 script to a second bash.
func wrapNoShell(script string) string {
	return `bash -c 'echo ` + base64.StdEncoding.EncodeToString([]byte(script)) + ` | base64 -d | bash'`
}

// script is what one command runs: the tag, the environment, the working
// directory and stdin, then the command itself under bash -c.
func script(req backend.ExecRequest, dir, tag, stdinPath string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "export %s=%s\n", backend.RunTagVar, tag)
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(req.Env[k]))
	}
	fmt.Fprintf(&b, "cd %s || exit 1\n", shellQuote(dir))
	if stdinPath != "" {
		fmt.Fprintf(&b, "exec 0<%s && rm -f %s\n", shellQuote(stdinPath), shellQuote(stdinPath))
	} else {
		b.WriteString("exec 0</dev/null\n")
	}
	fmt.Fprintf(&b, "exec bash -c %s\n", shellQuote(req.Command))
	return b.String()
}

// Exec runs req in a session of its own in the workspace's sandbox.
func (b *Backend) Exec(ctx context.Context, ws *workspace.Workspace, req backend.ExecRequest, out backend.OutputFunc) (backend.ExecResult, error) {
	c, err := b.sandboxFor(ctx, ws)
	if err != nil {
		return backend.ExecResult{}, err
	}
	dir := c.abs(req.Dir)
	if req.Dir != "" {
		fi, err := b.info(ctx, c, dir)
		if err != nil {
			return backend.ExecResult{}, fmt.Errorf("cwd %q: %w", req.Dir, err)
		}
		if !fi.IsDir {
			return backend.ExecResult{}, fmt.Errorf("cwd %q: %w", req.Dir, backend.ErrNotDir)
		}
	}
	tag := "brain" + randomHex()
	stdinPath := ""
	if req.Stdin != nil {
		stdinPath = "/tmp/." + tag + ".stdin"
		if err := b.upload(ctx, c, stdinPath, req.Stdin); err != nil {
			return backend.ExecResult{}, fmt.Errorf("daytona: upload stdin: %w", err)
		}
	}
	sid := tag
	if err := b.doJSON(ctx, http.MethodPost, c.toolbox+"/process/session", map[string]string{"sessionId": sid}, nil); err != nil {
		return backend.ExecResult{}, fmt.Errorf("daytona: create session: %w", err)
	}
	defer func() {
		// The session's shell goes; its log with it.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := b.doJSON(dctx, http.MethodDelete, c.toolbox+"/process/session/"+url.PathEscape(sid), nil, nil); err != nil {
			b.log.Warn("daytona: delete session", "sandbox_id", c.id, "err", err)
		}
	}()
	var started struct {
		CmdID string `json:"cmdId"`
	}
	sessURL := c.toolbox + "/process/session/" + url.PathEscape(sid)
	if err := b.doJSON(ctx, http.MethodPost, sessURL+"/exec", map[string]any{"command": wrapForShell(script(req, dir, tag, stdinPath)), "runAsync": true}, &started); err != nil {
		return backend.ExecResult{}, fmt.Errorf("daytona: run command: %w", err)
	}
	if started.CmdID == "" {
		return backend.ExecResult{}, errors.New("daytona: run command: answer without a cmdId")
	}
	cmdURL := sessURL + "/command/" + url.PathEscape(started.CmdID)

	exit, err := b.wait(ctx, cmdURL)
	if err != nil && ctx.Err() == nil {
		return backend.ExecResult{}, err
	}
	killed := ctx.Err() != nil
	if killed {
		// Nothing stops a session command but killing its processes.
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		b.killTagged(kctx, c, tag)
		cancel()
	} else {
		// Like the local backend: nothing a command left in the background
		// outlives it.
		go func() {
			kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b.killTagged(kctx, c, tag)
		}()
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := b.logs(lctx, cmdURL, out); err != nil && !killed {
		return backend.ExecResult{}, fmt.Errorf("daytona: command logs: %w", err)
	}
	if killed {
		return backend.ExecResult{ExitCode: -1, Killed: true}, nil
	}
	return backend.ExecResult{ExitCode: exit}, nil
}

// wait polls the command until it has an exit code or ctx ends.
func (b *Backend) wait(ctx context.Context, cmdURL string) (int, error) {
	delay := b.poll
	for {
		var cmd struct {
			ID       string `json:"id"`
			ExitCode *int   `json:"exitCode"`
		}
		if err := b.doJSON(ctx, http.MethodGet, cmdURL, nil, &cmd); err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, fmt.Errorf("daytona: command status: %w", err)
		}
		if cmd.ExitCode != nil {
			return *cmd.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*3/2, 500*time.Millisecond)
	}
}

// logs streams the command's log to out: plain text (stdout and stderr
// merged), or {"stdout","stderr"} from daemons that keep them apart.
func (b *Backend) logs(ctx context.Context, cmdURL string, out backend.OutputFunc) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cmdURL+"/logs", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+b.cfg.APIKey)
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return apiError(resp.StatusCode, data)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		var l struct {
			Stdout string `json:"stdout"`
			Stderr string `json:"stderr"`
			Output string `json:"output"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&l); err != nil {
			return err
		}
		if l.Stdout == "" && l.Stderr == "" {
			l.Stdout = l.Output
		}
		if l.Stdout != "" {
			out(backend.Stdout, []byte(l.Stdout))
		}
		if l.Stderr != "" {
			out(backend.Stderr, []byte(l.Stderr))
		}
		return nil
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			out(backend.Stdout, buf[:n])
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// killTagged kills every process carrying the run's tag, through the
// daemon's one-shot execute.
func (b *Backend) killTagged(ctx context.Context, c conn, tag string) {
	var res struct {
		ExitCode *int   `json:"exitCode"`
		Code     *int   `json:"code"`
		Result   string `json:"result"`
	}
	err := b.doJSON(ctx, http.MethodPost, c.toolbox+"/process/execute", map[string]any{"command": wrapNoShell(backend.KillTaggedScript(tag)), "timeout": 15}, &res)
	if err != nil {
		b.log.Warn("daytona: kill the command's processes", "sandbox_id", c.id, "err", err)
	}
}

// fileInfo is the daemon's FileInfo.
type fileInfo struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Mode    string `json:"mode"`
	ModTime string `json:"modTime"`
	IsDir   bool   `json:"isDir"`
}

func (b *Backend) info(ctx context.Context, c conn, abs string) (fileInfo, error) {
	var fi fileInfo
	err := b.doJSON(ctx, http.MethodGet, c.toolbox+"/files/info?"+url.Values{"path": {abs}}.Encode(), nil, &fi)
	return fi, mapErr(err)
}

func mapErr(err error) error {
	var ae *APIError
	if !errors.As(err, &ae) {
		return err
	}
	msg := strings.ToLower(ae.Message)
	switch {
	case ae.Status == http.StatusNotFound || strings.Contains(msg, "no such file"):
		return fmt.Errorf("%w (%v)", backend.ErrNotFound, err)
	case strings.Contains(msg, "not a directory"):
		return fmt.Errorf("%w (%v)", backend.ErrNotDir, err)
	case strings.Contains(msg, "is a directory"):
		return fmt.Errorf("%w (%v)", backend.ErrIsDir, err)
	case ae.Status == http.StatusInsufficientStorage || strings.Contains(msg, "no space left"):
		return fmt.Errorf("%w (%v)", backend.ErrQuota, err)
	}
	return err
}

func (b *Backend) upload(ctx context.Context, c conn, abs string, data []byte) error {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", path.Base(abs))
	if err != nil {
		return err
	}
	_, _ = fw.Write(data) // a bytes.Buffer behind it: cannot fail
	mw.Close()
	_, _, err = b.do(ctx, http.MethodPost, c.toolbox+"/files/upload?"+url.Values{"path": {abs}}.Encode(), &body, mw.FormDataContentType())
	return mapErr(err)
}

// WriteFile uploads data to rel, making its parent directories first.
func (b *Backend) WriteFile(ctx context.Context, ws *workspace.Workspace, rel string, data []byte) error {
	c, err := b.sandboxFor(ctx, ws)
	if err != nil {
		return err
	}
	abs := c.abs(rel)
	if fi, err := b.info(ctx, c, abs); err == nil && fi.IsDir {
		return fmt.Errorf("write %s: %w", rel, backend.ErrIsDir)
	}
	if dir := path.Dir(abs); dir != c.workdir {
		// An existing folder is fine; a real problem shows in the upload.
		_ = b.mkdir(ctx, c, dir)
	}
	if err := b.upload(ctx, c, abs, data); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}

// ReadFile downloads rel, keeping limit bytes from offset.
func (b *Backend) ReadFile(ctx context.Context, ws *workspace.Workspace, rel string, offset, limit int64) ([]byte, int64, error) {
	c, err := b.sandboxFor(ctx, ws)
	if err != nil {
		return nil, 0, err
	}
	abs := c.abs(rel)
	fi, err := b.info(ctx, c, abs)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", rel, err)
	}
	if fi.IsDir {
		return nil, 0, fmt.Errorf("read %s: %w", rel, backend.ErrIsDir)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.toolbox+"/files/download?"+url.Values{"path": {abs}}.Encode(), nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+b.cfg.APIKey)
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", rel, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, 0, fmt.Errorf("read %s: %w", rel, mapErr(apiError(resp.StatusCode, data)))
	}
	if offset > 0 {
		if _, err := io.CopyN(io.Discard, resp.Body, offset); err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("read %s: %w", rel, err)
		}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", rel, err)
	}
	return data, fi.Size, nil
}

// ListFiles lists rel depth levels down, one GET /files per directory.
func (b *Backend) ListFiles(ctx context.Context, ws *workspace.Workspace, rel string, depth, limit int) ([]backend.FileInfo, bool, error) {
	c, err := b.sandboxFor(ctx, ws)
	if err != nil {
		return nil, false, err
	}
	root := c.abs(rel)
	fi, err := b.info(ctx, c, root)
	if err != nil {
		return nil, false, fmt.Errorf("list %s: %w", rel, err)
	}
	if !fi.IsDir {
		return nil, false, fmt.Errorf("list %s: %w", rel, backend.ErrNotDir)
	}
	var out []backend.FileInfo
	type item struct {
		dir   string // relative to root
		level int
	}
	queue := []item{{"", 1}}
	for len(queue) > 0 && len(out) <= limit {
		it := queue[0]
		queue = queue[1:]
		var entries []fileInfo
		if err := b.doJSON(ctx, http.MethodGet, c.toolbox+"/files?"+url.Values{"path": {path.Join(root, it.dir)}}.Encode(), nil, &entries); err != nil {
			if it.dir == "" {
				return nil, false, fmt.Errorf("list %s: %w", rel, mapErr(err))
			}
			continue // vanished meanwhile
		}
		for _, e := range entries {
			p := path.Join(it.dir, e.Name)
			f := backend.FileInfo{Path: p, Type: "file", Size: e.Size}
			if e.IsDir {
				f.Type, f.Size = "dir", 0
				if it.level < depth {
					queue = append(queue, item{p, it.level + 1})
				}
			}
			if t, err := time.Parse(time.RFC3339Nano, e.ModTime); err == nil {
				f.ModTime = t.UTC()
			}
			f.Mode = modeOctal(e.Mode)
			out = append(out, f)
		}
	}
	sorted, truncated := backend.SortAndCap(out, limit)
	return sorted, truncated || len(queue) > 0 && len(out) > limit, nil
}

// modeOctal turns the daemon's mode ("-rw-r--r--", or octal text) into
// four octal digits; "" when it cannot.
func modeOctal(m string) string {
	if len(m) == 10 {
		perm := 0
		for i, c := range m[1:] {
			if c != '-' {
				perm |= 1 << (8 - i)
			}
		}
		return fmt.Sprintf("%04o", perm)
	}
	var n int
	if _, err := fmt.Sscanf(m, "%o", &n); err == nil {
		return fmt.Sprintf("%04o", n&0o777)
	}
	return ""
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
