package tools

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	b64 "github.com/segmentio/asm/base64"

	"github.com/brain-tools/suite/pkg/bufpool"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/storage/internal/keys"
	"github.com/brain-tools/suite/services/storage/internal/objects"
)

type getArgs struct {
	Key      string `json:"key" jsonschema:"Object key relative to your storage, e.g. \"notes/today.md\"." schema:"minLength=1,maxLength=1024"`
	MaxBytes *int64 `json:"max_bytes,omitempty" jsonschema:"Read at most this many bytes (the output limit applies too)." schema:"minimum=1"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"Byte offset to start reading at; default 0." schema:"minimum=0"`
}

// Validate holds the key rules a schema cannot say (keys.Validate).
func (a *getArgs) Validate() error {
	if err := keys.Validate(a.Key); err != nil {
		return &strictjson.FieldError{Field: "key", Problem: err.Error()}
	}
	return nil
}

// getResult is storage_get's structured_content: the object's description
// and which bytes the content blocks carry. The bytes themselves are only
// in the content blocks, so the output limit is not spent twice.
type getResult struct {
	objects.Object
	Offset int64 `json:"offset" schema:"minimum=0"`
	// Length is how many bytes of the object the content carries.
	Length int64 `json:"length" schema:"minimum=0"`
	// Encoding is text (UTF-8), base64 or image (an image block).
	Encoding string `json:"encoding" schema:"enum=text|base64|image"`
	// NextOffset, when set, is where the next storage_get continues.
	NextOffset *int64 `json:"next_offset,omitempty" schema:"minimum=0"`
}

func (t *Tools) get(ctx context.Context, call *service.Call, a getArgs) (*tool.Result, error) {
	ns, bad := t.namespace(call)
	if bad != nil {
		return bad, nil
	}
	if bad := checkKey(ns, "key", a.Key); bad != nil {
		return bad, nil
	}
	// Read at most the output limit: no encoding makes data smaller.
	want := t.cfg.MaxOutputBytes
	if a.MaxBytes != nil && *a.MaxBytes < want {
		want = *a.MaxBytes
	}
	h := getBuffers.Get()
	obj, data, err := t.store.GetInto(ctx, ns, a.Key, a.Offset, want, *h)
	if err != nil {
		getBuffers.Put(h, *h)
		return failure(err, false), nil
	}
	// Every rendering copies data (text, image base64, base64), so its
	// buffer serves the next call once the result is built.
	defer func() { getBuffers.Put(h, data) }()
	// Spend on data what the rest of the result leaves of the limit, and
	// shrink if the first estimate was off. Sizes are computed, not
	// marshalled: the data is most of the result and encoding it twice
	// would cost as much as the S3 calls.
	limit := int(t.cfg.MaxOutputBytes) - sseMargin
	skeleton, _ := render(call, obj, nil, a.Offset, 0)
	budget := limit - encodedLen(skeleton) - 512
	for range 4 {
		r, dataLen := render(call, obj, data, a.Offset, budget)
		n := skeletonLen(r) + dataLen
		if n <= limit {
			return r, nil
		}
		budget -= n - limit
	}
	return tool.Errorf("get %q: cannot fit the object's description in the %d-byte output limit", a.Key, t.cfg.MaxOutputBytes), nil
}

// skeletonLen is the encoded size of r with its data block emptied: the
// size of r minus the data's encoded length.
func skeletonLen(r *tool.Result) int {
	c := *r
	c.Content = append([]tool.Content(nil), r.Content...)
	if len(c.Content) == 2 {
		c.Content[1].Text, c.Content[1].Data = "", ""
	}
	return encodedLen(c)
}

