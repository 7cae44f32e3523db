// Command session drives one brain session end to end, the way an
// application would: it lists the catalog, creates a session with the tools
// named in BRAIN_TOOLS, calls each of them directly through brain's
// ToolCall API, and prints the results and the session's recorded events.
//
// Environment:
//
//	BRAIN_URL      brain's base URL (default http://127.0.0.1:8080)
//	BRAIN_API_KEY  the API key of the tenant (required)
//	BRAIN_TOOLS    comma-separated tools to enable (default: all in the catalog)
//	DOCS_URL       base URL of a server of $(go env GOROOT)/doc, for web_fetch and the browser
//	APPROVAL_OPERATOR_TOKEN  the approval page's operator token: the demo
//	               plays the operator who approves the gated storage_delete
//	BRAIN_TOOLS_KEY  the local service's token: the demo stores it as a
//	               tenant secret for a custom tool and a session's MCP
//	               server (see changing.go); unset, that part is skipped
//	LOCAL_URL      the local service (default http://127.0.0.1:8081)
//
// With lookup_order (a function tool of examples/brain.json) the demo is
// also the application that answers the tool's calls.
//
// It exits non-zero when any step fails or a tool answers is_error.
// Its one flag, -version, prints the build (pkg/version) and exits.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/version"
)

func main() {
	showVersion := flag.Bool("version", false, version.FlagUsage)
	flag.Parse()
	if *showVersion {
		_ = version.Print(os.Stdout, "session")
		return
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "session: unexpected argument %q: the session is configured by environment variables\n", flag.Arg(0))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "session:", err)
		os.Exit(1)
	}
}

// client is a minimal brain API client.
type client struct {
	base, key string
	http      *http.Client
}

// apiError is brain's refusal body.
type apiError struct {
	Status int
	Body   struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
}

func (e *apiError) Error() string {
	return fmt.Sprintf("brain answered %d %s: %s", e.Status, e.Body.Error.Code, e.Body.Error.Message)
}

func (c *client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read: %w", method, path, err)
	}
	if resp.StatusCode >= 400 {
		e := &apiError{Status: resp.StatusCode}
		_ = json.Unmarshal(data, &e.Body)
		return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, e)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

type content struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"`
	MIMEType string `json:"mime_type,omitempty"`
}

type result struct {
	Content           []content       `json:"content"`
	IsError           bool            `json:"is_error"`
	StructuredContent json.RawMessage `json:"structured_content"`
	UnknownOutcome    bool            `json:"unknown_outcome"`
}

type toolCall struct {
	ID                string          `json:"id"`
	Tool              string          `json:"tool"`
	Status            string          `json:"status"`
	Arguments         json.RawMessage `json:"arguments"`
	ParentID          *string         `json:"parent_id"`
	CallerType        string          `json:"caller_type"`
	Prompt            *string         `json:"prompt"`
	ResponseExpiresAt *string         `json:"response_expires_at"`
	ErrorCode         *string         `json:"error_code"`
	ErrorMessage      *string         `json:"error_message"`
	RevisionID        *string         `json:"revision_id"`
	Result            *result         `json:"result"`
}

type event struct {
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	CallID string          `json:"call_id"`
	Time   string          `json:"time"`
	Data   json.RawMessage `json:"data"`
}

// call creates a ToolCall and waits for it to finish, polling with
// wait_seconds while brain answers 202.
func (c *client) call(ctx context.Context, session, name string, args any) (*toolCall, error) {
	var tc toolCall
	status, err := c.do(ctx, http.MethodPost, "/sessions/"+session+"/tool_calls",
		map[string]any{"tool": name, "arguments": args, "wait_seconds": 30}, &tc)
	if err != nil {
		return nil, err
	}
	for status == http.StatusAccepted {
		if status, err = c.do(ctx, http.MethodGet, "/tool_calls/"+tc.ID+"?wait_seconds=30", nil, &tc); err != nil {
			return nil, err
		}
	}
	if tc.Result == nil {
		return &tc, fmt.Errorf("%s: call %s ended %s without a result", name, tc.ID, tc.Status)
	}
	if tc.Result.IsError {
		msg := ""
		if len(tc.Result.Content) > 0 {
			msg = tc.Result.Content[0].Text
		}
		return &tc, fmt.Errorf("%s: call %s ended %s: %s", name, tc.ID, tc.Status, msg)
	}
	return &tc, nil
}

