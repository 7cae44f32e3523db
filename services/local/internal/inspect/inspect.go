// Package inspect is the inspect_session tool: with the inspection_token and
// brain_url that brain sends for a binding with inspect_session: true, it
// reads the calling session's events from brain and summarizes them: counts
// by event type and the last N tool calls with tool, status and timing.
//
// The inspection token is a bearer credential that reads the session until
// the call returns. This package sends it only to brain_url, in the
// Authorization header, never follows a redirect with it, and never logs,
// stores or returns it (the contract's "Protect inspection tokens").
package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/pkg/tracing"
)

// Limits of one inspection.
const (
	DefaultLastN = 10
	MaxLastN     = 100
	// PageSize is the events asked per page (brain's largest page is 1000).
	PageSize = 1000
	// DefaultMaxEvents caps the events read per inspection; a longer
	// session is summarized over its first DefaultMaxEvents events and the
	// summary says it was truncated.
	DefaultMaxEvents = 20000
	// maxPageBytes caps one page's response body.
	maxPageBytes = 16 << 20
)

// Options configure the tool. Zero values take the defaults.
type Options struct {
	// Client is the HTTP client for brain. Default: a client with no
	// proxy, no redirects and a 30 s timeout per page.
	Client *http.Client
	// MaxEvents caps the events read per inspection. Default
	// DefaultMaxEvents.
	MaxEvents int
	// BrainURLs, when not empty, are the only brain base URLs the token is
	// sent to; a call whose brain_url is not one of them is refused. Each
	// must be a plain http(s) base URL (see CheckBrainURLs).
	BrainURLs []string
}

// CheckBrainURLs checks an allow-list for Options.BrainURLs: each entry is
// a plain http(s) base URL, written as strictly as BRAIN_PUBLIC_URL and
// PUBLIC_URL (service.CheckBaseURL: no empty port, no leading zeros). The
// error names the entry at fault.
func CheckBrainURLs(urls []string) error {
	for _, raw := range urls {
		if _, err := brainBase(raw); err != nil {
			return fmt.Errorf("brain URL %q: %v", raw, err)
		}
		if err := service.CheckBaseURL(raw); err != nil {
			return fmt.Errorf("brain URL %q: %v", raw, err)
		}
	}
	return nil
}

// baseKey is u as the allow-list compares it: scheme and host in lower
// case, the port as a number and none when it is the default, no trailing
// slash.
func baseKey(u *url.URL) string {
	port := u.Port()
	if n, err := strconv.Atoi(port); err == nil {
		port = strconv.Itoa(n) // 08080 is 8080
	}
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port) + strings.TrimRight(u.EscapedPath(), "/")
}

// allowedBases is the set of baseKey of the entries of urls that are
// plain http(s) base URLs (CheckBrainURLs refuses the others).
func allowedBases(urls []string) map[string]bool {
	set := make(map[string]bool, len(urls))
	for _, raw := range urls {
		if u, err := brainBase(raw); err == nil {
			set[baseKey(u)] = true
		}
	}
	return set
}

// Args are inspect_session's arguments; its input_schema is inferred from
// them (the limits are DefaultLastN and MaxLastN).
type Args struct {
	LastN *int `json:"last_n,omitempty" jsonschema:"How many of the most recent tool calls to list." schema:"minimum=1,maximum=100,default=10"`
}

// Call is one tool call in the summary. Status is brain's final status
// (succeeded, failed, timed_out, cancelled), or while no tool.result has
// been seen "requires_input" for a call waiting for an answer
// (tool.requires_input) and "running" otherwise (the inspect_session call
// itself is one). RespondedBy is who answered a call that waited
// (tool.responded): "operator NAME" or "api KEY_ENV"; ParentID the call an
// approval call was made for.
type Call struct {
	CallID      string `json:"call_id"`
	Tool        string `json:"tool"`
	Status      string `json:"status"`
	ParentID    string `json:"parent_id,omitempty"`
	RespondedBy string `json:"responded_by,omitempty"`
	ErrorCode   string `json:"error_code,omitempty"`
	StartedAt   string `json:"started_at,omitempty"`
	FinishedAt  string `json:"finished_at,omitempty"`
	DurationMS  *int64 `json:"duration_ms,omitempty"`
}

// Summary is inspect_session's structured_content.
type Summary struct {
	SessionID    string         `json:"session_id"`
	EventsRead   int            `json:"events_read"`
	Truncated    bool           `json:"truncated"`
	Counts       map[string]int `json:"counts"`
	CallsTotal   int            `json:"calls_total"`
	FirstEventAt string         `json:"first_event_at,omitempty"`
	LastEventAt  string         `json:"last_event_at,omitempty"`
	// Calls are the last N calls in the order they started, oldest first.
	Calls []Call `json:"calls"`
}

