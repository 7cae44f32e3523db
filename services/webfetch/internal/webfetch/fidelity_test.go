package webfetch

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/brain-tools/suite/pkg/extract/fixtures"
)

// fixtureServer serves every fixture page the issue lists, made at test
// time, on loopback.
func fixtureServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var bombWritten atomic.Int64
	mux := http.NewServeMux()
	for _, withMeta := range []bool{true, false} {
		for _, p := range fixtures.LegacyPages(withMeta) {
			body := p.Body
			path := fmt.Sprintf("/legacy/%s/%v", p.Name, withMeta)
			mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html") // no charset in the header
				_, _ = w.Write(body)
			})
		}
	}
	pdf := fixtures.PDF("Annual Fixture Report", "Revenue grew forty two percent this year.", "The second page closes the report.")
	mux.HandleFunc("/reports/latest", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8") // lies: the bytes are a PDF
		_, _ = w.Write(pdf)
	})
	mux.HandleFunc("/files/brochure.pdf", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf") // lies: the bytes are HTML
		_, _ = w.Write([]byte(`<!DOCTYPE html><html><head><title>Not a PDF</title></head><body><article><h1>Brochure</h1>` +
			`<p>This brochure is an HTML page that only pretends to be a PDF by its name and header, and it says so at length here.</p></article></body></html>`))
	})
	mux.HandleFunc("/books/novel", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(fixtures.EPUB())
	})
	mux.HandleFunc("/docs/a/b/page.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write(fixtures.BasePage("/static/v2/"))
	})
	hidden, _ := fixtures.HiddenPage()
	mux.HandleFunc("/app", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write(hidden)
	})
	mux.HandleFunc("/loop/a", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop/b", http.StatusFound) })
	mux.HandleFunc("/loop/b", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop/a", http.StatusFound) })
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/docs/a/b/page.html", http.StatusMovedPermanently)
	})
	member := gzipMember(t)
	mux.HandleFunc("/bomb", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		for i := 0; i < 100<<10; i++ { // 100 GiB inflated
			if _, err := w.Write(member); err != nil {
				return
			}
			bombWritten.Add(1)
		}
	})
	mux.HandleFunc("/boundary", func(w http.ResponseWriter, r *http.Request) {
		// 9 ASCII characters, then a 4-byte character at index 9: a page of
		// max_length 10 ends exactly on it.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("abcdefghi😀€é and the rest"))
	})
	mux.HandleFunc("/data.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"name":"fixture","tags":["a","b"]}`))
	})
	mux.HandleFunc("/notes.txt", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("  plain *text*\n\tkept as is\n"))
	})
	mux.HandleFunc("/with-nav", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		var b strings.Builder
		b.WriteString(`<html><head><title>Nav</title></head><body><nav class="menu"><a href="/">Site menu</a> <a href="/a">About</a></nav><article>`)
		for i := 0; i < 6; i++ {
			b.WriteString("<p>The article body goes on for a while, sentence after sentence, so that readability takes it as the content of the page.</p>")
		}
		b.WriteString(`</article><footer class="footer">Copyright</footer></body></html>`)
		_, _ = w.Write([]byte(b.String()))
	})
	mux.HandleFunc("/old/x", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/new/dir/page.html", http.StatusFound)
	})
	mux.HandleFunc("/new/dir/page.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<html><head><title>Moved</title></head><body><article><p>See the <a href="sub.html">sub page</a> and ` +
			`<img src="../pic.png" alt="pic">, resolved against the final URL after the redirect, with enough words to count as an article.</p></article></body></html>`))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<html><body><h1>Not here</h1><p>The page you asked for has gone.</p></body></html>"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &bombWritten
}

