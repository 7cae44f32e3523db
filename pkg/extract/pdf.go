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
			r.err = fmt.Errorf("read PDF: %w", err)
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
