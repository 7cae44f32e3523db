// Package tool holds the wire types of the tool contract: the request body
// the host POSTs to a tool service, the result the service answers with, and
// the binding that declares a tool in the host config.
//
// Source: the "Distributed tools" contract (shared/seeds/000_*.txt),
// sections "Handle a tool call", "Return a JSON result" and "Configure a
// tool". Field names, limits and validation rules follow it to the letter.
package tool

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	sjson "github.com/segmentio/encoding/json"

	"github.com/brain-tools/suite/pkg/strictjson"
)

// Limits and defaults of the contract.
const (
	// DefaultTimeoutSeconds is a binding's timeout_seconds when unset.
	DefaultTimeoutSeconds = 300
	// MaxTimeoutSeconds is the largest timeout_seconds a binding may set.
	MaxTimeoutSeconds = 86400
	// DefaultMaxOutputBytes is a binding's max_output_bytes when unset (1 MiB).
	DefaultMaxOutputBytes = 1 << 20
	// MaxOutputBytesLimit is the largest max_output_bytes a binding may set (2 MiB).
	MaxOutputBytesLimit = 2 << 20
	// HeaderTimeout is how long the host waits for a tool's response headers.
	HeaderTimeout = 30 * time.Second
)

// Content block types.
const (
	TypeText  = "text"
	TypeImage = "image"
)

// Request is the body the host POSTs to a tool's url. TenantID and SessionID
// come from the authenticated session, never from the model; a service
// authorizes with them. InspectionToken and BrainURL are set only for
// bindings with inspect_session: the token reads the session's events until
// the call returns and must never be logged or stored.
type Request struct {
	TenantID        string          `json:"tenant_id"`
	SessionID       string          `json:"session_id"`
	CallID          string          `json:"call_id"`
	Arguments       json.RawMessage `json:"arguments"`
	InspectionToken string          `json:"inspection_token,omitempty"`
	BrainURL        string          `json:"brain_url,omitempty"`
}

// Validate reports the first missing or malformed field: tenant_id,
// session_id and call_id are required, arguments must be a JSON object.
func (r *Request) Validate() error {
	switch {
	case r.TenantID == "":
		return &strictjson.FieldError{Field: "tenant_id", Problem: "required"}
	case r.SessionID == "":
		return &strictjson.FieldError{Field: "session_id", Problem: "required"}
	case r.CallID == "":
		return &strictjson.FieldError{Field: "call_id", Problem: "required"}
	case !isObject(r.Arguments):
		return &strictjson.FieldError{Field: "arguments", Problem: "required: must be a JSON object"}
	case r.InspectionToken != "" && r.BrainURL == "":
		return &strictjson.FieldError{Field: "brain_url", Problem: "required with inspection_token"}
	}
	return nil
}

// LogValue implements slog.LogValuer so that logging a Request never writes
// the inspection token (a bearer credential) or the arguments.
func (r Request) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("tenant_id", r.TenantID),
		slog.String("session_id", r.SessionID),
		slog.String("call_id", r.CallID),
	)
}

// String identifies the call without its token or arguments.
func (r Request) String() string {
	return fmt.Sprintf("tenant=%s session=%s call=%s", r.TenantID, r.SessionID, r.CallID)
}

// AppendJSON appends the request's JSON encoding to b, as json.Marshal
// would write it but without HTML escaping, and with Arguments copied as
// they are, not re-encoded (a large argument costs a copy). It fails when
// Arguments are not exactly one JSON value (RFC 8259) in valid UTF-8: that
// check keeps them inside their member of the envelope. Finer rules, such
// as duplicate names, are the tool's to refuse (pkg/service answers them
// with an is_error result); brain refuses them before, when it decodes the
// body of POST /sessions/{id}/tool_calls.
func (r *Request) AppendJSON(b []byte) ([]byte, error) {
	if !validJSON(r.Arguments) {
		return nil, errArguments()
	}
	b = r.appendHead(b)
	b = append(b, bytes.TrimSpace(r.Arguments)...)
	return r.appendTail(b), nil
}

