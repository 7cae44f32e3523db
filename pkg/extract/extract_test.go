package extract

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gogs/chardet"
	"golang.org/x/net/html"

	"github.com/brain-tools/suite/pkg/extract/fixtures"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestLegacyCharsets(t *testing.T) {
	x := New()
	for _, withMeta := range []bool{true, false} {
		for _, p := range fixtures.LegacyPages(withMeta) {
			name := p.Name + map[bool]string{true: "/meta", false: "/sniffed"}[withMeta]
			t.Run(name, func(t *testing.T) {
				for _, f := range []Format{Markdown, TextFormat, HTMLFormat} {
					d, err := x.Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/page"), ContentType: "text/html", Body: p.Body}, Options{Format: f, MainContent: true})
					if err != nil {
						t.Fatal(err)
					}
					if !strings.Contains(d.Text, p.Want) {
						t.Fatalf("%s: text does not contain %q:\n%s", f, p.Want, d.Text)
					}
					wantSource := map[bool]string{true: FromMeta, false: FromSniff}[withMeta]
					if d.ContentType != "text/html; charset="+p.Charset && !(p.Charset == "gbk" && d.ContentType == "text/html; charset=gb18030") {
						t.Fatalf("content type %q, want charset %s", d.ContentType, p.Charset)
					}
					if d.CharsetSource != wantSource {
						t.Fatalf("charset source %q, want %q", d.CharsetSource, wantSource)
					}
				}
			})
		}
	}
}

func TestCharsetOrder(t *testing.T) {
	latin := []byte("<p>caf\xe9</p>")                                      // windows-1252 é
	utf8Body := []byte("\xEF\xBB\xBF<meta charset=\"koi8-r\"><p>café</p>") // BOM + a lying meta
	tests := []struct {
		name, ct string
		body     []byte
		charset  string
		source   string
		want     string
	}{
		{"bom beats header and meta", "text/html; charset=iso-8859-2", utf8Body, "utf-8", FromBOM, "café"},
		{"header beats meta", "text/html; charset=windows-1252", []byte("<meta charset=\"koi8-r\"><p>caf\xe9</p>"), "windows-1252", FromHeader, "café"},
		{"meta", "text/html", []byte("<meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1252\"><p>caf\xe9</p>"), "windows-1252", FromMeta, "café"},
		{"utf-16 meta means utf-8", "text/html", []byte("<meta charset=\"utf-16\"><p>café</p>"), "utf-8", FromMeta, "café"},
		{"valid utf-8 sniffed", "text/html", []byte("<p>café</p>"), "utf-8", FromSniff, "café"},
		{"unknown header charset falls through", "text/html; charset=x-bogus", latin, "windows-1252", FromSniff, "caf"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decode(tc.body, tc.ct, true)
			if d.Charset != tc.charset || d.Source != tc.source || !strings.Contains(d.Text, tc.want) {
				t.Fatalf("Decode = %q from %s (%q), want %q from %s containing %q", d.Charset, d.Source, d.Text, tc.charset, tc.source, tc.want)
			}
		})
	}
}

// TestDetectedTies: the detector's results come in any order, so which of
// two equally confident guesses wins must not depend on it.
func TestDetectedTies(t *testing.T) {
	latin1, latin2 := chardet.Result{Charset: "ISO-8859-1", Confidence: 30}, chardet.Result{Charset: "ISO-8859-2", Confidence: 30}
	tests := []struct {
		name string
		rs   []chardet.Result
		want string
	}{
		{"tie, most used first", []chardet.Result{latin1, latin2}, "windows-1252"},
		{"tie, most used last", []chardet.Result{latin2, latin1}, "windows-1252"},
		{"tie of two not in the candidates goes to the first name", []chardet.Result{{Charset: "Shift_JIS", Confidence: 40}, {Charset: "EUC-JP", Confidence: 40}}, "euc-jp"},
		{"more confident wins whatever its rank", []chardet.Result{latin1, {Charset: "ISO-8859-2", Confidence: 31}}, "iso-8859-2"},
		{"below 20 is no guess", []chardet.Result{{Charset: "KOI8-R", Confidence: 19}}, "windows-1252"},
		{"unknown label skipped", []chardet.Result{{Charset: "x-nonsense", Confidence: 90}, {Charset: "KOI8-R", Confidence: 25}}, "koi8-r"},
		{"GB-18030 mapped", []chardet.Result{{Charset: "GB-18030", Confidence: 50}}, "gb18030"},
		{"none", nil, "windows-1252"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := detected(tc.rs, "windows-1252"); got != tc.want {
				t.Fatalf("detected(%v) = %q, want %q", tc.rs, got, tc.want)
			}
		})
	}
}

