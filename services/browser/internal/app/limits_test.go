package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestPageWeightIsCut: a page whose resources pass BROWSER_MAX_PAGE_BYTES
// has its connections cut at the limit, and says so; the page itself is
// still read.
func TestPageWeightIsCut(t *testing.T) {
	h := newHarness(t, map[string]string{"BROWSER_MAX_PAGE_BYTES": "300000"})
	served := make(chan int, 16)
	h.pages.HandleFunc("/big.bin", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		n := 0
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 64 { // 4 MiB
			m, err := w.Write(chunk)
			n += m
			if err != nil {
				break
			}
		}
		served <- n
	})
	h.handle("/heavy", `<!doctype html><title>heavy</title><p>A heavy page.</p><script>fetch("/big.bin").then(r => r.arrayBuffer()).then(b => document.title = "got " + b.byteLength, e => document.title = "cut")</script>`)
	r := h.must("s1", OpenName, map[string]any{"url": h.page + "/heavy"})
	o := pageOut(t, r)
	if !o.WeightLimited || !strings.Contains(text(r), "page-weight limit of 300000 bytes") {
		t.Errorf("not reported as cut: %+v\n%s", o, text(r))
	}
	if strings.HasPrefix(o.Title, "got 4194304") {
		t.Errorf("the whole 4 MiB arrived: %q", o.Title)
	}
	// The next call has a fresh budget.
	h.handle("/light", `<title>light</title><p>light</p>`)
	if o := pageOut(t, h.must("s1", OpenName, map[string]any{"url": h.page + "/light"})); o.WeightLimited {
		t.Errorf("the budget did not reset: %+v", o)
	}
}

// TestTooManyPages: a session past BROWSER_MAX_PAGES is told to close one.
func TestTooManyPages(t *testing.T) {
	h := newHarness(t, map[string]string{"BROWSER_MAX_PAGES": "2"})
	h.handle("/p", `<title>p</title><p>p</p>`)
	h.must("s1", OpenName, map[string]any{"url": h.page + "/p"})
	h.must("s1", OpenName, map[string]any{"url": h.page + "/p"})
	r, err := h.call(context.Background(), "s1", OpenName, map[string]any{"url": h.page + "/p"})
	if err != nil || !r.IsError || !strings.Contains(text(r), "2 pages open, the limit; close one with browser_pages") {
		t.Fatalf("third page: %v %s", err, text(r))
	}
	h.must("s1", PagesName, map[string]any{"action": "close", "page_id": "p1"})
	if o := pageOut(t, h.must("s1", OpenName, map[string]any{"url": h.page + "/p"})); o.PageID != "p3" {
		t.Errorf("page after close: %+v", o)
	}
	r = h.must("s1", PagesName, map[string]any{})
	if got := text(r); !strings.Contains(got, "p2:") || !strings.Contains(got, "p3:") || strings.Contains(got, "p1:") {
		t.Errorf("list: %s", got)
	}
}

// TestRender: POST /render returns the rendered DOM; a refused URL is 403
// naming the reason.
func TestRender(t *testing.T) {
	h := newHarness(t, nil)
	h.handle("/js", `<!doctype html><title>js</title><div id="x"></div><script>document.getElementById("x").textContent = "made by script"</script>`)
	post := func(body string) (int, []byte) {
		resp, err := http.Post(h.srv.URL+"/render", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, data
	}
	code, data := post(fmt.Sprintf(`{"url":%q}`, h.page+"/js"))
	var rr RenderResponse
	if code != 200 || json.Unmarshal(data, &rr) != nil || !strings.Contains(rr.HTML, `<div id="x">made by script</div>`) || rr.Status != 200 || rr.Title != "js" {
		t.Fatalf("render: %d %s", code, data)
	}
	if code, data := post(fmt.Sprintf(`{"url":"http://169.254.169.254:%d/"}`, h.port)); code != 403 || !strings.Contains(string(data), "link-local") {
		t.Errorf("refused render: %d %s", code, data)
	}
	if code, data := post(`{"url":"file:///etc/passwd"}`); code != 400 || !strings.Contains(string(data), "url: must be an absolute http") {
		t.Errorf("file render: %d %s", code, data)
	}
	if code, _ := post(`{"url":"http://a.example/","extra":1}`); code != 400 {
		t.Errorf("unknown field: %d", code)
	}
	if n := h.svc.Manager.Count(); n != 0 {
		t.Errorf("%d sessions left by renders", n)
	}
}

// TestDownloadsRefused: a page that is a download (Content-Disposition:
// attachment) is refused as one, and a page whose script starts a
// download stays where it is, with nothing saved.
func TestDownloadsRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.pages.HandleFunc("/file.bin", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="file.bin"`)
		_, _ = w.Write(bytes.Repeat([]byte{1}, 1000))
	})
	h.handle("/page", `<title>page</title><p>stays</p><a id="dl" href="/file.bin" download>get it</a>`)
	r, err := h.call(context.Background(), "s1", OpenName, map[string]any{"url": h.page + "/file.bin"})
	if err != nil || !r.IsError || !strings.Contains(text(r), "downloads are refused") {
		t.Fatalf("open a download: %v %s", err, text(r))
	}
	h.must("s1", OpenName, map[string]any{"url": h.page + "/page"})
	r = h.must("s1", ActName, map[string]any{"page_id": "p2", "actions": []map[string]any{{"action": "click", "selector": "#dl"}}})
	if o := pageOut(t, r); o.Title != "page" {
		t.Errorf("after a download click: %+v", o)
	}
	if ps, _ := filepath.Glob(filepath.Join(h.svc.Manager.Browser().DataDir(), "**", "file.bin")); len(ps) > 0 {
		t.Errorf("downloaded: %v", ps)
	}
}