// gzipMember is one gzip member of 1 MiB of zeros.
func gzipMember(t *testing.T) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := zw.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestFixtures(t *testing.T) {
	srv, bombWritten := fixtureServer(t)
	h := newHarness(t, map[string]string{"WEBFETCH_MAX_BODY_BYTES": "4194304"}, srv)

	type check struct {
		ok          bool
		contains    []string
		notContains []string
		contentType string
		title       string
		finalPath   string
	}
	tests := []struct {
		name string
		args map[string]any
		want check
	}{
		{"pdf behind a URL without .pdf", map[string]any{"url": srv.URL + "/reports/latest"},
			check{ok: true, contains: []string{"Revenue grew forty two percent this year.", "The second page closes the report."}, contentType: "application/pdf", title: "Annual Fixture Report"}},
		{"html behind a .pdf URL", map[string]any{"url": srv.URL + "/files/brochure.pdf"},
			check{ok: true, contains: []string{"# Brochure", "only pretends to be a PDF"}, contentType: "text/html; charset=utf-8", title: "Not a PDF"}},
		{"epub is an unsupported type", map[string]any{"url": srv.URL + "/books/novel"},
			check{contains: []string{"unsupported type application/epub+zip"}}},
		{"relative links under base href", map[string]any{"url": srv.URL + "/docs/a/b/page.html"},
			check{ok: true, contains: []string{
				"[introduction](" + srv.URL + "/static/v2/guide/intro.html)",
				"[root page](" + srv.URL + "/root.html)",
				"[parent page](" + srv.URL + "/static/up.html?q=1#frag)",
				"![a cat](" + srv.URL + "/static/v2/img/cat.png)",
			}, title: "Base"}},
		{"base href after a redirect", map[string]any{"url": srv.URL + "/moved"},
			check{ok: true, contains: []string{"[introduction](" + srv.URL + "/static/v2/guide/intro.html)"}, finalPath: "/docs/a/b/page.html"}},
		{"final URL after redirects as the base", map[string]any{"url": srv.URL + "/old/x"},
			check{ok: true, contains: []string{"[sub page](" + srv.URL + "/new/dir/sub.html)", "![pic](" + srv.URL + "/new/pic.png)"}, finalPath: "/new/dir/page.html"}},
		{"content inside a hidden container", map[string]any{"url": srv.URL + "/app"},
			check{ok: true, contains: []string{"the library lent eleven thousand books", "Paragraph 5 of the report"}, notContains: []string{"DOMContentLoaded"}, title: "Hidden until scripts run"}},
		{"redirect loop", map[string]any{"url": srv.URL + "/loop/a"},
			check{contains: []string{"redirect loop: " + srv.URL + "/loop/a → " + srv.URL + "/loop/b → " + srv.URL + "/loop/a"}}},
		{"gzip bomb", map[string]any{"url": srv.URL + "/bomb"},
			check{contains: []string{"body is larger than the 4194304-byte limit after decoding; refused"}}},
		{"json pretty-printed", map[string]any{"url": srv.URL + "/data.json"},
			check{ok: true, contains: []string{"{\n  \"name\": \"fixture\",\n  \"tags\": [\n    \"a\",\n    \"b\"\n  ]\n}"}, contentType: "application/json; charset=utf-8"}},
		{"plain text passed through", map[string]any{"url": srv.URL + "/notes.txt", "format": "html"},
			check{ok: true, contains: []string{"  plain *text*\n\tkept as is\n"}, contentType: "text/plain; charset=utf-8"}},
		{"selector", map[string]any{"url": srv.URL + "/docs/a/b/page.html", "selector": "p a[href^='https://other']"},
			check{ok: true, contains: []string{"[absolute link](https://other.example/abs)"}, notContains: []string{"introduction"}}},
		{"selector matching nothing", map[string]any{"url": srv.URL + "/docs/a/b/page.html", "selector": "table.prices"},
			check{contains: []string{`selector "table.prices" matched nothing on the page`}}},
		{"main_content drops navigation", map[string]any{"url": srv.URL + "/with-nav"},
			check{ok: true, contains: []string{"The article body"}, notContains: []string{"Site menu"}}},
		{"main_content false keeps the whole page", map[string]any{"url": srv.URL + "/with-nav", "main_content": false, "format": "text"},
			check{ok: true, contains: []string{"Site menu", "The article body"}}},
		{"http error status", map[string]any{"url": srv.URL + "/missing"},
			check{contains: []string{"HTTP 404 Not Found", "The page you asked for has gone."}}},
	}
	for _, withMeta := range []bool{true, false} {
		for _, p := range fixtures.LegacyPages(withMeta) {
			ct := "text/html; charset=" + p.Charset
			if p.Charset == "gbk" && !withMeta {
				// The detector names the superset GB 18030, which decodes
				// GBK bytes to the same text.
				ct = "text/html; charset=gb18030"
			}
			tests = append(tests, struct {
				name string
				args map[string]any
				want check
			}{fmt.Sprintf("%s without header charset, meta=%v", p.Name, withMeta), map[string]any{"url": fmt.Sprintf("%s/legacy/%s/%v", srv.URL, p.Name, withMeta)},
				check{ok: true, contains: []string{p.Want}, contentType: ct}})
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.call(tc.args)
			got := text(r)
			if r.IsError == tc.want.ok {
				t.Fatalf("is_error=%v: %s", r.IsError, got)
			}
			for _, s := range tc.want.contains {
				if !strings.Contains(got, s) {
					t.Errorf("missing %q in:\n%s", s, got)
				}
			}
			for _, s := range tc.want.notContains {
				if strings.Contains(got, s) {
					t.Errorf("unexpected %q in:\n%s", s, got)
				}
			}
			if !tc.want.ok {
				return
			}
			o := structured(t, r)
			if tc.want.contentType != "" && o.ContentType != tc.want.contentType {
				t.Errorf("content_type %q, want %q", o.ContentType, tc.want.contentType)
			}
			if tc.want.title != "" && o.Title != tc.want.title {
				t.Errorf("title %q, want %q", o.Title, tc.want.title)
			}
			if tc.want.finalPath != "" && o.FinalURL != srv.URL+tc.want.finalPath {
				t.Errorf("final_url %q, want path %s", o.FinalURL, tc.want.finalPath)
			}
			if o.Status != 200 || o.URL != tc.args["url"] || o.TotalLength != utf8.RuneCountInString(r.Content[0].Text) {
				t.Errorf("structured_content %+v", o)
			}
		})
	}
	if n := bombWritten.Load(); n > (100<<10)/10 {
		t.Errorf("the bomb server wrote %d members: it was read", n)
	}
}