func text(r *result) string {
	var b strings.Builder
	for i, c := range r.Content {
		if i > 0 {
			b.WriteString("\n")
		}
		if c.Type == "text" {
			b.WriteString(c.Text)
		} else {
			fmt.Fprintf(&b, "[%s %s]", c.Type, c.MIMEType)
		}
	}
	return b.String()
}

// excerpt returns the first n lines of s, saying how many were left out.
func excerpt(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= n {
		return s
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n    … (%d more lines)", len(lines)-n)
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

func run(ctx context.Context, out io.Writer) error {
	c := &client{base: strings.TrimRight(envOr("BRAIN_URL", "http://127.0.0.1:8080"), "/"), key: os.Getenv("BRAIN_API_KEY"), http: &http.Client{Timeout: 5 * time.Minute}}
	if c.key == "" {
		return errors.New("BRAIN_API_KEY is not set")
	}
	p := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	var catalog struct {
		Tools []struct {
			Name, Description string
		} `json:"tools"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/catalog", nil, &catalog); err != nil {
		return err
	}
	p("== catalog: %d tools", len(catalog.Tools))
	var names []string
	for _, t := range catalog.Tools {
		p("  %-20s %s", t.Name, firstSentence(t.Description, 90))
		names = append(names, t.Name)
	}
	enabled := names
	if v := os.Getenv("BRAIN_TOOLS"); v != "" {
		enabled = strings.Split(v, ",")
	}

	var session struct {
		ID     string   `json:"id"`
		Status string   `json:"status"`
		Tools  []string `json:"tools"`
	}
	if _, err := c.do(ctx, http.MethodPost, "/sessions", map[string]any{"config": map[string]any{"tools": enabled}}, &session); err != nil {
		return err
	}
	p("\n== session %s (%s) with tools %s", session.ID, session.Status, strings.Join(enabled, ", "))
	has := func(name string) bool { return slices.Contains(enabled, name) }

	if has("echo") {
		tc, err := c.call(ctx, session.ID, "echo", map[string]any{"text": "hello from the demo session"})
		if err != nil {
			return err
		}
		p("\n== echo → %s\n%s", tc.Status, indent(text(tc.Result)))
	}
	if has("lookup_order") {
		if err := answerFunction(ctx, c, session.ID, p); err != nil {
			return err
		}
	}

	if has("web_fetch") {
		docs := os.Getenv("DOCS_URL")
		if docs == "" {
			return errors.New("web_fetch is enabled but DOCS_URL is not set")
		}
		if err := fetchSpec(ctx, c, session.ID, strings.TrimRight(docs, "/")+"/go_spec.html", p); err != nil {
			return err
		}
	}

	if has("browser_open") {
		docs := os.Getenv("DOCS_URL")
		if docs == "" {
			return errors.New("browser_open is enabled but DOCS_URL is not set")
		}
		if err := browse(ctx, c, session.ID, strings.TrimRight(docs, "/"), has, p); err != nil {
			return err
		}
	}

	if has("sandbox_exec") {
		if err := sandbox(ctx, c, session.ID, has, p); err != nil {
			return err
		}
	}
	if has("storage_put") {
		if err := storage(ctx, c, session.ID, has, p); err != nil {
			return err
		}
	}
	if has("web_search") {
		tc, err := c.call(ctx, session.ID, "web_search", map[string]any{"query": "Go language specification", "count": 3})
		if err != nil {
			return err
		}
		p("\n== web_search → %s\n%s", tc.Status, indent(excerpt(text(tc.Result), 15)))
	}
	if has("inspect_session") {
		tc, err := c.call(ctx, session.ID, "inspect_session", map[string]any{})
		if err != nil {
			return err
		}
		p("\n== inspect_session (the tool read this session's events from brain with a one-call token) → %s\n%s", tc.Status, indent(excerpt(text(tc.Result), 20)))
	}

	var events struct {
		Events []event `json:"events"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/sessions/"+session.ID+"/events?limit=1000", nil, &events); err != nil {
		return err
	}
	p("\n== events of session %s: %d recorded", session.ID, len(events.Events))
	for _, e := range events.Events {
		var d struct {
			Tool       string  `json:"tool"`
			Status     string  `json:"status"`
			Kind       string  `json:"kind"`
			ParentID   *string `json:"parent_id"`
			DurationMS *int64  `json:"duration_ms"`
			Responder  *struct {
				Type   string `json:"type"`
				APIKey string `json:"api_key"`
				Name   string `json:"name"`
			} `json:"responder"`
		}
		_ = json.Unmarshal(e.Data, &d)
		line := fmt.Sprintf("  #%-4s %-18s", e.ID, e.Type)
		if e.CallID != "" {
			line += " call=" + e.CallID
		}
		if d.Tool != "" {
			line += " tool=" + d.Tool
		}
		if d.Status != "" {
			line += " status=" + d.Status
		}
		if d.Kind != "" {
			line += " waits for=" + d.Kind
		}
		if d.ParentID != nil {
			line += " for=" + *d.ParentID
		}
		if r := d.Responder; r != nil {
			line += " answered by " + r.Type + " " + r.Name + r.APIKey
		}
		if d.DurationMS != nil {
			line += fmt.Sprintf(" %dms", *d.DurationMS)
		}
		p("%s", line)
	}
	if _, err := c.do(ctx, http.MethodPost, "/sessions/"+session.ID+"/close", nil, nil); err != nil {
		return err
	}
	p("\n== session %s closed", session.ID)
	if err := changingTools(ctx, c, strings.TrimRight(envOr("LOCAL_URL", "http://127.0.0.1:8081"), "/"), p); err != nil {
		return err
	}
	p("\n== the demo finished without errors")
	return nil
}

// fetchSpec reads the Go spec as Markdown page by page through web_fetch,
// showing the first two pages: the second comes from the first's
// next_start_index.
func fetchSpec(ctx context.Context, c *client, session, url string, p func(string, ...any)) error {
	type page struct {
		TotalLength    int    `json:"total_length"`
		NextStartIndex *int   `json:"next_start_index"`
		Title          string `json:"title"`
		FinalURL       string `json:"final_url"`
	}
	start := 0
	for n := 1; n <= 2; n++ {
		tc, err := c.call(ctx, session, "web_fetch", map[string]any{"url": url, "format": "markdown", "max_length": 5000, "start_index": start})
		if err != nil {
			return err
		}
		var pg page
		if err := json.Unmarshal(tc.Result.StructuredContent, &pg); err != nil {
			return fmt.Errorf("web_fetch: structured_content: %w", err)
		}
		p("\n== web_fetch %s page %d (start_index %d of %d characters, title %q) → %s\n%s",
			url, n, start, pg.TotalLength, pg.Title, tc.Status, indent(excerpt(text(tc.Result), 25)))
		if pg.NextStartIndex == nil {
			break
		}
		start = *pg.NextStartIndex
	}
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// sandbox runs a script in the session's sandbox workspace, then reads back
// the file it wrote: the workspace persists across the session's calls.
func sandbox(ctx context.Context, c *client, session string, has func(string) bool, p func(string, ...any)) error {
	if has("sandbox_write_file") {
		script := "#!/bin/sh\nset -e\necho \"kernel: $(uname -sr)\"\necho \"user: $(id -u), pid namespace: $$\"\nls / | tr '\\n' ' '; echo\n" +
			"if (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null; then echo 'network: reachable (unexpected)'; else echo 'network: none'; fi\n" +
			"seq 1 5 | awk '{s+=$1} END {print \"sum 1..5 =\", s}' > result.txt\n"
		tc, err := c.call(ctx, session, "sandbox_write_file", map[string]any{"path": "demo.sh", "content": script})
		if err != nil {
			return err
		}
		p("\n== sandbox_write_file demo.sh → %s\n%s", tc.Status, indent(text(tc.Result)))
	}
	cmd := "uname -sr; echo no script"
	if has("sandbox_write_file") {
		cmd = "sh demo.sh"
	}
	tc, err := c.call(ctx, session, "sandbox_exec", map[string]any{"command": cmd, "timeout_seconds": 30})
	if err != nil {
		return err
	}
	var r struct {
		ExitCode   int   `json:"exit_code"`
		DurationMS int64 `json:"duration_ms"`
	}
	_ = json.Unmarshal(tc.Result.StructuredContent, &r)
	p("\n== sandbox_exec %q → %s (exit %d in %d ms)\n%s", cmd, tc.Status, r.ExitCode, r.DurationMS, indent(excerpt(text(tc.Result), 20)))
	if has("sandbox_read_file") && has("sandbox_write_file") {
		tc, err := c.call(ctx, session, "sandbox_read_file", map[string]any{"path": "result.txt"})
		if err != nil {
			return err
		}
		p("\n== sandbox_read_file result.txt (written by the command above) → %s\n%s", tc.Status, indent(text(tc.Result)))
	}
	if has("sandbox_start") && has("sandbox_status") {
		// A command that outlives one call: started, then waited for.
		tc, err := c.call(ctx, session, "sandbox_start", map[string]any{"command": "sleep 1; echo started, then finished", "timeout_seconds": 30})
		if err != nil {
			return err
		}
		var job struct {
			JobID string `json:"job_id"`
		}
		if err := json.Unmarshal(tc.Result.StructuredContent, &job); err != nil || job.JobID == "" {
			return fmt.Errorf("sandbox_start: no job_id in %s", tc.Result.StructuredContent)
		}
		p("\n== sandbox_start → %s, job %s", tc.Status, job.JobID)
		if tc, err = c.call(ctx, session, "sandbox_status", map[string]any{"job_id": job.JobID, "wait_seconds": 20}); err != nil {
			return err
		}
		p("== sandbox_status (waited for the job) → %s\n%s", tc.Status, indent(excerpt(text(tc.Result), 6)))
	}
	return nil
}

// storage writes an object under the tenant's namespace, reads it back and
// lists it.
func storage(ctx context.Context, c *client, session string, has func(string) bool, p func(string, ...any)) error {
	key := "demo/notes (1).md"
	body := "# Notes\n\nWritten by the demo session at " + time.Now().UTC().Format(time.RFC3339) + ". Ünïcödé survives.\n"
	tc, err := c.call(ctx, session, "storage_put", map[string]any{"key": key, "text": body, "content_type": "text/markdown; charset=utf-8"})
	if err != nil {
		return err
	}
	p("\n== storage_put %q → %s\n%s", key, tc.Status, indent(text(tc.Result)))
	if has("storage_get") {
		tc, err := c.call(ctx, session, "storage_get", map[string]any{"key": key})
		if err != nil {
			return err
		}
		if !strings.Contains(text(tc.Result), body) {
			return fmt.Errorf("storage_get %q: read back %q, want the text written", key, text(tc.Result))
		}
		p("\n== storage_get %q → %s, same bytes as written\n%s", key, tc.Status, indent(text(tc.Result)))
	}
	if has("storage_list") {
		tc, err := c.call(ctx, session, "storage_list", map[string]any{"prefix": "demo/"})
		if err != nil {
			return err
		}
		p("\n== storage_list demo/ → %s\n%s", tc.Status, indent(excerpt(text(tc.Result), 10)))
	}
	if has("storage_delete") {
		token := os.Getenv("APPROVAL_OPERATOR_TOKEN")
		if token == "" {
			return errors.New("storage_delete is enabled but APPROVAL_OPERATOR_TOKEN (the demo operator's sign-in, who approves it) is not set")
		}
		if err := gatedDelete(ctx, c, session, key, token, p); err != nil {
			return err
		}
	}
	return nil
}

// firstSentence shortens a tool description for the catalog listing.
func firstSentence(s string, max int) string {
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i+1]
	}
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

// browse opens a page of the local docs server in the real browser, acts
// on it (navigates to the spec, waits for a heading, goes back), takes a
// screenshot, lists the session's pages and closes them; with web_fetch
// too, it reads the page rendered through the browser.
func browse(ctx context.Context, c *client, session, docs string, has func(string) bool, p func(string, ...any)) error {
	type page struct {
		PageID      string `json:"page_id"`
		URL         string `json:"url"`
		Title       string `json:"title"`
		TotalLength int    `json:"total_length"`
	}
	decode := func(tc *toolCall) (page, error) {
		var pg page
		err := json.Unmarshal(tc.Result.StructuredContent, &pg)
		return pg, err
	}
	tc, err := c.call(ctx, session, "browser_open", map[string]any{"url": docs + "/go_mem.html", "max_length": 600})
	if err != nil {
		return err
	}
	pg, err := decode(tc)
	if err != nil {
		return fmt.Errorf("browser_open: structured_content: %w", err)
	}
	p("\n== browser_open %s → %s: page %s, title %q, %d characters rendered\n%s", pg.URL, tc.Status, pg.PageID, pg.Title, pg.TotalLength, indent(excerpt(text(tc.Result), 12)))
	if has("browser_act") {
		tc, err = c.call(ctx, session, "browser_act", map[string]any{"page_id": pg.PageID, "max_length": 300, "actions": []map[string]any{
			{"action": "navigate", "url": docs + "/go_spec.html"},
			{"action": "wait", "text": "Introduction"},
		}})
		if err != nil {
			return err
		}
		after, _ := decode(tc)
		p("\n== browser_act navigate + wait for \"Introduction\" → %s: %q at %s", tc.Status, after.Title, after.URL)
		tc, err = c.call(ctx, session, "browser_act", map[string]any{"page_id": pg.PageID, "max_length": 100, "actions": []map[string]any{{"action": "back"}}})
		if err != nil {
			return err
		}
		after, _ = decode(tc)
		p("== browser_act back → %s: %q", tc.Status, after.Title)
	}
	if has("browser_screenshot") {
		tc, err = c.call(ctx, session, "browser_screenshot", map[string]any{"page_id": pg.PageID, "width": 800, "height": 600})
		if err != nil {
			return err
		}
		var shot struct {
			Width, Height int
		}
		_ = json.Unmarshal(tc.Result.StructuredContent, &shot)
		size := 0
		if len(tc.Result.Content) > 0 {
			size = len(tc.Result.Content[0].Data) * 3 / 4
		}
		p("\n== browser_screenshot → %s: a %d×%d PNG of about %d bytes", tc.Status, shot.Width, shot.Height, size)
	}
	if has("web_fetch") {
		tc, err = c.call(ctx, session, "web_fetch", map[string]any{"url": docs + "/go_mem.html", "render": "always", "max_length": 200})
		if err != nil {
			return err
		}
		var wf struct {
			Rendered bool `json:"rendered"`
		}
		_ = json.Unmarshal(tc.Result.StructuredContent, &wf)
		p("\n== web_fetch render=always → %s, rendered=%v\n%s", tc.Status, wf.Rendered, indent(excerpt(text(tc.Result), 4)))
	}
	if has("browser_pages") {
		tc, err = c.call(ctx, session, "browser_pages", map[string]any{})
		if err != nil {
			return err
		}
		p("\n== browser_pages → %s\n%s", tc.Status, indent(text(tc.Result)))
		if _, err = c.call(ctx, session, "browser_pages", map[string]any{"action": "close_all"}); err != nil {
			return err
		}
		p("== browser_pages close_all: the browsing session's pages, cookies and storage are gone")
	}
	return nil
}
