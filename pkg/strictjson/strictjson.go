// Package strictjson decodes JSON the strict way every endpoint of the suite
// needs: a size cap, unknown fields refused, trailing data refused, and errors
// that name the field at fault.
//
// It decodes with github.com/go-json-experiment/json, the implementation of
// the proposed encoding/json/v2, whose defaults are the strict ones: object
// member names match struct fields case-sensitively, a duplicate member name
// is an error, and strings must be valid UTF-8 (RFC 8259 section 8.1; RFC
// 7493, I-JSON). It also decodes long strings several times faster than
// encoding/json, which matters for base64 payloads.
package strictjson

import (
	"errors"
	"fmt"
	"go/token"
	"io"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// FieldError is a decoding problem tied to one field. Field is the dotted
// path of the field ("config.tools", "content[1].type"); it is empty when
// the problem concerns the whole document (malformed JSON, trailing data).
type FieldError struct {
	Field   string
	Problem string
}

// Error is "field: problem", each part cut at MaxMessageBytes (Clip): a
// field name or a value quoted in the problem is the document's, and may be
// as large as it.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return Clip(e.Problem, MaxMessageBytes)
	}
	return Clip(e.Field, MaxMessageBytes) + ": " + Clip(e.Problem, MaxMessageBytes)
}

// MaxMessageBytes bounds each part of a FieldError's message.
const MaxMessageBytes = 512

// TooLargeError reports a document longer than the cap given to Decode.
// Limit is in bytes.
type TooLargeError struct {
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("body is larger than the limit of %d bytes", e.Limit)
}

// options are the strict ones: unknown members refused on top of the
// package's defaults (exact-case names, no duplicates, valid UTF-8), and
// integers read the way JSON Schema reads them (integers below).
var options = json.JoinOptions(json.RejectUnknownMembers(true), json.WithUnmarshalers(integers))

// integers decode Go integer fields from any JSON number whose value is an
// integer, as JSON Schema's "integer" type accepts them (draft 2020-12,
// validation section 6.1.1: "1.0" and "1e3" are integers), so that what a
// host validated against a tool's schema also decodes in the tool. A
// fraction is a wrong type; a value past the Go type's range says so.
var integers = json.JoinUnmarshalers(
	signed[int](), signed[int8](), signed[int16](), signed[int32](), signed[int64](),
	unsigned[uint](), unsigned[uint8](), unsigned[uint16](), unsigned[uint32](), unsigned[uint64](),
)

func signed[T int | int8 | int16 | int32 | int64]() *json.Unmarshalers {
	bits := int(unsafe.Sizeof(T(0))) * 8
	lo, hi := big.NewInt(-1<<(bits-1)), new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(bits-1)), big.NewInt(1))
	return json.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *T) error {
		n, err := integer(dec, lo, hi)
		if err == nil {
			*v = T(n.Int64())
		}
		return err
	})
}

func unsigned[T uint | uint8 | uint16 | uint32 | uint64]() *json.Unmarshalers {
	bits := int(unsafe.Sizeof(T(0))) * 8
	lo, hi := big.NewInt(0), new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(bits)), big.NewInt(1))
	return json.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *T) error {
		n, err := integer(dec, lo, hi)
		if err == nil {
			*v = T(n.Uint64())
		}
		return err
	})
}

// integer reads a JSON number that must be an integer from lo to hi. Any
// other JSON kind is left to the default decoding, which names the type.
func integer(dec *jsontext.Decoder, lo, hi *big.Int) (*big.Int, error) {
	if dec.PeekKind() != '0' {
		return nil, errors.ErrUnsupported
	}
	val, err := dec.ReadValue()
	if err != nil {
		return nil, err
	}
	lit := string(val)
	var n *big.Int
	if plain := !strings.ContainsAny(lit, ".eE"); plain && len(strings.TrimPrefix(lit, "-")) > 20 {
		// JSON has no leading zeros: past 20 digits is past any Go integer,
		// and a long literal is not parsed (big.Int parsing is quadratic).
		return nil, &FieldError{Problem: fmt.Sprintf("number %s is out of range (%s to %s)", clip(lit), lo, hi)}
	} else if plain {
		n, _ = new(big.Int).SetString(lit, 10)
	} else {
		// A fraction or an exponent: an integer only if the value is one.
		var fraction bool
		if n, fraction = exactInteger(lit); fraction {
			return nil, &FieldError{Problem: fmt.Sprintf("wrong type: got number %s, want integer", clip(lit))}
		}
		if n == nil {
			return nil, &FieldError{Problem: fmt.Sprintf("number %s is out of range (%s to %s)", clip(lit), lo, hi)}
		}
	}
	if n.Cmp(lo) < 0 || n.Cmp(hi) > 0 {
		return nil, &FieldError{Problem: fmt.Sprintf("number %s is out of range (%s to %s)", clip(lit), lo, hi)}
	}
	return n, nil
}

