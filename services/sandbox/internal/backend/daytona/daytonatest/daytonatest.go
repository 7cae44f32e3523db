// Package daytonatest is a local stand-in for Daytona that speaks its
// REST protocol: the API under /api (Bearer key; POST /sandbox answering
// {id, state: "creating", toolboxProxyUrl}, GET /sandbox/{id} reaching
// "started", DELETE, GET /sandbox; NestJS-style errors {statusCode,
// message, error}) and each sandbox's toolbox daemon under
// /toolbox/{id} (sessions whose shell runs each command as
// `{ cmd; } > log 2>&1; echo $? > exit_code` the way the daemon does, their
// command status and plain-text logs, /process/execute with the daemon's
// quote-aware split and no shell answering {code, result} or 408, the
// files routes, /work-dir; daemon errors {statusCode, message, code,
// source: "DAYTONA_DAEMON", ...}).
//
// Commands really run on this host with bash, in a directory per sandbox
// that /work-dir reports, so the behaviour suite can check them. It is for
// tests only: nothing is isolated.
package daytonatest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is a fake Daytona. Start it with New.
type Server struct {
	*httptest.Server
	APIKey string

	mu        sync.Mutex
	dir       string
	sandboxes map[string]*sandbox
	log       []string
	seq       int
}

type sandbox struct {
	id, root string
	state    string
	mu       sync.Mutex
	sessions map[string]*session
}

type session struct {
	dir   string // holds <cmdId>/output.log and exit_code
	shell *exec.Cmd
	stdin io.WriteCloser
	cmds  map[string]string // cmdId -> command
}

// New starts a fake Daytona on 127.0.0.1. Its API URL is URL + "/api".
func New(apiKey string) *Server {
	dir, err := os.MkdirTemp("", "daytona-fake-")
	if err != nil {
		panic(err)
	}
	s := &Server{APIKey: apiKey, dir: dir, sandboxes: map[string]*sandbox{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/sandbox", s.create)
	mux.HandleFunc("GET /api/sandbox", s.list)
	mux.HandleFunc("GET /api/sandbox/{id}", s.get)
	mux.HandleFunc("DELETE /api/sandbox/{id}", s.delete)
	mux.HandleFunc("/toolbox/{id}/{rest...}", s.toolbox)
	s.Server = httptest.NewServer(mux)
	return s
}

// Close stops the server, ends every session and removes the files.
func (s *Server) Close() {
	s.Server.Close()
	s.mu.Lock()
	for _, sb := range s.sandboxes {
		sb.closeAll()
	}
	s.mu.Unlock()
	os.RemoveAll(s.dir)
}

// Sandboxes returns the live sandbox IDs.
func (s *Server) Sandboxes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.sandboxes {
		ids = append(ids, id)
	}
	return ids
}

// Calls returns the calls seen ("POST /api/sandbox", "DELETE session").
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func (s *Server) logf(format string, args ...any) {
	s.mu.Lock()
	s.log = append(s.log, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// apiError is the API's (NestJS) error body.
func apiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"statusCode": status, "message": msg, "error": http.StatusText(status)})
}

// daemonError is the toolbox daemon's error body.
func daemonError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	writeJSON(w, status, map[string]any{
		"statusCode": status, "message": msg, "code": strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_")),
		"source": "DAYTONA_DAEMON", "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "path": r.URL.Path, "method": r.Method,
	})
}

