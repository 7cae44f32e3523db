package extract

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
)

// Kind is what a body really is, whatever its URL or header claims.
type Kind int

// The kinds Extract handles; Unsupported is everything else.
const (
	Unsupported Kind = iota
	HTML
	PDF
	JSON
	Text
)

func (k Kind) String() string {
	switch k {
	case HTML:
		return "html"
	case PDF:
		return "pdf"
	case JSON:
		return "json"
	case Text:
		return "text"
	}
	return "unsupported"
}

var (
	bomUTF8    = []byte{0xEF, 0xBB, 0xBF}
	bomUTF16BE = []byte{0xFE, 0xFF}
	bomUTF16LE = []byte{0xFF, 0xFE}
)

// Sniff decides what body is from its bytes first and the declared
// Content-Type second, so that a PDF is read as a PDF behind a .html URL
// or a text/html header, an HTML page behind a .pdf URL is read as HTML,
// and binaries (epub, zip, images, audio, fonts) are named and refused. It
// returns the kind and the media type to report.
//
// Rules, in order: a body that starts with "%PDF-" is a PDF; one that has
// "%PDF-" later in its first 1024 bytes (where PDF readers look for the
// header) is a PDF unless it is declared or looks like text or HTML (a
// page quoting the marker is not a PDF); an EPUB container is unsupported;
// the WHATWG MIME sniffing of net/http names binary signatures (images,
// archives, fonts…); bytes it cannot name are text when the header
// declares a text type and they hold no NUL and few control bytes (logs
// carry BEL and backspace), binary otherwise; text is HTML when sniffed as
// HTML, declared as HTML or XHTML, or when its first tag is a typical HTML
// tag; JSON when declared JSON (or +json) or when it parses as a JSON
// object or array; otherwise plain text.
func Sniff(body []byte, declared string) (Kind, string) {
	s := sniff(body, declared)
	return s.kind, s.mediaType
}

// sniffed is Sniff's finding, with what an error message needs.
type sniffed struct {
	kind      Kind
	mediaType string
	// declared is the declared media type, lower-case ("" when none).
	declared string
	// binary reports bytes that are not text whatever the header says.
	binary bool
}

func sniff(body []byte, declared string) sniffed {
	head := body
	if len(head) > 1024 {
		head = head[:1024]
	}
	declaredType, _, _ := mime.ParseMediaType(declared)
	declaredType = strings.ToLower(declaredType)
	textual := isTextual(declaredType)
	if isPDF(head, declaredType, textual) {
		return sniffed{kind: PDF, mediaType: "application/pdf", declared: declaredType}
	}
	if isEPUB(body) {
		return sniffed{kind: Unsupported, mediaType: "application/epub+zip", declared: declaredType, binary: true}
	}
	detected, _, _ := mime.ParseMediaType(http.DetectContentType(body))
	switch {
	case detected == "text/html":
		return sniffed{kind: HTML, mediaType: "text/html", declared: declaredType}
	case isUTF16(body), detected == "text/plain", detected == "text/xml":
	case detected == "application/octet-stream" && textual && !looksBinary(head):
		// Control bytes WHATWG sniffing takes for binary, in a body the
		// server says is text: a log with BEL or backspace.
	case detected == "application/octet-stream":
		t := declaredType
		if t == "" || textual {
			t = "application/octet-stream"
		}
		return sniffed{kind: Unsupported, mediaType: t, declared: declaredType, binary: true}
	default:
		return sniffed{kind: Unsupported, mediaType: detected, declared: declaredType, binary: true}
	}
	k, t := textKind(head, body, declaredType, detected)
	return sniffed{kind: k, mediaType: t, declared: declaredType}
}

