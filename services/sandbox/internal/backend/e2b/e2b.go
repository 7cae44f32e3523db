// Package e2b runs sandbox commands on E2B (e2b.dev) with plain net/http:
// there is no Go SDK. One E2B sandbox serves one session: it is created on
// the session's first call, reused by its later calls, kept alive while
// the session is active and deleted when the session's workspace expires.
//
// Control plane (https://api.<domain>, header X-API-Key): POST /sandboxes,
// POST /sandboxes/{id}/timeout, DELETE /sandboxes/{id}, GET /sandboxes.
// Data plane (envd in the sandbox, https://49983-<id>.<domain>, header
// X-Access-Token): commands through the Connect RPC process.Process/Start
// (JSON codec, enveloped stream of start/data/keepalive/end events and an
// end-of-stream message that may carry an error), SendSignal SIGKILL on a
// timeout or cancel since closing the stream does not stop the command,
// SendInput/CloseStdin for stdin; files through GET/POST /files and the
// Connect RPC filesystem.Filesystem/ListDir. Source: shared/design/
// PROVIDERS.md and envd's protobuf definitions (process.proto,
// filesystem.proto).
package e2b

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
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/brain-tools/suite/pkg/tracing"
	"github.com/brain-tools/suite/services/sandbox/internal/backend"
	"github.com/brain-tools/suite/services/sandbox/internal/workspace"
)

// Config configures the E2B backend (env vars in README.md).
type Config struct {
	// APIKey authenticates the control plane. Required.
	APIKey string `env:"E2B_API_KEY"`
	// Domain is E2B's domain.
	Domain string `env:"E2B_DOMAIN" envDefault:"e2b.app"`
	// APIURL is the control plane; empty means https://api.<Domain>.
	APIURL string `env:"E2B_API_URL"`
	// EnvdURL is the data plane address of a sandbox, with {sandbox_id}
	// and {domain} filled in; empty means https://49983-{sandbox_id}.{domain}.
	EnvdURL string `env:"E2B_ENVD_URL"`
	// Template is the sandbox template to start.
	Template string `env:"E2B_TEMPLATE" envDefault:"base"`
	// Workdir is the workspace inside the sandbox.
	Workdir string `env:"E2B_WORKDIR" envDefault:"/home/user/workspace"`
	// User runs commands and owns files (envd knows root and user).
	User string `env:"E2B_USER" envDefault:"user"`
	// AllowInternet gives the sandboxes internet access. Off by default,
	// like the local backend.
	AllowInternet bool `env:"E2B_ALLOW_INTERNET" envDefault:"false"`
}

// Backend is the E2B client. Create it with New.
type Backend struct {
	cfg    Config
	lease  time.Duration // the sandbox's E2B timeout, renewed on use
	renew  time.Duration // how often a used sandbox's lease is renewed
	http   *http.Client
	log    *slog.Logger
	apiURL string

	mu        sync.Mutex
	sandboxes map[string]*sandbox // by workspace ID

	checkMu sync.Mutex
	checkAt time.Time
	checkOK error
}

type sandbox struct {
	mu      sync.Mutex // held while creating or renewing
	conn    conn
	renewed time.Time
}

// conn is how to reach one sandbox's envd; a copy, so a sandbox being
// replaced does not change a call in flight.
type conn struct {
	id    string
	envd  string // data plane base URL
	token string
}

var _ backend.Backend = (*Backend)(nil)

