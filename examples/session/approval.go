package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/sse"
)

// approve shows an operator approval end to end: the session asks for
// approval, brain streams the tool's waiting_for_operator progress live,
// a stand-in operator signs in to the local service's approval page and
// approves with a comment, and the call finishes with the decision. Only
// then does the session perform the action (deleting the demo object).
func approve(ctx context.Context, c *client, session, operatorToken string, has func(string) bool, p func(string, ...any)) error {
	// Follow the session's events live from now on.
	var page struct {
		Events []event `json:"events"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/sessions/"+session+"/events?limit=1000", nil, &page); err != nil {
		return err
	}
	after := "0"
	if n := len(page.Events); n > 0 {
		after = page.Events[n-1].ID
	}
	progress := make(chan map[string]any, 1)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go watchProgress(sctx, c, session, after, progress)

	action := `storage_delete "demo/notes (1).md"`
	var tc toolCall
	status, err := c.do(ctx, http.MethodPost, "/sessions/"+session+"/tool_calls", map[string]any{
		"tool": "request_approval", "wait_seconds": 0,
		"arguments": map[string]any{"action": action, "details": "The demo session wants to delete the note it wrote.\nTenant: local. Reversible: no.", "timeout_seconds": 120},
	}, &tc)
	if err != nil {
		return err
	}
	p("\n== request_approval %s → %d %s (the call waits for a person)", action, status, tc.Status)

	var waiting map[string]any
	select {
	case waiting = <-progress:
	case <-time.After(30 * time.Second):
		return errors.New("request_approval: no waiting_for_operator progress within 30 s")
	}
	id, _ := waiting["approval_id"].(string)
	link, _ := waiting["url"].(string)
	p("   tool.progress (live): status=%v approval_id=%s\n   operator page: %s", waiting["status"], id, link)
	if id == "" || link == "" {
		return fmt.Errorf("request_approval: progress without approval_id or url: %v", waiting)
	}
	if err := operatorApproves(ctx, link, operatorToken, "demo-operator", "Looks fine: the note is the demo's own."); err != nil {
		return fmt.Errorf("operator: %w", err)
	}
	p("   the operator signed in to the page and approved with a comment")

	for status := http.StatusAccepted; status == http.StatusAccepted; {
		if status, err = c.do(ctx, http.MethodGet, "/tool_calls/"+tc.ID+"?wait_seconds=30", nil, &tc); err != nil {
			return err
		}
	}
	if tc.Result == nil || tc.Result.IsError {
		return fmt.Errorf("request_approval: call %s ended %s", tc.ID, tc.Status)
	}
	p("== request_approval → %s\n%s", tc.Status, indent(text(tc.Result)))

	if has("storage_delete") {
		done, err := c.call(ctx, session, "storage_delete", map[string]any{"key": "demo/notes (1).md"})
		if err != nil {
			return err
		}
		p("\n== storage_delete (after the approval) → %s\n%s", done.Status, indent(text(done.Result)))
	}
	return nil
}

// watchProgress reads the session's event stream after the given event ID
// and sends the first waiting_for_operator progress payload.
func watchProgress(ctx context.Context, c *client, session, after string, out chan<- map[string]any) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/sessions/"+session+"/events", nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", after)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	for e, err := range sse.Read(resp.Body, 1<<20) {
		if err != nil {
			return
		}
		if e.Name != "tool.progress" {
			continue
		}
		var ev struct {
			Data map[string]any `json:"data"`
		}
		if json.Unmarshal([]byte(e.Data), &ev) == nil && ev.Data["status"] == "waiting_for_operator" {
			out <- ev.Data
			return
		}
	}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// operatorApproves does what a person does on the approval page: sign in
// with the operator token, open the approval, approve with a comment.
func operatorApproves(ctx context.Context, link, token, name, comment string) error {
	u, err := url.Parse(link)
	if err != nil {
		return err
	}
	origin := u.Scheme + "://" + u.Host
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	get := func(path string) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, origin+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return string(b), err
	}
	post := func(path string, form url.Values) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, origin+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 400 {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return fmt.Errorf("POST %s: %s: %s", path, resp.Status, b)
		}
		return nil
	}
	csrf := func(html string) (string, error) {
		m := csrfRE.FindStringSubmatch(html)
		if m == nil {
			return "", errors.New("no CSRF token on the page")
		}
		return m[1], nil
	}

	signin, err := get("/operator/signin")
	if err != nil {
		return err
	}
	t, err := csrf(signin)
	if err != nil {
		return err
	}
	if err := post("/operator/signin", url.Values{"csrf": {t}, "name": {name}, "token": {token}, "next": {u.Path}}); err != nil {
		return err
	}
	detail, err := get(u.Path)
	if err != nil {
		return err
	}
	if t, err = csrf(detail); err != nil {
		return err
	}
	return post(u.Path+"/decision", url.Values{"csrf": {t}, "decision": {"approve"}, "comment": {comment}})
}
