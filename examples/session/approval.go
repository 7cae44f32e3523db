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

// gatedDelete shows an approval gate end to end: the host config gates
// storage_delete (require_approval "always"), so the call waits in
// requires_input with a prompt showing its exact arguments, and brain asks
// the approval tool for it (a child call whose parent_id is the gated
// call). The approval's waiting_for_operator progress arrives live with the
// page's link; a stand-in operator signs in to the local service's
// approval page and approves with a comment; only then is the delete sent.
func gatedDelete(ctx context.Context, c *client, session, key, operatorToken string, p func(string, ...any)) error {
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
	progress := make(chan progressEvent, 1)
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	// The progress is sent live only, never stored: the stream must be
	// open (brain subscribes before it answers) before the call is made.
	subscribed := make(chan error, 1)
	go watchProgress(sctx, c, session, after, subscribed, progress)
	if err := <-subscribed; err != nil {
		return fmt.Errorf("open the session's event stream: %w", err)
	}

	var tc toolCall
	status, err := c.do(ctx, http.MethodPost, "/sessions/"+session+"/tool_calls", map[string]any{
		"tool": "storage_delete", "arguments": map[string]any{"key": key}, "wait_seconds": 0,
	}, &tc)
	if err != nil {
		return err
	}
	if tc.Status != "requires_input" || tc.Prompt == nil {
		return fmt.Errorf("storage_delete: call %s is %s, want requires_input behind its approval gate", tc.ID, tc.Status)
	}
	p("\n== storage_delete %q → %d %s (the binding says require_approval: always)\n   prompt: %s\n   answer before %s",
		key, status, tc.Status, firstLine(*tc.Prompt), deref(tc.ResponseExpiresAt))

	var waiting progressEvent
	select {
	case waiting = <-progress:
	case <-time.After(30 * time.Second):
		return errors.New("storage_delete: no approval call reported waiting_for_operator within 30 s")
	}
	var approvalCall toolCall
	if _, err := c.do(ctx, http.MethodGet, "/tool_calls/"+waiting.callID, nil, &approvalCall); err != nil {
		return err
	}
	if approvalCall.ParentID == nil || *approvalCall.ParentID != tc.ID {
		return fmt.Errorf("storage_delete: the approval call %s is not the gated call's (parent_id %v)", approvalCall.ID, approvalCall.ParentID)
	}
	link, _ := waiting.data["url"].(string)
	p("   brain asked %s for it: call %s (caller_type %s, parent_id %s)\n   tool.progress (live): status=%v\n   operator page: %s",
		approvalCall.Tool, approvalCall.ID, approvalCall.CallerType, *approvalCall.ParentID, waiting.data["status"], link)
	if link == "" {
		return fmt.Errorf("storage_delete: approval progress without a url: %v", waiting.data)
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
		return fmt.Errorf("storage_delete: call %s ended %s", tc.ID, tc.Status)
	}
	p("== storage_delete (approved, then sent) → %s\n%s", tc.Status, indent(text(tc.Result)))
	return nil
}

// progressEvent is a tool.progress payload and the call that sent it.
type progressEvent struct {
	callID string
	data   map[string]any
}

// watchProgress reads the session's event stream after the given event ID
// (subscribed gets nil once brain has answered the stream's request, or
// why it could not be opened)
// and sends the first waiting_for_operator progress payload.
func watchProgress(ctx context.Context, c *client, session, after string, subscribed chan<- error, out chan<- progressEvent) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/sessions/"+session+"/events", nil)
	if err != nil {
		subscribed <- err
		return
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", after)
	resp, err := http.DefaultClient.Do(req)
	if err == nil && resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		err = fmt.Errorf("GET /sessions/%s/events: %s", session, resp.Status)
	}
	subscribed <- err
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
			CallID string         `json:"call_id"`
			Data   map[string]any `json:"data"`
		}
		if json.Unmarshal([]byte(e.Data), &ev) == nil && ev.Data["status"] == "waiting_for_operator" {
			out <- progressEvent{ev.CallID, ev.Data}
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

// orders are the demo application's own records, which the function tool
// lookup_order answers from.
var orders = map[string]map[string]any{
	"A-1042": {"order_id": "A-1042", "status": "shipped", "eta": "2026-12-04"},
}

// answerFunction shows a function tool: brain records the call and waits in
// requires_input until the application — this program — answers with the
// result from its own records through POST /tool_calls/{id}/respond.
func answerFunction(ctx context.Context, c *client, session string, p func(string, ...any)) error {
	var tc toolCall
	status, err := c.do(ctx, http.MethodPost, "/sessions/"+session+"/tool_calls", map[string]any{
		"tool": "lookup_order", "arguments": map[string]any{"order_id": "A-1042"}, "wait_seconds": 0,
	}, &tc)
	if err != nil {
		return err
	}
	if tc.Status != "requires_input" || tc.Prompt == nil {
		return fmt.Errorf("lookup_order: call %s is %s, want requires_input", tc.ID, tc.Status)
	}
	p("\n== lookup_order (a function tool: the application answers it) → %d %s\n   prompt: %s\n   answer before %s",
		status, tc.Status, firstLine(*tc.Prompt), deref(tc.ResponseExpiresAt))
	var args struct {
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal(tc.Arguments, &args); err != nil {
		return fmt.Errorf("lookup_order: arguments: %w", err)
	}
	rec, ok := orders[args.OrderID]
	res := map[string]any{"structured_content": rec, "content": []map[string]string{{"type": "text",
		"text": fmt.Sprintf("Order %s: %v, expected %v.", args.OrderID, rec["status"], rec["eta"])}}}
	if !ok {
		res = map[string]any{"is_error": true, "content": []map[string]string{{"type": "text", "text": "no such order " + args.OrderID}}}
	}
	if _, err := c.do(ctx, http.MethodPost, "/tool_calls/"+tc.ID+"/respond", res, &tc); err != nil {
		return err
	}
	if tc.Result == nil || tc.Result.IsError {
		return fmt.Errorf("lookup_order: call %s ended %s", tc.ID, tc.Status)
	}
	p("== respond (the application's answer, checked against the output_schema) → %s\n%s", tc.Status, indent(text(tc.Result)))
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
