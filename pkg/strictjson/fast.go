package strictjson

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// ReadObject reads data, one JSON object and nothing after it, a member at
// a time, in one pass of a reused tokenizer (duplicate names and invalid
// UTF-8 are errors): member is called with each name and dec at its value,
// which it must read whole (dec.InputOffset is an offset into data). ok is
// false when data is anything else or member returns false.
//
// It is for a fast path beside a strict decoder: a caller that reads the
// usual shape of a document here leaves everything else (ok false) to
// Unmarshal and its messages. The tokenizer keeps no reference to data
// once ReadObject returns.
func ReadObject(data []byte, member func(dec *jsontext.Decoder, name string) bool) (ok bool) {
	d := decoders.Get().(*pooledDecoder)
	defer func() {
		d.buf = bytes.Buffer{}
		d.dec.Reset(&d.buf) // drop the references to data
		decoders.Put(d)
	}()
	d.buf = *bytes.NewBuffer(data) // parsed in place
	d.dec.Reset(&d.buf)
	if !Members(&d.dec, member) {
		return false
	}
	_, err := d.dec.ReadToken()
	return errors.Is(err, io.EOF) // anything else: trailing data
}

// Members reads the JSON object at dec's position as ReadObject does, for
// an object inside one.
func Members(dec *jsontext.Decoder, member func(dec *jsontext.Decoder, name string) bool) bool {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil || name.Kind() != '"' {
			return false
		}
		if !member(dec, name.String()) {
			return false
		}
	}
	_, err := dec.ReadToken()
	return err == nil
}

// decoders are ReadObject's tokenizers, reused: a jsontext.Decoder keeps
// buffers and a string cache a new one would make again.
var decoders = sync.Pool{New: func() any { return new(pooledDecoder) }}

type pooledDecoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}
