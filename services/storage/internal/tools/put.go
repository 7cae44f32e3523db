package tools

import (
	"bytes"
	"context"
	"fmt"
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/brain-tools/suite/pkg/bufpool"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/strictjson"
	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/storage/internal/keys"
)

// MaxMetadataBytes is S3's limit on user-defined metadata: 2 KB of keys and
// values together.
const MaxMetadataBytes = 2048

type putArgs struct {
	Key         string            `json:"key"`
	Text        *string           `json:"text"`
	DataBase64  *upload           `json:"data_base64"`
	ContentType string            `json:"content_type"`
	Metadata    map[string]string `json:"metadata"`
}

// upload is data_base64's bytes, decoded straight from the request into a
// recycled buffer (strictjson.AppendBase64): a 256 KiB upload costs no
// fresh allocation once the service is warm.
type upload struct {
	data []byte
	buf  *[]byte
}

// UnmarshalJSONFrom implements json.UnmarshalerFrom.
func (u *upload) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	h := uploadBuffers.Get()
	data, err := strictjson.AppendBase64(*h, dec)
	if err != nil {
		uploadBuffers.Put(h, *h)
		return err
	}
	u.data, u.buf = data, h
	return nil
}

// release returns u's buffer to the pool; u.data is not used after.
func (u *upload) release() {
	if u.buf != nil {
		uploadBuffers.Put(u.buf, u.data)
	}
	u.data, u.buf = nil, nil
}

// uploadBuffers hold decoded uploads.
var uploadBuffers = bufpool.New(maxPooledBytes)

// Validate holds what putSchema cannot say: the key rules
// (keys.Validate), a content type that parses, and metadata that S3
// stores as given, within its 2 KB.
func (a *putArgs) Validate() error {
	if err := keys.Validate(a.Key); err != nil {
		return &strictjson.FieldError{Field: "key", Problem: err.Error()}
	}
	if a.ContentType != "" {
		if _, _, err := mime.ParseMediaType(a.ContentType); err != nil {
			return &strictjson.FieldError{Field: "content_type", Problem: fmt.Sprintf("%q is not a media type: %v", a.ContentType, err)}
		}
	}
	return validateMetadata(a.Metadata)
}

// validateMetadata applies S3's rules for user metadata, which travels as
// x-amz-meta-* headers, beyond the names of lower-case letters, digits,
// '-' and '_' and the values of printable ASCII that putSchema holds:
// values without surrounding spaces, 2 KB in all.
func validateMetadata(m map[string]string) error {
	total := 0
	for k, v := range m {
		// HTTP trims header values, so S3 would store a different value
		// than the one given (and storage_head would show it).
		if strings.TrimSpace(v) != v {
			return &strictjson.FieldError{Field: "metadata." + k, Problem: "value starts or ends with a space, which S3 would not keep"}
		}
		total += len(k) + len(v)
	}
	if total > MaxMetadataBytes {
		return &strictjson.FieldError{Field: "metadata", Problem: fmt.Sprintf("%d bytes of names and values, more than S3's %d", total, MaxMetadataBytes)}
	}
	return nil
}

func (t *Tools) put(ctx context.Context, call *service.Call, a putArgs) (*tool.Result, error) {
	ns, bad := t.namespace(call)
	if bad != nil {
		return bad, nil
	}
	if bad := checkKey(ns, "key", a.Key); bad != nil {
		return bad, nil
	}
	var body []byte
	contentType := a.ContentType
	if a.Text != nil {
		body = []byte(*a.Text)
		if contentType == "" {
			contentType = textType(a.Key)
		}
	} else {
		body = a.DataBase64.data
		// The SDK has sent the bytes when Put returns: the buffer can
		// serve the next upload.
		defer a.DataBase64.release()
		if contentType == "" {
			contentType = binaryType(a.Key, body)
		}
	}
	if int64(len(body)) > t.cfg.MaxPutBytes {
		field := "data_base64"
		if a.Text != nil {
			field = "text"
		}
		return t.tooLarge(field, int64(len(body))), nil
	}
	obj, err := t.store.Put(ctx, ns, a.Key, body, contentType, a.Metadata)
	if err != nil {
		return failure(err, true), nil
	}
	return structured(obj, tool.Text(fmt.Sprintf("stored %q: %d bytes, %s, etag %s", obj.Key, obj.Size, obj.ContentType, obj.ETag))), nil
}

