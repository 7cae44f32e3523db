package sse

import (
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriterFormat(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	if err := w.Event(EventProgress, map[string]any{"status": "working"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Comment("heartbeat\nsecond line"); err != nil {
		t.Fatal(err)
	}
	if err := w.EventWithID("tool.result", "42", json.RawMessage("{\n  \"a\": 1\n}")); err != nil {
		t.Fatal(err)
	}
	if err := w.Event("bad", json.RawMessage(`{`)); err == nil {
		t.Fatal("invalid raw JSON accepted")
	}
	if err := w.EventWithID("x", "1\n2", 1); err == nil {
		t.Fatal("id with a line break accepted")
	}
	want := "event: progress\ndata: {\"status\":\"working\"}\n\n" +
		": heartbeat second line\n\n" +
		"id: 42\nevent: tool.result\ndata: {\"a\":1}\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("stream:\n%q\nwant\n%q", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	if !rec.Flushed {
		t.Error("not flushed")
	}
}

func TestRead(t *testing.T) {
	tests := []struct {
		name    string
		stream  string
		max     int
		want    []Event
		wantErr error
	}{
		{name: "progress then result", stream: "event: progress\ndata: {\"a\":1}\n\n: hb\n\nevent: result\ndata: {\"content\":[]}\n\n",
			want: []Event{{Name: "progress", Data: `{"a":1}`}, {Name: "result", Data: `{"content":[]}`}}},
		{name: "default name and multi-line data", stream: "data: a\ndata: b\n\n",
			want: []Event{{Name: "message", Data: "a\nb"}}},
		{name: "CRLF and ids", stream: "id: 7\r\nevent: x\r\ndata: 1\r\n\r\n",
			want: []Event{{Name: "x", Data: "1", ID: "7"}}},
		{name: "incomplete final event discarded", stream: "event: result\ndata: {}",
			want: nil},
		{name: "comments only", stream: ": a\n: b\n\n", want: nil},
		{name: "too large", stream: "data: " + strings.Repeat("x", 100) + "\n\n", max: 32, wantErr: ErrEventTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Event
			var gotErr error
			for e, err := range Read(strings.NewReader(tt.stream), tt.max) {
				if err != nil {
					gotErr = err
					break
				}
				got = append(got, e)
			}
			if !errors.Is(gotErr, tt.wantErr) {
				t.Fatalf("err = %v, want %v", gotErr, tt.wantErr)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestReadError(t *testing.T) {
	for _, err := range Read(failingReader{}, 0) {
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v", err)
		}
		return
	}
	t.Fatal("no error yielded")
}

// FuzzRead feeds arbitrary bytes to the reader: it must neither panic nor
// yield an event larger than its limit, and must stop after an error.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		"event: progress\ndata: {}\n\nevent: result\ndata: {\"content\":[]}\n\n",
		": comment\n\n", "data\n\n", "id: 1\r\nretry: 10\r\ndata: x\r\n\r\n", "\n\n\n", "event:\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const max = 256
		errs := 0
		for e, err := range Read(strings.NewReader(string(data)), max) {
			if err != nil {
				errs++
				continue
			}
			if errs > 0 {
				t.Fatal("event after an error")
			}
			if len(e.Data) > max {
				t.Fatalf("event of %d bytes over the %d limit", len(e.Data), max)
			}
		}
	})
}
