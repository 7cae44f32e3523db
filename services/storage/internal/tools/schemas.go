package tools

// Descriptions of the storage tools, and storage_put's input schema, the
// one written out (the others are inferred from the argument types). The
// runtime checks every call's arguments against its tool's input schema,
// on both transports, before the handler runs; the handlers' Validate
// methods hold only what a schema cannot say.

import (
	"fmt"
	"strconv"
)

// putDescription is storage_put's description for a put limit of
// maxPut bytes: the model is told the limit in force, not a default.
func putDescription(maxPut int64) string {
	return `Store an object in your private storage under key (a path like "reports/q1.md"; no leading "/", no "." or ".." segments, at most 1024 bytes). Give exactly one of text (UTF-8) or data_base64 (binary). content_type defaults from the key's extension or the bytes; metadata is up to 2 KB of lower-case name -> ASCII value pairs. ` +
		fmt.Sprintf("This service stores at most %s (%d bytes) per storage_put; larger objects go through storage_presign with method PUT. ", sizeText(maxPut), maxPut) +
		`Overwrites an existing object.`
}

// sizeText writes n bytes for a reader: "2 MiB", "1.5 MiB", "700 KiB", "1000 bytes".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

const getDescription = `Read an object from your private storage. Text types come back as text, PNG/JPEG/GIF/WebP images as an image, anything else as base64. Large objects come back in parts: the result says which bytes it holds and the offset to continue from; max_bytes caps one part. For big downloads use storage_presign.`

const headDescription = `Describe an object in your private storage without reading it: size, content type, etag, last modified, metadata.`

const listDescription = `List objects in your private storage whose keys start with prefix, in key order, up to limit (1-1000, default 100) per call. When more remain, the result has a cursor: pass it back to get the next page.`

const deleteDescription = `Delete an object from your private storage. Deleting a key that does not exist succeeds and says so.`

const presignDescription = `Make a presigned URL for one object in your private storage, so a program or person can download (GET, the default) or upload (PUT) it directly without credentials, until it expires (expires_seconds, 1 to 604800, default 3600). For PUT, content_type is signed into the URL and must be sent as the Content-Type header.`

// keyProperty is the key argument's schema in storage_put's; the key
// fields of the other tools' argument types carry the same in their tags.
const keyProperty = `{"type": "string", "minLength": 1, "maxLength": 1024, "description": "Object key relative to your storage, e.g. \"notes/today.md\"."}`

const putSchema = `{
  "type": "object",
  "properties": {
    "key": ` + keyProperty + `,
    "text": {"type": "string", "description": "UTF-8 text to store."},
    "data_base64": {"type": "string", "contentEncoding": "base64", "description": "Binary content, standard base64."},
    "content_type": {"type": "string", "maxLength": 255, "description": "Media type, e.g. text/markdown or image/png."},
    "metadata": {
      "type": "object",
      "propertyNames": {"pattern": "^[a-z0-9_-]{1,128}$"},
      "additionalProperties": {"type": "string", "pattern": "^[\\x20-\\x7e]*$"},
      "description": "User metadata, at most 2048 bytes of names and values."
    }
  },
  "required": ["key"],
  "oneOf": [{"required": ["text"]}, {"required": ["data_base64"]}],
  "additionalProperties": false
}`