// binding is inspect_session's binding: inspect_session must be true so
// that brain sends the token (and so the tool is not listed over MCP,
// whose calls carry none). Its schemas are inferred from Args and Summary.
var binding = tool.Binding{
	Name:  "inspect_session",
	Title: "Inspect session",
	Description: "Summarize this session so far: how many events of each type, and the last tool calls with their tool, status and timing. " +
		"Use it to check what already happened, e.g. whether an earlier call finished.",
	TimeoutSeconds: 60,
	InspectSession: true,
	Annotations:    tool.ReadOnly(),
}

// Tool returns the inspect_session tool.
func Tool(opts Options) service.Tool {
	if opts.Client == nil {
		opts.Client = &http.Client{
			Timeout: 30 * time.Second,
			Transport: tracing.Transport(&http.Transport{
				// The token goes to brain and nowhere else: no proxy.
				Proxy:                 nil,
				DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
				ResponseHeaderTimeout: 30 * time.Second,
				MaxIdleConnsPerHost:   4,
				IdleConnTimeout:       30 * time.Second,
			}, "brain"),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = DefaultMaxEvents
	}
	// The allow-list is parsed once, not on every call.
	allowed := allowedBases(opts.BrainURLs)
	return service.NewTool(binding, func(ctx context.Context, call *service.Call, a Args) (Summary, error) {
		return inspect(ctx, opts, allowed, call, a)
	})
}

func inspect(ctx context.Context, opts Options, allowed map[string]bool, call *service.Call, a Args) (Summary, error) {
	if call.InspectionToken == "" {
		return Summary{}, errors.New("inspect_session: brain sent no inspection_token; set \"inspect_session\": true on this tool's binding in the host config")
	}
	base, err := brainBase(call.BrainURL)
	if err != nil {
		return Summary{}, fmt.Errorf("inspect_session: brain_url: %v", err)
	}
	if len(opts.BrainURLs) > 0 && !allowed[baseKey(base)] {
		// The token is not sent anywhere the operator did not name.
		return Summary{}, fmt.Errorf("inspect_session: brain_url %s is not one of this service's INSPECT_BRAIN_URLS", base.Redacted())
	}
	lastN := DefaultLastN
	if a.LastN != nil {
		lastN = *a.LastN
	}
	events, truncated, err := readEvents(ctx, opts, base, call.SessionID, call.InspectionToken)
	if err != nil {
		// err never carries the token: it is only ever in a header.
		call.Logger.Warn("inspect_session: read events", "err", err)
		return Summary{}, fmt.Errorf("inspect_session: %w", err)
	}
	return summarize(call.SessionID, events, truncated, lastN), nil
}

func brainBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return nil, errors.New("missing")
	case err != nil:
		return nil, fmt.Errorf("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("scheme must be http or https, got %q", u.Scheme)
	case u.Host == "":
		return nil, errors.New("has no host")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, errors.New("must be a plain base URL (no credentials, query or fragment)")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("port %q is not 1 to 65535", p)
		}
	}
	return u, nil
}

// event is the part of brain's event JSON the summary reads.
type event struct {
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	CallID string          `json:"call_id"`
	Time   string          `json:"time"`
	Data   json.RawMessage `json:"data"`
}

type page struct {
	Events  []event `json:"events"`
	HasMore bool    `json:"has_more"`
}

// readEvents pages through GET {base}/sessions/{id}/events as JSON until
// brain says there are no more, or MaxEvents have been read (truncated).
func readEvents(ctx context.Context, opts Options, base *url.URL, sessionID, token string) ([]event, bool, error) {
	var all []event
	after := int64(0)
	for {
		limit := min(PageSize, opts.MaxEvents-len(all))
		if limit <= 0 {
			return all, true, nil
		}
		p, err := fetchPage(ctx, opts.Client, base, sessionID, token, after, limit)
		if err != nil {
			return nil, false, err
		}
		all = append(all, p.Events...)
		if !p.HasMore || len(p.Events) == 0 {
			return all, false, nil
		}
		last, err := strconv.ParseInt(p.Events[len(p.Events)-1].ID, 10, 64)
		if err != nil || last <= after {
			return nil, false, fmt.Errorf("brain's event page has a bad or non-increasing id %q", p.Events[len(p.Events)-1].ID)
		}
		after = last
		if len(all) >= opts.MaxEvents {
			return all, true, nil
		}
	}
}

func fetchPage(ctx context.Context, client *http.Client, base *url.URL, sessionID, token string, after int64, limit int) (*page, error) {
	// The session ID is one path segment, escaped, whatever it holds.
	u := *base
	u.Path = strings.TrimRight(base.Path, "/") + "/sessions/" + sessionID + "/events"
	u.RawPath = strings.TrimRight(base.EscapedPath(), "/") + "/sessions/" + url.PathEscape(sessionID) + "/events"
	u.RawQuery = url.Values{"after": {strconv.FormatInt(after, 10)}, "limit": {strconv.Itoa(limit)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read events from brain: %w", stripURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read events from brain: %w", stripURL(err))
	}
	if len(body) > maxPageBytes {
		return nil, fmt.Errorf("read events from brain: a page is larger than %d bytes", maxPageBytes)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Code, Message string
			} `json:"error"`
		}
		msg := ""
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			msg = ": " + e.Error.Message
		}
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return nil, fmt.Errorf("brain refused the inspection token (status %d)%s", resp.StatusCode, msg)
		}
		return nil, fmt.Errorf("read events from brain: status %d%s", resp.StatusCode, msg)
	}
	var p page
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("read events from brain: not an event page: %v", err)
	}
	return &p, nil
}

