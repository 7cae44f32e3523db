package extract

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/text/encoding/charmap"

	"github.com/brain-tools/suite/pkg/extract/fixtures"
)

// The fetcher failures a new user met (issue 20), one test each.

// TestControlBytesInText: CI and terminal logs carry BEL and backspace; a
// body declared text/plain is text, control bytes and all.
func TestControlBytesInText(t *testing.T) {
	body := "step 1: ok\x07\nprogress 10%\x08\x08\x0850%\n\x1b[32mgreen\x1b[0m done\n"
	for _, ct := range []string{"text/plain; charset=utf-8", "text/plain", "text/x-log"} {
		d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/ci.log"), ContentType: ct, Body: []byte(body)}, Options{Format: Markdown})
		if err != nil {
			t.Fatalf("%s: %v", ct, err)
		}
		if d.Kind != Text || d.Text != body {
			t.Fatalf("%s: kind %v, text %q", ct, d.Kind, d.Text)
		}
	}
}

// TestPDFMarkerInsideText: "%PDF-" quoted near the top of an HTML page or a
// text file does not make it a PDF; a PDF starts with it.
func TestPDFMarkerInsideText(t *testing.T) {
	page := `<!doctype html><title>PDF signatures</title><p>Every PDF file starts with %PDF-1.7 followed by a binary comment.</p>` + strings.Repeat("<p>More about the format of the file header.</p>", 20)
	tests := []struct {
		name, ct, body string
		kind           Kind
	}{
		{"html", "text/html", page, HTML},
		{"html undeclared", "", page, HTML},
		{"text", "text/plain", "Notes\nA PDF begins %PDF-1.4 and ends %%EOF.\n", Text},
		{"markdown", "text/markdown", "# Notes\n\n`%PDF-1.4` is the header.\n", Text},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/x"), ContentType: tc.ct, Body: []byte(tc.body)}, Options{Format: TextFormat})
			if err != nil {
				t.Fatal(err)
			}
			if d.Kind != tc.kind || !strings.Contains(d.Text, "%PDF-1.") {
				t.Fatalf("kind %v, text %q", d.Kind, d.Text)
			}
		})
	}
	// A real PDF is still a PDF, whatever it is declared as.
	for _, ct := range []string{"application/pdf", "text/html", ""} {
		if k, _ := Sniff(fixtures.PDF("T", "hello"), ct); k != PDF {
			t.Errorf("a PDF declared %q sniffs as %v", ct, k)
		}
	}
}

// TestTextKeepsParagraphs: format=text separates the paragraphs readability
// rebuilds from <br><br> and <div>s, and <br><br> inside <pre> is two line
// breaks.
func TestTextKeepsParagraphs(t *testing.T) {
	filler := strings.Repeat("This sentence is here so that the article is long enough to be the main content. ", 6)
	page := `<!doctype html><html><head><title>T</title></head><body><nav><a href="/">Home</a></nav><article>` +
		`<div>alpha ` + filler + `<br><br>beta ` + filler + `<br><br>gamma ` + filler + `</div>` +
		`<div>delta ` + filler + `</div><div>epsilon ` + filler + `</div>` +
		`<p>The program:</p><pre>line one<br><br>line three<br>func main() { fmt.Println("hello, world") }<br>// a comment that makes this block long enough to stay</pre><p>` + filler + `</p></article></body></html>`
	for _, main := range []bool{true, false} {
		d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/a"), ContentType: "text/html", Body: []byte(page)}, Options{Format: TextFormat, MainContent: main})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{"alpha", "beta", "gamma", "delta", "epsilon"} {
			if i := strings.Index(d.Text, w); i < 0 || (w != "alpha" && !strings.HasSuffix(d.Text[:i], "\n")) {
				t.Errorf("main=%v: %q does not start a line:\n%s", main, w, d.Text)
			}
		}
		if strings.Contains(d.Text, "content.beta") || strings.Contains(d.Text, "content.delta") {
			t.Errorf("main=%v: paragraphs glued:\n%s", main, d.Text)
		}
		if !strings.Contains(d.Text, "line one\n\nline three") {
			t.Errorf("main=%v: <br><br> in <pre> is not two line breaks:\n%q", main, d.Text)
		}
	}
}