// render builds storage_get's result for data read at offset of obj,
// spending at most budget bytes of encoded output on the data itself, and
// returns the data's encoded length (inside its JSON string).
func render(call *service.Call, obj objects.Object, data []byte, offset int64, budget int) (*tool.Result, int) {
	if budget < 0 {
		budget = 0
	}
	res := getResult{Object: obj, Offset: offset}
	more := offset+int64(len(data)) < obj.Size
	var payload tool.Content
	encoded := 0
	mt, image := isImage(obj.ContentType)
	text, textLen := "", 0
	if len(data) > 0 && isText(obj.ContentType) && textOK(data, more) {
		text, textLen = fitText(string(trimIf(data, more)), budget)
	}
	switch {
	case len(data) == 0:
		res.Encoding = "text"
	// An image block only when the bytes are that image: a model shown
	// "image/png" over bytes that are not PNG gets base64 instead.
	case image && offset == 0 && !more && base64.StdEncoding.EncodedLen(len(data)) <= budget && http.DetectContentType(data) == mt:
		res.Encoding = "image"
		payload = tool.Image(data, mt)
		encoded = len(payload.Data)
	case text != "":
		res.Encoding = "text"
		data = data[:len(text)]
		payload = tool.Text(text)
		encoded = textLen
	default:
		res.Encoding = "base64"
		if max := budget / 4 * 3; len(data) > max {
			data = data[:max]
		}
		payload = tool.Text(encodeBase64(call, data))
		encoded = len(payload.Text)
	}
	res.Length = int64(len(data))
	if end := offset + res.Length; end < obj.Size {
		res.NextOffset = &end
	}
	blocks := []tool.Content{tool.Text(getHeader(res))}
	if payload.Type != "" && res.Length > 0 {
		blocks = append(blocks, payload)
	} else {
		encoded = 0
	}
	return structured(res, blocks...), encoded
}

func trimIf(data []byte, more bool) []byte {
	if more {
		return trimPartialRune(data)
	}
	return data
}

// textOK reports whether data can go out as text: valid UTF-8, allowing an
// incomplete character at the end when the object continues.
func textOK(data []byte, more bool) bool {
	if more {
		data = trimPartialRune(data)
	}
	return utf8.Valid(data)
}

func getHeader(r getResult) string {
	size := r.Size
	var b strings.Builder
	fmt.Fprintf(&b, "%q: %s, %d bytes", r.Key, orUnknown(r.ContentType), size)
	switch {
	case r.Length == 0 && r.Offset >= size && r.Offset > 0:
		fmt.Fprintf(&b, "; offset %d is at or past the end, no data", r.Offset)
	case size == 0:
		b.WriteString("; empty")
	case r.Length == 0:
		b.WriteString("; no data fits in the output limit")
	default:
		fmt.Fprintf(&b, "; bytes %d-%d as %s", r.Offset, r.Offset+r.Length-1, r.Encoding)
	}
	if r.NextOffset != nil {
		fmt.Fprintf(&b, "; more: call storage_get with offset %d, or storage_presign for a download URL", *r.NextOffset)
	}
	return b.String()
}

func orUnknown(ct string) string {
	if ct == "" {
		return "unknown type"
	}
	return ct
}

// encodeBase64 is standard base64 of data. Its string shares a pooled
// buffer that goes back to the pool once call's result is written (call
// nil: a fresh buffer), since the base64 of a large object is most of the
// call's allocation.
func encodeBase64(call *service.Call, data []byte) string {
	if len(data) == 0 {
		return ""
	}
	n := b64.StdEncoding.EncodedLen(len(data))
	var buf []byte
	if call == nil || n > maxPooledBytes {
		buf = make([]byte, n)
	} else {
		h := encodeBuffers.Get()
		buf = slices.Grow(*h, n)[:n]
		call.OnWritten(func() { encodeBuffers.Put(h, buf) })
	}
	b64.StdEncoding.Encode(buf, data)
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

// maxPooledBytes bounds the buffers storage_get keeps for reuse: 4 MiB,
// twice the largest output limit a binding may set.
const maxPooledBytes = 4 << 20

// getBuffers hold objects' bytes as read; encodeBuffers their base64.
var getBuffers, encodeBuffers = bufpool.New(maxPooledBytes), bufpool.New(maxPooledBytes)
