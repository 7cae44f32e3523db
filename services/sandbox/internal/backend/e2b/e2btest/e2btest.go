// Package e2btest is a local stand-in for E2B that speaks its wire
// protocol: the control plane (X-API-Key; POST /sandboxes answering 201,
// DELETE, POST .../timeout answering 204, GET /sandboxes; errors as
// {"code": <status>, "message"}) and each sandbox's envd under
// /envd/<sandbox id> (X-Access-Token; process.Process/Start as a Connect
// server stream of enveloped JSON events with keepalives, base64 output,
// an end event and an end-of-stream message, Connect-Timeout-Ms as the
// command's deadline ending the stream with deadline_exceeded;
// SendSignal, SendInput, CloseStdin, filesystem.Filesystem/Stat and
// ListDir as Connect unary calls with {"code": "<name>", "message"}
// errors; GET and POST /files, 507 when the sandbox's disk is full).
//
// Commands really run, on this host, with bash in a directory per
// sandbox that stands in for the sandbox's root (so the behaviour suite
// can check output, exit codes, stdin, kills), in their own process group,
// which SIGNAL_SIGKILL kills whole. It is for tests only: nothing is
// isolated.
package e2btest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is a fake E2B. Start it with New.
type Server struct {
	*httptest.Server
	APIKey string
	// Keepalive is how often a command stream carries a keepalive event.
	Keepalive time.Duration
	// DiskLimit, when > 0, makes uploads that would push a sandbox's
	// files over it answer 507.
	DiskLimit int64

	mu        sync.Mutex
	sandboxes map[string]*sandbox
	dir       string
	// Log records the control-plane and envd calls ("POST /sandboxes",
	// "SendSignal SIGNAL_SIGKILL"), for tests.
	Log []string
	// breakNext: see BreakNextStream.
	breakNext bool
}

// BreakNextStream makes the next command stream of a tagged process end,
// after its start event, with an end-of-stream error instead of the
// command's end. Safe while the server answers other calls (the cleanup of
// an earlier command may still be running).
func (s *Server) BreakNextStream() {
	s.mu.Lock()
	s.breakNext = true
	s.mu.Unlock()
}

type sandbox struct {
	id, token string
	root      string // stands in for the sandbox's /
	timeout   time.Time
	mu        sync.Mutex
	procs     map[string]*proc // by tag
	byPID     map[uint32]*proc
}

type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pid   uint32
}

// New starts a fake E2B on 127.0.0.1. EnvdURL gives the E2B_ENVD_URL
// template that reaches its sandboxes.
func New(apiKey string) *Server {
	dir, err := os.MkdirTemp("", "e2b-fake-")
	if err != nil {
		panic(err)
	}
	s := &Server{APIKey: apiKey, Keepalive: 200 * time.Millisecond, sandboxes: map[string]*sandbox{}, dir: dir}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sandboxes", s.create)
	mux.HandleFunc("GET /sandboxes", s.list)
	mux.HandleFunc("DELETE /sandboxes/{id}", s.delete)
	mux.HandleFunc("POST /sandboxes/{id}/timeout", s.setTimeout)
	mux.HandleFunc("/envd/{id}/{rest...}", s.envd)
	s.Server = httptest.NewServer(mux)
	return s
}

// Close stops the server, kills every command and removes the files.
func (s *Server) Close() {
	s.Server.Close()
	s.mu.Lock()
	for _, sb := range s.sandboxes {
		sb.killAll()
	}
	s.mu.Unlock()
	os.RemoveAll(s.dir)
}

// EnvdURL is the E2B_ENVD_URL template for this server.
func (s *Server) EnvdURL() string { return s.URL + "/envd/{sandbox_id}" }

// Sandboxes returns the IDs of the live sandboxes.
func (s *Server) Sandboxes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.sandboxes {
		ids = append(ids, id)
	}
	return ids
}

// Calls returns a copy of Log.
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.Log...)
}

func (s *Server) logf(format string, args ...any) {
	s.mu.Lock()
	s.Log = append(s.Log, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// apiError writes the control plane's error body.
func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"code": status, "message": msg})
}