// TestTablesAreNotPadded: a 44-row table costs about what its cells do, not
// a multiple of it in alignment spaces (max_length is counted in
// characters); within 1.5 times a plain rendering.
func TestTablesAreNotPadded(t *testing.T) {
	var b, plain strings.Builder
	b.WriteString("<table><tr><th>Name</th><th>Description</th><th>Since</th></tr>")
	plain.WriteString("| Name | Description | Since |\n| --- | --- | --- |\n")
	for i := range 44 {
		name := fmt.Sprintf("item%d", i)
		desc := strings.Repeat("word ", 1+(i*7)%23) + "end"
		if i == 17 {
			desc = strings.Repeat("a very long description ", 12)
		}
		since := fmt.Sprintf("v1.%d", i)
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td></tr>", name, desc, since)
		fmt.Fprintf(&plain, "| %s | %s | %s |\n", name, strings.TrimSpace(desc), since)
	}
	b.WriteString("</table>")
	d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/t"), ContentType: "text/html", Body: []byte(b.String())}, Options{Format: Markdown})
	if err != nil {
		t.Fatal(err)
	}
	got, want := len(d.Text), plain.Len()
	if float64(got) > 1.5*float64(want) {
		t.Fatalf("table is %d characters, plain rendering %d (%.1f×):\n%s", got, want, float64(got)/float64(want), d.Text)
	}
	t.Logf("44-row table: %d characters, plain rendering %d (%.2f×)", got, want, float64(got)/float64(want))
	if !strings.Contains(d.Text, "| item17 | a very long description") || !strings.Contains(d.Text, "|---|---|---|") {
		t.Fatalf("not a GFM table:\n%s", d.Text)
	}
}

// TestLinksAsWritten: an anchor without href is its text, an empty one is
// nothing, and a link's query string stays as the page wrote it.
func TestLinksAsWritten(t *testing.T) {
	page := `<p><a name="top">Title</a> and <a id="empty"></a>then <a href="/search?q=a+b&amp;lang=en">search</a> and <a href="https://other.example/x?y=1+2#frag">other</a>.</p>`
	d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/p"), ContentType: "text/html", Body: []byte(page)}, Options{Format: Markdown})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"[Title]()", "[]()"} {
		if strings.Contains(d.Text, bad) {
			t.Errorf("Markdown has %q:\n%s", bad, d.Text)
		}
	}
	for _, want := range []string{"Title and then", "[search](http://example.test/search?q=a+b&lang=en)", "[other](https://other.example/x?y=1+2#frag)"} {
		if !strings.Contains(d.Text, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, d.Text)
		}
	}
}

// TestKOI8RSniffed: a Russian page in KOI8-R that declares no charset
// reads as Russian.
func TestKOI8RSniffed(t *testing.T) {
	want := "Этот документ написан для проверки определения кодировки. В нём есть заголовок и несколько абзацев русского текста. Сегодня в Москве солнечно, температура двадцать градусов."
	for _, tc := range []struct {
		name string
		page string
	}{
		{"html", "<html><head><title>Проверка</title></head><body><h1>Проверочный документ</h1><p>" + want + "</p></body></html>"},
		{"text", "Проверочный документ\n\n" + want + "\n"},
		{"short html", "<html><head><title>Короткий текст</title></head><body><p>Короткий текст.</p></body></html>"},
		{"short text", "Короткий текст. Привет!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := charmap.KOI8R.NewEncoder().Bytes([]byte(tc.page))
			if err != nil {
				t.Fatal(err)
			}
			ct := "text/html"
			if strings.HasSuffix(tc.name, "text") {
				ct = "text/plain"
			}
			d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/ru"), ContentType: ct, Body: body}, Options{Format: TextFormat})
			if err != nil {
				t.Fatal(err)
			}
			w := want
			if strings.HasPrefix(tc.name, "short") {
				w = "Короткий текст."
			}
			if !strings.Contains(d.Text, w) || !strings.HasSuffix(d.ContentType, "charset=koi8-r") {
				t.Fatalf("%s: %q", d.ContentType, d.Text)
			}
		})
	}
}

// TestErrorsSayWhatIsWrong: binary bytes declared text/html are named as
// binary, not as an unsupported text/html; a cut-off PDF is named as cut.
func TestErrorsSayWhatIsWrong(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	random := make([]byte, 2048)
	for i := range random {
		random[i] = byte(i*131 + i/7)
	}
	pdf := fixtures.PDF("Report", "Some text on the page.")
	tests := []struct {
		name, ct string
		body     []byte
		want     string
		not      string
	}{
		{"png as html", "text/html", png, "binary data (image/png), not the text/html its Content-Type declares", "unsupported type text/html"},
		{"bytes as html", "text/html; charset=utf-8", random, "binary data, not the text/html its Content-Type declares", "unsupported type text/html"},
		{"truncated pdf", "application/pdf", pdf[:len(pdf)*2/3], "the PDF is cut short", "missing %%EOF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/x"), ContentType: tc.ct, Body: tc.body}, Options{Format: Markdown})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), tc.not) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
		})
	}
}
