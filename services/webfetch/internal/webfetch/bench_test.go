package webfetch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"

	"github.com/brain-tools/suite/pkg/extract"
)

// BenchmarkGoSpecMarkdown converts go_spec.html to Markdown two ways, side
// by side in MB/s of HTML: html-to-markdown's converter alone
// (htmltomarkdown.ConvertString, parse included), and the tool's whole
// extraction of a fetched body (type sniffing, charset, parse, <base href>
// and absolute links, readability with its fallback check, Markdown with
// tables, pagination). The target: tool >= 75 % of converter (issue 20).
func BenchmarkGoSpecMarkdown(b *testing.B) {
	body, err := os.ReadFile(goSpecPath(b))
	if err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse("http://127.0.0.1:8099/go_spec.html")
	b.Run("converter", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := htmltomarkdown.ConvertString(string(body)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tool", func(b *testing.B) {
		x := extract.New()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			d, err := x.Extract(context.Background(), extract.Input{URL: u, ContentType: "text/html; charset=utf-8", Body: body},
				extract.Options{Format: extract.Markdown, MainContent: true})
			if err != nil {
				b.Fatal(err)
			}
			if _, _, _, err := extract.Paginate(d.Text, 0, DefaultMaxLength); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLoopbackFetch is a whole web_fetch call end to end on loopback:
// POST to the service, guard, fetch from a file server, extraction,
// pagination, JSON result, with the cache off so every call fetches. It
// reports the median (p50-ms) and p90 latency, and MB/s of HTML fetched.
func BenchmarkLoopbackFetch(b *testing.B) {
	small := []byte("<!DOCTYPE html><html><head><title>Small</title></head><body><article><h1>Small page</h1>" +
		strings.Repeat("<p>A short paragraph of an ordinary small page, with a <a href=\"/x\">link</a>.</p>", 20) +
		"</article></body></html>")
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(strings.TrimSuffix(goSpecPath(b), "/go_spec.html"))))
	mux.HandleFunc("/small.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(small)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	spec, _ := os.ReadFile(goSpecPath(b))
	for _, page := range []struct {
		name string
		path string
		size int
	}{{"small", "/small.html", len(small)}, {"go_spec", "/go_spec.html", len(spec)}} {
		b.Run(page.name, func(b *testing.B) {
			h := newHarness(b, map[string]string{"WEBFETCH_CACHE_TTL": "0", "WEBFETCH_ROBOTS": "true"}, srv)
			args := map[string]any{"url": srv.URL + page.path}
			var lat []time.Duration
			b.SetBytes(int64(page.size))
			for b.Loop() {
				start := time.Now()
				r := h.call(args)
				lat = append(lat, time.Since(start))
				if r.IsError {
					b.Fatal(text(r))
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "p90-ms")
		})
	}
}

// BenchmarkGoSpecRatio runs the converter alone and the tool's extraction
// back to back in each iteration, in alternating order, so that a busy
// machine slows both alike; it reports the medians over the iterations of
// each one's MB/s and of the tool's share of the converter's speed
// (tool-%-of-converter; the target is at least 75, issue 20).
func BenchmarkGoSpecRatio(b *testing.B) {
	body, err := os.ReadFile(goSpecPath(b))
	if err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse("http://127.0.0.1:8099/go_spec.html")
	x := extract.New()
	runConverter := func() time.Duration {
		start := time.Now()
		if _, err := htmltomarkdown.ConvertString(string(body)); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	runTool := func() time.Duration {
		start := time.Now()
		d, err := x.Extract(context.Background(), extract.Input{URL: u, ContentType: "text/html; charset=utf-8", Body: body},
			extract.Options{Format: extract.Markdown, MainContent: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, _, err := extract.Paginate(d.Text, 0, DefaultMaxLength); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var conv, tool, ratio []float64
	mb := float64(len(body)) / 1e6
	for i := 0; b.Loop(); i++ {
		var c, t time.Duration
		if i%2 == 0 {
			c, t = runConverter(), runTool()
		} else {
			t, c = runTool(), runConverter()
		}
		conv = append(conv, mb/c.Seconds())
		tool = append(tool, mb/t.Seconds())
		ratio = append(ratio, 100*c.Seconds()/t.Seconds())
	}
	b.ReportMetric(median(conv), "converter-MB/s")
	b.ReportMetric(median(tool), "tool-MB/s")
	b.ReportMetric(median(ratio), "tool-%-of-converter")
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}
