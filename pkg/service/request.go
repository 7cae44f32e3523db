package service

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"
)

// argsDecoder decodes a tool's arguments straight from the request's
// decoder into the tool's argument type (see TypedTool).
type argsDecoder func(dec *jsontext.Decoder) (any, error)

// readRequest reads the call's body. A body that declares its length is
// refused at once when that is over limit, and otherwise read in one
// allocation of that size (net/http ends the body there); a chunked body is
// read up to limit+1 bytes.
func readRequest(r *http.Request, limit int64) ([]byte, error) {
	n := r.ContentLength
	if n > 0 {
		if limit > 0 && n > limit {
			return nil, &strictjson.TooLargeError{Limit: limit}
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(r.Body, data); err != nil {
			return nil, readError(err)
		}
		return data, nil
	}
	body := io.Reader(r.Body)
	if limit > 0 {
		body = io.LimitReader(r.Body, limit+1)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, readError(err)
	}
	if limit > 0 && int64(len(data)) > limit {
		return nil, &strictjson.TooLargeError{Limit: limit}
	}
	return data, nil
}

// bodyTimeout is BodyTimeout; tests shorten it.
var bodyTimeout = BodyTimeout

// errBodyTimeout is a body not sent within bodyTimeout.
var errBodyTimeout = errors.New("the request body did not arrive in time")

func readError(err error) error {
	if IsTimeout(err) {
		return errBodyTimeout
	}
	return &strictjson.FieldError{Problem: fmt.Sprintf("read body: %v", err)}
}

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
	if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "arguments.") && !strings.HasPrefix(fe.Field, "arguments[") {
		return req, nil, nil, err
	}
	req = tool.Request{}
	if jsonv2.Unmarshal(data, &req, jsonv2.RejectUnknownMembers(true),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) != nil {
		return req, nil, nil, err
	}
	return req, nil, &strictjson.FieldError{Field: strings.TrimPrefix(fe.Field, "arguments."), Problem: fe.Problem}, nil
}

func decodeFast(data []byte, decodeArgs argsDecoder) (req tool.Request, args any, ok bool) {
	// A bytes.Buffer is parsed in place; any other reader is copied into
	// the decoder's own buffer in steps, re-scanning long strings.
	dec := jsontext.NewDecoder(bytes.NewBuffer(data))
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
	if _, err := dec.ReadToken(); err != io.EOF {
		return req, nil, false // trailing data
	}
	return req, args, true
}
