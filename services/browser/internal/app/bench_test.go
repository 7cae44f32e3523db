package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/tool"
)

// BenchmarkOpenAndRead: open-and-read of a local page (go_mem.html of the
// Go distribution, on the allow-listed loopback address) through
// browser_open — a new page in real Chromium, loaded, read as Markdown —
// beside web_fetch of the same page (the webfetch service built from this
// workspace, cache off), alternating in each iteration so a busy machine
// slows both alike. Reports p50 and p99 of each, in ms.
func BenchmarkOpenAndRead(b *testing.B) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "doc", "go_mem.html"))
	if err != nil {
		b.Fatal(err)
	}
	h := newHarness(b, nil)
	h.pages.HandleFunc("/go_mem.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	})
	webfetch := startWebfetch(b, h.port)
	url := h.page + "/go_mem.html"
	var browserLat, fetchLat []time.Duration
	for i := 0; b.Loop(); i++ {
		open := func() {
			start := time.Now()
			r := h.must("bench", OpenName, map[string]any{"url": url})
			browserLat = append(browserLat, time.Since(start))
			h.must("bench", PagesName, map[string]any{"action": "close", "page_id": pageOut(h.t, r).PageID})
		}
		fetch := func() {
			start := time.Now()
			callWebfetch(b, webfetch, url)
			fetchLat = append(fetchLat, time.Since(start))
		}
		if i%2 == 0 {
			open()
			fetch()
		} else {
			fetch()
			open()
		}
	}
	pct := func(d []time.Duration, p int) float64 {
		slices.Sort(d)
		return float64(d[min(len(d)-1, len(d)*p/100)].Microseconds()) / 1000
	}
	b.ReportMetric(pct(browserLat, 50), "browser-p50-ms")
	b.ReportMetric(pct(browserLat, 99), "browser-p99-ms")
	b.ReportMetric(pct(fetchLat, 50), "webfetch-p50-ms")
	b.ReportMetric(pct(fetchLat, 99), "webfetch-p99-ms")
	b.ReportMetric(float64(h.svc.Manager.Peak())/(1<<20), "chromium-peak-MiB")
}

// startWebfetch builds and runs the webfetch service (a module of this
// workspace) allowed to reach the page server only, and returns its URL.
func startWebfetch(b *testing.B, port int) string {
	b.Helper()
	dir := b.TempDir()
	bin := filepath.Join(dir, "webfetch")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/brain-tools/suite/services/webfetch").CombinedOutput(); err != nil {
		b.Fatalf("build webfetch (services/webfetch in go.work): %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "ADDR="+addr, "INSECURE_NO_AUTH=true", "WEBFETCH_ALLOW="+pageHost,
		"WEBFETCH_PORTS="+strconv.Itoa(port), "WEBFETCH_CACHE_TTL=0", "WEBFETCH_ROBOTS=false", "LOG_LEVEL=warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cancel(); _ = cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			resp.Body.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			b.Fatal("webfetch did not start")
		}
	}
}

func callWebfetch(b *testing.B, base, url string) {
	args, _ := json.Marshal(map[string]any{"url": url})
	body, _ := json.Marshal(tool.Request{TenantID: "t", SessionID: "bench", CallID: "c", Arguments: args})
	resp, err := http.Post(base+"/tools/web_fetch", "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	r, err := tool.DecodeResult(data)
	if err != nil || r.IsError {
		b.Fatalf("web_fetch: %v %s", err, data)
	}
}
