// Package strictjson decodes JSON the strict way every endpoint of the suite
// needs: a size cap, unknown fields refused, trailing data refused, and errors
// that name the field at fault.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// FieldError is a decoding problem tied to one field. Field is the dotted
// path of the field ("config.tools", "arguments.text"); it is empty when the
// problem concerns the whole document (malformed JSON, trailing data).
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Problem)
}

// TooLargeError reports a document longer than the cap given to Decode.
// Limit is in bytes.
type TooLargeError struct {
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("body is larger than the limit of %d bytes", e.Limit)
}

// Decode reads exactly one JSON value from r into v. It reads at most limit
// bytes (limit <= 0 means no cap) and fails with *TooLargeError past it.
// Unknown object fields, trailing data after the value and an empty body are
// errors; every error other than *TooLargeError is a *FieldError.
func Decode(r io.Reader, limit int64, v any) error {
	if limit > 0 {
		r = &capReader{r: r, left: limit + 1, limit: limit}
	}
	return decode(r, v)
}

// Unmarshal is Decode over a byte slice without a size cap.
func Unmarshal(data []byte, v any) error {
	return decode(bytes.NewReader(data), v)
}

func decode(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return translate(err)
	}
	// Anything but whitespace after the value is trailing data.
	var extra json.RawMessage
	switch err := dec.Decode(&extra); {
	case err == io.EOF:
		return nil
	case err == nil:
		return &FieldError{Problem: "unexpected data after the JSON value"}
	default:
		var tl *TooLargeError
		if errors.As(err, &tl) {
			return tl
		}
		return &FieldError{Problem: "unexpected data after the JSON value"}
	}
}

// translate turns encoding/json's errors into *FieldError with the field
// named, keeping *TooLargeError as it is.
func translate(err error) error {
	var (
		tl     *TooLargeError
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		fe     *FieldError
	)
	switch {
	case errors.As(err, &tl):
		return tl
	case errors.As(err, &fe):
		return fe
	case errors.Is(err, io.EOF):
		return &FieldError{Problem: "body is empty: expected a JSON value"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &FieldError{Problem: "malformed JSON: unexpected end of input"}
	case errors.As(err, &syntax):
		return &FieldError{Problem: fmt.Sprintf("malformed JSON at byte %d: %s", syntax.Offset, strings.TrimPrefix(syntax.Error(), "json: "))}
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return &FieldError{Problem: fmt.Sprintf("wrong type: got %s, want %s", typ.Value, typeName(typ.Type.String()))}
		}
		return &FieldError{Field: field, Problem: fmt.Sprintf("wrong type: got %s, want %s", typ.Value, typeName(typ.Type.String()))}
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &FieldError{Field: strings.Trim(name, `"`), Problem: "unknown field"}
	}
	return &FieldError{Problem: strings.TrimPrefix(msg, "json: ")}
}

// typeName renders a Go type as the JSON type a client would recognise.
func typeName(goType string) string {
	switch {
	case goType == "string":
		return "string"
	case goType == "bool":
		return "boolean"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "integer"
	case strings.HasPrefix(goType, "float"):
		return "number"
	case strings.HasPrefix(goType, "[]"):
		return "array"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "struct"):
		return "object"
	}
	if i := strings.LastIndexByte(goType, '.'); i >= 0 {
		// Named types: structs decode from objects; the caller's doc says more.
		return "object (" + goType[i+1:] + ")"
	}
	return goType
}

// capReader fails with *TooLargeError once more than limit bytes were read,
// so the cap holds without buffering the excess.
type capReader struct {
	r     io.Reader
	left  int64
	limit int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, &TooLargeError{Limit: c.limit}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left <= 0 {
		return n, &TooLargeError{Limit: c.limit}
	}
	return n, err
}