// Body is AppendJSON's encoding as a reader of n bytes. Up to
// SmallBody bytes it is one *bytes.Reader, which net/http sends with the
// request's headers in one write. A larger body reads over three parts:
// the identity fields, r.Arguments as they are (not copied, so a large
// upload costs no second buffer) and the rest; r.Arguments must then not
// change until the reader is drained. Its error is AppendJSON's.
func (r *Request) Body() (body io.Reader, n int64, err error) {
	if !validJSON(r.Arguments) {
		return nil, 0, errArguments()
	}
	head, args, tail := r.appendHead(nil), bytes.TrimSpace(r.Arguments), r.appendTail(nil)
	n = int64(len(head) + len(args) + len(tail))
	if n <= SmallBody {
		return bytes.NewReader(append(append(head, args...), tail...)), n, nil
	}
	return io.MultiReader(bytes.NewReader(head), bytes.NewReader(args), bytes.NewReader(tail)), n, nil
}

// SmallBody is the size, in bytes, up to which Request.Body is one
// contiguous reader. net/http writes a request's headers and a body it
// knows to be in memory (a *bytes.Reader) through one 4 KiB buffer, so a
// small request leaves in one write instead of four; past a few KiB that
// buffer splits the body anyway, and the three parts cost fewer writes.
const SmallBody = 3 << 10

func errArguments() error {
	return &strictjson.FieldError{Field: "arguments", Problem: "not a valid JSON value"}
}

// appendHead appends the encoding up to the arguments' value.
func (r *Request) appendHead(b []byte) []byte {
	b = append(b, `{"tenant_id":`...)
	b, _ = appendString(b, r.TenantID)
	b = append(b, `,"session_id":`...)
	b, _ = appendString(b, r.SessionID)
	b = append(b, `,"call_id":`...)
	b, _ = appendString(b, r.CallID)
	return append(b, `,"arguments":`...)
}

// appendTail appends the encoding after the arguments' value.
func (r *Request) appendTail(b []byte) []byte {
	if r.InspectionToken != "" {
		b = append(b, `,"inspection_token":`...)
		b, _ = appendString(b, r.InspectionToken)
	}
	if r.BrainURL != "" {
		b = append(b, `,"brain_url":`...)
		b, _ = appendString(b, r.BrainURL)
	}
	return append(b, '}')
}

// validJSON reports whether data is one JSON value (RFC 8259 syntax, any
// surrounding space) in valid UTF-8, nested at most 10,000 levels deep.
// segmentio/encoding checks the syntax about ten times faster than
// jsontext.Value.IsValid on a long string (a base64 upload); utf8.Valid
// adds the strict UTF-8 that it leaves out. It has no nesting limit and
// slows down on deep nesting, so a value with more than 10,000 brackets is
// checked by jsontext instead, which refuses nesting past 10,000 levels as
// strictjson and the tools do.
func validJSON(data []byte) bool {
	if bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) > maxNesting {
		return jsontext.Value(data).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) && utf8.Valid(data)
	}
	return sjson.Valid(data) && utf8.Valid(data)
}

// maxNesting is jsontext's limit on nested objects and arrays.
const maxNesting = 10000

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// Content is one content block: {"type":"text","text":"..."} or
// {"type":"image","data":"BASE64","mime_type":"image/png"}. Any other type,
// or a field that does not belong to the block's type, is invalid.
type Content struct {
	Type     string
	Text     string
	Data     string // base64, for images
	MIMEType string // for images
}

// Text returns a text block.
func Text(s string) Content { return Content{Type: TypeText, Text: s} }

// Image returns an image block with data base64-encoded.
func Image(data []byte, mimeType string) Content {
	return Content{Type: TypeImage, Data: base64.StdEncoding.EncodeToString(data), MIMEType: mimeType}
}

// block is a content block as sent: every field any type may carry, and
// the other members (Other, a go-json-experiment/json embedded fallback,
// which the strict decoder fills instead of refusing them), so that the
// type is judged before the fields foreign to it.
type block struct {
	Type     *string                   `json:"type"`
	Text     *string                   `json:"text"`
	Data     *string                   `json:"data"`
	MIMEType *string                   `json:"mime_type"`
	Other    map[string]jsontext.Value `json:",embed"`
}

