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
// Content-Type second, so that "%PDF" beats a .html URL or a text/html
// header, an HTML page behind a .pdf URL is read as HTML, and binaries
// (epub, zip, images, audio, fonts) are named and refused. It returns the
// kind and the media type to report.
//
// Rules, in order: "%PDF-" in the first 1024 bytes (where PDF readers look
// for the header) is PDF; an EPUB container is unsupported; the WHATWG MIME
// sniffing of net/http decides binary versus text; text is HTML when
// sniffed as HTML, declared as HTML or XHTML, or when its first tag is a
// typical HTML tag; JSON when declared JSON (or +json) or when it parses as
// a JSON object or array; otherwise plain text.
func Sniff(body []byte, declared string) (Kind, string) {
	head := body
	if len(head) > 1024 {
		head = head[:1024]
	}
	if bytes.Contains(head, []byte("%PDF-")) {
		return PDF, "application/pdf"
	}
	if isEPUB(body) {
		return Unsupported, "application/epub+zip"
	}
	declaredType, _, _ := mime.ParseMediaType(declared)
	declaredType = strings.ToLower(declaredType)
	sniffed, _, _ := mime.ParseMediaType(http.DetectContentType(body))
	switch {
	case sniffed == "text/html":
		return HTML, "text/html"
	case sniffed != "text/plain" && sniffed != "text/xml" && !isUTF16(body):
		if sniffed == "application/octet-stream" && declaredType != "" && declaredType != "application/octet-stream" {
			return Unsupported, declaredType
		}
		return Unsupported, sniffed
	}
	switch {
	case declaredType == "text/html" || declaredType == "application/xhtml+xml":
		return HTML, declaredType
	case looksHTML(head):
		return HTML, "text/html"
	case declaredType == "application/json" || strings.HasSuffix(declaredType, "+json"):
		return JSON, declaredType
	case looksJSON(body):
		return JSON, "application/json"
	case sniffed == "text/xml":
		return Text, "text/xml"
	case strings.HasPrefix(declaredType, "text/") || strings.HasSuffix(declaredType, "+xml") || declaredType == "application/xml":
		return Text, declaredType
	}
	return Text, "text/plain"
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