func TestSniff(t *testing.T) {
	pdf := fixtures.PDF("T", "hello")
	tests := []struct {
		name, ct string
		body     []byte
		kind     Kind
		media    string
	}{
		{"pdf declared as html", "text/html", pdf, PDF, "application/pdf"},
		{"pdf declared as octet-stream", "application/octet-stream", pdf, PDF, "application/pdf"},
		{"html declared as pdf", "application/pdf", []byte("<!DOCTYPE html><html><body><p>hi</p></body></html>"), HTML, "text/html"},
		{"html starting with meta, declared as pdf", "application/pdf", []byte("<meta charset=utf-8><title>x</title><p>hi"), HTML, "text/html"},
		{"epub", "application/octet-stream", fixtures.EPUB(), Unsupported, "application/epub+zip"},
		{"png", "text/html", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), Unsupported, "image/png"},
		{"gzip", "", []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00"), Unsupported, "application/x-gzip"},
		{"json declared", "application/json", []byte(`{"a":1}`), JSON, "application/json"},
		{"problem+json", "application/problem+json", []byte(`{"a":1}`), JSON, "application/problem+json"},
		{"json undeclared", "text/plain", []byte(`[1,2]`), JSON, "application/json"},
		{"plain text", "text/plain", []byte("just text"), Text, "text/plain"},
		{"csv", "text/csv", []byte("a,b\n1,2\n"), Text, "text/csv"},
		{"xml", "application/xml", []byte("<?xml version=\"1.0\"?><r/>"), Text, "text/xml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, m := Sniff(tc.body, tc.ct)
			if k != tc.kind || m != tc.media {
				t.Fatalf("Sniff = %s %s, want %s %s", k, m, tc.kind, tc.media)
			}
		})
	}
}

func TestUnsupportedType(t *testing.T) {
	_, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/book"), Body: fixtures.EPUB()}, Options{Format: Markdown})
	var ut *UnsupportedTypeError
	if !errors.As(err, &ut) || !strings.Contains(err.Error(), "unsupported type application/epub+zip") {
		t.Fatalf("err = %v", err)
	}
}

func TestPDF(t *testing.T) {
	body := fixtures.PDF("Fixture Report", "Revenue grew forty two percent this quarter.", "Second page says goodbye.")
	d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/report"), ContentType: "text/html", Body: body}, Options{Format: Markdown, MainContent: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != PDF || d.ContentType != "application/pdf" || d.Title != "Fixture Report" {
		t.Fatalf("doc = %+v", d)
	}
	for _, want := range []string{"Revenue grew forty two percent this quarter.", "Second page says goodbye."} {
		if !strings.Contains(d.Text, want) {
			t.Fatalf("PDF text %q lacks %q", d.Text, want)
		}
	}
	if _, err := New().Extract(context.Background(), Input{Body: []byte("%PDF-1.4 garbage")}, Options{}); err == nil {
		t.Fatal("a broken PDF extracted without error")
	}
}

func TestJSONAndText(t *testing.T) {
	x := New()
	d, err := x.Extract(context.Background(), Input{ContentType: "application/json", Body: []byte(`{"b":[1,2],"a":"é"}`)}, Options{Format: Markdown})
	if err != nil || d.Text != "{\n  \"b\": [\n    1,\n    2\n  ],\n  \"a\": \"é\"\n}" {
		t.Fatalf("JSON = %q, %v", d.Text, err)
	}
	d, err = x.Extract(context.Background(), Input{ContentType: "text/plain", Body: []byte("  line one\n\tline two *not md*\n")}, Options{Format: Markdown})
	if err != nil || d.Text != "  line one\n\tline two *not md*\n" {
		t.Fatalf("text = %q, %v", d.Text, err)
	}
}

// fences returns the contents of the fenced code blocks of Markdown md.
func fences(md string) []string {
	var out []string
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		m := regexp.MustCompile("^(`{3,}|~{3,})").FindString(l)
		if m == "" {
			continue
		}
		var body []string
		for i++; i < len(lines) && !(strings.HasPrefix(lines[i], m) && strings.TrimLeft(lines[i], m[:1]) == ""); i++ {
			body = append(body, lines[i])
		}
		out = append(out, strings.Join(body, "\n"))
	}
	return out
}