// New returns an E2B backend whose sandboxes live idle (the workspace idle
// time) plus a margin after their last use, so E2B removes them itself if
// this service is gone.
func New(cfg Config, idle time.Duration, logger *slog.Logger) (*Backend, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("e2b backend: E2B_API_KEY is not set")
	}
	if cfg.Domain == "" {
		cfg.Domain = "e2b.app"
	}
	if cfg.Template == "" {
		cfg.Template = "base"
	}
	if cfg.Workdir == "" || !path.IsAbs(cfg.Workdir) {
		return nil, fmt.Errorf("e2b backend: E2B_WORKDIR must be an absolute path, got %q", cfg.Workdir)
	}
	if cfg.User == "" {
		cfg.User = "user"
	}
	api := cfg.APIURL
	if api == "" {
		api = "https://api." + cfg.Domain
	}
	if _, err := url.Parse(api); err != nil {
		return nil, fmt.Errorf("e2b backend: E2B_API_URL: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Backend{
		cfg: cfg, lease: idle + 5*time.Minute, renew: time.Minute, log: logger, apiURL: strings.TrimRight(api, "/"),
		// No client timeout: command streams last as long as commands.
		// Every request has its own context.
		http:      &http.Client{Transport: tracing.Transport(http.DefaultTransport, "e2b")},
		sandboxes: map[string]*sandbox{},
	}, nil
}

// Name returns "e2b".
func (b *Backend) Name() string { return "e2b" }

// Check lists sandboxes to prove the API key works; the answer is cached
// for a minute.
func (b *Backend) Check(ctx context.Context) error {
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	if time.Since(b.checkAt) < time.Minute {
		return b.checkOK
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := b.api(ctx, http.MethodGet, "/sandboxes", nil, http.StatusOK)
	if err != nil {
		err = fmt.Errorf("e2b: list sandboxes: %w", err)
	}
	b.checkAt, b.checkOK = time.Now(), err
	return err
}

// api calls the control plane and returns the body of an answer with one
// of the wanted statuses.
func (b *Backend) api(ctx context.Context, method, p string, body any, want ...int) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.apiURL+p, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", b.cfg.APIKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	for _, w := range want {
		if resp.StatusCode == w {
			return data, nil
		}
	}
	return nil, errorFromBody(resp.StatusCode, data)
}

// sandboxFor returns the session's sandbox, creating it on first use and
// renewing its E2B lease at most once a minute (b.renew).
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
	if sb.conn.id != "" && time.Since(sb.renewed) > b.renew {
		_, err := b.api(ctx, http.MethodPost, "/sandboxes/"+url.PathEscape(sb.conn.id)+"/timeout", map[string]int{"timeout": int(b.lease / time.Second)}, http.StatusNoContent, http.StatusOK)
		var ce *ConnectError
		switch {
		case errors.As(err, &ce) && ce.Status == http.StatusNotFound:
			// E2B removed it (its lease ran out): start over. The
			// session's files went with it.
			b.log.Warn("e2b sandbox is gone; creating a new one", "sandbox_id", sb.conn.id, "tenant_id", ws.Owner.Tenant, "session_id", ws.SessionName())
			sb.conn.id = ""
		case err != nil:
			return conn{}, fmt.Errorf("e2b: renew sandbox %s: %w", sb.conn.id, err)
		default:
			sb.renewed = time.Now()
		}
	}
	if sb.conn.id != "" {
		return sb.conn, nil
	}
	body := map[string]any{
		"templateID":            b.cfg.Template,
		"timeout":               int(b.lease / time.Second),
		"metadata":              map[string]string{"tenant_id": ws.Owner.Tenant, "session_id": ws.SessionName(), "workspace": ws.Key},
		"envVars":               map[string]string{},
		"secure":                true,
		"allow_internet_access": b.cfg.AllowInternet,
	}
	data, err := b.api(ctx, http.MethodPost, "/sandboxes", body, http.StatusCreated, http.StatusOK)
	if err != nil {
		return conn{}, fmt.Errorf("e2b: create sandbox: %w", err)
	}
	var created struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
		Domain          string `json:"domain"`
	}
	if err := json.Unmarshal(data, &created); err != nil || created.SandboxID == "" {
		return conn{}, fmt.Errorf("e2b: create sandbox: unexpected answer %.200q", data)
	}
	domain := b.cfg.Domain
	if created.Domain != "" {
		domain = created.Domain
	}
	tmpl := b.cfg.EnvdURL
	if tmpl == "" {
		tmpl = "https://49983-{sandbox_id}.{domain}"
	}
	sb.conn.id, sb.conn.token, sb.renewed = created.SandboxID, created.EnvdAccessToken, time.Now()
	sb.conn.envd = strings.TrimRight(strings.NewReplacer("{sandbox_id}", created.SandboxID, "{domain}", domain).Replace(tmpl), "/")
	b.log.Info("e2b sandbox created", "sandbox_id", sb.conn.id, "tenant_id", ws.Owner.Tenant, "session_id", ws.SessionName())

	// The workspace directory (envd makes it with its parents, owned by
	// the user of the call).
	err = b.unary(ctx, sb.conn, "/filesystem.Filesystem/MakeDir", map[string]any{"path": b.cfg.Workdir}, nil)
	var ce *ConnectError
	if errors.As(err, &ce) && ce.Code == "already_exists" {
		err = nil
	}
	if err != nil {
		id := sb.conn.id
		sb.conn.id = ""
		b.deleteSandbox(id)
		return conn{}, fmt.Errorf("e2b: create the workspace directory: %w", err)
	}
	return sb.conn, nil
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
	if _, err := b.api(ctx, http.MethodDelete, "/sandboxes/"+url.PathEscape(id), nil, http.StatusNoContent, http.StatusOK, http.StatusNotFound); err != nil {
		return fmt.Errorf("e2b: delete sandbox %s: %w", id, err)
	}
	return nil
}