// connectError writes a Connect unary error: the HTTP status of the code
// and {"code","message"}.
func connectError(w http.ResponseWriter, code, msg string) {
	status := map[string]int{"not_found": 404, "invalid_argument": 400, "unauthenticated": 401, "internal": 500, "resource_exhausted": 429, "already_exists": 409}[code]
	if status == 0 {
		status = 500
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"code": code, "message": msg})
}

func (s *Server) authed(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("X-API-Key") != s.APIKey {
		apiError(w, http.StatusUnauthorized, "Invalid API key, it must start with 'e2b_'")
		return false
	}
	return true
}

func randomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	if !s.authed(w, r) {
		return
	}
	var body struct {
		TemplateID          string            `json:"templateID"`
		Timeout             int               `json:"timeout"`
		Metadata            map[string]string `json:"metadata"`
		EnvVars             map[string]string `json:"envVars"`
		Secure              bool              `json:"secure"`
		AllowInternetAccess *bool             `json:"allow_internet_access"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		apiError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return
	}
	if body.TemplateID == "" {
		apiError(w, http.StatusBadRequest, "templateID is required")
		return
	}
	if body.Timeout <= 0 || body.Timeout > 24*3600 {
		apiError(w, http.StatusBadRequest, "timeout must be between 1 and 86400 seconds")
		return
	}
	id := "i" + randomID(9)
	root := filepath.Join(s.dir, id)
	if err := os.MkdirAll(filepath.Join(root, "home", "user"), 0o755); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	sb := &sandbox{id: id, token: randomID(16), root: root, timeout: time.Now().Add(time.Duration(body.Timeout) * time.Second), procs: map[string]*proc{}, byPID: map[uint32]*proc{}}
	s.mu.Lock()
	s.sandboxes[id] = sb
	s.Log = append(s.Log, "POST /sandboxes "+body.TemplateID)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]any{"sandboxID": id, "templateID": body.TemplateID, "clientID": "6532622b", "envdVersion": "0.2.0", "envdAccessToken": sb.token})
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	if !s.authed(w, r) {
		return
	}
	s.mu.Lock()
	var out []map[string]any
	for id := range s.sandboxes {
		out = append(out, map[string]any{"sandboxID": id, "templateID": "base"})
	}
	s.mu.Unlock()
	if out == nil {
		out = []map[string]any{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	if !s.authed(w, r) {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	sb := s.sandboxes[id]
	delete(s.sandboxes, id)
	s.Log = append(s.Log, "DELETE /sandboxes/"+id)
	s.mu.Unlock()
	if sb == nil {
		apiError(w, http.StatusNotFound, fmt.Sprintf("sandbox %q not found", id))
		return
	}
	sb.killAll()
	os.RemoveAll(sb.root)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request) {
	if !s.authed(w, r) {
		return
	}
	var body struct {
		Timeout int `json:"timeout"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Timeout <= 0 {
		apiError(w, http.StatusBadRequest, "timeout must be a positive number of seconds")
		return
	}
	s.mu.Lock()
	sb := s.sandboxes[r.PathValue("id")]
	s.Log = append(s.Log, "POST /sandboxes/"+r.PathValue("id")+"/timeout")
	s.mu.Unlock()
	if sb == nil {
		apiError(w, http.StatusNotFound, "sandbox not found")
		return
	}
	sb.mu.Lock()
	sb.timeout = time.Now().Add(time.Duration(body.Timeout) * time.Second)
	sb.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// Expire removes a sandbox as if its E2B timeout had run out.
func (s *Server) Expire(id string) {
	s.mu.Lock()
	sb := s.sandboxes[id]
	delete(s.sandboxes, id)
	s.mu.Unlock()
	if sb != nil {
		sb.killAll()
		os.RemoveAll(sb.root)
	}
}

func (sb *sandbox) killAll() {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for _, p := range sb.procs {
		syscall.Kill(-int(p.pid), syscall.SIGKILL)
	}
}

// hostPath maps a sandbox path to the directory standing in for it.
func (sb *sandbox) hostPath(p string) (string, bool) {
	if !path.IsAbs(p) {
		p = path.Join("/home/user", p)
	}
	p = path.Clean(p)
	return filepath.Join(sb.root, filepath.FromSlash(p)), true
}

func (sb *sandbox) sandboxPath(host string) string {
	rel, err := filepath.Rel(sb.root, host)
	if err != nil {
		return host
	}
	return "/" + filepath.ToSlash(rel)
}

func (s *Server) envd(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	sb := s.sandboxes[r.PathValue("id")]
	s.mu.Unlock()
	if sb == nil {
		// What the E2B edge answers for a sandbox that is gone.
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, "The sandbox %s was not found", r.PathValue("id"))
		return
	}
	if r.Header.Get("X-Access-Token") != sb.token {
		connectError(w, "unauthenticated", "invalid access token")
		return
	}
	if a := r.Header.Get("Authorization"); a != "" && a != "Basic "+base64.StdEncoding.EncodeToString([]byte("user:")) && a != "Basic "+base64.StdEncoding.EncodeToString([]byte("root:")) {
		connectError(w, "unauthenticated", "invalid user")
		return
	}
	switch rest := r.PathValue("rest"); {
	case rest == "process.Process/Start" && r.Method == http.MethodPost:
		s.start(w, r, sb)
	case rest == "process.Process/SendSignal" && r.Method == http.MethodPost:
		s.signal(w, r, sb)
	case rest == "process.Process/SendInput" && r.Method == http.MethodPost:
		s.input(w, r, sb, false)
	case rest == "process.Process/CloseStdin" && r.Method == http.MethodPost:
		s.input(w, r, sb, true)
	case rest == "filesystem.Filesystem/MakeDir" && r.Method == http.MethodPost:
		s.makeDir(w, r, sb)
	case rest == "filesystem.Filesystem/Stat" && r.Method == http.MethodPost:
		s.stat(w, r, sb)
	case rest == "filesystem.Filesystem/ListDir" && r.Method == http.MethodPost:
		s.listDir(w, r, sb)
	case rest == "files" && r.Method == http.MethodGet:
		s.download(w, r, sb)
	case rest == "files" && r.Method == http.MethodPost:
		s.upload(w, r, sb)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// unaryIn decodes a Connect unary request with the JSON codec.
func unaryIn(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Header.Get("Content-Type") != "application/json" {
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return false
	}
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		connectError(w, "invalid_argument", "invalid request: "+err.Error())
		return false
	}
	return true
}

func unaryOut(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// stream is one response of a server-streaming call; frames stop once
// the handler has returned.
type stream struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	done bool
}

// frame writes one Connect envelope and flushes it.
func (st *stream) frame(flags byte, v any) {
	data, _ := json.Marshal(v)
	buf := make([]byte, 5, 5+len(data))
	buf[0] = flags
	binary.BigEndian.PutUint32(buf[1:], uint32(len(data)))
	buf = append(buf, data...)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return
	}
	if _, err := st.w.Write(buf); err == nil {
		st.w.(http.Flusher).Flush()
	}
}