func TestPreKeptExactly(t *testing.T) {
	x := New()
	in := Input{URL: mustURL(t, "http://example.test/code"), ContentType: "text/html; charset=utf-8", Body: fixtures.CodePage()}
	for _, mc := range []bool{true, false} {
		d, err := x.Extract(context.Background(), in, Options{Format: Markdown, MainContent: mc})
		if err != nil {
			t.Fatal(err)
		}
		got := fences(d.Text)
		if len(got) != len(fixtures.PreBlocks) {
			t.Fatalf("main=%v: %d fenced blocks, want %d:\n%s", mc, len(got), len(fixtures.PreBlocks), d.Text)
		}
		for i, want := range fixtures.PreBlocks {
			// A fence's content ends before the closing fence line, so one
			// final newline of the <pre> is the line break before it.
			if got[i] != strings.TrimSuffix(want, "\n") {
				t.Errorf("main=%v block %d:\n got %q\nwant %q", mc, i, got[i], want)
			}
		}
		if !regexp.MustCompile("\\| Precedence +\\| Operator +\\|\n").MatchString(d.Text) ||
			!regexp.MustCompile("\\| 4 +\\| `\\+ - \\\\\\| \\^` +\\|\n").MatchString(d.Text) {
			t.Errorf("main=%v: table not kept:\n%s", mc, d.Text)
		}
	}
	for _, f := range []Format{TextFormat, HTMLFormat} {
		d, err := x.Extract(context.Background(), in, Options{Format: f, MainContent: true})
		if err != nil {
			t.Fatal(err)
		}
		text := d.Text
		if f == HTMLFormat {
			text = htmlText(t, d.Text)
		}
		for i, want := range fixtures.PreBlocks {
			if !strings.Contains(text, want) {
				t.Errorf("%s: block %d %q missing from:\n%s", f, i, want, text)
			}
		}
		if f == TextFormat && !strings.Contains(text, "5\t* / %") {
			t.Errorf("text: table row not tab-separated:\n%s", text)
		}
	}
}

func htmlText(t *testing.T, s string) string {
	n, err := html.Parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return textOf(n)
}

func TestBaseHref(t *testing.T) {
	x := New()
	page := fixtures.BasePage("https://cdn.example/docs/v2/")
	d, err := x.Extract(context.Background(), Input{URL: mustURL(t, "https://site.example/a/b/page.html"), ContentType: "text/html", Body: page}, Options{Format: Markdown, MainContent: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"[introduction](https://cdn.example/docs/v2/guide/intro.html)",
		"[root page](https://cdn.example/root.html)",
		"[parent page](https://cdn.example/docs/up.html?q=1#frag)",
		"[section](https://cdn.example/docs/v2/#section)",
		"![a cat](https://cdn.example/docs/v2/img/cat.png)",
		"[absolute link](https://other.example/abs)",
	} {
		if !strings.Contains(d.Text, want) {
			t.Errorf("missing %s in:\n%s", want, d.Text)
		}
	}
	h, err := x.Extract(context.Background(), Input{URL: mustURL(t, "https://site.example/a/b/page.html"), ContentType: "text/html", Body: page}, Options{Format: HTMLFormat, MainContent: true})
	if err != nil || !strings.Contains(h.Text, `srcset="https://cdn.example/docs/v2/img/cat.png 1x, https://cdn.example/docs/v2/img/cat@2x.png 2x"`) {
		t.Errorf("srcset not absolute: %v\n%s", err, h.Text)
	}
	// A relative <base href> resolves against the final URL; without one
	// the final URL is the base.
	d, _ = x.Extract(context.Background(), Input{URL: mustURL(t, "https://site.example/a/b/page.html"), ContentType: "text/html", Body: fixtures.BasePage("../c/")}, Options{Format: Markdown, MainContent: true})
	if !strings.Contains(d.Text, "(https://site.example/a/c/guide/intro.html)") {
		t.Errorf("relative base:\n%s", d.Text)
	}
	d, _ = x.Extract(context.Background(), Input{URL: mustURL(t, "https://final.example/x/y.html"), ContentType: "text/html",
		Body: []byte(`<p>See <a href="z.html">z</a> and enough words to be a page of text for the reader to take in.</p>`)}, Options{Format: Markdown, MainContent: false})
	if !strings.Contains(d.Text, "(https://final.example/x/z.html)") {
		t.Errorf("final URL as base:\n%s", d.Text)
	}
}

func TestCodeLanguageKept(t *testing.T) {
	var b strings.Builder
	b.WriteString(`<html><body><article><h1>Go code</h1>`)
	for i := 0; i < 4; i++ {
		b.WriteString(`<p>Here is a paragraph that explains the code below in enough words for readability to keep the article.</p>`)
	}
	b.WriteString(`<pre><code class="language-go">package main</code></pre></article></body></html>`)
	d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/"), ContentType: "text/html", Body: []byte(b.String())}, Options{Format: Markdown, MainContent: true})
	if err != nil || !strings.Contains(d.Text, "```go\npackage main\n```") {
		t.Fatalf("%v:\n%s", err, d.Text)
	}
}

func TestInlineImagesDropTheirData(t *testing.T) {
	data := "data:image/png;base64," + strings.Repeat("iVBORw0KGgo", 1000)
	page := []byte(`<p>A chart: <img alt="sales chart" src="` + data + `"> and <img alt="logo" src="/logo.png" srcset="` + data + ` 2x">.</p>`)
	d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/"), ContentType: "text/html", Body: page}, Options{Format: Markdown})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d.Text, "iVBOR") || !strings.Contains(d.Text, "![sales chart](data:,)") || !strings.Contains(d.Text, "![logo](http://example.test/logo.png)") {
		t.Fatalf("text %q", d.Text)
	}
}

func TestHiddenContentFallsBackToWholePage(t *testing.T) {
	page, want := fixtures.HiddenPage()
	d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/app"), ContentType: "text/html", Body: page}, Options{Format: Markdown, MainContent: true})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Fallback || !strings.Contains(d.Text, want) || strings.Contains(d.Text, "DOMContentLoaded") {
		t.Fatalf("fallback=%v text:\n%s", d.Fallback, d.Text)
	}
	if d.Title != "Hidden until scripts run" {
		t.Fatalf("title %q", d.Title)
	}
}

