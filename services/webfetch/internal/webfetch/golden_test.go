package webfetch

import (
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	gmtext "github.com/yuin/goldmark/text"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// goSpecPath finds $(go env GOROOT)/doc/go_spec.html.
func goSpecPath(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v (the go tool must be on PATH to find go_spec.html)", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "doc", "go_spec.html")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("go_spec.html: %v", err)
	}
	return p
}

// serveGoSpec serves go_spec.html from a loopback file server.
func serveGoSpec(t testing.TB) *httptest.Server {
	t.Helper()
	dir := filepath.Dir(goSpecPath(t))
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv
}

// fetchAll reads url page by page with max_length, checking that every
// page starts where the previous one said, and returns the joined text and
// the number of pages.
func fetchAll(t *testing.T, h *harness, url string, maxLength int) (string, int) {
	t.Helper()
	var b strings.Builder
	start, pages, total := 0, 0, -1
	for {
		r := h.call(map[string]any{"url": url, "max_length": maxLength, "start_index": start})
		if r.IsError {
			t.Fatalf("start_index %d: %s", start, text(r))
		}
		o := structured(t, r)
		page := r.Content[0].Text
		pages++
		if !utf8.ValidString(page) {
			t.Fatalf("page at %d is not valid UTF-8", start)
		}
		n := utf8.RuneCountInString(page)
		if total >= 0 && o.TotalLength != total {
			t.Fatalf("total_length changed from %d to %d", total, o.TotalLength)
		}
		total = o.TotalLength
		b.WriteString(page)
		if o.NextStartIndex == nil {
			if start+n != total || len(r.Content) != 1 {
				t.Fatalf("last page ends at %d of %d with %d blocks", start+n, total, len(r.Content))
			}
			break
		}
		if n != maxLength || *o.NextStartIndex != start+n {
			t.Fatalf("page at %d has %d characters and next_start_index %d", start, n, *o.NextStartIndex)
		}
		if len(r.Content) != 2 || !strings.Contains(r.Content[1].Text, "start_index="+itoa(*o.NextStartIndex)) {
			t.Fatalf("cut page lacks the hint: %q", r.Content[1:])
		}
		start = *o.NextStartIndex
	}
	if utf8.RuneCountInString(b.String()) != total {
		t.Fatalf("joined %d characters, total_length %d", utf8.RuneCountInString(b.String()), total)
	}
	return b.String(), pages
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestGoSpecGolden fetches go_spec.html through the whole tool (loopback
// file server, guard, fetch, readability, Markdown) and compares it with
// testdata/go_spec.golden.md, the server's origin written as {{origin}}.
// go test -run GoSpecGolden -update rewrites the file.
func TestGoSpecGolden(t *testing.T) {
	srv := serveGoSpec(t)
	h := newHarness(t, map[string]string{"WEBFETCH_CACHE_TTL": "5m"}, srv)
	url := srv.URL + "/go_spec.html"

	whole := h.call(map[string]any{"url": url, "max_length": MaxMaxLength})
	o := structured(t, whole)
	if o.Status != 200 || o.ContentType != "text/html; charset=utf-8" || o.URL != url || o.FinalURL != url {
		t.Fatalf("structured_content %+v", o)
	}

	got, pages := fetchAll(t, h, url, 49999)
	if pages < 3 {
		t.Fatalf("only %d pages", pages)
	}
	// Pages of another size, each extracted afresh (cache off), join to
	// the same text.
	fresh := newHarness(t, map[string]string{"WEBFETCH_CACHE_TTL": "0"}, srv)
	if again, _ := fetchAll(t, fresh, url, MaxMaxLength); again != got {
		t.Fatal("pages of 100000 characters join to a different text than pages of 49999")
	}
	md := strings.ReplaceAll(got, srv.URL, "{{origin}}")

	golden := filepath.Join("testdata", "go_spec.golden.md")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run GoSpecGolden -update to create it)", err)
	}
	if md != string(want) {
		t.Fatalf("Markdown differs from %s (rerun with -update after checking the change): %s", golden, firstDiff(md, string(want)))
	}

	// What the golden file must show, checked against the source.
	src, _ := os.ReadFile(goSpecPath(t))
	count := func(re string, s string) int { return len(regexp.MustCompile(re).FindAllStringIndex(s, -1)) }
	if h2, want := count(`(?m)^## `, md), count(`<h2[ >]`, string(src)); h2 != want {
		t.Errorf("%d level-2 headings, the source has %d", h2, want)
	}
	if h3, want := count(`(?m)^### `, md), count(`<h3[ >]`, string(src)); h3 != want {
		t.Errorf("%d level-3 headings, the source has %d", h3, want)
	}
	if fences, want := count("(?m)^ *```", md), 2*count(`<pre[ >]`, string(src)); fences != want {
		t.Errorf("%d code fences, want %d (two per <pre>)", fences, want)
	}
	var links int
	doc := goldmark.DefaultParser().Parse(gmtext.NewReader([]byte(md)))
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		var dest string
		switch l := n.(type) {
		case *ast.Link:
			dest = string(l.Destination)
		case *ast.Image:
			dest = string(l.Destination)
		default:
			return ast.WalkContinue, nil
		}
		if entering {
			links++
			if !strings.HasPrefix(dest, "{{origin}}/") && !strings.HasPrefix(dest, "https://") && !strings.HasPrefix(dest, "http://") {
				t.Errorf("link %q is not absolute", dest)
			}
		}
		return ast.WalkContinue, nil
	})
	if want := count(`<a href=`, string(src)); links < want {
		t.Errorf("%d links in the Markdown, the source has %d", links, want)
	}
	if !strings.Contains(md, "[Language_versions]") && !strings.Contains(md, "({{origin}}/go_spec.html#Language_versions)") {
		t.Error("in-page links are not absolute")
	}
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			return "line " + itoa(i+1) + ":\n got: " + la[i] + "\nwant: " + lb[i]
		}
	}
	return "lengths differ: " + itoa(len(la)) + " vs " + itoa(len(lb)) + " lines"
}