func (b *Backend) deleteSandbox(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.api(ctx, http.MethodDelete, "/sandboxes/"+url.PathEscape(id), nil, http.StatusNoContent, http.StatusOK, http.StatusNotFound); err != nil {
		b.log.Warn("e2b: delete sandbox", "sandbox_id", id, "err", err)
	}
}

func (b *Backend) abs(rel string) string { return path.Join(b.cfg.Workdir, rel) }

// Exec runs req in the session's sandbox.
func (b *Backend) Exec(ctx context.Context, ws *workspace.Workspace, req backend.ExecRequest, out backend.OutputFunc) (backend.ExecResult, error) {
	sb, err := b.sandboxFor(ctx, ws)
	if err != nil {
		return backend.ExecResult{}, err
	}
	if req.Dir != "" {
		var st struct {
			Entry entry `json:"entry"`
		}
		if err := b.unary(ctx, sb, "/filesystem.Filesystem/Stat", map[string]any{"path": b.abs(req.Dir)}, &st); err != nil {
			return backend.ExecResult{}, fmt.Errorf("cwd %q: %w", req.Dir, mapErr(err))
		}
		if st.Entry.Type != "FILE_TYPE_DIRECTORY" {
			return backend.ExecResult{}, fmt.Errorf("cwd %q: %w", req.Dir, backend.ErrNotDir)
		}
	}
	return b.run(ctx, sb, req, b.abs(req.Dir), out)
}

// processEvent is one message of process.Process/Start's stream.
type processEvent struct {
	Event struct {
		Start *struct {
			PID uint32 `json:"pid"`
		} `json:"start"`
		Data *struct {
			Stdout []byte `json:"stdout"` // base64 in proto3 JSON
			Stderr []byte `json:"stderr"`
			PTY    []byte `json:"pty"`
		} `json:"data"`
		End *struct {
			ExitCode int32   `json:"exitCode"` // omitted when 0
			Exited   bool    `json:"exited"`
			Status   string  `json:"status"`
			Error    *string `json:"error"`
		} `json:"end"`
		Keepalive *struct{} `json:"keepalive"`
	} `json:"event"`
}

// run starts req in dir and follows its stream to the end.
func (b *Backend) run(ctx context.Context, sb conn, req backend.ExecRequest, dir string, out backend.OutputFunc) (backend.ExecResult, error) {
	tag := "brain" + randomHex()
	res, err := b.start(ctx, sb, req, dir, tag, out)
	if res.Killed {
		// SendSignal reached the command itself; its background children,
		// also those that left its process group, carry the tag.
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		b.killTagged(kctx, sb, tag)
		cancel()
	} else if err == nil {
		// Like the local backend, where PID 1's exit ends them, nothing a
		// command left in the background outlives it.
		go func() {
			kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b.killTagged(kctx, sb, tag)
		}()
	}
	return res, err
}