// TestMultiByteAtTheBoundary puts a 4-byte character at index 9 and asks
// for 10 characters: the page ends with the whole character, the next page
// starts after it, and the pages join back.
func TestMultiByteAtTheBoundary(t *testing.T) {
	srv, _ := fixtureServer(t)
	h := newHarness(t, nil, srv)
	const whole = "abcdefghi😀€é and the rest"
	tests := []struct {
		start, max int
		page       string
		next       int
	}{
		{0, 10, "abcdefghi😀", 10},
		{0, 9, "abcdefghi", 9},
		{9, 1, "😀", 10},
		{10, 2, "€é", 12},
		{12, 100, " and the rest", 0},
	}
	var joined strings.Builder
	for _, tc := range tests {
		r := h.call(map[string]any{"url": srv.URL + "/boundary", "start_index": tc.start, "max_length": tc.max})
		if r.IsError {
			t.Fatal(text(r))
		}
		o := structured(t, r)
		page := r.Content[0].Text
		if page != tc.page || !utf8.ValidString(page) || o.TotalLength != utf8.RuneCountInString(whole) {
			t.Fatalf("start %d max %d: page %q total %d", tc.start, tc.max, page, o.TotalLength)
		}
		if tc.next == 0 {
			if o.NextStartIndex != nil || len(r.Content) != 1 {
				t.Fatalf("last page: next %v, %d blocks", o.NextStartIndex, len(r.Content))
			}
		} else if o.NextStartIndex == nil || *o.NextStartIndex != tc.next || !strings.Contains(r.Content[1].Text, "start_index="+strconv.Itoa(tc.next)) {
			t.Fatalf("start %d max %d: next %v, hint %q", tc.start, tc.max, o.NextStartIndex, r.Content[1:])
		}
		if tc.start == 0 && tc.max == 10 || tc.start >= 10 { // the chain 0 → 10 → 12 → end
			joined.WriteString(page)
		}
	}
	if joined.String() != whole {
		t.Fatalf("joined %q", joined.String())
	}
	r := h.call(map[string]any{"url": srv.URL + "/boundary", "start_index": 25})
	if !r.IsError || !strings.Contains(text(r), "start_index 25 is past the end of the content (total_length 25)") {
		t.Fatalf("past the end: %q", text(r))
	}
}

