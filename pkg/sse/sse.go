// Package sse writes and reads server-sent events the way the tool contract
// uses them: a tool answers with zero or more "progress" events, comment
// heartbeats, then exactly one "result" event; the host reads them back.
//
// Writing follows the WHATWG HTML "Server-sent events" format: each event is
// built in a buffer, written once and flushed; data is compact JSON on one
// data line. Reading uses github.com/tmaxmax/go-sse's parser.
package sse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"sync"

	gosse "github.com/tmaxmax/go-sse"
)

// Event names of the tool contract.
const (
	EventProgress = "progress"
	EventResult   = "result"
)

// Writer writes events to an HTTP response. It is safe for concurrent use
// (a heartbeat goroutine and the tool's own progress may write at once).
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	flusher http.Flusher
	started bool
	rw      http.ResponseWriter
}

// NewWriter returns a Writer for w. The status line and headers
// (Content-Type: text/event-stream, Cache-Control: no-cache,
// X-Accel-Buffering: no) are sent with the first event or by Start.
func NewWriter(w http.ResponseWriter) *Writer {
	f, _ := w.(http.Flusher)
	return &Writer{w: w, flusher: f, rw: w}
}

// Headers are the headers of an SSE answer, which NewWriter's Start sets
// and a server writing its own status line (NewStreamWriter) sends.
var Headers = [][2]string{{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}}

// NewStreamWriter returns a Writer for the body of a stream whose status
// line and Headers were already sent (a server that took the connection
// over): each event is one Write to w, unbuffered.
func NewStreamWriter(w io.Writer) *Writer {
	return &Writer{w: w, started: true}
}

// Start sends the headers and flushes them, so the host's 30 s header limit
// is met before any event is ready.
func (w *Writer) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.startLocked()
}

func (w *Writer) startLocked() error {
	if w.started {
		return nil
	}
	w.started = true
	h := w.rw.Header()
	for _, kv := range Headers {
		h.Set(kv[0], kv[1])
	}
	w.rw.WriteHeader(http.StatusOK)
	return w.flush()
}

// Event writes one event named name whose data is data marshalled as compact
// JSON (a json.RawMessage is compacted as it is). The JSON is encoded before
// anything is written, so a marshal error leaves the stream untouched.
func (w *Writer) Event(name string, data any) error {
	return w.EventWithID(name, "", data)
}

// EventWithID is Event with an "id:" line, for streams a client resumes
// with Last-Event-ID. name and id must not contain line breaks.
func (w *Writer) EventWithID(name, id string, data any) error {
	if strings.ContainsAny(name, "\r\n") || strings.ContainsAny(id, "\r\n\x00") {
		return fmt.Errorf("sse event: name and id must not contain line breaks")
	}
	payload, err := compactJSON(data)
	if err != nil {
		return fmt.Errorf("sse event %s: %w", name, err)
	}
	var buf bytes.Buffer
	buf.Grow(len(payload) + len(name) + len(id) + 24)
	if id != "" {
		buf.WriteString("id: ")
		buf.WriteString(id)
		buf.WriteByte('\n')
	}
	if name != "" {
		buf.WriteString("event: ")
		buf.WriteString(name)
		buf.WriteByte('\n')
	}
	buf.WriteString("data: ")
	buf.Write(payload)
	buf.WriteString("\n\n")
	return w.write(buf.Bytes())
}

// Comment writes a comment line (": text"), which readers ignore: the
// heartbeat that keeps proxies from closing an idle stream.
func (w *Writer) Comment(text string) error {
	text = strings.NewReplacer("\r", " ", "\n", " ").Replace(text)
	return w.write([]byte(": " + text + "\n\n"))
}

func (w *Writer) write(p []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.startLocked(); err != nil {
		return err
	}
	if _, err := w.w.Write(p); err != nil {
		return fmt.Errorf("sse write: %w", err)
	}
	return w.flush()
}

func (w *Writer) flush() error {
	if w.flusher == nil {
		return nil
	}
	if f, ok := w.rw.(interface{ FlushError() error }); ok {
		return f.FlushError()
	}
	w.flusher.Flush()
	return nil
}

// appender is implemented by values that encode themselves faster than
// encoding/json can (tool.Result).
type appender interface {
	AppendJSON([]byte) ([]byte, error)
}

func compactJSON(v any) ([]byte, error) {
	var raw []byte
	switch t := v.(type) {
	case appender:
		return t.AppendJSON(nil)
	case json.RawMessage:
		raw = t
	case []byte:
		raw = t
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("data is not valid JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// Event is one event read from a stream. Name is "message" when the stream
// gave none (the WHATWG default). Data joins multiple data lines with "\n".
type Event struct {
	Name string
	Data string
	ID   string
}

// ErrEventTooLarge is returned by Read when one event is longer than the
// limit it was given.
var ErrEventTooLarge = errors.New("sse: event larger than the limit")

// Read yields the events of the stream r in order. Comment lines are
// skipped; an event longer than maxEventBytes (0 = 64 KiB) ends the sequence
// with ErrEventTooLarge. Any read error of r ends it with that error; a
// clean end of r ends the sequence without one.
func Read(r io.Reader, maxEventBytes int) iter.Seq2[Event, error] {
	if maxEventBytes <= 0 {
		maxEventBytes = 64 << 10
	}
	cfg := &gosse.ReadConfig{MaxEventSize: maxEventBytes}
	return func(yield func(Event, error) bool) {
		for e, err := range gosse.Read(r, cfg) {
			if err != nil {
				if isTooLong(err) {
					err = ErrEventTooLarge
				}
				yield(Event{}, err)
				return
			}
			name := e.Type
			if name == "" {
				name = "message"
			}
			if !yield(Event{Name: name, Data: e.Data, ID: e.LastEventID}, nil) {
				return
			}
		}
	}
}

func isTooLong(err error) bool {
	return errors.Is(err, bufio.ErrTooLong)
}
