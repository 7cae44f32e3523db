package service

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/brain-tools/suite/pkg/httpapi"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
)

// argsDecoder decodes a tool's arguments straight from the request's
// decoder into the tool's argument type (see NewTool).
type argsDecoder func(dec *jsontext.Decoder) (any, error)

// bodyTimeout is httpapi.BodyTimeout; tests shorten it.
var bodyTimeout = httpapi.BodyTimeout

// decodeRequest decodes the request body data strictly. It reads the
// envelope token by token in one pass: Arguments is the slice of data that
// holds them (data is the caller's own and is not reused), and when
// decodeArgs is set the arguments are decoded into their type in the same
// pass (args). Anything unusual falls back to strictjson.Unmarshal, whose
// errors name the field; args is then nil and the handler decodes
// Arguments itself, reporting its own argument errors.
//
// A problem inside the arguments (a duplicate name, invalid UTF-8) is the
// caller's bad argument, not a bad request: the contract answers those
// with an is_error result. argErr then holds it, and req the envelope read
// without those two checks.
func decodeRequest(data []byte, decodeArgs argsDecoder) (req tool.Request, args any, argErr, err error) {
	if req, args, ok := decodeFast(data, decodeArgs); ok {
		return req, args, nil, nil
	}
	if err = strictjson.Unmarshal(data, &req); err == nil {
		return req, nil, nil, nil
	}
	var fe *strictjson.FieldError
	if !errors.As(err, &fe) || !insideArguments(fe) {
		return req, nil, nil, err
	}
	// The fault is inside the arguments. The envelope must still be sound
	// on its own: judge it with the arguments replaced by {}.
	start, end, ok := argumentsSpan(data)
	if !ok || data[start] != '{' {
		// Not an object: the envelope's fault, which Validate names.
		return req, nil, nil, err
	}
	envelope := slices.Concat(data[:start], []byte("{}"), data[end:])
	if eerr := strictjson.Unmarshal(envelope, &req); eerr != nil {
		return req, nil, nil, eerr
	}
	req.Arguments = data[start:end]
	field := strings.TrimPrefix(strings.TrimPrefix(fe.Field, "arguments"), ".")
	return req, nil, &strictjson.FieldError{Field: field, Problem: fe.Problem}, nil
}

// insideArguments reports whether fe is about something inside the
// arguments object rather than the envelope: a member or element under
// it, or a name in it that is not valid UTF-8 (the decoder reports the
// object itself); "arguments" written twice is the envelope's.
func insideArguments(fe *strictjson.FieldError) bool {
	switch {
	case strings.HasPrefix(fe.Field, "arguments."), strings.HasPrefix(fe.Field, "arguments["):
		return true
	case fe.Field == "arguments":
		return fe.Problem != "duplicate field"
	}
	return false
}

// argumentsSpan finds the value of the envelope's "arguments" member in
// data, read leniently (duplicate names and invalid UTF-8 allowed): its
// start and end offsets, when it is there once.
func argumentsSpan(data []byte) (start, end int, ok bool) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return 0, 0, false
	}
	found := 0
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return 0, 0, false
		}
		isArgs := tok.String() == "arguments"
		from := dec.InputOffset()
		if err := dec.SkipValue(); err != nil {
			return 0, 0, false
		}
		if isArgs {
			found++
			v := data[from:dec.InputOffset()]
			lead := len(v) - len(bytes.TrimLeft(v, ": \t\r\n"))
			start, end = int(from)+lead, int(dec.InputOffset())
		}
	}
	return start, end, found == 1
}

// requestDecoders are decodeFast's decoders, reused: a jsontext.Decoder
// keeps the string cache that decoding into Go strings fills (4 KiB, made
// on a decoder's first string), which a decoder per request would make
// again on every call.
var requestDecoders = sync.Pool{New: func() any { return new(requestDecoder) }}

type requestDecoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

func decodeFast(data []byte, decodeArgs argsDecoder) (req tool.Request, args any, ok bool) {
	rd := requestDecoders.Get().(*requestDecoder)
	defer func() {
		rd.buf = bytes.Buffer{}
		rd.dec.Reset(&rd.buf) // drop the references to data
		requestDecoders.Put(rd)
	}()
	// A bytes.Buffer is parsed in place; any other reader is copied into
	// the decoder's own buffer in steps, re-scanning long strings.
	rd.buf = *bytes.NewBuffer(data)
	rd.dec.Reset(&rd.buf)
	dec := &rd.dec
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return req, nil, false
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return req, nil, false
		}
		var dst *string
		switch tok.String() {
		case "tenant_id":
			dst = &req.TenantID
		case "session_id":
			dst = &req.SessionID
		case "call_id":
			dst = &req.CallID
		case "inspection_token":
			dst = &req.InspectionToken
		case "brain_url":
			dst = &req.BrainURL
		case "arguments":
			if dec.PeekKind() != '{' {
				return req, nil, false
			}
			start := dec.InputOffset()
			if decodeArgs != nil {
				if args, err = decodeArgs(dec); err != nil {
					return req, nil, false
				}
			} else if err := dec.SkipValue(); err != nil {
				return req, nil, false
			}
			// The value starts after the name's ':' and any space.
			req.Arguments = bytes.TrimLeft(data[start:dec.InputOffset()], ": \t\r\n")
			continue
		default:
			return req, nil, false // unknown field: the strict decoder names it
		}
		val, err := dec.ReadToken()
		if err != nil || val.Kind() != '"' {
			return req, nil, false
		}
		*dst = val.String()
	}
	if _, err := dec.ReadToken(); err != nil {
		return req, nil, false
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return req, nil, false // trailing data
	}
	return req, args, true
}