// TestRobotsThroughTheTool: a robots.txt answering 5xx and one that hangs
// both mean "disallow", and the page is never fetched; the config switch
// turns robots off.
func TestRobotsThroughTheTool(t *testing.T) {
	var pageHits atomic.Int64
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	page := func(w http.ResponseWriter, r *http.Request) {
		pageHits.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("the page"))
	}
	mux5xx := http.NewServeMux()
	mux5xx.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusInternalServerError) })
	mux5xx.HandleFunc("/", page)
	s5xx := httptest.NewServer(mux5xx)
	t.Cleanup(s5xx.Close)
	muxHang := http.NewServeMux()
	muxHang.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	muxHang.HandleFunc("/", page)
	sHang := httptest.NewServer(muxHang)
	t.Cleanup(sHang.Close)

	tests := []struct {
		name, robots, url, want string
	}{
		{"5xx", "true", s5xx.URL + "/p", "robots.txt answered 500 Internal Server Error; treated as disallow all"},
		{"hang", "true", sHang.URL + "/p", "robots.txt did not answer within 300ms; treated as disallow all"},
		{"off", "false", s5xx.URL + "/p", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, map[string]string{"WEBFETCH_ROBOTS": tc.robots, "WEBFETCH_ROBOTS_TIMEOUT": "300ms"}, s5xx, sHang)
			before := pageHits.Load()
			r := h.call(map[string]any{"url": tc.url})
			if tc.want == "" {
				if r.IsError || r.Content[0].Text != "the page" {
					t.Fatalf("robots off: %q", text(r))
				}
				return
			}
			if !r.IsError || !strings.Contains(text(r), tc.want) {
				t.Fatalf("got %q, want %q", text(r), tc.want)
			}
			if pageHits.Load() != before {
				t.Fatal("the page was fetched")
			}
		})
	}
}

// TestUnreachableHostIsNotARobotsRefusal: with robots.txt honoured, a host
// that cannot be reached (a name that does not resolve, a loopback port
// that refuses connections on an allow-listed address or name, a name the
// guard refuses) is reported as such, with the same cause as the page
// fetch gives with robots.txt off, never as "disallowed by robots.txt"
// (TestRobotsThroughTheTool keeps 5xx and a hang as "disallow"). The
// metrics count it as unreachable or refused, not robots.
func TestUnreachableHostIsNotARobotsRefusal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(closed)
	tests := []struct {
		name, allow, origin, cause, outcome string
	}{
		{"name does not resolve", "127.0.0.1", "http://nowhere.test",
			"host nowhere.test:80 is unreachable: resolve nowhere.test: lookup nowhere.test", "unreachable"},
		{"refused port, allow-listed address", "127.0.0.1", "http://" + closed,
			"host " + closed + " is unreachable: dial tcp " + closed + ": connect: connection refused", "unreachable"},
		{"refused port, allow-listed name", "intranet.test", "http://intranet.test:" + port,
			"host intranet.test:" + port + " is unreachable: dial tcp " + closed + ": connect: connection refused", "unreachable"},
		{"name refused by the guard", "127.0.0.1", "http://private.test",
			"refused: host private.test resolves to 10.0.0.1, a private-use address (RFC 1918)", "refused"},
	}
	for _, tc := range tests {
		for _, robots := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/robots=%v", tc.name, robots), func(t *testing.T) {
				h := newHarness(t, map[string]string{"WEBFETCH_ROBOTS": strconv.FormatBool(robots), "WEBFETCH_ALLOW": tc.allow, "WEBFETCH_PORTS": "80,443," + port})
				h.allowDial(closed)
				page := tc.origin + "/page"
				want := "fetch " + page + ": get " + page + ": " + tc.cause
				if robots {
					want = "fetch " + page + ": get " + tc.origin + "/robots.txt: " + tc.cause
				}
				r := h.call(map[string]any{"url": page})
				if !r.IsError || !strings.Contains(text(r), want) || strings.Contains(text(r), "disallowed by robots.txt") {
					t.Fatalf("result is_error=%v %q, want an error saying %q and not blaming robots.txt", r.IsError, text(r), want)
				}
				resp, err := http.Get(h.svc.URL + "/metrics")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if want := `webfetch_fetches_total{outcome="` + tc.outcome + `",service="webfetch"} 1`; !strings.Contains(string(body), want) {
					t.Fatalf("metrics lack %s", want)
				}
			})
		}
	}
}