func (s *Server) authed(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Authorization") != "Bearer "+s.APIKey {
		apiError(w, http.StatusUnauthorized, "Invalid API key")
		return false
	}
	return true
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	if !s.authed(w, r) {
		return
	}
	var body struct {
		Snapshot          string            `json:"snapshot"`
		Env               map[string]string `json:"env"`
		Labels            map[string]string `json:"labels"`
		AutoStopInterval  *int              `json:"autoStopInterval"`
		NetworkBlockAll   *bool             `json:"networkBlockAll"`
		CPU, Memory, Disk *int
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		apiError(w, http.StatusBadRequest, "invalid body: "+err.Error())
		return
	}
	if body.AutoStopInterval != nil && *body.AutoStopInterval < 0 {
		apiError(w, http.StatusBadRequest, "autoStopInterval must not be negative")
		return
	}
	s.mu.Lock()
	s.seq++
	id := fmt.Sprintf("sbx-%04d", s.seq)
	root := filepath.Join(s.dir, id)
	os.MkdirAll(root, 0o755)
	s.sandboxes[id] = &sandbox{id: id, root: root, state: "creating", sessions: map[string]*session{}}
	s.log = append(s.log, "POST /api/sandbox")
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "state": "creating", "toolboxProxyUrl": s.URL + "/toolbox", "labels": body.Labels})
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	if !s.authed(w, r) {
		return
	}
	var out []map[string]any
	for _, id := range s.Sandboxes() {
		out = append(out, map[string]any{"id": id, "state": "started"})
	}
	if out == nil {
		out = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	if !s.authed(w, r) {
		return
	}
	s.mu.Lock()
	sb := s.sandboxes[r.PathValue("id")]
	s.mu.Unlock()
	if sb == nil {
		apiError(w, http.StatusNotFound, "Sandbox not found")
		return
	}
	sb.mu.Lock()
	// The first look finds it starting; the next, started.
	st := sb.state
	switch sb.state {
	case "creating":
		sb.state = "starting"
	case "starting":
		sb.state = "started"
	}
	sb.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"id": sb.id, "state": st, "toolboxProxyUrl": s.URL + "/toolbox"})
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	if !s.authed(w, r) {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	sb := s.sandboxes[id]
	delete(s.sandboxes, id)
	s.log = append(s.log, "DELETE /api/sandbox/"+id)
	s.mu.Unlock()
	if sb == nil {
		apiError(w, http.StatusNotFound, "Sandbox not found")
		return
	}
	sb.closeAll()
	os.RemoveAll(sb.root)
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "state": "destroying"})
}

func (sb *sandbox) closeAll() {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for _, se := range sb.sessions {
		se.stdin.Close()
		syscall.Kill(-se.shell.Process.Pid, syscall.SIGKILL)
	}
}

// inside reports whether p (a host path, as /work-dir made the client's
// paths) is within the sandbox's directory.
func (sb *sandbox) inside(p string) bool {
	p = filepath.Clean(p)
	return p == sb.root || strings.HasPrefix(p, sb.root+string(filepath.Separator)) || strings.HasPrefix(p, "/tmp/.brain")
}

func (s *Server) toolbox(w http.ResponseWriter, r *http.Request) {
	if !s.authed(w, r) {
		return
	}
	s.mu.Lock()
	sb := s.sandboxes[r.PathValue("id")]
	s.mu.Unlock()
	if sb == nil {
		apiError(w, http.StatusNotFound, "Sandbox not found")
		return
	}
	rest := r.PathValue("rest")
	parts := strings.Split(rest, "/")
	switch {
	case rest == "work-dir" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]string{"dir": sb.root})
	case rest == "files" && r.Method == http.MethodGet:
		s.listFiles(w, r, sb)
	case rest == "files/info" && r.Method == http.MethodGet:
		s.fileInfo(w, r, sb)
	case rest == "files/download" && r.Method == http.MethodGet:
		s.download(w, r, sb)
	case rest == "files/upload" && r.Method == http.MethodPost:
		s.upload(w, r, sb)
	case rest == "files/folder" && r.Method == http.MethodPost:
		s.folder(w, r, sb)
	case rest == "process/execute" && r.Method == http.MethodPost:
		s.execute(w, r, sb)
	case rest == "process/session" && r.Method == http.MethodPost:
		s.createSession(w, r, sb)
	case len(parts) == 4 && parts[1] == "session" && parts[3] == "exec" && r.Method == http.MethodPost:
		s.sessionExec(w, r, sb, parts[2])
	case len(parts) == 3 && parts[1] == "session" && r.Method == http.MethodDelete:
		s.deleteSession(w, r, sb, parts[2])
	case len(parts) == 5 && parts[1] == "session" && parts[3] == "command" && r.Method == http.MethodGet:
		s.command(w, r, sb, parts[2], parts[4], false)
	case len(parts) == 6 && parts[1] == "session" && parts[3] == "command" && parts[5] == "logs" && r.Method == http.MethodGet:
		s.command(w, r, sb, parts[2], parts[4], true)
	default:
		daemonError(w, r, http.StatusNotFound, "404 page not found")
	}
}