// content checks the block's fields against its type and returns it.
func (b *block) content() (Content, error) {
	if b.Type == nil {
		return Content{}, &strictjson.FieldError{Field: "type", Problem: "required"}
	}
	var present []string
	switch *b.Type {
	case TypeText:
		if b.Data != nil {
			present = append(present, "data")
		}
		if b.MIMEType != nil {
			present = append(present, "mime_type")
		}
	case TypeImage:
		if b.Text != nil {
			present = append(present, "text")
		}
	default:
		return Content{}, &strictjson.FieldError{Field: "type", Problem: fmt.Sprintf("unknown content type %q (want text or image)", *b.Type)}
	}
	for name := range b.Other {
		present = append(present, name)
	}
	if len(present) > 0 {
		slices.Sort(present)
		return Content{}, &strictjson.FieldError{Field: present[0], Problem: "unknown field"}
	}
	c := Content{Type: *b.Type}
	switch c.Type {
	case TypeText:
		if b.Text == nil {
			return Content{}, &strictjson.FieldError{Field: "text", Problem: "required in a text block"}
		}
		c.Text = *b.Text
	case TypeImage:
		if b.Data != nil {
			c.Data = *b.Data
		}
		if b.MIMEType != nil {
			c.MIMEType = *b.MIMEType
		}
	}
	return c, c.Validate()
}

// MarshalJSON writes only the fields of the block's type, without HTML
// escaping.
func (c Content) MarshalJSON() ([]byte, error) {
	return c.appendJSON(nil)
}