func (st *stream) close() {
	st.mu.Lock()
	st.done = true
	st.mu.Unlock()
}

type selector struct {
	PID *uint32 `json:"pid"`
	Tag *string `json:"tag"`
}

func (sb *sandbox) find(sel selector) *proc {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	switch {
	case sel.PID != nil:
		return sb.byPID[*sel.PID]
	case sel.Tag != nil:
		return sb.procs[*sel.Tag]
	}
	return nil
}

func (s *Server) start(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if r.Header.Get("Content-Type") != "application/connect+json" || r.Header.Get("Connect-Protocol-Version") != "1" {
		connectError(w, "invalid_argument", "want Content-Type application/connect+json and Connect-Protocol-Version 1")
		return
	}
	var hdr [5]byte
	if _, err := io.ReadFull(r.Body, hdr[:]); err != nil {
		connectError(w, "invalid_argument", "missing envelope")
		return
	}
	msg := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
	if _, err := io.ReadFull(r.Body, msg); err != nil || hdr[0] != 0 {
		connectError(w, "invalid_argument", "bad envelope")
		return
	}
	var req struct {
		Process struct {
			Cmd  string            `json:"cmd"`
			Args []string          `json:"args"`
			Envs map[string]string `json:"envs"`
			Cwd  *string           `json:"cwd"`
		} `json:"process"`
		Tag   *string `json:"tag"`
		Stdin *bool   `json:"stdin"`
	}
	dec := json.NewDecoder(bytes.NewReader(msg))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		connectError(w, "invalid_argument", "invalid StartRequest: "+err.Error())
		return
	}
	deadline := time.Time{}
	if v := r.Header.Get("Connect-Timeout-Ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			connectError(w, "invalid_argument", "bad Connect-Timeout-Ms")
			return
		}
		deadline = time.Now().Add(time.Duration(ms) * time.Millisecond)
	}

	cwd := "/home/user"
	if req.Process.Cwd != nil && *req.Process.Cwd != "" {
		cwd = *req.Process.Cwd
	}
	hostCwd, _ := sb.hostPath(cwd)
	cmd := exec.Command(req.Process.Cmd, req.Process.Args...)
	cmd.Dir = hostCwd
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + filepath.Join(sb.root, "home", "user"), "LANG=C.UTF-8"}
	for k, v := range req.Process.Envs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	outR, outW, _ := os.Pipe()
	errR, errW, _ := os.Pipe()
	cmd.Stdout, cmd.Stderr = outW, errW
	var stdin io.WriteCloser
	if req.Stdin != nil && *req.Stdin {
		stdin, _ = cmd.StdinPipe()
	}

	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	st := &stream{w: w}
	defer st.close()
	err := cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		st.frame(0, map[string]any{"event": map[string]any{"end": map[string]any{"exited": false, "status": "error", "error": err.Error()}}})
		st.frame(2, map[string]any{})
		return
	}
	p := &proc{cmd: cmd, stdin: stdin, pid: uint32(cmd.Process.Pid)}
	tag := ""
	if req.Tag != nil {
		tag = *req.Tag
	}
	sb.mu.Lock()
	sb.byPID[p.pid] = p
	if tag != "" {
		sb.procs[tag] = p
	}
	sb.mu.Unlock()
	s.logf("Start %s", strings.Join(append([]string{req.Process.Cmd}, req.Process.Args...), " "))
	st.frame(0, map[string]any{"event": map[string]any{"start": map[string]any{"pid": p.pid}}})

	var readers sync.WaitGroup
	pump := func(rd *os.File, name string) {
		defer readers.Done()
		buf := make([]byte, 8192)
		for {
			n, err := rd.Read(buf)
			if n > 0 {
				// proto3 JSON: bytes are base64.
				st.frame(0, map[string]any{"event": map[string]any{"data": map[string]any{name: base64.StdEncoding.EncodeToString(buf[:n])}}})
			}
			if err != nil {
				return
			}
		}
	}
	readers.Add(2)
	go pump(outR, "stdout")
	go pump(errR, "stderr")

	// Like envd, the end follows the process's exit, not its children's:
	// output still buffered gets a moment, then the pipes are closed.
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pumped := make(chan struct{})
		go func() { readers.Wait(); close(pumped) }()
		select {
		case <-pumped:
		case <-time.After(300 * time.Millisecond):
		}
		outR.Close()
		errR.Close()
		<-pumped
		sb.mu.Lock()
		delete(sb.byPID, p.pid)
		if tag != "" {
			delete(sb.procs, tag)
		}
		sb.mu.Unlock()
		done <- err
	}()

	s.mu.Lock()
	broken := s.breakNext && tag != ""
	if broken {
		s.breakNext = false
	}
	s.mu.Unlock()
	if broken {
		syscall.Kill(-int(p.pid), syscall.SIGKILL)
		<-done
		st.frame(2, map[string]any{"error": map[string]string{"code": "unavailable", "message": "sandbox is shutting down"}})
		return
	}

	ka := time.NewTicker(s.Keepalive)
	defer ka.Stop()
	var timer <-chan time.Time
	if !deadline.IsZero() {
		timer = time.After(time.Until(deadline))
	}
	for {
		select {
		case err := <-done:
			end := map[string]any{"exited": true, "status": "exit status 0"}
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				ws := ee.Sys().(syscall.WaitStatus)
				if ws.Signaled() {
					// proto3 JSON omits a zero exitCode; a killed process
					// has -1.
					end = map[string]any{"exitCode": -1, "exited": false, "status": "signal: " + ws.Signal().String()}
				} else {
					end = map[string]any{"exitCode": ws.ExitStatus(), "exited": true, "status": fmt.Sprintf("exit status %d", ws.ExitStatus())}
				}
			}
			st.frame(0, map[string]any{"event": map[string]any{"end": end}})
			st.frame(2, map[string]any{})
			return
		case <-ka.C:
			st.frame(0, map[string]any{"event": map[string]any{"keepalive": map[string]any{}}})
		case <-timer:
			syscall.Kill(-int(p.pid), syscall.SIGKILL)
			<-done
			st.frame(2, map[string]any{"error": map[string]string{"code": "deadline_exceeded", "message": "context deadline exceeded"}})
			return
		case <-r.Context().Done():
			// The client went away; as in envd, the command keeps running
			// until SendSignal.
			return
		}
	}
}