type fileInfo struct {
	Name        string `json:"name"`
	Size        int64  `json:"size"`
	Mode        string `json:"mode"`
	ModTime     string `json:"modTime"`
	IsDir       bool   `json:"isDir"`
	Owner       string `json:"owner"`
	Group       string `json:"group"`
	Permissions string `json:"permissions"`
}

func infoOf(fi os.FileInfo) fileInfo {
	return fileInfo{Name: fi.Name(), Size: fi.Size(), Mode: fi.Mode().String(), ModTime: fi.ModTime().UTC().Format(time.RFC3339Nano),
		IsDir: fi.IsDir(), Owner: "daytona", Group: "daytona", Permissions: fmt.Sprintf("%#o", fi.Mode().Perm())}
}

func (s *Server) pathArg(w http.ResponseWriter, r *http.Request, sb *sandbox) (string, bool) {
	p := r.URL.Query().Get("path")
	if p == "" || !sb.inside(p) {
		daemonError(w, r, http.StatusBadRequest, "invalid path: "+p)
		return "", false
	}
	return p, true
}

func (s *Server) fileInfo(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := s.pathArg(w, r, sb)
	if !ok {
		return
	}
	fi, err := os.Stat(p)
	if err != nil {
		daemonError(w, r, http.StatusNotFound, "file not found")
		return
	}
	writeJSON(w, http.StatusOK, infoOf(fi))
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := s.pathArg(w, r, sb)
	if !ok {
		return
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		if os.IsNotExist(err) {
			daemonError(w, r, http.StatusNotFound, "directory not found")
		} else {
			daemonError(w, r, http.StatusBadRequest, fmt.Sprintf("readdirent %s: not a directory", p))
		}
		return
	}
	out := []fileInfo{}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			out = append(out, infoOf(fi))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := s.pathArg(w, r, sb)
	if !ok {
		return
	}
	fi, err := os.Stat(p)
	if err != nil {
		daemonError(w, r, http.StatusNotFound, "file not found")
		return
	}
	if fi.IsDir() {
		daemonError(w, r, http.StatusBadRequest, "path is a directory")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", "attachment; filename="+fi.Name())
	http.ServeFile(w, r, p)
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := s.pathArg(w, r, sb)
	if !ok {
		return
	}
	f, _, err := r.FormFile("file")
	if err != nil {
		daemonError(w, r, http.StatusBadRequest, "missing file: "+err.Error())
		return
	}
	defer f.Close()
	data, _ := io.ReadAll(f)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		daemonError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) folder(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	p, ok := s.pathArg(w, r, sb)
	if !ok {
		return
	}
	mode, err := strconv.ParseUint(r.URL.Query().Get("mode"), 8, 32)
	if err != nil {
		daemonError(w, r, http.StatusBadRequest, "invalid mode")
		return
	}
	if err := os.MkdirAll(p, os.FileMode(mode)); err != nil {
		daemonError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// splitCommand is the daemon's split: spaces outside quotes, no escapes,
// no shell.
func splitCommand(command string) []string {
	var args []string
	var cur bytes.Buffer
	var quote rune
	for _, r := range command {
		switch {
		case (r == '"' || r == '\'') && quote == 0:
			quote = r
		case r == quote:
			quote = 0
		case r == ' ' && quote == 0:
			if cur.Len() > 0 {
				args = append(args, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		args = append(args, cur.String())
	}
	return args
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Command string  `json:"command"`
		Cwd     *string `json:"cwd"`
		Timeout *uint32 `json:"timeout"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Command == "" {
		daemonError(w, r, http.StatusBadRequest, "command is required")
		return
	}
	parts := splitCommand(req.Command)
	s.logf("execute %s", parts[0])
	cmd := exec.Command(parts[0], parts[1:]...)
	cmd.Dir = sb.root
	timeout := 360 * time.Second
	if req.Timeout != nil && *req.Timeout > 0 {
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	timedOut := false
	timer := time.AfterFunc(timeout, func() {
		timedOut = true
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
	})
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	if err != nil && timedOut {
		daemonError(w, r, http.StatusRequestTimeout, "command execution timeout")
		return
	}
	code := 0
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	} else {
		code = -1
	}
	writeJSON(w, http.StatusOK, map[string]any{"code": code, "result": string(out)})
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.SessionID == "" {
		daemonError(w, r, http.StatusBadRequest, "sessionId is required")
		return
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if _, ok := sb.sessions[req.SessionID]; ok {
		daemonError(w, r, http.StatusConflict, "session already exists")
		return
	}
	dir := filepath.Join(s.dir, "sessions-"+sb.id, req.SessionID)
	os.MkdirAll(dir, 0o755)
	shell := exec.Command("/bin/bash")
	shell.Dir = sb.root
	shell.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + sb.root, "LANG=C.UTF-8"}
	shell.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, _ := shell.StdinPipe()
	if err := shell.Start(); err != nil {
		daemonError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	go shell.Wait()
	sb.sessions[req.SessionID] = &session{dir: dir, shell: shell, stdin: stdin, cmds: map[string]string{}}
	w.WriteHeader(http.StatusCreated)
}

func (s *Server) sessionExec(w http.ResponseWriter, r *http.Request, sb *sandbox, sid string) {
	var req struct {
		Command  string `json:"command"`
		RunAsync bool   `json:"runAsync"`
		Async    bool   `json:"async"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || strings.TrimSpace(req.Command) == "" {
		daemonError(w, r, http.StatusBadRequest, "command cannot be empty")
		return
	}
	sb.mu.Lock()
	se := sb.sessions[sid]
	if se == nil {
		sb.mu.Unlock()
		daemonError(w, r, http.StatusNotFound, "session not found")
		return
	}
	s.mu.Lock()
	s.seq++
	cmdID := fmt.Sprintf("cmd-%06d", s.seq)
	s.mu.Unlock()
	se.cmds[cmdID] = req.Command
	cmdDir := filepath.Join(se.dir, cmdID)
	sb.mu.Unlock()
	os.MkdirAll(cmdDir, 0o755)
	line := fmt.Sprintf("{ %s; } > %s 2>&1 ; echo \"$?\" > %s\n", req.Command, filepath.Join(cmdDir, "output.log"), filepath.Join(cmdDir, "exit_code"))
	if _, err := io.WriteString(se.stdin, line); err != nil {
		daemonError(w, r, http.StatusBadRequest, "failed to write command: "+err.Error())
		return
	}
	if !req.RunAsync && !req.Async {
		daemonError(w, r, http.StatusBadRequest, "this fake only runs commands with runAsync")
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"cmdId": cmdID})
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, sb *sandbox, sid string) {
	sb.mu.Lock()
	se := sb.sessions[sid]
	delete(sb.sessions, sid)
	sb.mu.Unlock()
	s.logf("DELETE session")
	if se == nil {
		daemonError(w, r, http.StatusNotFound, "session not found")
		return
	}
	se.stdin.Close()
	// The daemon cancels the session's shell; its children are on their own.
	se.shell.Process.Kill()
	os.RemoveAll(se.dir)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) command(w http.ResponseWriter, r *http.Request, sb *sandbox, sid, cmdID string, logs bool) {
	sb.mu.Lock()
	se := sb.sessions[sid]
	var command string
	ok := false
	if se != nil {
		command, ok = se.cmds[cmdID]
	}
	sb.mu.Unlock()
	if se == nil {
		daemonError(w, r, http.StatusNotFound, "session not found")
		return
	}
	if !ok {
		daemonError(w, r, http.StatusNotFound, "command not found")
		return
	}
	cmdDir := filepath.Join(se.dir, cmdID)
	if logs {
		data, err := os.ReadFile(filepath.Join(cmdDir, "output.log"))
		if err != nil {
			daemonError(w, r, http.StatusNotFound, err.Error())
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(data)
		return
	}
	out := map[string]any{"id": cmdID, "command": command}
	if data, err := os.ReadFile(filepath.Join(cmdDir, "exit_code")); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			out["exitCode"] = n
		}
	}
	writeJSON(w, http.StatusOK, out)
}