// exactInteger is the value of lit, a JSON number with a fraction or an
// exponent (the decoder checked its syntax), when that value is an
// integer; fraction reports one that is not. A value of more than 40
// digits (past any Go integer) is nil without being built, and nothing
// long is parsed, so "1e999999999" or a megabyte of digits costs one scan.
func exactInteger(lit string) (n *big.Int, fraction bool) {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, expPart, _ := strings.Cut(strings.ToLower(lit), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return new(big.Int), false // zero, however it is written
	}
	trimmed := strings.TrimRight(digits, "0")
	// value = trimmed × 10^scale; the mantissa's own part of scale is at
	// most its length, a few million.
	scale := int64(len(digits) - len(trimmed) - len(frac))
	if expPart != "" {
		negExp := strings.HasPrefix(expPart, "-")
		e := strings.TrimLeft(strings.TrimLeft(expPart, "+-"), "0")
		if len(e) > 12 {
			// |exponent| ≥ 10^12 outweighs any mantissa a body can hold.
			if negExp {
				return nil, true
			}
			return nil, false
		}
		if e != "" {
			v, _ := strconv.ParseInt(e, 10, 64)
			if negExp {
				v = -v
			}
			scale += v
		}
	}
	if scale < 0 {
		return nil, true
	}
	if int64(len(trimmed))+scale > 40 {
		return nil, false
	}
	n, _ = new(big.Int).SetString(trimmed+strings.Repeat("0", int(scale)), 10)
	if neg {
		n.Neg(n)
	}
	return n, false
}

// clip shortens a number literal for a message.
func clip(s string) string { return Clip(s, 40) }

// Clip cuts s to at most max bytes, at a UTF-8 character boundary, and
// marks the cut with "…" (so a clipped string is up to max+3 bytes). It
// bounds a value repeated in a message (a field name, a refusal, an
// is_error text, a schema failure), whose input may be as large as a
// request.
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Decode reads exactly one JSON value from r into v. It reads at most limit
// bytes (limit <= 0 means no cap) and fails with *TooLargeError past it.
// Unknown object fields (names match case-sensitively), duplicate names,
// invalid UTF-8, trailing data after the value and an empty body are errors;
// every error other than *TooLargeError is a *FieldError.
func Decode(r io.Reader, limit int64, v any) error {
	if limit > 0 && limit < math.MaxInt64 {
		r = io.LimitReader(r, limit+1)
	}
	// Read whole, then decode: decoding from the reader grows and copies
	// the decoder's own buffer in small steps.
	data, err := io.ReadAll(r)
	if err != nil {
		return &FieldError{Problem: "read body: " + err.Error()}
	}
	if limit > 0 && int64(len(data)) > limit {
		return &TooLargeError{Limit: limit}
	}
	return translate(json.Unmarshal(data, v, options), v)
}

// Unmarshal is Decode over a byte slice without a size cap.
func Unmarshal(data []byte, v any) error {
	return translate(json.Unmarshal(data, v, options), v)
}

// DecodeValue decodes the next JSON value of dec into v with Unmarshal's
// rules, for a caller reading a document token by token. Its errors are
// Unmarshal's, with Field relative to that value.
func DecodeValue(dec *jsontext.Decoder, v any) error {
	return translate(json.UnmarshalDecode(dec, v, options), v)
}

// UnmarshalKeepingDuplicates is Unmarshal, except that a name written twice
// in one object is not an error: the last value wins. It is for callers
// that find duplicates themselves to report them better (brain's host
// config names every duplicate at once, by binding).
func UnmarshalKeepingDuplicates(data []byte, v any) error {
	return translate(json.Unmarshal(data, v, options, jsontext.AllowDuplicateNames(true)), v)
}

// translate turns the decoder's errors into *FieldError with the field
// named, keeping *TooLargeError as it is.
func translate(err error, v any) error {
	if err == nil {
		return nil
	}
	var (
		tl  *TooLargeError
		fe  *FieldError
		sem *json.SemanticError
		syn *jsontext.SyntacticError
	)
	switch {
	case errors.As(err, &tl):
		return tl
	case errors.As(err, &fe):
		// From a field's own UnmarshalJSON: place it under that field.
		if errors.As(err, &sem) {
			return &FieldError{Field: join(path(sem.JSONPointer), fe.Field), Problem: fe.Problem}
		}
		return fe
	case errors.As(err, &syn):
		return syntactic(syn)
	case errors.As(err, &sem):
		return semantic(sem, v)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &FieldError{Problem: "body is empty: expected a JSON value"}
	}
	return &FieldError{Problem: err.Error()}
}

