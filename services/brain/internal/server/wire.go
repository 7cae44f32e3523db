package server

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/store"
)

// SessionJSON is a session as the API shows it.
type SessionJSON struct {
	ID        string          `json:"id"`
	TenantID  string          `json:"tenant_id"`
	Status    string          `json:"status"`
	Harness   *string         `json:"harness"`
	Config    json.RawMessage `json:"config"`
	Tools     []string        `json:"tools"`
	CreatedAt string          `json:"created_at"`
	UpdatedAt string          `json:"updated_at"`
}

// CallJSON is a ToolCall resource. Times are RFC 3339 in UTC, null when
// unset; error_code and error_message are null on success; result is null
// until the call finished.
type CallJSON struct {
	ID             string          `json:"id"`
	SessionID      string          `json:"session_id"`
	TenantID       string          `json:"tenant_id"`
	Tool           string          `json:"tool"`
	Status         string          `json:"status"`
	Arguments      json.RawMessage `json:"arguments"`
	CreatedAt      string          `json:"created_at"`
	StartedAt      *string         `json:"started_at"`
	FinishedAt     *string         `json:"finished_at"`
	ErrorCode      *string         `json:"error_code"`
	ErrorMessage   *string         `json:"error_message"`
	UnknownOutcome bool            `json:"unknown_outcome"`
	Result         json.RawMessage `json:"result"`
}

// EventJSON is one session event. ID is the event's sequence number as a
// string; live-only tool.progress events have none.
type EventJSON struct {
	ID        string          `json:"id,omitempty"`
	Type      string          `json:"type"`
	SessionID string          `json:"session_id"`
	CallID    string          `json:"call_id,omitempty"`
	Time      string          `json:"time"`
	Data      json.RawMessage `json:"data"`
}

func timeString(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := timeString(t)
	return &s
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func sessionJSON(s *store.Session) SessionJSON {
	return SessionJSON{
		ID: s.ID, TenantID: s.TenantID, Status: s.Status, Harness: optString(s.Harness),
		Config: s.Config, Tools: s.Tools, CreatedAt: timeString(s.CreatedAt), UpdatedAt: timeString(s.UpdatedAt),
	}
}

func callJSON(c *store.Call) CallJSON {
	res := c.Result
	if res == nil {
		res = json.RawMessage("null")
	}
	return CallJSON{
		ID: c.ID, SessionID: c.SessionID, TenantID: c.TenantID, Tool: c.Tool, Status: c.Status,
		Arguments: c.Arguments, CreatedAt: timeString(c.CreatedAt), StartedAt: optTime(c.StartedAt),
		FinishedAt: optTime(c.FinishedAt), ErrorCode: optString(c.ErrorCode), ErrorMessage: optString(c.ErrorMessage),
		UnknownOutcome: c.UnknownOutcome, Result: res,
	}
}

func eventJSON(ev store.Event) EventJSON {
	e := EventJSON{Type: ev.Type, SessionID: ev.SessionID, CallID: ev.CallID, Time: timeString(ev.Time), Data: ev.Data}
	if ev.ID > 0 {
		e.ID = strconv.FormatInt(ev.ID, 10)
	}
	return e
}

// toolCallData is the data of a tool.call event.
type toolCallData struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// toolResultData is the data of a tool.result event.
type toolResultData struct {
	Tool       string          `json:"tool"`
	Status     string          `json:"status"`
	ErrorCode  *string         `json:"error_code"`
	Result     json.RawMessage `json:"result"`
	DurationMS int64           `json:"duration_ms"`
}

// sessionEventData is the data of session.* events.
type sessionEventData struct {
	Status string   `json:"status"`
	Tools  []string `json:"tools,omitempty"`
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Only brain's own wire types reach here; they always encode.
		panic("encode " + err.Error())
	}
	return b
}