// killTagged kills every process of the run tag in the sandbox.
func (b *Backend) killTagged(ctx context.Context, sb conn, tag string) {
	req := backend.ExecRequest{Command: backend.KillTaggedScript(tag), Timeout: 10 * time.Second}
	if _, err := b.start(ctx, sb, req, "/", "", func(backend.Stream, []byte) {}); err != nil {
		b.log.Warn("e2b: kill the command's processes", "sandbox_id", sb.id, "err", err)
	}
}

// start runs one process through process.Process/Start and follows its
// stream to the end; with a tag, the process is started with it (for
// SendSignal) and with RunTagVar set to it.
func (b *Backend) start(ctx context.Context, sb conn, req backend.ExecRequest, dir, tag string, out backend.OutputFunc) (backend.ExecResult, error) {
	envs := make(map[string]string, len(req.Env)+1)
	for k, v := range req.Env {
		envs[k] = v
	}
	if tag != "" {
		envs[backend.RunTagVar] = tag
	}
	start := map[string]any{
		"process": map[string]any{
			"cmd":  "/bin/bash",
			"args": []string{"-l", "-c", req.Command},
			"envs": envs,
			"cwd":  dir,
		},
	}
	if tag != "" {
		start["tag"] = tag
	}
	if req.Stdin != nil {
		start["stdin"] = true
	}
	msg, _ := json.Marshal(start)

	// The stream's own context ends only after the kill was sent, so that
	// envd's end event can still arrive.
	streamCtx, cancelStream := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelStream()
	hreq, err := http.NewRequestWithContext(streamCtx, http.MethodPost, sb.envd+"/process.Process/Start", bytes.NewReader(envelope(0, msg)))
	if err != nil {
		return backend.ExecResult{}, err
	}
	hreq.Header.Set("Content-Type", "application/connect+json")
	hreq.Header.Set("Connect-Protocol-Version", "1")
	hreq.Header.Set("X-Access-Token", sb.token)
	hreq.Header.Set("Authorization", b.userAuth())
	if req.Timeout > 0 {
		hreq.Header.Set("Connect-Timeout-Ms", fmt.Sprint(req.Timeout.Milliseconds()))
	}
	// Kill on cancel or timeout: SendSignal, then give the stream a moment
	// to deliver the end event before dropping it.
	var killMu sync.Mutex
	killed := false
	stopWatch := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-stopWatch:
			return
		case <-ctx.Done():
		}
		killMu.Lock()
		killed = true
		killMu.Unlock()
		kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.unary(kctx, sb, "/process.Process/SendSignal", map[string]any{"process": map[string]any{"tag": tag}, "signal": "SIGNAL_SIGKILL"}, nil); err != nil {
			b.log.Warn("e2b: kill command", "sandbox_id", sb.id, "err", err)
		}
		select {
		case <-stopWatch:
		case <-time.After(2 * time.Second):
			cancelStream()
		}
	}()
	defer func() { close(stopWatch); <-watchDone }()

	wasKilled := func() bool { killMu.Lock(); defer killMu.Unlock(); return killed }
	resp, err := b.http.Do(hreq)
	if err != nil {
		if wasKilled() {
			return backend.ExecResult{ExitCode: -1, Killed: true}, nil
		}
		return backend.ExecResult{}, fmt.Errorf("e2b: start command: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return backend.ExecResult{}, fmt.Errorf("e2b: start command: %w", errorFromBody(resp.StatusCode, data))
	}

	for {
		flags, body, err := readEnvelope(resp.Body)
		if err != nil {
			if wasKilled() {
				return backend.ExecResult{ExitCode: -1, Killed: true}, nil
			}
			if errors.Is(err, io.EOF) {
				err = errors.New("stream ended without an end-of-stream message")
			}
			return backend.ExecResult{}, fmt.Errorf("e2b: read command stream: %w", err)
		}
		if flags&flagEndStream != 0 {
			var es endStream
			if err := json.Unmarshal(body, &es); err != nil {
				return backend.ExecResult{}, fmt.Errorf("e2b: end of command stream: %w", err)
			}
			if wasKilled() || (es.Error != nil && es.Error.Code == "deadline_exceeded") {
				// envd's own deadline (Connect-Timeout-Ms) or our kill.
				return backend.ExecResult{ExitCode: -1, Killed: true}, nil
			}
			if es.Error != nil {
				return backend.ExecResult{}, fmt.Errorf("e2b: command stream: %w", es.Error)
			}
			return backend.ExecResult{}, errors.New("e2b: command stream ended without the command's end")
		}
		var ev processEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			return backend.ExecResult{}, fmt.Errorf("e2b: command event: %w", err)
		}
		switch e := ev.Event; {
		case e.Start != nil:
			if req.Stdin != nil {
				go b.sendStdin(ctx, sb, tag, req.Stdin)
			}
		case e.Data != nil:
			if len(e.Data.Stdout) > 0 {
				out(backend.Stdout, e.Data.Stdout)
			}
			if len(e.Data.Stderr) > 0 {
				out(backend.Stderr, e.Data.Stderr)
			}
			if len(e.Data.PTY) > 0 {
				out(backend.Stdout, e.Data.PTY)
			}
		case e.End != nil:
			// Drain to the end-of-stream message; its error, if any, no
			// longer matters: the command's end is known.
			go func() { _, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) }()
			if wasKilled() {
				return backend.ExecResult{ExitCode: -1, Killed: true}, nil
			}
			if !e.End.Exited && e.End.Error != nil {
				return backend.ExecResult{}, fmt.Errorf("e2b: command did not run: %s", *e.End.Error)
			}
			return backend.ExecResult{ExitCode: int(e.End.ExitCode)}, nil
		}
	}
}