func syntactic(e *jsontext.SyntacticError) *FieldError {
	field := path(e.JSONPointer)
	switch {
	case errors.Is(e.Err, io.ErrUnexpectedEOF) && e.ByteOffset == 0:
		return &FieldError{Problem: "body is empty: expected a JSON value"}
	case errors.Is(e.Err, io.ErrUnexpectedEOF):
		return &FieldError{Problem: "malformed JSON: unexpected end of input"}
	case errors.Is(e.Err, jsontext.ErrDuplicateName):
		return &FieldError{Field: field, Problem: "duplicate field"}
	}
	msg := e.Err.Error()
	if strings.Contains(msg, "after top-level value") {
		return &FieldError{Problem: "unexpected data after the JSON value"}
	}
	if strings.Contains(msg, "invalid UTF-8") {
		return &FieldError{Field: field, Problem: "string is not valid UTF-8"}
	}
	if strings.Contains(msg, "surrogate") {
		return &FieldError{Field: field, Problem: "string has an unpaired UTF-16 surrogate escape (\\ud800-\\udfff): not valid Unicode"}
	}
	if strings.Contains(msg, "max depth") {
		if len(field) > 120 {
			field = field[:120] + "…"
		}
		return &FieldError{Field: field, Problem: "nested too deeply (more than 10000 levels of objects and arrays)"}
	}
	return &FieldError{Problem: fmt.Sprintf("malformed JSON at byte %d: %s", e.ByteOffset, msg)}
}

func semantic(e *json.SemanticError, v any) *FieldError {
	field := path(e.JSONPointer)
	if errors.Is(e.Err, json.ErrUnknownName) {
		problem := "unknown field"
		if name := nearName(reflect.TypeOf(v), e.JSONPointer); name != "" {
			problem = fmt.Sprintf("unknown field (field names are case-sensitive: did you mean %q?)", name)
		}
		return &FieldError{Field: field, Problem: problem}
	}
	if e.GoType != nil && e.JSONKind != 0 {
		got := kindName(e.JSONKind)
		if errors.Is(e.Err, strconv.ErrRange) && e.JSONKind == '0' {
			return &FieldError{Field: field, Problem: fmt.Sprintf("number %s is out of range for %s", clip(string(e.JSONValue)), typeName(e.GoType))}
		}
		return &FieldError{Field: field, Problem: fmt.Sprintf("wrong type: got %s, want %s", got, typeName(e.GoType))}
	}
	if e.Err != nil {
		return &FieldError{Field: field, Problem: e.Err.Error()}
	}
	return &FieldError{Field: field, Problem: strings.TrimPrefix(e.Error(), "json: ")}
}

// path renders a JSON Pointer (RFC 6901) as the suite's dotted field path:
// "/content/1/type" is "content[1].type".
func path(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 64); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "." + b
}

// nearName finds, for the unknown member p points at, a field of the
// enclosing struct whose name differs only in case.
func nearName(t reflect.Type, p jsontext.Pointer) string {
	tokens := []string{}
	for tok := range p.Tokens() {
		tokens = append(tokens, tok)
	}
	if len(tokens) == 0 {
		return ""
	}
	for _, tok := range tokens[:len(tokens)-1] {
		t = deref(t)
		if t == nil {
			return ""
		}
		switch t.Kind() {
		case reflect.Struct:
			t = jsonFields(t)[tok]
		case reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
		default:
			return ""
		}
	}
	if t = deref(t); t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	last := tokens[len(tokens)-1]
	for name := range jsonFields(t) {
		if strings.EqualFold(name, last) {
			return name
		}
	}
	return ""
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// jsonFields maps the JSON names of struct type t's fields, embedded
// structs' fields included, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "" && deref(f.Type).Kind() == reflect.Struct:
			for k, v := range jsonFields(deref(f.Type)) {
				out[k] = v
			}
		case !f.IsExported():
		case name == "":
			out[f.Name] = f.Type
		default:
			out[name] = f.Type
		}
	}
	return out
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return k.String()
}

// typeName renders a Go type as the JSON type a client would recognise.
func typeName(t reflect.Type) string {
	t = deref(t)
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Name() != "" {
			return "JSON value"
		}
		return "array"
	case reflect.Map:
		return "object"
	case reflect.Struct:
		if t.Name() != "" && token.IsExported(t.Name()) {
			// Named types: structs decode from objects; the caller's doc says more.
			return "object (" + t.Name() + ")"
		}
		return "object"
	}
	return t.String()
}
