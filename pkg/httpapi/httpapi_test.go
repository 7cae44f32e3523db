package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

type errBody struct {
	Error struct {
		Code, Message string
		RequestID     string `json:"request_id"`
	}
}

func decodeErr(t *testing.T, rec *httptest.ResponseRecorder) errBody {
	t.Helper()
	var b errBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatalf("error body %q: %v", rec.Body, err)
	}
	return b
}

// TestResponder: refusals are written as they are and not logged, an
// unknown error is a 500 whose cause is logged as an error and never
// sent, a 503 (a state to wait out) is logged as a warning, and a client
// that went away gets 499 and no log.
func TestResponder(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	endedByServer, endServer := context.WithCancelCause(context.Background())
	endServer(Unavailable("the server is shutting down"))
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancelExpired()
	tests := []struct {
		name      string
		ctx       context.Context
		err       error
		status    int
		code, msg string
		logged    string // the level of the "request failed" line; "" for none
		notInBody string
	}{
		{"refusal", context.Background(), BadRequest("text: required"), 400, CodeInvalidRequest, "text: required", "", ""},
		{"wrapped refusal", context.Background(), fmt.Errorf("decode: %w", NotFound("no session %q", "s1")), 404, CodeNotFound, `no session "s1"`, "", ""},
		{"unknown error", context.Background(), errors.New("disk on fire at /var/secret"), 500, CodeInternal, "internal error", "ERROR", "secret"},
		{"5xx with cause", context.Background(), &Error{Status: 503, Code: CodeUnavailable, Message: "store unavailable", Cause: errors.New("dial 10.0.0.5: refused")}, 503, CodeUnavailable, "store unavailable", "WARN", "10.0.0.5"},
		{"dependency silent", context.Background(), fmt.Errorf("read call: %w", context.DeadlineExceeded), 503, CodeUnavailable, "a database or service this one depends on did not answer; retry shortly", "WARN", "deadline"},
		{"dependency refused", context.Background(), fmt.Errorf("create call: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused to 10.0.0.7")}), 503, CodeUnavailable, "a database or service this one depends on did not answer; retry shortly", "WARN", "10.0.0.7"},
		// The client left while a statement waited out its bound: still a
		// silent dependency, logged as such (it was a 500 logged ERROR).
		{"dependency silent, client gone", cancelled, fmt.Errorf("read call: %w", context.DeadlineExceeded), 503, CodeUnavailable, "a database or service this one depends on did not answer; retry shortly", "WARN", "deadline"},
		{"the request's own deadline passed", expired, context.DeadlineExceeded, 500, CodeInternal, "internal error", "ERROR", ""},
		{"database shutting down", context.Background(), fmt.Errorf("read call: %w", sqlStateErr("57P01")), 503, CodeUnavailable, "a database or service this one depends on did not answer; retry shortly", "WARN", "57P01"},
		{"database starting up", context.Background(), fmt.Errorf("connect: %w", sqlStateErr("57P03")), 503, CodeUnavailable, "a database or service this one depends on did not answer; retry shortly", "WARN", "57P03"},
		{"a statement's own failure", context.Background(), fmt.Errorf("insert: %w", sqlStateErr("23505")), 500, CodeInternal, "internal error", "ERROR", "23505"},
		{"connection cut mid-answer", context.Background(), fmt.Errorf("read call: %w", io.ErrUnexpectedEOF), 503, CodeUnavailable, "a database or service this one depends on did not answer; retry shortly", "WARN", "unexpected EOF"},
		{"name not resolved", context.Background(), fmt.Errorf("fetch: %w", &net.DNSError{Err: "no such host", Name: "db.internal"}), 503, CodeUnavailable, "a database or service this one depends on did not answer; retry shortly", "WARN", "db.internal"},
		{"client went away", cancelled, fmt.Errorf("list events: %w", context.Canceled), StatusClientClosedRequest, CodeClientClosed, "the client closed the request", "", ""},
		{"ended by the server, saying why", endedByServer, fmt.Errorf("read call: %w", context.Canceled), 503, CodeUnavailable, "the server is shutting down", "WARN", ""},
		{"canceled, client still there", context.Background(), context.Canceled, 500, CodeInternal, "internal error", "ERROR", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			rs := Responder{Logger: slog.New(slog.NewJSONHandler(&log, nil))}
			h := WithRequestID(rs.Handle(func(http.ResponseWriter, *http.Request) error { return tt.err }))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil).WithContext(tt.ctx))
			b := decodeErr(t, rec)
			if rec.Code != tt.status || b.Error.Code != tt.code || b.Error.Message != tt.msg {
				t.Errorf("got %d %+v, want %d %s %q", rec.Code, b.Error, tt.status, tt.code, tt.msg)
			}
			if b.Error.RequestID == "" || b.Error.RequestID != rec.Header().Get(HeaderRequestID) {
				t.Errorf("request_id %q, header %q", b.Error.RequestID, rec.Header().Get(HeaderRequestID))
			}
			var line struct{ Level, Msg string }
			if log.Len() > 0 {
				if err := json.Unmarshal(log.Bytes(), &line); err != nil || line.Msg != "request failed" {
					t.Errorf("log %s: %v", log.String(), err)
				}
			}
			if line.Level != tt.logged {
				t.Errorf("logged at %q, want %q: %s", line.Level, tt.logged, log.String())
			}
			if tt.notInBody != "" && strings.Contains(rec.Body.String(), tt.notInBody) {
				t.Errorf("body leaks the cause: %s", rec.Body)
			}
			if tt.logged != "" && tt.notInBody != "" && !strings.Contains(log.String(), tt.notInBody) {
				t.Errorf("log lacks the cause: %s", log.String())
			}
		})
	}
}

