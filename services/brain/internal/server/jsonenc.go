package server

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/store"
)

// The encoders of what every tool call writes — its tool.call and
// tool.result events, its result, and the ToolCall brain answers with —
// append to a buffer directly. Each produces exactly the bytes of
// json.Marshal of the same value (HTML characters escaped, raw JSON
// compacted), which jsonenc_test.go holds them to, without its
// reflection, and without encoding/json's second pass over every
// json.RawMessage (the call's arguments, the result) and every
// MarshalJSON method's output.

// appendString appends s as encoding/json encodes a string:
// tool.AppendString, with <, > and & escaped as json.Marshal escapes them.
func appendString(b []byte, s string) []byte {
	n := len(b)
	b = tool.AppendString(b, s)
	if !strings.ContainsAny(s, "<>&") {
		return b
	}
	var esc bytes.Buffer
	json.HTMLEscape(&esc, b[n:])
	return append(b[:n], esc.Bytes()...)
}

// appendRaw appends raw, valid JSON brain made or checked, as encoding/json
// encodes a json.RawMessage: compacted, with <, >, & and U+2028/U+2029
// escaped; empty is null. JSON that needs none of that (what brain's own
// encoders and a compact client write) is copied as it is.
func appendRaw(b []byte, raw []byte) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	if plainJSON(raw) {
		return append(b, raw...)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		// Only valid JSON reaches here (see the callers); should it not
		// be, encoding/json would refuse it the same way.
		panic("encode raw JSON: " + err.Error())
	}
	var esc bytes.Buffer
	json.HTMLEscape(&esc, buf.Bytes())
	return append(b, esc.Bytes()...)
}

// plainJSON reports whether raw has no byte that encoding/json would
// change: no whitespace (which can only be insignificant in compact JSON
// outside strings, and is escaped inside them), no <, > or &, and no
// U+2028/U+2029 (whose encodings start with 0xE2).
func plainJSON(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2:
			return false
		}
	}
	return true
}

// encodeResult is mustJSON(r): tool.Result.AppendJSON (no HTML escaping)
// with the HTML escaping json.Marshal then adds.
func encodeResult(r *tool.Result) json.RawMessage {
	b, err := r.AppendJSON(nil)
	if err != nil {
		// Only results the decoder or brain made reach here; they encode.
		panic("encode result: " + err.Error())
	}
	if plainJSON(b) {
		return b
	}
	var esc bytes.Buffer
	json.HTMLEscape(&esc, b)
	return esc.Bytes()
}

// appendJSON is mustJSON(d).
func (d *toolCallData) appendJSON(b []byte) []byte {
	b = append(b, `{"tool":`...)
	b = appendString(b, d.Tool)
	b = append(b, `,"arguments":`...)
	b = appendRaw(b, d.Arguments)
	if d.CallerType != "" {
		b = append(b, `,"caller_type":`...)
		b = appendString(b, d.CallerType)
	}
	if d.ParentID != nil {
		b = append(b, `,"parent_id":`...)
		b = appendString(b, *d.ParentID)
	}
	if d.RevisionID != nil {
		b = append(b, `,"revision_id":`...)
		b = appendString(b, *d.RevisionID)
	}
	return append(b, '}')
}

// appendJSON is mustJSON(d).
func (d *toolResultData) appendJSON(b []byte) []byte {
	b = append(b, `{"tool":`...)
	b = appendString(b, d.Tool)
	b = append(b, `,"status":`...)
	b = appendString(b, d.Status)
	b = append(b, `,"error_code":`...)
	b = appendOptString(b, d.ErrorCode)
	b = append(b, `,"retryable":`...)
	b = appendOptBool(b, d.Retryable)
	b = append(b, `,"result":`...)
	b = appendRaw(b, d.Result)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, d.DurationMS, 10)
	return append(b, '}')
}

func appendOptString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

func appendOptBool(b []byte, v *bool) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return strconv.AppendBool(b, *v)
}

// callAnswer is call c as the API shows it, pos its queue position when
// queued: json.Marshal(callJSON(c, pos)), appended straight from the call
// (httpapi.WriteJSON takes it as an Appender), without the strings and
// pointers of a CallJSON.
type callAnswer struct {
	c   *store.Call
	pos *int
}

// AppendJSON implements httpapi.Appender.
func (a callAnswer) AppendJSON(b []byte) ([]byte, error) {
	c := a.c
	b = slices.Grow(b, 640+len(c.Arguments)+len(c.Result)+len(c.Prompt)+len(c.ResponseSchema)+len(c.ErrorMessage))
	b = append(b, `{"id":`...)
	b = appendString(b, c.ID)
	b = append(b, `,"session_id":`...)
	b = appendString(b, c.SessionID)
	b = append(b, `,"tenant_id":`...)
	b = appendString(b, c.TenantID)
	b = append(b, `,"tool":`...)
	b = appendString(b, c.Tool)
	b = append(b, `,"status":`...)
	b = appendString(b, c.Status)
	b = append(b, `,"arguments":`...)
	b = appendRaw(b, c.Arguments)
	b = append(b, `,"parent_id":`...)
	b = appendNullString(b, c.ParentID)
	b = append(b, `,"span_id":`...)
	b = appendNullString(b, c.SpanID)
	b = append(b, `,"caller_type":`...)
	if c.CallerType == "" {
		b = appendString(b, store.CallerAPI)
	} else {
		b = appendString(b, c.CallerType)
	}
	b = append(b, `,"prompt":`...)
	b = appendNullString(b, c.Prompt)
	b = append(b, `,"response_schema":`...)
	b = appendRaw(b, c.ResponseSchema)
	b = append(b, `,"response_expires_at":`...)
	b = appendNullTime(b, c.ResponseExpiresAt)
	b = append(b, `,"queue_position":`...)
	if a.pos == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*a.pos), 10)
	}
	b = append(b, `,"created_at":`...)
	b = appendTime(b, c.CreatedAt)
	b = append(b, `,"started_at":`...)
	b = appendNullTime(b, c.StartedAt)
	b = append(b, `,"finished_at":`...)
	b = appendNullTime(b, c.FinishedAt)
	b = append(b, `,"error_code":`...)
	b = appendNullString(b, c.ErrorCode)
	b = append(b, `,"error_message":`...)
	b = appendNullString(b, c.ErrorMessage)
	b = append(b, `,"unknown_outcome":`...)
	b = strconv.AppendBool(b, c.UnknownOutcome)
	b = append(b, `,"retryable":`...)
	b = appendOptBool(b, c.Retryable)
	b = append(b, `,"result_available":`...)
	b = strconv.AppendBool(b, c.Result != nil)
	b = append(b, `,"result":`...)
	b = appendRaw(b, c.Result)
	b = append(b, `,"revision_id":`...)
	b = appendNullString(b, c.RevisionID)
	return append(b, '}'), nil
}

// appendNullString is appendOptString(b, optString(s)).
func appendNullString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

// appendTime is appendString(b, timeString(t)): RFC 3339 needs no escape.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendNullTime is appendOptString(b, optTime(t)).
func appendNullTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	return appendTime(b, t)
}
