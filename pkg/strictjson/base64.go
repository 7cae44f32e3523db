package strictjson

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"

	"github.com/go-json-experiment/json/jsontext"
	b64 "github.com/segmentio/asm/base64"
)

// Base64 is binary data that travels in JSON as a string of standard,
// padded base64 (RFC 4648 section 4), such as a tool's "data_base64"
// argument. It decodes straight from the document's bytes, with SIMD where
// the CPU has it and no intermediate string: a 256 KiB payload costs one
// allocation of its decoded size.
//
// A JSON null leaves a *Base64 field nil, as for any pointer. Any kind other
// than a string is a wrong type; a string that is not standard base64 is an
// error naming the byte at fault. The document's size limit bounds the data.
type Base64 []byte

// UnmarshalJSONFrom implements json.UnmarshalerFrom.
func (b *Base64) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadValue()
		*b = nil
		return err
	}
	out, err := AppendBase64(nil, dec)
	if err != nil {
		return err
	}
	if out == nil {
		out = []byte{}
	}
	*b = out
	return nil
}

// AppendBase64 reads the next value of dec, a JSON string of standard,
// padded base64, and appends the bytes it encodes to dst: Base64's
// decoding, for a caller that brings its own (recycled) buffer. Any other
// JSON kind is a wrong type; bad base64 is an error naming the byte at
// fault, as encoding/base64 names it.
func AppendBase64(dst []byte, dec *jsontext.Decoder) ([]byte, error) {
	if k := dec.PeekKind(); k != '"' {
		if _, err := dec.ReadValue(); err != nil {
			return dst, err
		}
		return dst, &FieldError{Problem: fmt.Sprintf("wrong type: got %s, want string of base64", kindName(k))}
	}
	val, err := dec.ReadValue()
	if err != nil {
		return dst, err
	}
	raw := val[1 : len(val)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		// Escapes are legal JSON, if unusual in base64: unquote first.
		if raw, err = jsontext.AppendUnquote(nil, val); err != nil {
			return dst, err
		}
	}
	n0 := len(dst)
	dst = slices.Grow(dst, base64.StdEncoding.DecodedLen(len(raw)))
	out := dst[n0 : n0+base64.StdEncoding.DecodedLen(len(raw))]
	n, err := b64.StdEncoding.Decode(out, raw)
	if err != nil {
		// segmentio/asm refuses what encoding/base64 refuses, but its
		// error gives an offset within its block, not within the input:
		// encoding/base64 names the byte (only bad input pays for this).
		if _, serr := base64.StdEncoding.Decode(out, raw); serr != nil {
			err = serr
		}
		return dst[:n0], &FieldError{Problem: fmt.Sprintf("not standard base64: %v", err)}
	}
	return dst[:n0+n], nil
}