// TestResponderRender: a server with its own error format (an HTML page)
// renders the same decision.
func TestResponderRender(t *testing.T) {
	rs := Responder{Render: func(w http.ResponseWriter, _ *http.Request, e *Error) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(e.Status)
		fmt.Fprintf(w, "<p>%s</p>", e.Message)
	}}
	rec := httptest.NewRecorder()
	rs.Error(rec, httptest.NewRequest(http.MethodGet, "/", nil), errors.New("boom"))
	if rec.Code != 500 || rec.Body.String() != "<p>internal error</p>" {
		t.Errorf("got %d %q", rec.Code, rec.Body)
	}
}

func TestRequestID(t *testing.T) {
	shape := regexp.MustCompile(`^req_[2-7a-z]{26}$`)
	a, b := NewRequestID(), NewRequestID()
	if !shape.MatchString(a) || a == b {
		t.Errorf("NewRequestID: %q, %q", a, b)
	}
	time.Sleep(2 * time.Millisecond)
	if c := NewRequestID(); c <= a {
		t.Errorf("a later ID %q sorts before %q", c, a)
	}
	tests := []struct{ sent, want string }{
		{"brain-req_abc:1", "brain-req_abc:1"},
		{strings.Repeat("a", 128), strings.Repeat("a", 128)},
		{strings.Repeat("a", 129), ""},
		{"has space", ""},
		{"quote\"", ""},
		{"", ""},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if tt.sent != "" {
			req.Header.Set(HeaderRequestID, tt.sent)
		}
		WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if RequestID(w) == "" {
				t.Error("RequestID empty inside the handler")
			}
		})).ServeHTTP(rec, req)
		got := rec.Header().Get(HeaderRequestID)
		if tt.want != "" && got != tt.want || tt.want == "" && !shape.MatchString(got) {
			t.Errorf("sent %q: got %q, want %q (or a new ID)", tt.sent, got, tt.want)
		}
	}
}