// sendStdin writes data to the command's stdin in pieces, then closes it.
func (b *Backend) sendStdin(ctx context.Context, sb conn, tag string, data []byte) {
	sel := map[string]any{"tag": tag}
	for len(data) > 0 {
		n := min(len(data), 64<<10)
		err := b.unary(ctx, sb, "/process.Process/SendInput", map[string]any{"process": sel, "input": map[string]any{"stdin": data[:n]}}, nil)
		if err != nil {
			b.log.Warn("e2b: send stdin", "sandbox_id", sb.id, "err", err)
			return
		}
		data = data[n:]
	}
	if err := b.unary(ctx, sb, "/process.Process/CloseStdin", map[string]any{"process": sel}, nil); err != nil {
		b.log.Warn("e2b: close stdin", "sandbox_id", sb.id, "err", err)
	}
}

// unary calls a Connect unary RPC of envd with the JSON codec.
func (b *Backend) unary(ctx context.Context, sb conn, method string, in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sb.envd+method, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	req.Header.Set("X-Access-Token", sb.token)
	req.Header.Set("Authorization", b.userAuth())
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errorFromBody(resp.StatusCode, body)
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}

// entry is envd's EntryInfo.
type entry struct {
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	Path         string          `json:"path"`
	Size         json.RawMessage `json:"size"` // int64: a string in proto3 JSON
	Mode         uint32          `json:"mode"`
	ModifiedTime time.Time       `json:"modifiedTime"`
}

func (b *Backend) listDir(ctx context.Context, sb conn, dir string, depth int) ([]entry, error) {
	var out struct {
		Entries []entry `json:"entries"`
	}
	err := b.unary(ctx, sb, "/filesystem.Filesystem/ListDir", map[string]any{"path": dir, "depth": depth}, &out)
	if err != nil {
		return nil, mapErr(err)
	}
	return out.Entries, nil
}

