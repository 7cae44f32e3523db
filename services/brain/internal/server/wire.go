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

// CallJSON is a ToolCall resource, with every field of the peer's ToolCall
// (seed 001) always present, null when it does not apply. Times are RFC 3339
// in UTC, null when unset; error_code, error_message and retryable are null
// on success (retryable null until the call failed); result is null until
// the call finished (result_available says whether it has one); prompt,
// response_schema and response_expires_at describe the answer a call in
// requires_input waits for; queue_position is 1 for the next queued call of
// its binding to run, null when the call is not queued; parent_id is the
// gated call an approval call was made for; span_id is the call's trace
// span (16 hex digits; its trace is in the access log and the span's
// export), null when brain was not tracing when the call started;
// caller_type is api (an
// application) or system (brain's own approval calls).
type CallJSON struct {
	ID                string          `json:"id"`
	SessionID         string          `json:"session_id"`
	TenantID          string          `json:"tenant_id"`
	Tool              string          `json:"tool"`
	Status            string          `json:"status"`
	Arguments         json.RawMessage `json:"arguments"`
	ParentID          *string         `json:"parent_id"`
	SpanID            *string         `json:"span_id"`
	CallerType        string          `json:"caller_type"`
	Prompt            *string         `json:"prompt"`
	ResponseSchema    json.RawMessage `json:"response_schema"`
	ResponseExpiresAt *string         `json:"response_expires_at"`
	QueuePosition     *int            `json:"queue_position"`
	CreatedAt         string          `json:"created_at"`
	StartedAt         *string         `json:"started_at"`
	FinishedAt        *string         `json:"finished_at"`
	ErrorCode         *string         `json:"error_code"`
	ErrorMessage      *string         `json:"error_message"`
	UnknownOutcome    bool            `json:"unknown_outcome"`
	Retryable         *bool           `json:"retryable"`
	ResultAvailable   bool            `json:"result_available"`
	Result            json.RawMessage `json:"result"`
	// RevisionID is the custom-tool revision the call runs with (GET
	// /tool_revisions/{id}); null for other tools, as the peer's built-in
	// tools have no revision.
	RevisionID *string `json:"revision_id"`
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

// callJSON is c as the API shows it; pos is its queue position when queued.
func callJSON(c *store.Call, pos *int) CallJSON {
	res := c.Result
	if res == nil {
		res = json.RawMessage("null")
	}
	schema := c.ResponseSchema
	if schema == nil {
		schema = json.RawMessage("null")
	}
	caller := c.CallerType
	if caller == "" {
		caller = store.CallerAPI
	}
	return CallJSON{
		ID: c.ID, SessionID: c.SessionID, TenantID: c.TenantID, Tool: c.Tool, Status: c.Status,
		Arguments: c.Arguments, ParentID: optString(c.ParentID), SpanID: optString(c.SpanID), CallerType: caller, Prompt: optString(c.Prompt),
		ResponseSchema: schema, ResponseExpiresAt: optTime(c.ResponseExpiresAt), QueuePosition: pos,
		CreatedAt: timeString(c.CreatedAt), StartedAt: optTime(c.StartedAt),
		FinishedAt: optTime(c.FinishedAt), ErrorCode: optString(c.ErrorCode), ErrorMessage: optString(c.ErrorMessage),
		UnknownOutcome: c.UnknownOutcome, Retryable: c.Retryable, ResultAvailable: c.Result != nil, Result: res,
		RevisionID: optString(c.RevisionID),
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
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
	CallerType string          `json:"caller_type,omitempty"`
	ParentID   *string         `json:"parent_id,omitempty"`
	RevisionID *string         `json:"revision_id,omitempty"`
}

// requiresInputData is the data of a tool.requires_input event: what the
// call waits for (kind approval or function) and until when.
type requiresInputData struct {
	Tool              string          `json:"tool"`
	Kind              string          `json:"kind"`
	Prompt            string          `json:"prompt"`
	ResponseSchema    json.RawMessage `json:"response_schema"`
	ResponseExpiresAt string          `json:"response_expires_at"`
}

// respondedData is the data of a tool.responded event: who answered and,
// for an approval, the answer (a function tool's answer is the result of
// its tool.result event).
type respondedData struct {
	Tool      string    `json:"tool"`
	Kind      string    `json:"kind"`
	Responder responder `json:"responder"`
	Approved  *bool     `json:"approved,omitempty"`
	Comment   *string   `json:"comment,omitempty"`
}

// toolResultData is the data of a tool.result event.
type toolResultData struct {
	Tool       string          `json:"tool"`
	Status     string          `json:"status"`
	ErrorCode  *string         `json:"error_code"`
	Retryable  *bool           `json:"retryable"`
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
