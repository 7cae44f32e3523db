// Package extract turns a fetched body into text for a model: it finds the
// real type from the bytes, decodes the charset, and renders HTML (main
// content by readability, or a CSS selector's matches, or the whole page)
// as Markdown, plain text or cleaned HTML with every link absolute; PDF
// text comes from github.com/ledongthuc/pdf; JSON is pretty-printed; plain
// text passes through. Paginate cuts the result by characters.
package extract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
)

// Format is the rendering asked for.
type Format string

// Formats. They shape HTML pages; PDF, JSON and text bodies come out as
// their text whatever the format.
const (
	Markdown   Format = "markdown"
	TextFormat Format = "text"
	HTMLFormat Format = "html"
)

// Options say what to extract.
type Options struct {
	Format Format
	// MainContent runs readability; when it finds (nearly) nothing the
	// whole page is used.
	MainContent bool
	// Selector, when set, renders the matches of this CSS selector (all of
	// them, in document order) and MainContent is not applied.
	Selector string
}

// Input is a fetched body.
type Input struct {
	// URL is the final URL after redirects: the base for relative links
	// when the page has no <base href>.
	URL         *url.URL
	ContentType string
	Body        []byte
}

// Document is the extracted text and what is known about it.
type Document struct {
	Kind Kind
	// ContentType is the real media type, with the charset used for text
	// kinds ("text/html; charset=shift_jis").
	ContentType   string
	Title         string
	Text          string
	CharsetSource string
	// Fallback reports that readability found nearly nothing and the
	// whole page was rendered.
	Fallback bool
}

// UnsupportedTypeError is a body of a type Extract does not read (epub,
// images, archives, audio, other binaries).
type UnsupportedTypeError struct {
	// Type is the real type found from the bytes ("image/png"), or
	// application/octet-stream when the bytes name none.
	Type string
	// Declared is the type the Content-Type header declared, when it
	// promised text the bytes are not.
	Declared string
}

func (e *UnsupportedTypeError) Error() string {
	const read = "only HTML, PDF, JSON and plain text are read"
	if e.Declared != "" {
		if e.Type == "application/octet-stream" {
			return fmt.Sprintf("the body is binary data, not the %s its Content-Type declares; %s", e.Declared, read)
		}
		return fmt.Sprintf("the body is binary data (%s), not the %s its Content-Type declares; %s", e.Type, e.Declared, read)
	}
	return fmt.Sprintf("unsupported type %s: %s", e.Type, read)
}

var errNoMatch = errors.New("matched nothing")

// Extractor holds what is costly to build once (the Markdown converters).
// It is safe for concurrent use.
type Extractor struct {
	convs converters
}

// New returns an Extractor.
func New() *Extractor { return &Extractor{convs: newConverters()} }

// Extract reads in according to o. Errors: *UnsupportedTypeError, a
// selector that matched nothing or was applied to a non-HTML body, a PDF
// the parser cannot read.
func (x *Extractor) Extract(ctx context.Context, in Input, o Options) (*Document, error) {
	sn := sniff(in.Body, in.ContentType)
	kind, mediaType := sn.kind, sn.mediaType
	if o.Selector != "" && kind != HTML {
		return nil, fmt.Errorf("selector %q: applies to HTML pages only, this is %s", o.Selector, mediaType)
	}
	d := &Document{Kind: kind, ContentType: mediaType}
	switch kind {
	case PDF:
		title, text, err := pdfText(ctx, in.Body)
		if err != nil {
			return nil, err
		}
		d.Title, d.Text = title, text
		return d, nil
	case Unsupported:
		e := &UnsupportedTypeError{Type: mediaType}
		if sn.binary && isTextual(sn.declared) {
			e.Declared = sn.declared
		}
		return nil, e
	}
	dec := Decode(in.Body, in.ContentType, kind == HTML)
	d.ContentType = mediaType + "; charset=" + dec.Charset
	d.CharsetSource = dec.Source
	switch kind {
	case JSON:
		var b bytes.Buffer
		if err := json.Indent(&b, bytes.TrimSpace([]byte(dec.Text)), "", "  "); err != nil {
			// Declared JSON that does not parse: pass it through as text.
			d.Text = dec.Text
			return d, nil
		}
		d.Text = b.String()
		return d, nil
	case Text:
		d.Text = dec.Text
		return d, nil
	}
	res, err := selectHTML(dec.Text, in.URL, o.MainContent, o.Selector)
	if err != nil {
		if errors.Is(err, errNoMatch) {
			return nil, fmt.Errorf("selector %q %w on the page", o.Selector, errNoMatch)
		}
		return nil, fmt.Errorf("parse HTML: %w", err)
	}
	text, err := res.render(x.convs, o.Format)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", o.Format, err)
	}
	d.Title, d.Text, d.Fallback = res.title, text, res.fallback
	return d, nil
}