// stripURL drops the URL from a *url.Error: it holds no token, but the
// message is clearer with only the cause.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func summarize(sessionID string, events []event, truncated bool, lastN int) Summary {
	s := Summary{SessionID: sessionID, EventsRead: len(events), Truncated: truncated, Counts: map[string]int{}, Calls: []Call{}}
	byID := map[string]*Call{}
	var order []*Call
	for _, ev := range events {
		s.Counts[ev.Type]++
		if s.FirstEventAt == "" {
			s.FirstEventAt = ev.Time
		}
		s.LastEventAt = ev.Time
		switch ev.Type {
		case "tool.requires_input", "tool.responded":
			var d struct {
				Responder *struct {
					Type   string `json:"type"`
					Name   string `json:"name"`
					APIKey string `json:"api_key"`
				} `json:"responder"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			c, ok := byID[ev.CallID]
			if !ok {
				continue
			}
			if ev.Type == "tool.requires_input" {
				c.Status = "requires_input"
			} else if r := d.Responder; r != nil {
				c.Status = "running"
				c.RespondedBy = strings.TrimSpace(r.Type + " " + r.Name + r.APIKey)
			}
		case "tool.call":
			var d struct {
				Tool     string `json:"tool"`
				ParentID string `json:"parent_id"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			c := &Call{CallID: ev.CallID, Tool: d.Tool, Status: "running", ParentID: d.ParentID, StartedAt: ev.Time}
			if old, ok := byID[ev.CallID]; ok && ev.CallID != "" {
				*old = *c
				continue
			}
			byID[ev.CallID] = c
			order = append(order, c)
		case "tool.result":
			var d struct {
				Tool       string  `json:"tool"`
				Status     string  `json:"status"`
				ErrorCode  *string `json:"error_code"`
				DurationMS *int64  `json:"duration_ms"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			c, ok := byID[ev.CallID]
			if !ok {
				// The call started before the events read (never, unless
				// truncated): list it from its result alone.
				c = &Call{CallID: ev.CallID, Tool: d.Tool}
				byID[ev.CallID] = c
				order = append(order, c)
			}
			if c.Tool == "" {
				c.Tool = d.Tool
			}
			c.Status = d.Status
			if c.Status == "" {
				c.Status = "finished"
			}
			if d.ErrorCode != nil {
				c.ErrorCode = *d.ErrorCode
			}
			c.FinishedAt = ev.Time
			c.DurationMS = d.DurationMS
		}
	}
	s.CallsTotal = len(order)
	if len(order) > lastN {
		order = order[len(order)-lastN:]
	}
	for _, c := range order {
		s.Calls = append(s.Calls, *c)
	}
	return s
}

// String renders the summary for a reader: the result's text block.
func (s Summary) String() string {
	var b strings.Builder
	types := make([]string, 0, len(s.Counts))
	for t := range s.Counts {
		types = append(types, t)
	}
	sort.Strings(types)
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("%s %d", t, s.Counts[t])
	}
	fmt.Fprintf(&b, "Session %s: %d events", s.SessionID, s.EventsRead)
	if len(parts) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	b.WriteString(".")
	if s.Truncated {
		fmt.Fprintf(&b, " Only the first %d events were read.", s.EventsRead)
	}
	if s.CallsTotal == 0 {
		b.WriteString("\nNo tool calls yet.")
		return b.String()
	}
	if s.CallsTotal > len(s.Calls) {
		fmt.Fprintf(&b, "\nLast %d of %d tool calls, oldest first:", len(s.Calls), s.CallsTotal)
	} else {
		fmt.Fprintf(&b, "\n%d tool calls, oldest first:", s.CallsTotal)
	}
	for _, c := range s.Calls {
		fmt.Fprintf(&b, "\n- %s (call %s", c.Tool, c.CallID)
		if c.ParentID != "" {
			fmt.Fprintf(&b, ", for call %s", c.ParentID)
		}
		fmt.Fprintf(&b, "): %s", c.Status)
		if c.ErrorCode != "" {
			fmt.Fprintf(&b, " [%s]", c.ErrorCode)
		}
		if c.RespondedBy != "" {
			fmt.Fprintf(&b, ", answered by %s", c.RespondedBy)
		}
		if c.DurationMS != nil {
			fmt.Fprintf(&b, " in %s", (time.Duration(*c.DurationMS) * time.Millisecond).String())
		}
		if c.StartedAt != "" {
			fmt.Fprintf(&b, ", started %s", c.StartedAt)
		}
	}
	return b.String()
}
