package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/brain/internal/config"
	"github.com/google/go-cmp/cmp"
)

const testToken = "tools-secret-token"

var testEnv = map[string]string{"TOOLS_KEY": testToken, "API_KEY": "client-key"}

// newTool builds a checked binding for url through config.Parse, as brain
// does at start. The default binding has a 10 s timeout so that a broken
// test fails instead of hanging; edit changes any field.
func newTool(t testing.TB, url string, edit func(b map[string]any)) *config.Tool {
	t.Helper()
	b := map[string]any{
		"name":        "echo",
		"description": "Echo text.",
		"input_schema": json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":64},
			"email":{"type":"string","format":"email"}},"required":["text"]}`),
		"url":             url,
		"token_env":       "TOOLS_KEY",
		"tenants":         []string{"local"},
		"timeout_seconds": 10,
	}
	if edit != nil {
		edit(b)
	}
	data, err := json.Marshal(map[string]any{"tools": []any{b}, "api_keys": []map[string]string{{"env": "API_KEY", "tenant": "local"}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(data, func(k string) string { return testEnv[k] })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return c.Tools[0]
}

func testRequest() tool.Request {
	return tool.Request{TenantID: "local", SessionID: "sess_1", CallID: "call_1", Arguments: json.RawMessage(`{"text":"hi"}`)}
}

// writeJSON answers with status and a JSON body.
func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// jsonHandler answers 200 with body as application/json.
func jsonHandler(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, body) }
}

// rawHandler answers 200 with the given Content-Type (none when empty) and
// body.
func rawHandler(contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if contentType == "" {
			w.Header()["Content-Type"] = nil // no sniffing: no header at all
		} else {
			w.Header().Set("Content-Type", contentType)
		}
		io.WriteString(w, body)
	}
}

// sseHandler writes each chunk of an event stream and flushes it.
func sseHandler(chunks ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, c := range chunks {
			io.WriteString(w, c)
			w.(http.Flusher).Flush()
		}
	}
}

// waitHandler blocks until the client goes away (or 20 s pass); before
// that it runs start, which may send headers or events.
func waitHandler(start func(w http.ResponseWriter)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client leaving.
		io.Copy(io.Discard, r.Body)
		if start != nil {
			start(w)
		}
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
	}
}

// endlessSSE sends a progress event every every until the client leaves.
func endlessSSE(every time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i := 0; ; i++ {
			fmt.Fprintf(w, "event: progress\ndata: {\"i\":%d}\n\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(every):
			}
		}
	}
}

// resultOfSize returns a valid JSON result of exactly n bytes (n >= 40).
func resultOfSize(n int) string {
	const head, tail = `{"content":[{"type":"text","text":"`, `"}]}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

// sseOfSize returns an event stream of exactly n bytes whose last event is
// a valid result: a comment pads it.
func sseOfSize(n int) string {
	const result = "event: result\ndata: {\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}\n\n"
	return ": " + strings.Repeat("p", n-len(result)-4) + "\n\n" + result
}

const okResult = `{"content":[{"type":"text","text":"hi"}]}`

type want struct {
	status  string
	code    string // "" = success
	unknown bool
	sent    bool
	text    string // substring of the first content block's text
}

type outcomeCase struct {
	name    string
	handler http.HandlerFunc
	binding func(b map[string]any)
	tool    func(t *config.Tool)
	req     func(r *tool.Request)
	// cancelOnProgress cancels the call's ctx at the first progress event;
	// cancelAfter cancels it after that long; preCancel before the call.
	cancelOnProgress bool
	cancelAfter      time.Duration
	preCancel        bool
	headerTimeout    time.Duration // 0 = 5 s
	url              string        // overrides the test server's url
	want             want
	requests         int32 // requests the server must have seen; -1 = don't check
	progress         []string
	check            func(t *testing.T, o Outcome)
}

func succeeded(text string) want {
	return want{status: StatusSucceeded, sent: true, text: text}
}

func unknownFailure(code, text string) want {
	return want{status: StatusFailed, code: code, unknown: true, sent: true, text: text}
}

func refusal(code, text string) want {
	return want{status: StatusFailed, code: code, text: text}
}

// statusWith answers status with one header set.
func statusWith(status int, header, value string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(header, value)
		w.WriteHeader(status)
	}
}

func wantRetryable(want bool) func(t *testing.T, o Outcome) {
	return func(t *testing.T, o Outcome) {
		if o.Retryable != want {
			t.Errorf("retryable = %v, want %v (%s)", o.Retryable, want, o.ErrorMessage)
		}
	}
}

// wantRetryAfter is wantRetryable, and the outcome's RetryAfter after.
func wantRetryAfter(retryable bool, after time.Duration) func(t *testing.T, o Outcome) {
	return func(t *testing.T, o Outcome) {
		wantRetryable(retryable)(t, o)
		if o.RetryAfter != after {
			t.Errorf("RetryAfter = %s, want %s (%s)", o.RetryAfter, after, o.ErrorMessage)
		}
	}
}