// TestEmptyPage: a fetch that works but finds no readable text (an empty
// body, a page of only scripts, blank text, a PDF page without text, a
// selector matching empty elements, 204 No Content) is a success whose one
// text block says so, naming the status and the type: not an empty text
// block, and not is_error (the call did what was asked; the model should
// look elsewhere rather than retry). total_length is 0, so any start_index
// past 0 is an error.
func TestEmptyPage(t *testing.T) {
	pages := map[string]struct {
		status      int
		contentType string
		body        []byte
	}{
		"/empty":   {200, "text/html", []byte("<html><body></body></html>")},
		"/scripts": {200, "text/html", []byte(`<html><head><title>App</title><script>window.x = 1</script></head><body><div id="root"></div><script src="/app.js"></script></body></html>`)},
		"/blank":   {200, "text/html", []byte("<html><body><p> \n\t </p></body></html>")},
		"/plain":   {200, "text/plain", nil},
		"/scan":    {200, "application/pdf", fixtures.PDF("Scan", "")},
		"/nothing": {http.StatusNoContent, "", nil},
		"/div":     {200, "text/html", []byte(`<html><body><div class="x"></div><p>Other text that is here.</p></body></html>`)},
	}
	mux := http.NewServeMux()
	for path, p := range pages {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if p.contentType != "" {
				w.Header().Set("Content-Type", p.contentType)
			}
			w.WriteHeader(p.status)
			_, _ = w.Write(p.body)
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	h := newHarness(t, map[string]string{"WEBFETCH_ROBOTS": "false"}, srv)

	const scripts = " It has scripts, which web_fetch does not run: its text is probably built by JavaScript."
	tests := []struct {
		path, format, selector, title string
		want                          string // the note, after "[No readable text: "
	}{
		{"/empty", "markdown", "", "", "the page at %s (HTTP 200 OK, text/html; charset=utf-8) has no text after extraction."},
		{"/empty", "text", "", "", "the page at %s (HTTP 200 OK, text/html; charset=utf-8) has no text after extraction."},
		{"/empty", "html", "", "", "the page at %s (HTTP 200 OK, text/html; charset=utf-8) has no text after extraction."},
		{"/scripts", "markdown", "", "App", `the page at %s (HTTP 200 OK, text/html; charset=utf-8, titled "App") has no text after extraction.` + scripts},
		{"/scripts", "text", "", "App", `the page at %s (HTTP 200 OK, text/html; charset=utf-8, titled "App") has no text after extraction.` + scripts},
		{"/blank", "markdown", "", "", "the page at %s (HTTP 200 OK, text/html; charset=utf-8) has no text after extraction."},
		{"/plain", "markdown", "", "", "the page at %s (HTTP 200 OK, text/plain; charset=utf-8) has no text after extraction."},
		{"/scan", "markdown", "", "Scan", `the page at %s (HTTP 200 OK, application/pdf, titled "Scan") has no text after extraction. A PDF of scanned pages holds images of text, which web_fetch does not read.`},
		{"/nothing", "markdown", "", "", "the page at %s (HTTP 204 No Content, text/plain; charset=utf-8) has no text after extraction."},
		{"/div", "markdown", "div.x", "", `the elements matching "div.x" at %s (HTTP 200 OK, text/html; charset=utf-8) has no text after extraction.`},
	}
	for _, tc := range tests {
		t.Run(strings.TrimPrefix(tc.path, "/")+"/"+tc.format, func(t *testing.T) {
			u := srv.URL + tc.path
			args := map[string]any{"url": u, "format": tc.format}
			if tc.selector != "" {
				args["selector"] = tc.selector
			}
			r := h.call(args)
			want := "[No readable text: " + fmt.Sprintf(tc.want, u) + "]"
			if r.IsError || len(r.Content) != 1 || r.Content[0].Text != want {
				t.Fatalf("is_error=%v content %q, want one block %q", r.IsError, text(r), want)
			}
			o := structured(t, r)
			if o.TotalLength != 0 || o.NextStartIndex != nil || o.Status != pages[tc.path].status || o.Title != tc.title || !strings.Contains(want, o.ContentType) {
				t.Fatalf("structured_content %+v", o)
			}
		})
	}
	r := h.call(map[string]any{"url": srv.URL + "/empty", "start_index": 1})
	if !r.IsError || !strings.Contains(text(r), "start_index 1 is past the end of the content (total_length 0)") {
		t.Fatalf("start_index past an empty page: %q", text(r))
	}
}