func mapErr(err error) error {
	var ce *ConnectError
	if !errors.As(err, &ce) {
		return err
	}
	msg := strings.ToLower(ce.Message)
	switch {
	case ce.Code == "not_found" || ce.Status == http.StatusNotFound:
		return fmt.Errorf("%w (%v)", backend.ErrNotFound, err)
	case strings.Contains(msg, "not a directory"):
		return fmt.Errorf("%w (%v)", backend.ErrNotDir, err)
	case strings.Contains(msg, "is a directory"):
		return fmt.Errorf("%w (%v)", backend.ErrIsDir, err)
	case ce.Status == http.StatusInsufficientStorage || ce.Code == "resource_exhausted":
		return fmt.Errorf("%w (%v)", backend.ErrQuota, err)
	}
	return err
}

// ListFiles lists rel in the session's sandbox.
func (b *Backend) ListFiles(ctx context.Context, ws *workspace.Workspace, rel string, depth, limit int) ([]backend.FileInfo, bool, error) {
	sb, err := b.sandboxFor(ctx, ws)
	if err != nil {
		return nil, false, err
	}
	dir := b.abs(rel)
	entries, err := b.listDir(ctx, sb, dir, depth)
	if err != nil {
		return nil, false, fmt.Errorf("list %s: %w", rel, err)
	}
	infos := make([]backend.FileInfo, 0, len(entries))
	for _, e := range entries {
		p := e.Path
		if p == "" {
			p = path.Join(dir, e.Name)
		}
		r := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		if r == "" || !strings.HasPrefix(p, dir+"/") {
			continue
		}
		fi := backend.FileInfo{Path: r, ModTime: e.ModifiedTime.UTC()}
		switch e.Type {
		case "FILE_TYPE_FILE":
			fi.Type = "file"
			fi.Size = parseInt64(e.Size)
		case "FILE_TYPE_DIRECTORY":
			fi.Type = "dir"
		case "FILE_TYPE_SYMLINK":
			fi.Type = "symlink"
		default:
			fi.Type = "other"
		}
		if e.Mode != 0 {
			fi.Mode = fmt.Sprintf("%04o", e.Mode&0o777)
		}
		infos = append(infos, fi)
	}
	out, truncated := backend.SortAndCap(infos, limit)
	return out, truncated, nil
}

func parseInt64(raw json.RawMessage) int64 {
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		return n
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		_, _ = fmt.Sscan(s, &n) // not a number: n stays 0
	}
	return n
}

func (b *Backend) filesURL(sb conn, abs string) string {
	q := url.Values{"path": {abs}, "username": {b.cfg.User}}
	return sb.envd + "/files?" + q.Encode()
}

// ReadFile downloads rel from the session's sandbox, keeping only limit
// bytes from offset.
func (b *Backend) ReadFile(ctx context.Context, ws *workspace.Workspace, rel string, offset, limit int64) ([]byte, int64, error) {
	sb, err := b.sandboxFor(ctx, ws)
	if err != nil {
		return nil, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.filesURL(sb, b.abs(rel)), nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("X-Access-Token", sb.token)
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", rel, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, 0, fmt.Errorf("read %s: %w", rel, mapErr(errorFromBody(resp.StatusCode, data)))
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
	return data, resp.ContentLength, nil
}

// WriteFile uploads data to rel in the session's sandbox; envd creates the
// parent directories.
func (b *Backend) WriteFile(ctx context.Context, ws *workspace.Workspace, rel string, data []byte) error {
	sb, err := b.sandboxFor(ctx, ws)
	if err != nil {
		return err
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", path.Base(rel))
	if err != nil {
		return err
	}
	_, _ = fw.Write(data) // a bytes.Buffer behind it: cannot fail
	mw.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.filesURL(sb, b.abs(rel)), &body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-Access-Token", sb.token)
	resp, err := b.http.Do(req)
	if err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	defer resp.Body.Close()
	respBody, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("write %s: %w", rel, mapErr(errorFromBody(resp.StatusCode, respBody)))
	}
	return nil
}

// userAuth names the user envd runs a command or file operation as: HTTP
// Basic with the user name and an empty password, as E2B's SDKs send it.
func (b *Backend) userAuth() string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(b.cfg.User+":"))
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
