package webfetch

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/extract"
)

// TestLargePagePagesFromOneRead: a 5 MB page (over the 2 MiB body cache)
// is fetched and extracted once; every start_index page after the first
// comes from that read, so paging costs no download and the pages join
// back to one version of the page even though the server changes it on
// every request.
func TestLargePagePagesFromOneRead(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		n := hits.Add(1)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		var b strings.Builder
		b.WriteString("<!doctype html><title>big</title><body>")
		for i := 0; b.Len() < 5_000_000; i++ {
			fmt.Fprintf(&b, "<p>Version %d, paragraph %d: this page changes every time it is served.</p>", n, i)
		}
		_, _ = w.Write([]byte(b.String()))
	}))
	defer srv.Close()
	h := newHarness(t, map[string]string{"WEBFETCH_CACHE_TTL": "5m"}, srv)
	url := srv.URL + "/big"
	var joined strings.Builder
	start := 0
	for page := 0; page < 5; page++ {
		r := h.call(map[string]any{"url": url, "max_length": MaxMaxLength, "start_index": start})
		if r.IsError {
			t.Fatalf("start_index %d: %s", start, text(r))
		}
		joined.WriteString(r.Content[0].Text)
		o := structured(t, r)
		if o.NextStartIndex == nil {
			t.Fatal("a 5 MB page fits in one page")
		}
		start = *o.NextStartIndex
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the server was asked %d times for 5 pages of one document", n)
	}
	if got := joined.String(); strings.Contains(got, "Version 2,") || !strings.Contains(got, "Version 1, paragraph 0:") {
		t.Errorf("the pages mix versions of the page (%d requests)", hits.Load())
	}
}

// TestReadsBudget: the pages kept stay within WEBFETCH_CACHE_MAX_BYTES; a
// page larger than the budget is not kept at all.
func TestReadsBudget(t *testing.T) {
	mk := func(n int) *page {
		return &page{URL: "u", FinalURL: "u", Doc: &extract.Document{Text: strings.Repeat("x", n)}}
	}
	r := newReads(time.Minute, 10_000)
	for i := range 10 {
		r.add(fmt.Sprint(i), mk(3000))
		if b := r.bytes.Load(); b > 10_000 {
			t.Fatalf("after %d adds the pages take %d bytes", i+1, b)
		}
	}
	if _, ok := r.get("9"); !ok {
		t.Error("the newest page was dropped")
	}
	if _, ok := r.get("0"); ok {
		t.Error("the oldest page was kept past the budget")
	}
	r.add("huge", mk(20_000))
	if _, ok := r.get("huge"); ok {
		t.Error("a page over the whole budget was kept")
	}
	r.add("9", mk(10))
	if b := r.bytes.Load(); b > 10_000 || b <= 0 {
		t.Errorf("replacing a page leaves %d bytes counted", b)
	}
}
