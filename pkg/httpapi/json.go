package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/brain-tools/suite/pkg/bufpool"
)

// Appender is a value that encodes itself to JSON by appending to a
// buffer (tool.Result does), which WriteJSON prefers over encoding/json:
// the buffer comes from a pool and goes back to it once written.
type Appender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// WriteJSON encodes v, then writes status, Content-Type application/json,
// Content-Length and the body with a final newline. Encoding comes first,
// so an encoding failure is a clean 500 with the JSON error body instead
// of half an answer.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	var (
		data []byte
		err  error
		h    *[]byte // the pooled buffer of an Appender
	)
	if a, ok := v.(Appender); ok {
		h = outBuffers.Get()
		data, err = a.AppendJSON(*h)
	} else {
		data, err = json.Marshal(v)
	}
	if err != nil {
		if h != nil {
			outBuffers.Put(h, *h)
		}
		writeBody(w, http.StatusInternalServerError, errorBody(w, CodeInternal, "internal error: encode response"))
		return
	}
	writeBody(w, status, append(data, '\n'))
	if h != nil {
		// Write does not keep data, so the buffer serves the next answer.
		outBuffers.Put(h, data)
	}
}

// outBuffers are WriteJSON's buffers, up to 4 MiB each (twice brain's
// largest max_output_bytes).
var outBuffers = bufpool.New(4 << 20)

func writeBody(w http.ResponseWriter, status int, data []byte) {
	hd := w.Header()
	hd["Content-Type"] = []string{"application/json"}
	// A length lets the caller size its buffer once and spares the chunked
	// framing of a large answer.
	hd["Content-Length"] = []string{strconv.Itoa(len(data))}
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// WriteError writes e as the suite's JSON error body with e.Status:
//
//	{"error":{"code":e.Code,"message":e.Message,"request_id":RequestID(w)}}
//
// request_id is left out when the response has no X-Request-Id. e.Cause
// is never written. A 401 also gets a Bearer challenge when the response
// has none yet.
func WriteError(w http.ResponseWriter, e *Error) {
	if e.Status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
		w.Header().Set("WWW-Authenticate", "Bearer")
	}
	writeBody(w, e.Status, errorBody(w, e.Code, e.Message))
}

// Refuse is WriteError of a new *Error: WriteError(w, Errorf(status, code, "%s", message)).
func Refuse(w http.ResponseWriter, status int, code, message string) {
	WriteError(w, &Error{Status: status, Code: code, Message: message})
}

// errorBody encodes the error body; code and message are escaped as JSON
// strings, so nothing a message repeats can break out of it.
func errorBody(w http.ResponseWriter, code, message string) []byte {
	type body struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id,omitempty"`
	}
	data, err := json.Marshal(struct {
		Error body `json:"error"`
	}{body{code, message, RequestID(w)}})
	if err != nil { // strings always encode
		data = []byte(`{"error":{"code":"internal_error","message":"internal error"}}`)
	}
	return append(data, '\n')
}
