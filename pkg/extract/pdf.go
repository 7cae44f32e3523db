package extract

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/ledongthuc/pdf"
)

// pdfText extracts the text of every page with github.com/ledongthuc/pdf,
// pages separated by a blank line, and the document title from the Info
// dictionary. The parser runs in its own goroutine so that ctx bounds it;
// a panic on a malformed file becomes an error.
func pdfText(ctx context.Context, body []byte) (title, text string, err error) {
	type result struct {
		title, text string
		err         error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if v := recover(); v != nil {
				r = result{err: fmt.Errorf("read PDF: malformed file (%v)", v)}
			}
			done <- r
		}()
		rd, err := pdf.NewReader(bytes.NewReader(body), int64(len(body)))
		if err != nil {
			r.err = pdfError(body, err)
			return
		}
		r.title = strings.TrimSpace(rd.Trailer().Key("Info").Key("Title").Text())
		fonts := make(map[string]*pdf.Font)
		var pages []string
		for i := 1; i <= rd.NumPage(); i++ {
			if ctx.Err() != nil {
				r.err = ctx.Err()
				return
			}
			p := rd.Page(i)
			for _, name := range p.Fonts() {
				if _, ok := fonts[name]; !ok {
					f := p.Font(name)
					fonts[name] = &f
				}
			}
			t, err := p.GetPlainText(fonts)
			if err != nil {
				r.err = fmt.Errorf("read PDF page %d: %w", i, err)
				return
			}
			if t = strings.TrimSpace(t); t != "" {
				pages = append(pages, t)
			}
		}
		r.text = strings.Join(pages, "\n\n")
	}()
	select {
	case r := <-done:
		return r.title, r.text, r.err
	case <-ctx.Done():
		return "", "", fmt.Errorf("read PDF: %w", context.Cause(ctx))
	}
}

// pdfError says what is wrong with a PDF the parser refused. A file
// without its end-of-file marker in the last 1024 bytes (ISO 32000-1,
// 7.5.5) was cut short, most often by a download that stopped; the
// parser's own words ("missing %%EOF") do not say so.
func pdfError(body []byte, err error) error {
	tail := body[max(0, len(body)-1024):]
	if !bytes.Contains(tail, []byte("%%EOF")) {
		return fmt.Errorf("read PDF: the PDF is cut short: its end-of-file marker is missing after %d bytes, so the file is incomplete (a download that stopped early, or a size limit on the server)", len(body))
	}
	return fmt.Errorf("read PDF: the file is damaged (%w)", err)
}