func (t *Tools) tooLarge(field string, n int64) *tool.Result {
	return fieldErr(field, "%d bytes, more than the %d bytes (%s) storage_put takes; nothing was stored; upload larger objects with storage_presign (method PUT)", n, t.cfg.MaxPutBytes, sizeText(t.cfg.MaxPutBytes))
}

// putTool is storage_put with its answer to a request over
// MAX_REQUEST_BYTES: an is_error result that names the argument and the
// put limit, as for any other put over the limit, instead of the
// runtime's bare 413, which the host would record as an unknown outcome
// although nothing was written.
func (t *Tools) putTool(b tool.Binding) service.Tool {
	st := service.NewTool(b, t.put)
	st.TooLarge = func(head []byte, limit int64) *tool.Result {
		return fieldErr(bigArgument(head), "the request is more than %d bytes (MAX_REQUEST_BYTES), so its data is more than the %d bytes (%s) storage_put takes; nothing was stored; upload larger objects with storage_presign (method PUT)",
			limit, t.cfg.MaxPutBytes, sizeText(t.cfg.MaxPutBytes))
	}
	return st
}

// bigArgument names the argument a request cut off at head was sending
// when it ran out: the member of "arguments" whose value head does not
// finish, text or data_base64 in any request that got this far. It falls
// back to "data_base64 or text".
func bigArgument(head []byte) string {
	dec := jsontext.NewDecoder(bytes.NewReader(head), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	name, inArgs := "", false
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			break
		}
		// A string token is an object member's name when it leaves the
		// object holding an odd count of names and values.
		depth := dec.StackDepth()
		kind, n := dec.StackIndex(depth)
		isName := tok.Kind() == '"' && kind == '{' && n%2 == 1
		switch {
		case depth == 1 && isName:
			inArgs = tok.String() == "arguments"
		case depth == 2 && inArgs && isName:
			name = tok.String()
		}
	}
	if name == "text" || name == "data_base64" {
		return name
	}
	return "data_base64 or text"
}

// textType picks a text content type from the key's extension, falling
// back to text/plain.
func textType(key string) string {
	if ct := mime.TypeByExtension(path.Ext(key)); ct != "" && isText(ct) {
		if !strings.Contains(ct, "charset") {
			ct += "; charset=utf-8"
		}
		return ct
	}
	return "text/plain; charset=utf-8"
}

// binaryType picks a content type from the key's extension, then from the
// bytes (net/http's sniffing), so images come back as image blocks. A
// charset=utf-8 that either source claims is kept only when the bytes are
// UTF-8: "notes.txt" holding Latin-1 is text/plain, with no charset, since
// none can be told from the bytes.
func binaryType(key string, body []byte) string {
	ct := mime.TypeByExtension(path.Ext(key))
	if ct == "" {
		ct = http.DetectContentType(body)
	}
	if !utf8.Valid(body) {
		ct = withoutUTF8(ct)
	}
	return ct
}

// withoutUTF8 drops a charset=utf-8 parameter from contentType.
func withoutUTF8(contentType string) string {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.EqualFold(params["charset"], "utf-8") {
		return contentType
	}
	delete(params, "charset")
	return mime.FormatMediaType(mt, params)
}

// isText reports whether bytes of this content type should be returned as
// text: text/*, JSON, XML, YAML, JavaScript and the +json/+xml suffixes.
func isText(contentType string) bool {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	if strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") || strings.HasSuffix(mt, "+yaml") {
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript", "application/ecmascript",
		"application/x-yaml", "application/yaml", "application/toml", "application/x-ndjson",
		"application/sql", "application/x-sh", "application/csv", "application/graphql":
		return true
	}
	_, hasCharset := params["charset"]
	return hasCharset && mt != "application/octet-stream"
}

// imageTypes are the image types returned as image blocks.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

func isImage(contentType string) (string, bool) {
	mt, _, err := mime.ParseMediaType(contentType)
	return mt, err == nil && imageTypes[mt]
}