// UnmarshalJSON accepts a text or image block and nothing else: unknown
// types and fields foreign to the type are errors.
func (c *Content) UnmarshalJSON(data []byte) error {
	var b block
	if err := strictjson.Unmarshal(data, &b); err != nil {
		return err
	}
	v, err := b.content()
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// Validate checks the block by its type: an image needs base64 data and an
// image/* mime_type.
func (c *Content) Validate() error {
	switch c.Type {
	case TypeText:
		return nil
	case TypeImage:
		if c.Data == "" {
			return &strictjson.FieldError{Field: "data", Problem: "required in an image block"}
		}
		if _, err := base64.StdEncoding.DecodeString(c.Data); err != nil {
			return &strictjson.FieldError{Field: "data", Problem: "not valid base64"}
		}
		if !strings.HasPrefix(c.MIMEType, "image/") {
			return &strictjson.FieldError{Field: "mime_type", Problem: fmt.Sprintf("must be an image/* type, got %q", c.MIMEType)}
		}
		return nil
	}
	return &strictjson.FieldError{Field: "type", Problem: fmt.Sprintf("unknown content type %q (want text or image)", c.Type)}
}

// Result is a tool's answer. At least one of Content and StructuredContent
// must be present. IsError marks a failed or denied call; UnknownOutcome marks
// an action that may have happened although its completion is unknown.
// StructuredContent is any JSON value; a JSON null counts as absent.
type Result struct {
	Content           []Content       `json:"content,omitempty"`
	IsError           bool            `json:"is_error,omitempty"`
	StructuredContent json.RawMessage `json:"structured_content,omitempty"`
	UnknownOutcome    bool            `json:"unknown_outcome,omitempty"`
}

// ErrEmptyResult is the contract's "neither content nor structured content".
var ErrEmptyResult = errors.New("result has neither content nor structured_content")

// HasStructured reports whether the result carries structured content.
func (r *Result) HasStructured() bool {
	s := bytes.TrimSpace(r.StructuredContent)
	return len(s) > 0 && !bytes.Equal(s, []byte("null"))
}

// emptyResult is ErrEmptyResult, naming the content list when one was
// given empty.
func emptyResult(emptyList bool) error {
	if emptyList {
		return fmt.Errorf("%w: content is an empty list; give it at least 1 block, or give structured_content", ErrEmptyResult)
	}
	return ErrEmptyResult
}

// Validate applies the contract's rules to a result: it has content or
// structured content, and every content block is valid.
func (r *Result) Validate() error {
	if len(r.Content) == 0 && !r.HasStructured() {
		return emptyResult(r.Content != nil)
	}
	for i := range r.Content {
		if err := r.Content[i].Validate(); err != nil {
			return prefix(fmt.Sprintf("content[%d]", i), err)
		}
	}
	if r.HasStructured() && !json.Valid(r.StructuredContent) {
		return &strictjson.FieldError{Field: "structured_content", Problem: "not valid JSON"}
	}
	return nil
}

// DecodeResult parses a result strictly: unknown fields, unknown content
// types, trailing data and a result with neither content nor structured
// content are errors. Errors name the field ("content[1].type: ...").
func DecodeResult(data []byte) (*Result, error) {
	if r, ok := decodeResultFast(data); ok {
		return r, nil
	}
	return decodeResultStrict(data)
}

// decodeResultStrict is DecodeResult without the fast path: every result
// the fast path takes, it takes too and makes the same of.
func decodeResultStrict(data []byte) (*Result, error) {
	var raw struct {
		Content           []block         `json:"content"`
		IsError           bool            `json:"is_error"`
		StructuredContent json.RawMessage `json:"structured_content"`
		UnknownOutcome    bool            `json:"unknown_outcome"`
	}
	if err := strictjson.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	r := &Result{IsError: raw.IsError, StructuredContent: raw.StructuredContent, UnknownOutcome: raw.UnknownOutcome}
	if !r.HasStructured() {
		r.StructuredContent = nil
	}
	if len(raw.Content) > 0 {
		r.Content = make([]Content, len(raw.Content))
	}
	for i := range raw.Content {
		c, err := raw.Content[i].content()
		if err != nil {
			return nil, fmt.Errorf("result: %w", prefix(fmt.Sprintf("content[%d]", i), err))
		}
		r.Content[i] = c
	}
	// Each block was validated as it was read, and the decoder checked
	// structured_content's JSON: what Validate adds is the empty rule.
	if len(r.Content) == 0 && !r.HasStructured() {
		return nil, fmt.Errorf("result: %w", emptyResult(raw.Content != nil))
	}
	return r, nil
}

// decodeResultFast decodes the usual result — text blocks, the two flags,
// any structured_content, each field at most once, nothing else — in one
// pass (strictjson.ReadObject), to what the strict decoder makes of it; ok
// is false for anything else (an image block, an unknown field, an empty
// result, any error), which DecodeResult leaves to the strict decoder and
// its error messages. The result shares no memory with data.
func decodeResultFast(data []byte) (*Result, bool) {
	r := &Result{}
	ok := strictjson.ReadObject(data, func(dec *jsontext.Decoder, name string) bool {
		switch name {
		case "content":
			if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
				return false
			}
			for dec.PeekKind() != ']' {
				c, ok := decodeTextBlock(dec)
				if !ok {
					return false
				}
				r.Content = append(r.Content, c)
			}
			_, err := dec.ReadToken()
			return err == nil
		case "is_error", "unknown_outcome":
			tok, err := dec.ReadToken()
			if err != nil || (tok.Kind() != 't' && tok.Kind() != 'f') {
				return false
			}
			if name == "is_error" {
				r.IsError = tok.Bool()
			} else {
				r.UnknownOutcome = tok.Bool()
			}
			return true
		case "structured_content":
			start := dec.InputOffset()
			if err := dec.SkipValue(); err != nil {
				return false
			}
			// The value starts after the name's ':' and any space.
			r.StructuredContent = bytes.Clone(bytes.TrimLeft(data[start:dec.InputOffset()], ": \t\r\n"))
			return true
		}
		return false
	})
	if !ok {
		return nil, false
	}
	if !r.HasStructured() {
		r.StructuredContent = nil
	}
	if len(r.Content) == 0 && !r.HasStructured() {
		return nil, false // the strict decoder words the empty result
	}
	return r, true
}

// decodeTextBlock reads one {"type":"text","text":...} block, its two
// members in either order; ok is false for any other block.
func decodeTextBlock(dec *jsontext.Decoder) (c Content, ok bool) {
	var typed, texted bool
	ok = strictjson.Members(dec, func(dec *jsontext.Decoder, name string) bool {
		val, err := dec.ReadToken()
		if err != nil || val.Kind() != '"' {
			return false
		}
		switch name {
		case "type":
			typed = val.String() == TypeText
			return typed
		case "text":
			c.Text, texted = val.String(), true
			return true
		}
		return false
	})
	if !ok || !typed || !texted {
		return Content{}, false
	}
	c.Type = TypeText
	return c, true
}

func prefix(p string, err error) error {
	var fe *strictjson.FieldError
	if errors.As(err, &fe) {
		f := p
		if fe.Field != "" {
			f = p + "." + fe.Field
		}
		return &strictjson.FieldError{Field: f, Problem: fe.Problem}
	}
	return fmt.Errorf("%s: %w", p, err)
}