func TestSelector(t *testing.T) {
	x := New()
	page := []byte(`<html><body><nav>menu</nav><div class="post"><h2>One</h2><div class="post">nested</div></div><p>between</p><div class="post"><h2>Two</h2></div></body></html>`)
	in := Input{URL: mustURL(t, "http://example.test/"), ContentType: "text/html", Body: page}
	d, err := x.Extract(context.Background(), in, Options{Format: Markdown, MainContent: true, Selector: "div.post"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Text != "## One\n\nnested\n\n## Two" {
		t.Fatalf("selector text %q", d.Text)
	}
	_, err = x.Extract(context.Background(), in, Options{Format: Markdown, Selector: "article.none"})
	if err == nil || err.Error() != `selector "article.none" matched nothing on the page` {
		t.Fatalf("no match: %v", err)
	}
	_, err = x.Extract(context.Background(), Input{ContentType: "application/json", Body: []byte("{}")}, Options{Selector: "p"})
	if err == nil || !strings.Contains(err.Error(), "applies to HTML pages only") {
		t.Fatalf("selector on JSON: %v", err)
	}
	if CheckSelector("div[") == nil || CheckSelector("div > p.x") != nil {
		t.Fatal("CheckSelector")
	}
}

func TestTextFormat(t *testing.T) {
	page := []byte(`<html><head><title>T</title><style>p{}</style></head><body><h1>Head   line</h1><p>Some <b>bold</b>
	and <a href="/x">linked</a> text.</p><ul><li>one</li><li>two</li></ul><ol start="3"><li>three</li><li>four</li></ol><p>a<br>b</p><script>var x</script></body></html>`)
	d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/"), ContentType: "text/html", Body: page}, Options{Format: TextFormat})
	if err != nil {
		t.Fatal(err)
	}
	want := "Head line\n\nSome bold and linked text.\n\n- one\n- two\n\n3. three\n4. four\n\na\nb"
	if d.Text != want {
		t.Fatalf("text:\n%q\nwant\n%q", d.Text, want)
	}
}

func TestPaginate(t *testing.T) {
	s := "ab€d😀f" // 1, 1, 3, 1, 4, 1 bytes
	tests := []struct {
		start, max int
		page       string
		next       int
	}{
		{0, 3, "ab€", 3},
		{2, 1, "€", 3},
		{3, 2, "d😀", 5},
		{4, 1, "😀", 5},
		{5, 10, "f", 0},
		{0, 6, s, 0},
		{0, 100, s, 0},
	}
	for _, tc := range tests {
		page, total, next, err := Paginate(s, tc.start, tc.max)
		if err != nil || page != tc.page || total != 6 || next != tc.next || !utf8.ValidString(page) {
			t.Errorf("Paginate(%d,%d) = %q %d %d %v, want %q 6 %d", tc.start, tc.max, page, total, next, err, tc.page, tc.next)
		}
	}
	if _, _, _, err := Paginate(s, 6, 1); err == nil || !strings.Contains(err.Error(), "start_index 6 is past the end of the content (total_length 6)") {
		t.Errorf("past the end: %v", err)
	}
	if p, total, next, err := Paginate("", 0, 5); err != nil || p != "" || total != 0 || next != 0 {
		t.Errorf("empty: %q %d %d %v", p, total, next, err)
	}
	// Pages of every size join back to the whole.
	for max := 1; max <= 7; max++ {
		var b strings.Builder
		for start := 0; ; {
			page, _, next, err := Paginate(s, start, max)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(page)
			if next == 0 {
				break
			}
			start = next
		}
		if b.String() != s {
			t.Errorf("max %d: joined %q", max, b.String())
		}
	}
}

// TestHTMLFormatIsSafe: format=html keeps the page's structure and text but
// nothing a browser would run, whether readability picked the article or
// the whole page is used.
func TestHTMLFormatIsSafe(t *testing.T) {
	page := []byte(`<html><head><title>T</title><style>body{color:red}</style><script>alert(1)</script></head><body>
<h2 id="intro" onclick="steal()">Intro</h2>
<p>Some <a href="javascript:alert(2)">bad link</a>, a <a href="https://ok.example/x" rel="author">good link</a> and <b>bold</b> text.</p>
<img src="https://ok.example/cat.png" srcset="https://ok.example/cat2.png 2x" onerror="steal()" alt="cat">
<iframe src="https://evil.example/frame"></iframe><form action="https://evil.example/post"><input name="q"></form>
<pre><code class="language-go">fmt.Println("&lt;hi&gt;")</code></pre>
<table><tr><th>a</th></tr><tr><td>1</td></tr></table>
<svg><script>alert(3)</script></svg><object data="x.swf"></object>
<p style="background:url(javascript:alert(4))">styled paragraph with enough words to be a real part of the page for readability.</p>
</body></html>`)
	for _, main := range []bool{true, false} {
		d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "https://site.example/p.html"), ContentType: "text/html", Body: page}, Options{Format: HTMLFormat, MainContent: main})
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"<script", "alert(", "steal()", "javascript:", "<iframe", "<form", "<input", "<style", "style=", "<object", "onerror", "onclick"} {
			if strings.Contains(d.Text, bad) {
				t.Errorf("main=%v: output keeps %q:\n%s", main, bad, d.Text)
			}
		}
		for _, good := range []string{`<a href="https://ok.example/x" rel="author">good link</a>`, "<b>bold</b>", `<img src="https://ok.example/cat.png" srcset="https://ok.example/cat2.png 2x" alt="cat"`, `<code class="language-go">`, "<td>1</td>", "styled paragraph"} {
			if !strings.Contains(d.Text, good) {
				t.Errorf("main=%v: output lost %q:\n%s", main, good, d.Text)
			}
		}
	}
}

