package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/browser/internal/chrome"
)

func renderers(t *testing.T, b *chrome.Browser) int {
	t.Helper()
	ps, err := b.Processes()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range ps {
		if p.Type == "renderer" {
			n++
		}
	}
	return n
}

// TestNoChromiumProcessOutlivesItsSession: 200 calls across 25 sessions
// (4 at a time) — plain opens, pages that never finish loading (read when
// the load wait ends), opens the client cancels mid-navigation, actions
// that wait for an element that never comes — then the sessions end, by
// close_all or by idle reclaim. Afterwards no renderer process is left;
// while it ran, renderers stayed within sessions × pages, and Chromium's
// memory (PSS of every process) stayed under its limit. Closing the
// service leaves no Chromium process at all.
func TestNoChromiumProcessOutlivesItsSession(t *testing.T) {
	if testing.Short() {
		t.Skip("200 browser calls: not in -short")
	}
	const sessions, perSession, parallel = 25, 8, 4
	h := newHarness(t, map[string]string{
		"BROWSER_LOAD_TIMEOUT":   "400ms",
		"BROWSER_SETTLE_TIMEOUT": "200ms",
		"BROWSER_ACTION_TIMEOUT": "300ms",
		"BROWSER_IDLE_TIMEOUT":   "8s",
		"BROWSER_MAX_PAGES":      "3",
		"BROWSER_MAX_SESSIONS":   "16",
		"BROWSER_MAX_MEMORY_MB":  "1536",
	})
	h.handle("/ok", `<!doctype html><title>ok</title><p>A page that loads.</p><script>document.body.append(" Scripted.")</script>`)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	h.pages.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>hang</title><p>Half a page`))
		w.(http.Flusher).Flush()
		select { // the rest never comes
		case <-hang:
		case <-r.Context().Done():
		}
	})
	b := h.svc.Manager.Browser()
	base := renderers(t, b)

	var mu sync.Mutex
	peakRenderers, calls, errorsSeen := 0, 0, 0
	var peakMem int64
	sample := func() {
		n := renderers(t, b)
		m := b.Memory()
		mu.Lock()
		peakRenderers = max(peakRenderers, n)
		peakMem = max(peakMem, m)
		mu.Unlock()
	}
	// counted is one of the 200: an open, a timeout or a cancel.
	counted := func(id string, args map[string]any, name string, cancelAfter time.Duration, wantErr bool) *PageOutput {
		ctx, cancel := context.WithCancel(context.Background())
		if cancelAfter > 0 {
			ctx, cancel = context.WithTimeout(context.Background(), cancelAfter)
		}
		r, err := h.call(ctx, id, name, args)
		cancel()
		mu.Lock()
		calls++
		mu.Unlock()
		if cancelAfter > 0 {
			return nil // the client gave up: whatever came back is moot
		}
		if err != nil || r.IsError != wantErr {
			mu.Lock()
			errorsSeen++
			mu.Unlock()
			if err == nil {
				err = fmt.Errorf("is_error=%v: %s", r.IsError, text(r))
			}
			t.Logf("session %s %s %v: %v", id, name, args, err)
			return nil
		}
		if wantErr {
			return nil
		}
		o := pageOut(t, r)
		return &o
	}
	closePage := func(id string, o *PageOutput) {
		if o != nil {
			h.must(id, PagesName, map[string]any{"action": "close", "page_id": o.PageID})
		}
	}
	run := func(s int) {
		id := fmt.Sprintf("s%d", s)
		for i := 0; i < perSession; i++ {
			switch (s + i) % 4 {
			case 0: // a page that loads
				closePage(id, counted(id, map[string]any{"url": h.page + "/ok"}, OpenName, 0, false))
			case 1: // a page that never finishes loading: read when the wait ends
				o := counted(id, map[string]any{"url": h.page + "/hang"}, OpenName, 0, false)
				if o != nil && !o.Loading {
					t.Errorf("session %s: the hanging page is not reported as loading", id)
				}
				closePage(id, o)
			case 2: // the client gives up mid-navigation: the new page goes too
				counted(id, map[string]any{"url": h.page + "/hang"}, OpenName, 150*time.Millisecond, false)
			case 3: // an action whose element never comes times out
				o := counted(id, map[string]any{"url": h.page + "/ok"}, OpenName, 0, false)
				if o != nil {
					counted(id, map[string]any{"page_id": o.PageID, "actions": []map[string]any{{"action": "wait", "selector": "#never"}}}, ActName, 0, true)
					closePage(id, o)
				}
			}
		}
		// Nothing of the session's calls is left open but what it kept.
		r := h.must(id, PagesName, map[string]any{})
		if got := text(r); !strings.Contains(got, "no open pages") {
			t.Errorf("session %s has pages left after its calls: %s", id, got)
		}
		if s%2 == 0 {
			h.must(id, PagesName, map[string]any{"action": "close_all"})
		}
		// The odd sessions are left to idle reclaim.
	}
	// Sampling runs beside the calls, so its /proc scans never delay them.
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	var wg sync.WaitGroup
	work := make(chan int)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				run(s)
			}
		}()
	}
	for s := range sessions {
		work <- s
	}
	close(work)
	wg.Wait()
	close(stopSampling)
	<-sampled
	if calls < 200 {
		t.Fatalf("%d opens, timeouts and cancels, want at least 200", calls)
	}
	if errorsSeen > 0 {
		t.Errorf("%d calls answered unexpectedly", errorsSeen)
	}

	// Every session ends (idle reclaim for the rest); then no renderer is left.
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) && (h.svc.Manager.Count() > 0 || renderers(t, b) > base) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := h.svc.Manager.Count(); n != 0 {
		t.Errorf("%d sessions still alive after the idle timeout", n)
	}
	if n := renderers(t, b); n > base {
		ps, _ := b.Processes()
		t.Errorf("%d renderer processes outlived their sessions (baseline %d): %+v", n, base, ps)
	}
	// The configured bound: sessions × pages (a page changing sites has a
	// second renderer for a moment, which the sampling may catch).
	if limit := 16 * 3; peakRenderers > limit+base {
		t.Errorf("peak of %d renderers, more than 16 sessions × 3 pages", peakRenderers)
	}
	if peakMem > 1536<<20 {
		t.Errorf("peak memory %d MiB over the 1536 MiB limit", peakMem>>20)
	}
	t.Logf("%d calls over %d sessions; peak %d renderer processes, peak Chromium memory (PSS, all processes) %.0f MiB; %d renderers left",
		calls, sessions, peakRenderers, float64(peakMem)/(1<<20), renderers(t, b)-base)

	h.svc.Close()
	time.Sleep(200 * time.Millisecond)
	if ps, _ := chrome.ProcessesOf(b.DataDir()); len(ps) != 0 {
		t.Errorf("after Close %d Chromium processes are left: %+v", len(ps), ps)
	}
}