// TextResult returns a successful result with one text block.
func TextResult(format string, args ...any) *Result {
	return &Result{Content: []Content{Text(fmt.Sprintf(format, args...))}}
}

// Errorf returns an is_error result with one text block: how a service
// reports a failure it handled (status 200, as the contract's callout says).
func Errorf(format string, args ...any) *Result {
	return &Result{Content: []Content{Text(fmt.Sprintf(format, args...))}, IsError: true}
}

// StructuredResult returns a successful result with v as structured_content
// and, when text is not empty, a text block for readers.
func StructuredResult(v any, text string) (*Result, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("structured result: %w", err)
	}
	r := &Result{StructuredContent: data}
	if text != "" {
		r.Content = []Content{Text(text)}
	}
	return r, nil
}

// AppendJSON appends the result's JSON encoding to b: the bytes of
// json.Marshal without HTML escaping (so "<", ">" and "&" in command output
// or pages cost one byte, not six), built directly. encoding/json re-scans whatever a
// MarshalJSON method returns, which for a large text result costs more
// than encoding it; the service runtime writes results through this.
func (r *Result) AppendJSON(b []byte) ([]byte, error) {
	size := 64 + len(r.StructuredContent)
	for i := range r.Content {
		size += 48 + len(r.Content[i].Text) + len(r.Content[i].Data) + len(r.Content[i].MIMEType)
	}
	b = slices.Grow(b, size)
	b = append(b, '{')
	first := true
	field := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	if len(r.Content) > 0 {
		field("content")
		b = append(b, '[')
		for i, c := range r.Content {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = c.appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if r.IsError {
		field("is_error")
		b = append(b, "true"...)
	}
	if len(r.StructuredContent) > 0 {
		field("structured_content")
		var buf bytes.Buffer
		if err := json.Compact(&buf, r.StructuredContent); err != nil {
			return nil, fmt.Errorf("structured_content: %w", err)
		}
		b = append(b, buf.Bytes()...)
	}
	if r.UnknownOutcome {
		field("unknown_outcome")
		b = append(b, "true"...)
	}
	return append(b, '}'), nil
}

func (c Content) appendJSON(b []byte) ([]byte, error) {
	str := func(s string) error {
		var err error
		b, err = appendString(b, s)
		return err
	}
	switch c.Type {
	case TypeText:
		b = append(b, `{"type":"text","text":`...)
		if err := str(c.Text); err != nil {
			return nil, err
		}
	case TypeImage:
		b = append(b, `{"type":"image","data":`...)
		if err := str(c.Data); err != nil {
			return nil, err
		}
		b = append(b, `,"mime_type":`...)
		if err := str(c.MIMEType); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("content: unknown type %q", c.Type)
	}
	return append(b, '}'), nil
}

// AppendString appends s as a JSON string, as encoding/json with
// SetEscapeHTML(false) writes it: the encoder of Request's and Result's
// strings, for a host that writes JSON of its own (brain's ToolCall).
func AppendString(b []byte, s string) []byte {
	b, _ = appendString(b, s)
	return b
}

// appendString appends s as a JSON string, escaping what JSON requires and
// nothing for HTML's sake. The bytes are those of encoding/json with
// SetEscapeHTML(false): invalid UTF-8 becomes U+FFFD, and U+2028 and
// U+2029 are escaped (they end lines in JavaScript). Runs of plain ASCII
// (base64, most text) are found eight bytes at a time and copied whole.
func appendString(b []byte, s string) ([]byte, error) {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		i += plainPrefix(s[i:])
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"'), nil
}

const hex = "0123456789abcdef"

// plainPrefix returns the length of s's leading run of bytes that JSON
// copies as they are: printable ASCII other than '"' and '\\'. It looks
// at eight bytes per step (SWAR: a byte lane's high bit is set when the
// lane is below 0x20, equals '"' or '\\', or is not ASCII).
func plainPrefix(s string) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		v := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		ctl := (v - ones*0x20) &^ v
		q := v ^ ones*'"'
		q = (q - ones) &^ q
		bs := v ^ ones*'\\'
		bs = (bs - ones) &^ bs
		if (ctl|q|bs|v)&highs != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			break
		}
	}
	return i
}