func (s *Server) signal(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Process selector `json:"process"`
		Signal  string   `json:"signal"`
	}
	if !unaryIn(w, r, &req) {
		return
	}
	s.logf("SendSignal %s", req.Signal)
	p := sb.find(req.Process)
	if p == nil {
		connectError(w, "not_found", "process not found")
		return
	}
	sig := map[string]syscall.Signal{"SIGNAL_SIGKILL": syscall.SIGKILL, "SIGNAL_SIGTERM": syscall.SIGTERM}[req.Signal]
	if sig == 0 {
		connectError(w, "invalid_argument", "invalid signal "+req.Signal)
		return
	}
	syscall.Kill(-int(p.pid), sig)
	unaryOut(w, map[string]any{})
}

func (s *Server) input(w http.ResponseWriter, r *http.Request, sb *sandbox, closeIt bool) {
	var req struct {
		Process selector `json:"process"`
		Input   struct {
			Stdin []byte `json:"stdin"`
		} `json:"input"`
	}
	if !unaryIn(w, r, &req) {
		return
	}
	p := sb.find(req.Process)
	if p == nil {
		connectError(w, "not_found", "process not found")
		return
	}
	if p.stdin == nil {
		connectError(w, "invalid_argument", "stdin is not enabled for this process")
		return
	}
	if closeIt {
		p.stdin.Close()
	} else if _, err := p.stdin.Write(req.Input.Stdin); err != nil {
		connectError(w, "internal", "write stdin: "+err.Error())
		return
	}
	unaryOut(w, map[string]any{})
}

