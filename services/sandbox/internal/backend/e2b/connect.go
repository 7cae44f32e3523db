package e2b

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Connect protocol framing (connectrpc.com, "Connect Protocol Reference",
// streaming RPCs): every message is an envelope of one flag byte, a 4-byte
// big-endian length and that many bytes of JSON. Flag bit 0x02 marks the
// end-of-stream message, whose JSON is {} or {"error":{"code","message"}}
// plus optional metadata. Bit 0x01 would mark a compressed message, which
// we never ask for.
const (
	flagCompressed = 0x01
	flagEndStream  = 0x02

	// maxEnvelope caps one message. envd sends output in chunks of a few
	// KiB; anything near this is broken.
	maxEnvelope = 16 << 20
)

// envelope returns msg framed as one Connect envelope with flags.
func envelope(flags byte, msg []byte) []byte {
	out := make([]byte, 5+len(msg))
	out[0] = flags
	binary.BigEndian.PutUint32(out[1:5], uint32(len(msg)))
	copy(out[5:], msg)
	return out
}

// readEnvelope reads one envelope from r. At a clean end of r before any
// byte it returns io.EOF; a stream cut inside an envelope is
// io.ErrUnexpectedEOF.
func readEnvelope(r io.Reader) (flags byte, msg []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxEnvelope {
		return 0, nil, fmt.Errorf("connect envelope of %d bytes is over the limit of %d", n, maxEnvelope)
	}
	if hdr[0]&flagCompressed != 0 {
		return 0, nil, errors.New("connect envelope is compressed, which was not asked for")
	}
	msg = make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return hdr[0], msg, nil
}

// ConnectError is an error a Connect server reported: in an end-of-stream
// message, or as the JSON body of a non-200 answer.
type ConnectError struct {
	// Status is the HTTP status when the error came as a non-200 answer,
	// 0 in an end-of-stream message.
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *ConnectError) Error() string {
	var b bytes.Buffer
	if e.Status != 0 {
		fmt.Fprintf(&b, "HTTP %d: ", e.Status)
	}
	if e.Code != "" {
		b.WriteString(e.Code)
	}
	if e.Message != "" {
		if e.Code != "" {
			b.WriteString(": ")
		}
		b.WriteString(e.Message)
	}
	if b.Len() == 0 {
		b.WriteString("unknown error")
	}
	return b.String()
}

// endStream is the JSON of an end-of-stream message.
type endStream struct {
	Error    *ConnectError   `json:"error"`
	Metadata json.RawMessage `json:"metadata"`
}

// errorFromBody reads a non-200 answer as a ConnectError. envd's REST
// routes answer {"code": <number>, "message"}, the Connect routes
// {"code": "<name>", "message"}; anything else keeps its text.
func errorFromBody(status int, body []byte) *ConnectError {
	e := &ConnectError{Status: status}
	var m struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &m) == nil && (m.Message != "" || len(m.Code) > 0) {
		e.Message = m.Message
		var name string
		if json.Unmarshal(m.Code, &name) == nil {
			e.Code = name
		}
		return e
	}
	e.Message = string(bytes.TrimSpace(body))
	if len(e.Message) > 300 {
		e.Message = e.Message[:300] + "..."
	}
	return e
}