// textKind sorts a text body into HTML, JSON or plain text.
func textKind(head, body []byte, declaredType, detected string) (Kind, string) {
	switch {
	case declaredType == "text/html" || declaredType == "application/xhtml+xml":
		return HTML, declaredType
	case looksHTML(head):
		return HTML, "text/html"
	case declaredType == "application/json" || strings.HasSuffix(declaredType, "+json"):
		return JSON, declaredType
	case looksJSON(body):
		return JSON, "application/json"
	case detected == "text/xml":
		return Text, "text/xml"
	case strings.HasPrefix(declaredType, "text/") || strings.HasSuffix(declaredType, "+xml") || declaredType == "application/xml":
		return Text, declaredType
	}
	return Text, "text/plain"
}

// isTextual reports a declared type that promises text.
func isTextual(t string) bool {
	switch {
	case strings.HasPrefix(t, "text/"), strings.HasSuffix(t, "+xml"), strings.HasSuffix(t, "+json"):
		return true
	}
	switch t {
	case "application/json", "application/xml", "application/xhtml+xml", "application/javascript", "application/x-ndjson", "application/yaml", "application/x-yaml", "application/toml":
		return true
	}
	return false
}

// pdfMarker is the PDF header (ISO 32000-1, 7.5.2).
var pdfMarker = []byte("%PDF-")

// isPDF: "%PDF-" first (after a byte order mark or white space) is a PDF;
// later in the first 1024 bytes, only when neither the header nor the bytes
// before it say text.
func isPDF(head []byte, declaredType string, textual bool) bool {
	i := bytes.Index(head, pdfMarker)
	if i < 0 {
		return false
	}
	if len(bytes.TrimLeft(bytes.TrimPrefix(head[:i], bomUTF8), " \t\r\n\f\x00")) == 0 {
		return true
	}
	return !textual && !looksHTML(head) && (declaredType == "application/pdf" || declaredType == "application/x-pdf" || looksBinary(head[:i]))
}

// looksBinary reports bytes that are not text in any charset: a NUL, or
// more than a quarter of them control bytes the WHATWG MIME sniffing
// standard calls binary data bytes (0x00-0x08, 0x0B, 0x0E-0x1A, 0x1C-0x1F).
// A terminal log's BEL and backspaces stay well under that; binary formats
// have NULs in their first bytes.
func looksBinary(b []byte) bool {
	n := 0
	for _, c := range b {
		switch {
		case c == 0:
			return true
		case c <= 0x08, c == 0x0B, c >= 0x0E && c <= 0x1A, c >= 0x1C && c <= 0x1F:
			n++
		}
	}
	return n*4 > len(b)
}

func isUTF16(b []byte) bool {
	return bytes.HasPrefix(b, bomUTF16BE) || bytes.HasPrefix(b, bomUTF16LE)
}

// isEPUB recognises the OCF container: a zip whose first entry is the
// uncompressed file "mimetype" holding application/epub+zip.
func isEPUB(b []byte) bool {
	return len(b) > 58 && bytes.HasPrefix(b, []byte("PK\x03\x04")) &&
		bytes.Equal(b[30:38], []byte("mimetype")) && bytes.HasPrefix(b[38:], []byte("application/epub+zip"))
}

// htmlStarts are first tags that only HTML documents open with; net/http's
// sniffer misses pages that start with <meta> or <link>, for example.
var htmlStarts = []string{"<!doctype html", "<html", "<head", "<meta", "<link", "<title", "<body", "<div", "<p>", "<h1", "<table", "<!--", "<script", "<style", "<base"}

func looksHTML(head []byte) bool {
	h := bytes.TrimLeft(bytes.TrimPrefix(head, bomUTF8), " \t\r\n\f")
	if len(h) == 0 || h[0] != '<' {
		return false
	}
	lower := strings.ToLower(string(h[:min(len(h), 64)]))
	for _, s := range htmlStarts {
		if strings.HasPrefix(lower, s) {
			return true
		}
	}
	return false
}

func looksJSON(body []byte) bool {
	t := bytes.TrimSpace(bytes.TrimPrefix(body, bomUTF8))
	if len(t) == 0 || (t[0] != '{' && t[0] != '[') {
		return false
	}
	return json.Valid(t)
}