// TestOutcomeTable runs one real tool server per case on 127.0.0.1 and
// checks the outcome against the contract's outcome table.
func TestOutcomeTable(t *testing.T) {
	closedURL := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr + "/tools/echo"
	}()
	outSchema := func(b map[string]any) {
		b["output_schema"] = json.RawMessage(`{"type":"object","properties":{"echo":{"type":"string"}},"required":["echo"]}`)
	}
	maxBytes := func(n int) func(b map[string]any) {
		return func(b map[string]any) { b["max_output_bytes"] = n }
	}
	oneSecond := func(b map[string]any) { b["timeout_seconds"] = 1 }

	cases := []outcomeCase{
		// The tool returned a result (success rows).
		{name: "json result", handler: jsonHandler(okResult), want: succeeded("hi"), requests: 1},
		{name: "json with charset parameter", handler: rawHandler("application/json; charset=utf-8", okResult), want: succeeded("hi"), requests: 1},
		{name: "json content type in capitals", handler: rawHandler("Application/JSON", okResult), want: succeeded("hi"), requests: 1},
		{name: "json 201 is 2xx", handler: func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 201, okResult) }, want: succeeded("hi"), requests: 1},
		{name: "sse progress comments result", handler: sseHandler(
			": hello\n\n",
			"event: progress\ndata: {\"status\":\"waiting_for_operator\"}\n\n",
			": heartbeat\n\n",
			"id: 7\nevent: progress\ndata: [1,\ndata: 2]\n\n",
			"event: result\ndata: {\"content\":[{\"type\":\"text\",\"text\":\"Operator answered yes.\"}]}\n\n",
		), want: succeeded("Operator answered yes."), requests: 1, progress: []string{`{"status":"waiting_for_operator"}`, "[1,\n2]"}},
		{name: "sse with charset parameter and CRLF", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			io.WriteString(w, "event: result\r\ndata: "+okResult+"\r\n\r\n")
		}, want: succeeded("hi"), requests: 1},
		// The contract: exactly one result event, and nothing but the end
		// of the stream after it.
		{name: "sse second result fails", handler: sseHandler("event: result\ndata: "+okResult+"\n\n", "event: result\ndata: "+okResult+"\n\n"),
			want: unknownFailure(CodeBadEvent, "a second result event"), requests: 1},
		{name: "sse second result after comments fails", handler: sseHandler("event: result\ndata: "+okResult+"\n\n", ": heartbeat\n\n", "event: result\ndata: {\"content\":[{\"type\":\"text\",\"text\":\"other\"}],\"is_error\":true}\n\n"),
			want: unknownFailure(CodeBadEvent, "a second result event"), requests: 1},
		{name: "sse event after result fails", handler: sseHandler("event: result\ndata: "+okResult+"\n\n", "event: bogus\ndata: x\n\n"),
			want: unknownFailure(CodeBadEvent, `event "bogus" after the result`), requests: 1},
		{name: "sse progress after result fails", handler: sseHandler("event: result\ndata: "+okResult+"\n\n", "event: progress\ndata: {}\n\n"),
			want: unknownFailure(CodeBadEvent, `event "progress" after the result`), requests: 1},
		{name: "sse comments after result", handler: sseHandler("event: result\ndata: "+okResult+"\n\n", ": bye\n\n"), want: succeeded("hi"), requests: 1},
		{name: "sse result then stream stays open", handler: waitHandler(func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: result\ndata: "+okResult+"\n\n")
			w.(http.Flusher).Flush()
		}), want: succeeded("hi"), requests: 1},
		{name: "structured only gets a text block", binding: outSchema,
			handler: jsonHandler(`{"structured_content": {"echo" : "hi",  "n": 1}}`),
			want:    succeeded(`{"echo":"hi","n":1}`), requests: 1,
			check: func(t *testing.T, o Outcome) {
				if len(o.Result.Content) != 1 || string(o.Result.StructuredContent) != `{"echo" : "hi",  "n": 1}` {
					t.Errorf("result = %+v", o.Result)
				}
			}},
		{name: "structured with content keeps content", binding: outSchema,
			handler: jsonHandler(`{"content":[{"type":"text","text":"said hi"}],"structured_content":{"echo":"hi"}}`),
			want:    succeeded("said hi"), requests: 1,
			check: func(t *testing.T, o Outcome) {
				if len(o.Result.Content) != 1 {
					t.Errorf("content = %+v", o.Result.Content)
				}
			}},
		{name: "structured without output_schema is not checked", handler: jsonHandler(`{"structured_content":[1,2]}`), want: succeeded("[1,2]"), requests: 1},
		{name: "image block", handler: jsonHandler(`{"content":[{"type":"image","data":"iVBORw0KGgo=","mime_type":"image/png"}]}`), want: succeeded(""), requests: 1},

		// The tool returned a result with is_error: true.
		{name: "tool error", handler: jsonHandler(`{"content":[{"type":"text","text":"no such file"}],"is_error":true}`),
			want: want{status: StatusFailed, code: CodeToolError, sent: true, text: "no such file"}, requests: 1,
			check: func(t *testing.T, o Outcome) {
				if o.ErrorMessage != "tool echo: no such file" {
					t.Errorf("ErrorMessage = %q", o.ErrorMessage)
				}
			}},
		{name: "tool error keeps the tool's unknown_outcome", handler: jsonHandler(`{"content":[{"type":"text","text":"lost track"}],"is_error":true,"unknown_outcome":true}`),
			want: want{status: StatusFailed, code: CodeToolError, unknown: true, sent: true, text: "lost track"}, requests: 1},
		{name: "tool error skips output_schema", binding: outSchema,
			handler: jsonHandler(`{"content":[{"type":"text","text":"denied"}],"is_error":true,"structured_content":{"echo":5}}`),
			want:    want{status: StatusFailed, code: CodeToolError, sent: true, text: "denied"}, requests: 1},
		{name: "tool error with only structured content gets a text block", handler: jsonHandler(`{"is_error":true,"structured_content":{"reason":"quota exceeded"}}`),
			want: want{status: StatusFailed, code: CodeToolError, sent: true, text: `{"reason":"quota exceeded"}`}, requests: 1,
			check: func(t *testing.T, o Outcome) {
				if len(o.Result.Content) != 1 || o.Result.Content[0].Type != tool.TypeText || string(o.Result.StructuredContent) != `{"reason":"quota exceeded"}` {
					t.Errorf("result = %+v", o.Result)
				}
				if o.ErrorMessage != `tool echo: {"reason":"quota exceeded"}` {
					t.Errorf("ErrorMessage = %q", o.ErrorMessage)
				}
			}},
		{name: "tool error over sse", handler: sseHandler("event: result\ndata: {\"content\":[{\"type\":\"text\",\"text\":\"operator said no\"}],\"is_error\":true}\n\n"),
			want: want{status: StatusFailed, code: CodeToolError, sent: true, text: "operator said no"}, requests: 1},

		// Brain refused the call before sending it.
		{name: "tenant not allowed", handler: jsonHandler(okResult), req: func(r *tool.Request) { r.TenantID = "other" },
			want: refusal(CodeTenantNotAllowed, `not allowed for tenant "other"`), requests: 0},
		{name: "arguments fail schema", handler: jsonHandler(okResult), req: func(r *tool.Request) { r.Arguments = json.RawMessage(`{"text":5}`) },
			want: refusal(CodeInvalidArguments, `arguments: at "/text"`), requests: 0},
		{name: "arguments fail format", handler: jsonHandler(okResult), req: func(r *tool.Request) { r.Arguments = json.RawMessage(`{"text":"a","email":"nope"}`) },
			want: refusal(CodeInvalidArguments, `at "/email": 'nope' is not valid email`), requests: 0},
		{name: "arguments missing", handler: jsonHandler(okResult), req: func(r *tool.Request) { r.Arguments = nil },
			want: refusal(CodeInvalidArguments, `arguments: required`), requests: 0},
		{name: "arguments not an object", handler: jsonHandler(okResult), binding: func(b map[string]any) { b["input_schema"] = json.RawMessage(`{}`) },
			req:  func(r *tool.Request) { r.Arguments = json.RawMessage(`"hi"`) },
			want: refusal(CodeInvalidArguments, `arguments: must be a JSON object`), requests: 0},
		{name: "credential missing", handler: jsonHandler(okResult), tool: func(t *config.Tool) { t.Token = "" },
			want: refusal(CodeMissingCredential, "token_env TOOLS_KEY is not set"), requests: 0},
		{name: "inspection token missing", handler: jsonHandler(okResult), binding: func(b map[string]any) { b["inspect_session"] = true },
			want: refusal(CodeMissingCredential, "inspection_token"), requests: 0},
		{name: "mcp tool given to the HTTP caller", handler: jsonHandler(okResult), binding: func(b map[string]any) { b["mcp_tool"] = "remote_echo" },
			want: refusal(CodeMCPNotSupported, `MCP tool "remote_echo"`), requests: 0},

		// The connection failed, timed out, or dropped.
		{name: "connection refused", url: closedURL,
			want: want{status: StatusFailed, code: CodeConnectionFailed, unknown: true, sent: false, text: "connection failed: dial"}, requests: -1,
			check: func(t *testing.T, o Outcome) {
				if strings.Contains(o.ErrorMessage, "127.0.0.1") || strings.Contains(o.ErrorMessage, "/tools/") {
					t.Errorf("ErrorMessage shows the url: %q", o.ErrorMessage)
				}
			}},
		{name: "dropped before response", handler: func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}, want: unknownFailure(CodeConnectionFailed, "connection failed"), requests: 1},
		{name: "dropped mid json body", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "200")
			io.WriteString(w, `{"content":[{"type":"text","text":"hal`)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, want: unknownFailure(CodeConnectionFailed, "connection closed before the response was complete"), requests: 1},
		{name: "dropped mid chunked json body", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"content":[{"type":"text","text":"hal`)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, want: unknownFailure(CodeConnectionFailed, "connection closed"), requests: 1},
		{name: "dropped mid sse", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: progress\ndata: {\"step\":1}\n\nevent: result\ndata: {\"content\":")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, want: unknownFailure(CodeConnectionFailed, "connection closed"), requests: 1, progress: []string{`{"step":1}`}},
		{name: "header timeout", headerTimeout: 200 * time.Millisecond, handler: waitHandler(nil),
			want: want{status: StatusTimedOut, code: CodeHeaderTimeout, unknown: true, sent: true, text: "no response headers within 200ms"}, requests: 1},
		{name: "headers just in time", headerTimeout: 2 * time.Second, handler: func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(300 * time.Millisecond)
			writeJSON(w, 200, okResult)
		}, want: succeeded("hi"), requests: 1},
		{name: "header limit does not cover the body", headerTimeout: time.Second, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			time.Sleep(1500 * time.Millisecond)
			io.WriteString(w, "event: result\ndata: "+okResult+"\n\n")
		}, want: succeeded("hi"), requests: 1},
		{name: "timeout after the header limit", binding: oneSecond, headerTimeout: 300 * time.Millisecond, handler: endlessSSE(20 * time.Millisecond),
			want: want{status: StatusTimedOut, code: CodeTimeout, unknown: true, sent: true, text: "exceeded timeout_seconds (1s)"}, requests: 1, progress: nil},
		{name: "timeout endless sse", binding: oneSecond, handler: endlessSSE(20 * time.Millisecond),
			want: want{status: StatusTimedOut, code: CodeTimeout, unknown: true, sent: true, text: "exceeded timeout_seconds (1s)"}, requests: 1, progress: nil},
		{name: "timeout slow json body", binding: oneSecond, handler: waitHandler(func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"content":[`)
			w.(http.Flusher).Flush()
		}), want: want{status: StatusTimedOut, code: CodeTimeout, unknown: true, sent: true, text: "timeout_seconds"}, requests: 1},
		{name: "timeout before headers", binding: oneSecond, headerTimeout: 5 * time.Second, handler: waitHandler(nil),
			want: want{status: StatusTimedOut, code: CodeTimeout, unknown: true, sent: true}, requests: 1},

		// The tool returned a non-2xx status.
		{name: "status 500 with a result body", handler: func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 500, okResult) },
			want: unknownFailure(CodeHTTPStatus, "HTTP 500 Internal Server Error"), requests: 1,
			check: func(t *testing.T, o Outcome) {
				if strings.Contains(o.Result.Content[0].Text, `"hi"`) {
					t.Error("the body of a non-2xx response was used")
				}
			}},
		{name: "status 401", handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(401) }, want: unknownFailure(CodeHTTPStatus, "HTTP 401"), requests: 1,
			check: wantRetryable(false)},
		// A 429 or 503 that says when to come back is retryable; the outcome
		// stays unknown, as for every non-2xx status.
		{name: "status 429 with Retry-After seconds", handler: statusWith(429, "Retry-After", "7"), want: unknownFailure(CodeHTTPStatus, "HTTP 429 Too Many Requests with Retry-After 7s"), requests: 1,
			check: wantRetryAfter(true, 7*time.Second)},
		{name: "status 503 with Retry-After date", handler: statusWith(503, "Retry-After", "Wed, 21 Oct 2026 07:28:00 GMT"), want: unknownFailure(CodeHTTPStatus, "with Retry-After Wed, 21 Oct 2026 07:28:00 GMT"), requests: 1,
			check: wantRetryAfter(true, 0)}, // a date past: no wait
		{name: "status 503 without Retry-After", handler: statusWith(503, "X-Other", "1"), want: unknownFailure(CodeHTTPStatus, "HTTP 503"), requests: 1,
			check: wantRetryAfter(false, 0)},
		{name: "status 429 with a bad Retry-After", handler: statusWith(429, "Retry-After", "soon"), want: unknownFailure(CodeHTTPStatus, "HTTP 429"), requests: 1,
			check: wantRetryAfter(false, 0)},
		{name: "status 500 with Retry-After", handler: statusWith(500, "Retry-After", "1"), want: unknownFailure(CodeHTTPStatus, "HTTP 500"), requests: 1,
			check: wantRetryAfter(false, 0)},
		{name: "status 404 with a large body", handler: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(404)
			io.WriteString(w, strings.Repeat("x", 3<<20))
		}, want: unknownFailure(CodeHTTPStatus, "HTTP 404"), requests: 1},
		{name: "redirect 302 not followed", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, want: unknownFailure(CodeHTTPStatus, "HTTP 302 Found (redirects are not followed)"), requests: 1},
		{name: "redirect 307 not followed", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}, want: unknownFailure(CodeHTTPStatus, "HTTP 307"), requests: 1},

		// Wrong content type, invalid result, too much output, no result event.
		{name: "content type text/plain", handler: rawHandler("text/plain", okResult), want: unknownFailure(CodeBadContentType, `"text/plain"`), requests: 1},
		{name: "content type missing", handler: rawHandler("", okResult), want: unknownFailure(CodeBadContentType, `Content-Type ""`), requests: 1},
		{name: "content type json variant", handler: rawHandler("application/problem+json", okResult), want: unknownFailure(CodeBadContentType, "application/problem+json"), requests: 1},
		{name: "content type malformed", handler: rawHandler("application/json; charset", okResult), want: unknownFailure(CodeBadContentType, ""), requests: 1},
		{name: "invalid result not json", handler: jsonHandler(`hello`), want: unknownFailure(CodeInvalidResult, "invalid result"), requests: 1},
		{name: "invalid result empty body", handler: jsonHandler(``), want: unknownFailure(CodeInvalidResult, "invalid result"), requests: 1},
		{name: "invalid result null", handler: jsonHandler(`null`), want: unknownFailure(CodeInvalidResult, "invalid result"), requests: 1},
		{name: "invalid result unknown field", handler: jsonHandler(`{"content":[{"type":"text","text":"hi"}],"isError":true}`), want: unknownFailure(CodeInvalidResult, "isError: unknown field"), requests: 1},
		{name: "invalid result unknown content type", handler: jsonHandler(`{"content":[{"type":"audio","data":"AAAA"}]}`), want: unknownFailure(CodeInvalidResult, `content[0].type: unknown content type "audio"`), requests: 1},
		{name: "invalid result unknown block field", handler: jsonHandler(`{"content":[{"type":"text","text":"hi","mime_type":"text/plain"}]}`), want: unknownFailure(CodeInvalidResult, "content[0]"), requests: 1},
		{name: "invalid result neither content nor structured", handler: jsonHandler(`{"is_error":false}`), want: unknownFailure(CodeInvalidResult, "neither content nor structured_content"), requests: 1},
		{name: "invalid result structured null only", handler: jsonHandler(`{"structured_content":null}`), want: unknownFailure(CodeInvalidResult, "neither content nor structured_content"), requests: 1},
		{name: "invalid result empty content list", handler: jsonHandler(`{"content":[]}`), want: unknownFailure(CodeInvalidResult, "neither content nor structured_content"), requests: 1},
		{name: "invalid result trailing data", handler: jsonHandler(okResult + `{}`), want: unknownFailure(CodeInvalidResult, "after the JSON value"), requests: 1},
		{name: "invalid result image without mime", handler: jsonHandler(`{"content":[{"type":"image","data":"AAAA"}]}`), want: unknownFailure(CodeInvalidResult, "mime_type"), requests: 1},
		{name: "invalid result in sse", handler: sseHandler("event: result\ndata: {\"content\":[{\"type\":\"video\"}]}\n\n"), want: unknownFailure(CodeInvalidResult, "unknown content type"), requests: 1},
		{name: "output at max bytes passes", binding: maxBytes(4096), handler: jsonHandler(resultOfSize(4096)), want: succeeded("xxx"), requests: 1},
		{name: "output one byte over max fails", binding: maxBytes(4096), handler: jsonHandler(resultOfSize(4097)), want: unknownFailure(CodeOutputTooLarge, "larger than max_output_bytes 4096"), requests: 1},
		{name: "chunked output at max bytes passes", binding: maxBytes(4096), handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			body := resultOfSize(4096)
			io.WriteString(w, body[:100])
			w.(http.Flusher).Flush() // no Content-Length: the cap is found while reading
			io.WriteString(w, body[100:])
		}, want: succeeded("xxx"), requests: 1},
		{name: "chunked output one byte over max fails", binding: maxBytes(4096), handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			body := resultOfSize(4096) + " "
			io.WriteString(w, body[:100])
			w.(http.Flusher).Flush()
			io.WriteString(w, body[100:])
		}, want: unknownFailure(CodeOutputTooLarge, "max_output_bytes 4096"), requests: 1},
		{name: "endless chunked json is cut at max", binding: maxBytes(4096), handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.(http.Flusher).Flush()
			for r.Context().Err() == nil {
				if _, err := io.WriteString(w, strings.Repeat(" ", 1024)); err != nil {
					return
				}
			}
		}, want: unknownFailure(CodeOutputTooLarge, "max_output_bytes"), requests: 1},
		{name: "sse at max bytes passes", binding: maxBytes(4096), handler: sseHandler(sseOfSize(4096)), want: succeeded("ok"), requests: 1},
		{name: "sse one byte over max fails", binding: maxBytes(4096), handler: sseHandler(sseOfSize(4097)), want: unknownFailure(CodeOutputTooLarge, "max_output_bytes 4096"), requests: 1},
		{name: "endless sse is cut at max", binding: maxBytes(4096), handler: endlessSSE(time.Millisecond), want: unknownFailure(CodeOutputTooLarge, "max_output_bytes"), requests: 1, progress: nil},
		{name: "no result event", handler: sseHandler("event: progress\ndata: {}\n\n", ": bye\n\n"), want: unknownFailure(CodeNoResultEvent, "without a result event"), requests: 1, progress: []string{`{}`}},
		{name: "empty event stream", handler: sseHandler(), want: unknownFailure(CodeNoResultEvent, "without a result event"), requests: 1},
		{name: "result event not terminated", handler: sseHandler("event: result\ndata: " + okResult), want: unknownFailure(CodeNoResultEvent, ""), requests: 1},
		{name: "unknown event name", handler: sseHandler("event: update\ndata: {}\n\nevent: result\ndata: " + okResult + "\n\n"), want: unknownFailure(CodeBadEvent, `unexpected SSE event "update"`), requests: 1},
		{name: "unnamed event", handler: sseHandler("data: {}\n\n"), want: unknownFailure(CodeBadEvent, `"message"`), requests: 1},
		{name: "progress not json", handler: sseHandler("event: progress\ndata: 50%\n\nevent: result\ndata: " + okResult + "\n\n"), want: unknownFailure(CodeBadEvent, "progress event data is not JSON"), requests: 1},
		{name: "progress empty", handler: sseHandler("event: progress\ndata:\n\n"), want: unknownFailure(CodeBadEvent, "not JSON"), requests: 1},
		{name: "output schema mismatch", binding: outSchema, handler: jsonHandler(`{"structured_content":{"echo":5}}`),
			want: unknownFailure(CodeOutputSchemaMismatch, `structured_content: at "/echo"`), requests: 1},
		{name: "output schema mismatch with content", binding: outSchema, handler: jsonHandler(`{"content":[{"type":"text","text":"x"}],"structured_content":{}}`),
			want: unknownFailure(CodeOutputSchemaMismatch, "missing property 'echo'"), requests: 1},

		// Cancelled by the caller (session interrupted or closed, call cancelled).
		{name: "cancelled before sending", preCancel: true, handler: jsonHandler(okResult),
			want: want{status: StatusCancelled, code: CodeCancelled, unknown: false, sent: false, text: "cancelled"}, requests: 0,
			check: wantRetryable(true)},
		{name: "cancelled while waiting for headers", cancelAfter: 200 * time.Millisecond, handler: waitHandler(nil),
			want: want{status: StatusCancelled, code: CodeCancelled, unknown: true, sent: true, text: "cancelled"}, requests: 1,
			check: wantRetryable(false)},
		{name: "cancelled mid stream", cancelOnProgress: true, handler: waitHandler(func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: progress\ndata: {\"waiting\":true}\n\n")
			w.(http.Flusher).Flush()
		}), want: want{status: StatusCancelled, code: CodeCancelled, unknown: true, sent: true, text: "cancelled"}, requests: 1, progress: []string{`{"waiting":true}`}},
	}

	transport := newTransport(http.ProxyFromEnvironment)
	t.Cleanup(transport.CloseIdleConnections)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var requests atomic.Int32
			var elsewhere atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
				elsewhere.Add(1)
				writeJSON(w, 200, okResult)
			})
			if tc.handler != nil {
				mux.HandleFunc("/tools/echo", func(w http.ResponseWriter, r *http.Request) {
					requests.Add(1)
					tc.handler(w, r)
				})
			}
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			url := srv.URL + "/tools/echo"
			if tc.url != "" {
				url = tc.url
			}
			tl := newTool(t, url, tc.binding)
			if tc.tool != nil {
				tc.tool(tl)
			}
			req := testRequest()
			if tc.req != nil {
				tc.req(&req)
			}
			c := New(Options{Transport: transport})
			c.headerTimeout = 5 * time.Second
			if tc.headerTimeout != 0 {
				c.headerTimeout = tc.headerTimeout
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.preCancel {
				cancel()
			}
			if tc.cancelAfter > 0 {
				time.AfterFunc(tc.cancelAfter, cancel)
			}
			var progress []string
			onProgress := func(data json.RawMessage) {
				progress = append(progress, string(data))
				if tc.cancelOnProgress {
					cancel()
				}
			}

			start := time.Now()
			o := c.Call(ctx, tl, req, onProgress)
			elapsed := time.Since(start)

			got := want{status: o.Status, code: o.ErrorCode, unknown: o.Result.UnknownOutcome, sent: o.Sent}
			exp := tc.want
			exp.text = ""
			if diff := cmp.Diff(exp, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("outcome (-want +got):\n%s\nmessage: %s", diff, o.ErrorMessage)
			}
			if wantErr := tc.want.code != ""; o.Result.IsError != wantErr {
				t.Errorf("is_error = %v, want %v", o.Result.IsError, wantErr)
			}
			if (o.ErrorMessage == "") != (tc.want.code == "") {
				t.Errorf("ErrorMessage = %q with code %q", o.ErrorMessage, o.ErrorCode)
			}
			if err := o.Result.Validate(); err != nil {
				t.Errorf("outcome result invalid per pkg/tool: %v", err)
			}
			if len(o.Result.Content) == 0 {
				t.Fatalf("outcome has no content: %+v", o.Result)
			}
			if tc.want.text != "" && !strings.Contains(o.Result.Content[0].Text, tc.want.text) {
				t.Errorf("content text %q does not contain %q", o.Result.Content[0].Text, tc.want.text)
			}
			if strings.Contains(o.ErrorMessage, testToken) || strings.Contains(o.Result.Content[0].Text, testToken) {
				t.Error("outcome shows the token")
			}
			if tc.requests >= 0 {
				if n := requests.Load(); n != tc.requests {
					t.Errorf("tool server saw %d requests, want %d", n, tc.requests)
				}
			}
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("redirect target saw %d requests", n)
			}
			if tc.progress != nil || tc.name == "sse progress comments result" {
				if diff := cmp.Diff(tc.progress, progress); diff != "" {
					t.Errorf("progress (-want +got):\n%s", diff)
				}
			}
			if tc.want.code == CodeTimeout && (elapsed < time.Second || elapsed > 5*time.Second) {
				t.Errorf("timed out after %v, want about 1s", elapsed)
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}

// recorder is a tool server that records what brain sent.
type recorder struct {
	mu      sync.Mutex
	headers http.Header
	method  string
	body    []byte
	count   int
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.headers, rec.method, rec.body = r.Header.Clone(), r.Method, body
	rec.count++
	rec.mu.Unlock()
	writeJSON(w, 200, okResult)
}

// TestRequestShape checks the method, headers and body of the contract's
// "Handle a tool call".
func TestRequestShape(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	c := New(Options{})

	cases := []struct {
		name     string
		binding  func(b map[string]any)
		req      tool.Request
		wantAuth string
		wantBody string
	}{
		{
			name:     "token and plain body",
			req:      tool.Request{TenantID: "local", SessionID: "s1", CallID: "c1", Arguments: json.RawMessage(`{"text":"hello"}`), InspectionToken: "insp", BrainURL: "http://brain"},
			wantAuth: "Bearer " + testToken,
			wantBody: `{"tenant_id":"local","session_id":"s1","call_id":"c1","arguments":{"text":"hello"}}`,
		},
		{
			name:     "no token_env no authorization",
			binding:  func(b map[string]any) { delete(b, "token_env") },
			req:      tool.Request{TenantID: "local", SessionID: "s1", CallID: "c2", Arguments: json.RawMessage(`{"text":"x"}`)},
			wantBody: `{"tenant_id":"local","session_id":"s1","call_id":"c2","arguments":{"text":"x"}}`,
		},
		{
			name:     "inspect_session adds token and brain_url",
			binding:  func(b map[string]any) { b["inspect_session"] = true },
			req:      tool.Request{TenantID: "local", SessionID: "s1", CallID: "c3", Arguments: json.RawMessage(`{"text":"x"}`), InspectionToken: "insp_tok", BrainURL: "http://127.0.0.1:8080"},
			wantAuth: "Bearer " + testToken,
			wantBody: `{"tenant_id":"local","session_id":"s1","call_id":"c3","arguments":{"text":"x"},"inspection_token":"insp_tok","brain_url":"http://127.0.0.1:8080"}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tl := newTool(t, srv.URL+"/tools/echo", tc.binding)
			o := c.Call(context.Background(), tl, tc.req, nil)
			if o.Status != StatusSucceeded {
				t.Fatalf("call: %+v", o)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if rec.method != http.MethodPost {
				t.Errorf("method %s", rec.method)
			}
			for k, v := range map[string]string{
				"Content-Type":  "application/json",
				"Accept":        "application/json, text/event-stream",
				"Authorization": tc.wantAuth,
				"Traceparent":   "",
			} {
				if got := rec.headers.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if string(rec.body) != tc.wantBody {
				t.Errorf("body\n got %s\nwant %s", rec.body, tc.wantBody)
			}
		})
	}
}

// TestNoRetry shows the at-most-once rule: a connection dropped after the
// request was read is reported, never retried, both on a fresh and on a
// reused connection.
func TestNoRetry(t *testing.T) {
	var drops, oks atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/tools/ok", func(w http.ResponseWriter, r *http.Request) {
		oks.Add(1)
		writeJSON(w, 200, okResult)
	})
	mux.HandleFunc("/tools/drop", func(w http.ResponseWriter, r *http.Request) {
		drops.Add(1)
		io.ReadAll(r.Body)
		panic(http.ErrAbortHandler)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := New(Options{})

	drop := newTool(t, srv.URL+"/tools/drop", nil)
	ok := newTool(t, srv.URL+"/tools/ok", nil)
	for i := 1; i <= 3; i++ {
		// Warm the pool so the next call may reuse an idle connection.
		if o := c.Call(context.Background(), ok, testRequest(), nil); o.Status != StatusSucceeded {
			t.Fatalf("ok call: %+v", o)
		}
		o := c.Call(context.Background(), drop, testRequest(), nil)
		if o.ErrorCode != CodeConnectionFailed || !o.Result.UnknownOutcome || !o.Sent {
			t.Fatalf("dropped call: %+v", o)
		}
		if n := drops.Load(); n != int32(i) {
			t.Fatalf("after %d calls the tool saw %d requests: retried", i, n)
		}
	}
}

// TestHeaderTimeoutDefault pins the contract's 30 s response-header limit.
func TestHeaderTimeoutDefault(t *testing.T) {
	if got := New(Options{}).headerTimeout; got != tool.HeaderTimeout || tool.HeaderTimeout != 30*time.Second {
		t.Errorf("header timeout = %v, want 30s", got)
	}
}

// TestConcurrentCalls runs calls in parallel through one Caller (the
// race detector checks the Caller's shared state).
func TestConcurrentCalls(t *testing.T) {
	srv := httptest.NewServer(sseHandler("event: progress\ndata: 1\n\n", "event: result\ndata: "+okResult+"\n\n"))
	t.Cleanup(srv.Close)
	c := New(Options{})
	tl := newTool(t, srv.URL, nil)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			o := c.Call(context.Background(), tl, testRequest(), func(json.RawMessage) { n++ })
			if o.Status != StatusSucceeded || n != 1 {
				t.Errorf("call: %+v, %d progress events", o, n)
			}
		}()
	}
	wg.Wait()
}