// TestActiveLinksDropped: a javascript: (or vbscript:, data:) link, however
// it is spelled, keeps its text and loses its target in every format.
func TestActiveLinksDropped(t *testing.T) {
	page := []byte("<html><body><article><h1>Links</h1><p>" +
		`<a href="javascript:alert(1)">one</a>, <a href="JaVaScRiPt:alert(2)">two</a>, <a href="java` + "\t" + `script:alert(3)">three</a>, ` +
		`<a href=" &#106;avascript:alert(4)">four</a>, <a href="vbscript:msgbox(5)">five</a>, <a href="data:text/html,&lt;script&gt;">six</a>, ` +
		`<a href="/ok">fine</a> and <a href="mailto:a@example.com">mail</a>. ` +
		`<img src="javascript:alert(7)" srcset="javascript:alert(8) 2x, /cat.png 1x" alt="cat">` +
		"Enough words here for readability to take this paragraph as the article of the page, and a few more.</p></article></body></html>")
	for _, f := range []Format{Markdown, TextFormat, HTMLFormat} {
		for _, main := range []bool{true, false} {
			d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "https://site.example/p.html"), ContentType: "text/html", Body: page}, Options{Format: f, MainContent: main})
			if err != nil {
				t.Fatal(err)
			}
			lower := strings.ToLower(d.Text)
			for _, bad := range []string{"javascript", "vbscript", "data:", "alert(", "msgbox"} {
				if strings.Contains(lower, bad) {
					t.Errorf("%s main=%v keeps %q:\n%s", f, main, bad, d.Text)
				}
			}
			for _, good := range []string{"one", "two", "three", "four", "five", "six", "https://site.example/ok", "mailto:a@example.com"} {
				if f != TextFormat && !strings.Contains(d.Text, good) || f == TextFormat && !strings.HasPrefix(good, "http") && !strings.HasPrefix(good, "mailto") && !strings.Contains(d.Text, good) {
					t.Errorf("%s main=%v lost %q:\n%s", f, main, good, d.Text)
				}
			}
		}
	}
}