func entryOf(sb *sandbox, host string, fi fs.FileInfo) map[string]any {
	typ := "FILE_TYPE_FILE"
	switch {
	case fi.IsDir():
		typ = "FILE_TYPE_DIRECTORY"
	case fi.Mode()&fs.ModeSymlink != 0:
		typ = "FILE_TYPE_SYMLINK"
	}
	return map[string]any{
		"name": fi.Name(), "type": typ, "path": sb.sandboxPath(host),
		"size": strconv.FormatInt(fi.Size(), 10), // int64 is a string in proto3 JSON
		"mode": uint32(fi.Mode().Perm()), "permissions": fi.Mode().String(),
		"owner": "user", "group": "user", "modifiedTime": fi.ModTime().UTC().Format(time.RFC3339Nano),
	}
}

func (s *Server) stat(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Path string `json:"path"`
	}
	if !unaryIn(w, r, &req) {
		return
	}
	host, _ := sb.hostPath(req.Path)
	fi, err := os.Lstat(host)
	if err != nil {
		connectError(w, "not_found", fmt.Sprintf("file not found: %s", req.Path))
		return
	}
	unaryOut(w, map[string]any{"entry": entryOf(sb, host, fi)})
}

func (s *Server) makeDir(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Path string `json:"path"`
	}
	if !unaryIn(w, r, &req) {
		return
	}
	host, _ := sb.hostPath(req.Path)
	if fi, err := os.Stat(host); err == nil {
		if fi.IsDir() {
			connectError(w, "already_exists", fmt.Sprintf("directory already exists: %s", req.Path))
		} else {
			connectError(w, "invalid_argument", fmt.Sprintf("path already exists but it is not a directory: %s", req.Path))
		}
		return
	}
	if err := os.MkdirAll(host, 0o755); err != nil {
		connectError(w, "internal", err.Error())
		return
	}
	fi, _ := os.Stat(host)
	unaryOut(w, map[string]any{"entry": entryOf(sb, host, fi)})
}