func TestCapReader(t *testing.T) {
	for _, tc := range []struct {
		n, limit int
		ok       bool
	}{{0, 0, true}, {1, 0, false}, {5, 5, true}, {6, 5, false}, {4, 5, true}, {5000, 4096, false}} {
		r := NewCapReader(strings.NewReader(strings.Repeat("a", tc.n)), int64(tc.limit))
		data, err := io.ReadAll(r)
		if tc.ok && (err != nil || len(data) != tc.n) {
			t.Errorf("%d bytes, limit %d: %d bytes, %v", tc.n, tc.limit, len(data), err)
		}
		if !tc.ok && (!errors.Is(err, ErrOutputTooLarge) || len(data) > tc.limit) {
			t.Errorf("%d bytes, limit %d: %d bytes, %v; want ErrOutputTooLarge", tc.n, tc.limit, len(data), err)
		}
	}
}

// TestInvalidResultMessageIsBounded: a result refused for a name or value
// of the tool's own (an unknown field, content type or mime_type) repeats
// at most strictjson.MaxMessageBytes of it, cut on a character boundary:
// brain stores the message with the call and its tool.result event.
func TestInvalidResultMessageIsBounded(t *testing.T) {
	huge := strings.Repeat("é", 100_000)
	c := New(Options{})
	for _, tc := range []struct{ name, body, want string }{
		{"unknown field", `{"content":[{"type":"text","text":"x"}],"` + huge + `":1}`, ": unknown field"},
		{"unknown content type", `{"content":[{"type":"` + huge + `"}]}`, "content[0].type: unknown content type"},
		{"mime_type", `{"content":[{"type":"image","data":"AA==","mime_type":"` + huge + `"}]}`, "content[0].mime_type: must be an image/* type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(jsonHandler(tc.body))
			t.Cleanup(srv.Close)
			o := c.Call(context.Background(), newTool(t, srv.URL+"/tools/echo", nil), tool.Request{TenantID: "local", SessionID: "s", CallID: "c", Arguments: json.RawMessage(`{"text":"x"}`)}, nil)
			if o.ErrorCode != CodeInvalidResult || !strings.Contains(o.ErrorMessage, tc.want) {
				t.Fatalf("outcome %s %.120q, want %s naming %q", o.ErrorCode, o.ErrorMessage, CodeInvalidResult, tc.want)
			}
			if n := len(o.ErrorMessage); n > 3*strictjson.MaxMessageBytes || !utf8.ValidString(o.ErrorMessage) || !strings.Contains(o.ErrorMessage, "…") {
				t.Errorf("message of %d bytes (valid UTF-8: %v), want it cut near %d", n, utf8.ValidString(o.ErrorMessage), strictjson.MaxMessageBytes)
			}
		})
	}
}