// TestDecodeJSON covers every refusal of the strict body reader, each at
// its edge.
func TestDecodeJSON(t *testing.T) {
	type body struct {
		Text string `json:"text"`
	}
	tests := []struct {
		name, ct, body string
		limit          int64
		status         int
		msg            string
	}{
		{"good", "application/json", `{"text":"hi"}`, 64, 200, ""},
		{"exactly the limit", "application/json", `{"text":"` + strings.Repeat("x", 53) + `"}`, 64, 200, ""},
		{"one byte over", "application/json", `{"text":"` + strings.Repeat("x", 54) + `"}`, 64, 413, "request body is larger than the limit of 64 bytes"},
		{"utf-8 charset", "application/json; charset=UTF-8", `{"text":"hi"}`, 64, 200, ""},
		{"other charset", "application/json; charset=latin1", `{}`, 64, 415, `Content-Type must be application/json, got "application/json; charset=latin1"`},
		{"no content type", "", `{}`, 64, 415, `Content-Type must be application/json, got ""`},
		{"unknown field", "application/json", `{"txt":"hi"}`, 64, 400, "request body: txt: unknown field"},
		{"wrong type", "application/json", `{"text":1}`, 64, 400, "request body: text: "},
		{"trailing data", "application/json", `{"text":"a"} {}`, 64, 400, "request body"},
		{"null", "application/json", `null`, 64, 400, "request body: must be a JSON object, got null"},
		{"array", "application/json", `[]`, 64, 400, "request body: must be a JSON object, got an array"},
		{"not JSON that starts like null", "application/json", `nope`, 64, 400, "request body: malformed JSON"},
		{"not JSON that starts like true", "application/json", `tool=echo`, 64, 400, "request body: malformed JSON"},
		{"empty", "application/json", ``, 64, 400, "request body is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			if tt.ct != "" {
				req.Header.Set("Content-Type", tt.ct)
			}
			var v body
			err := DecodeJSON(req, tt.limit, &v)
			var e *Error
			switch {
			case tt.status == 200 && err != nil:
				t.Errorf("err %v", err)
			case tt.status != 200 && (!errors.As(err, &e) || e.Status != tt.status || !strings.Contains(e.Message, tt.msg)):
				t.Errorf("err %#v, want %d containing %q", err, tt.status, tt.msg)
			}
		})
	}
	// An optional body may be absent, whatever the Content-Type.
	var v body
	if err := DecodeOptionalJSON(httptest.NewRequest(http.MethodPost, "/", strings.NewReader("")), 64, &v); err != nil {
		t.Errorf("optional empty body: %v", err)
	}
}

func TestWriteJSONEncodeFailure(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteJSON(rec, http.StatusOK, map[string]any{"bad": func() {}})
	if b := decodeErr(t, rec); rec.Code != 500 || b.Error.Code != CodeInternal {
		t.Errorf("got %d %s", rec.Code, rec.Body)
	}
}

func TestErrorfClips(t *testing.T) {
	e := BadRequest("name %q", strings.Repeat("n", 10000))
	if len(e.Message) > MaxEcho+32 || !strings.Contains(e.Message, "…") {
		t.Errorf("message of %d bytes", len(e.Message))
	}
}

// sqlStateErr is a database error with an SQLSTATE, as pgconn.PgError is.
type sqlStateErr string

func (e sqlStateErr) Error() string    { return "SQLSTATE " + string(e) }
func (e sqlStateErr) SQLState() string { return string(e) }

// unsentErr is a driver's error for a statement that never reached the
// server, as pgconn's for a connection it had already closed ("conn
// closed") is.
type unsentErr bool

func (e unsentErr) Error() string     { return "conn closed" }
func (e unsentErr) SafeToRetry() bool { return bool(e) }

func TestFailureLevel(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want slog.Level
	}{
		{"deadline", fmt.Errorf("renew: %w", context.DeadlineExceeded), slog.LevelWarn},
		{"database shutting down", sqlStateErr("57P01"), slog.LevelWarn},
		{"connection cut mid-answer", fmt.Errorf("renew: %w", io.ErrUnexpectedEOF), slog.LevelWarn},
		{"a connection the driver had closed", fmt.Errorf("set session status: %w", unsentErr(true)), slog.LevelWarn},
		{"a driver error that may have reached the server", unsentErr(false), slog.LevelError},
		{"a statement's own failure", sqlStateErr("23505"), slog.LevelError},
		{"anything else", errors.New("boom"), slog.LevelError},
	}
	for _, tt := range tests {
		if got := FailureLevel(tt.err); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