func (s *Server) listDir(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	var req struct {
		Path  string `json:"path"`
		Depth uint32 `json:"depth"`
	}
	if !unaryIn(w, r, &req) {
		return
	}
	host, _ := sb.hostPath(req.Path)
	fi, err := os.Stat(host)
	if err != nil {
		connectError(w, "not_found", fmt.Sprintf("path not found: %s", req.Path))
		return
	}
	if !fi.IsDir() {
		connectError(w, "invalid_argument", fmt.Sprintf("path is not a directory: %s", req.Path))
		return
	}
	depth := int(req.Depth)
	if depth == 0 {
		depth = 1
	}
	entries := []map[string]any{}
	filepath.WalkDir(host, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == host {
			return nil
		}
		rel, _ := filepath.Rel(host, p)
		level := strings.Count(rel, string(filepath.Separator)) + 1
		info, err := d.Info()
		if err != nil {
			return nil
		}
		entries = append(entries, entryOf(sb, p, info))
		if d.IsDir() && level >= depth {
			return filepath.SkipDir
		}
		return nil
	})
	unaryOut(w, map[string]any{"entries": entries})
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if u := r.URL.Query().Get("username"); u != "user" && u != "root" {
		apiError(w, http.StatusUnauthorized, "invalid username")
		return
	}
	host, _ := sb.hostPath(r.URL.Query().Get("path"))
	fi, err := os.Stat(host)
	if err != nil {
		apiError(w, http.StatusNotFound, fmt.Sprintf("path '%s' does not exist", r.URL.Query().Get("path")))
		return
	}
	if fi.IsDir() {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", r.URL.Query().Get("path")))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeFile(w, r, host)
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, sb *sandbox) {
	if u := r.URL.Query().Get("username"); u != "user" && u != "root" {
		apiError(w, http.StatusUnauthorized, "invalid username")
		return
	}
	p := r.URL.Query().Get("path")
	host, _ := sb.hostPath(p)
	f, _, err := r.FormFile("file")
	if err != nil {
		apiError(w, http.StatusBadRequest, "missing multipart field file: "+err.Error())
		return
	}
	defer f.Close()
	data, _ := io.ReadAll(f)
	if s.DiskLimit > 0 {
		var used int64
		filepath.WalkDir(sb.root, func(_ string, d fs.DirEntry, _ error) error {
			if d != nil && !d.IsDir() {
				if info, err := d.Info(); err == nil {
					used += info.Size()
				}
			}
			return nil
		})
		if used+int64(len(data)) > s.DiskLimit {
			apiError(w, http.StatusInsufficientStorage, "not enough disk space available")
			return
		}
	}
	if fi, err := os.Stat(host); err == nil && fi.IsDir() {
		apiError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", p))
		return
	}
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := os.WriteFile(host, data, 0o644); err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	unaryOut(w, []map[string]any{{"path": sb.sandboxPath(host), "name": filepath.Base(host), "type": "file"}})
}