// TestDescribe: a transport failure names its operation once, not again
// through the system call's own prefix.
func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, "read: connection reset by peer"},
		{&url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, "dial: connection refused"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("i/o timeout")}, "dial: i/o timeout"},
		{io.ErrUnexpectedEOF, "connection closed before the response was complete"},
	} {
		if got := Describe(tc.err); got != tc.want {
			t.Errorf("Describe(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestRetryAfter: the wait a 429 or 503 asks for, as of now: its seconds,
// or the time until its HTTP date (0 once that is past); none for another
// status or a value that is neither.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 21, 7, 28, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, value string
		status      int
		said        string
		wait        time.Duration
		ok          bool
	}{
		{"seconds", "2", 503, "2s", 2 * time.Second, true},
		{"zero seconds", "0", 429, "0s", 0, true},
		{"huge seconds", "4294967295", 429, "4294967295s", 4294967295 * time.Second, true},
		{"date ahead", "Wed, 21 Oct 2026 07:28:30 GMT", 503, "Wed, 21 Oct 2026 07:28:30 GMT", 30 * time.Second, true},
		{"date past", "Wed, 21 Oct 2026 07:27:00 GMT", 503, "Wed, 21 Oct 2026 07:27:00 GMT", 0, true},
		{"negative", "-1", 503, "", 0, false},
		{"too many seconds", "4294967296", 503, "", 0, false},
		{"status 500", "2", 500, "", 0, false},
		{"none", "", 503, "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tc.status, Header: http.Header{}}
			if tc.value != "" {
				resp.Header.Set("Retry-After", tc.value)
			}
			said, wait, ok := RetryAfter(resp, now)
			if said != tc.said || wait != tc.wait || ok != tc.ok {
				t.Errorf("RetryAfter(%d, %q) = %q, %s, %v; want %q, %s, %v", tc.status, tc.value, said, wait, ok, tc.said, tc.wait, tc.ok)
			}
		})
	}
}
