package tools

// Descriptions and JSON Schemas (draft 2020-12) of the storage tools. The
// host validates arguments against the input schemas and successful
// structured_content against the output schemas; the handlers check the
// same rules again, since a service cannot rely on its caller.

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

const getSchema = `{
  "type": "object",
  "properties": {
    "key": ` + keyProperty + `,
    "max_bytes": {"type": "integer", "minimum": 1, "description": "Read at most this many bytes (the output limit applies too)."},
    "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to start reading at; default 0."}
  },
  "required": ["key"],
  "additionalProperties": false
}`

const keySchema = `{
  "type": "object",
  "properties": {"key": ` + keyProperty + `},
  "required": ["key"],
  "additionalProperties": false
}`

const listSchema = `{
  "type": "object",
  "properties": {
    "prefix": {"type": "string", "maxLength": 1024, "description": "Only keys starting with this, e.g. \"reports/\"; default all."},
    "cursor": {"type": "string", "maxLength": 2048, "description": "next_cursor of the previous page."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Objects per page; default 100."}
  },
  "additionalProperties": false
}`

const presignSchema = `{
  "type": "object",
  "properties": {
    "key": ` + keyProperty + `,
    "method": {"type": "string", "enum": ["GET", "PUT"], "description": "GET to download (default), PUT to upload."},
    "expires_seconds": {"type": "integer", "minimum": 1, "maximum": 604800, "description": "Lifetime of the URL; default 3600."},
    "content_type": {"type": "string", "maxLength": 255, "description": "PUT only: the Content-Type the upload must send."}
  },
  "required": ["key"],
  "additionalProperties": false
}`

const objectProperties = `
    "key": {"type": "string"},
    "size": {"type": "integer", "minimum": 0},
    "content_type": {"type": "string"},
    "etag": {"type": "string"},
    "last_modified": {"type": "string", "format": "date-time"},
    "metadata": {"type": "object", "additionalProperties": {"type": "string"}}`

const objectOutSchema = `{
  "type": "object",
  "properties": {` + objectProperties + `
  },
  "required": ["key", "size"]
}`

const getOutSchema = `{
  "type": "object",
  "properties": {` + objectProperties + `,
    "offset": {"type": "integer", "minimum": 0},
    "length": {"type": "integer", "minimum": 0},
    "encoding": {"enum": ["text", "base64", "image"]},
    "next_offset": {"type": "integer", "minimum": 0}
  },
  "required": ["key", "size", "offset", "length", "encoding"]
}`

const listOutSchema = `{
  "type": "object",
  "properties": {
    "prefix": {"type": "string"},
    "objects": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "key": {"type": "string"},
          "size": {"type": "integer", "minimum": 0},
          "last_modified": {"type": "string", "format": "date-time"},
          "etag": {"type": "string"}
        },
        "required": ["key", "size"]
      }
    },
    "next_cursor": {"type": "string"}
  },
  "required": ["prefix", "objects"]
}`

const deleteOutSchema = `{
  "type": "object",
  "properties": {"key": {"type": "string"}, "deleted": {"type": "boolean"}},
  "required": ["key", "deleted"]
}`

const presignOutSchema = `{
  "type": "object",
  "properties": {
    "method": {"enum": ["GET", "PUT"]},
    "url": {"type": "string", "format": "uri"},
    "expires_at": {"type": "string", "format": "date-time"},
    "headers": {"type": "object", "additionalProperties": {"type": "string"}}
  },
  "required": ["method", "url", "expires_at"]
}`
