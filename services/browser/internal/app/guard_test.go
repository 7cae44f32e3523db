package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// victim listens on every IPv4 address (127.0.0.1, 169.254.169.254 on the
// namespace's loopback, 0.0.0.0) and on [::1] at one port, and counts
// every connection it accepts.
type victim struct {
	port     int
	accepted atomic.Int64
	first    atomic.Value
}

func newVictim(t *testing.T) *victim {
	t.Helper()
	v := &victim{}
	ln4, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	v.port = ln4.Addr().(*net.TCPAddr).Port
	ln6, err := net.Listen("tcp6", "[::1]:"+strconv.Itoa(v.port))
	if err != nil {
		t.Fatal(err)
	}
	for _, ln := range []net.Listener{ln4, ln6} {
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				v.accepted.Add(1)
				v.first.CompareAndSwap(nil, c.RemoteAddr().String()+" → "+c.LocalAddr().String())
				c.Close()
			}
		}()
	}
	return v
}

// TestGuardHoldsForTheBrowser is the SSRF proof: a page on an
// operator-allowed loopback address aims images, scripts, iframes,
// stylesheets, redirects, fetch(), XHR, beacons, EventSource, WebSockets, a
// worker and a service worker at 127.0.0.1, [::1], 169.254.169.254,
// 0.0.0.0 and a name resolving to loopback, over http and https, on a
// port the guard allows. The page loads and its scripts run to the end;
// the victim listening on all those addresses sees nothing, and the proxy
// dialed nothing but the page server.
func TestGuardHoldsForTheBrowser(t *testing.T) {
	needNetns(t)
	v := newVictim(t)
	h := newHarness(t, nil, v.port)
	vp := strconv.Itoa(v.port)
	targets := []string{"127.0.0.1:" + vp, "[::1]:" + vp, "169.254.169.254:" + vp, "0.0.0.0:" + vp, "loopback.test:" + vp}
	var tags, urls []string
	for _, tg := range targets {
		for _, scheme := range []string{"http", "https"} {
			u := scheme + "://" + tg + "/x"
			urls = append(urls, u)
			tags = append(tags,
				fmt.Sprintf(`<img src="%s/img">`, u),
				fmt.Sprintf(`<script src="%s/script.js"></script>`, u),
				fmt.Sprintf(`<iframe src="%s/frame"></iframe>`, u),
				fmt.Sprintf(`<link rel="stylesheet" href="%s/style.css">`, u),
				fmt.Sprintf(`<img src="/redirect?to=%s/redirected-img">`, u),
				fmt.Sprintf(`<iframe src="/redirect?to=%s/redirected-frame"></iframe>`, u))
		}
	}
	js := fmt.Sprintf(`
const urls = %s, hosts = %s;
const tries = [];
for (const u of urls) {
  tries.push(fetch(u + "/fetch").catch(e => "refused"));
  tries.push(fetch("/redirect?to=" + encodeURIComponent(u + "/redirected-fetch")).catch(e => "refused"));
  tries.push(new Promise(res => { const x = new XMLHttpRequest(); x.onloadend = res; x.open("GET", u + "/xhr"); x.send(); }));
  try { navigator.sendBeacon(u + "/beacon", "x"); } catch (e) {}
  tries.push(new Promise(res => { try { const es = new EventSource(u + "/events"); es.onerror = () => { es.close(); res(); }; } catch (e) { res(); } }));
}
for (const hst of hosts) {
  for (const s of ["ws", "wss"]) {
    tries.push(new Promise(res => { try { const w = new WebSocket(s + "://" + hst + "/ws"); w.onerror = res; w.onclose = res; } catch (e) { res(); } }));
  }
}
tries.push(new Promise(res => { const w = new Worker("/worker.js"); w.onmessage = res; w.onerror = res; }));
let sw = "no service worker API";
if (navigator.serviceWorker) {
  tries.push(navigator.serviceWorker.register("/sw.js").then(() => { sw = "registered"; }, e => { sw = "refused: " + e.message; }));
}
Promise.allSettled(tries).then(() => setTimeout(() => {
  const d = document.createElement("p"); d.id = "done"; d.textContent = "attacks finished; service worker " + sw;
  document.body.appendChild(d);
}, 500));
`, jsArray(urls), jsArray(targets))
	h.handle("/attack", `<!doctype html><title>attack</title><h1>attack page</h1><p>Every request below aims at the victim.</p>`+strings.Join(tags, "\n")+`<script>`+js+`</script>`)
	h.pages.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	h.pages.HandleFunc("/worker.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprintf(w, `const urls = %s; Promise.allSettled(urls.map(u => fetch(u + "/worker"))).then(() => postMessage("done"));`, jsArray(urls))
	})
	h.pages.HandleFunc("/sw.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprintf(w, `self.addEventListener("install", () => { for (const u of %s) fetch(u + "/sw"); });`, jsArray(urls))
	})

	r := h.must("s1", OpenName, map[string]any{"url": h.page + "/attack", "wait_for": "#done"})
	got := text(r)
	if !strings.Contains(got, "attack page") || !strings.Contains(got, "attacks finished; service worker refused") {
		t.Errorf("the page did not load and run to the end:\n%s", got)
	}
	o := pageOut(t, r)
	if o.Status != 200 {
		t.Errorf("status %d", o.Status)
	}
	blocked := strings.Join(o.Blocked, "\n")
	for _, want := range []string{"127.0.0.1", "::1", "169.254.169.254", "0.0.0.0", "loopback.test"} {
		if !strings.Contains(blocked, want) {
			t.Errorf("no refusal recorded for %s; blocked:\n%s", want, blocked)
		}
	}

	// Top-level navigations: straight to the victim, and through a redirect.
	for _, u := range urls {
		r, err := h.call(context.Background(), "s1", OpenName, map[string]any{"url": u})
		if err != nil || !r.IsError || !strings.Contains(text(r), "refused") {
			t.Errorf("browser_open %s: %v %+v", u, err, r)
		}
	}
	// An open that a redirect takes to a refused address fails, naming
	// the redirect and the guard's reason: the proxy's refusal is not
	// shown as a page of that address.
	for _, u := range urls {
		if !strings.HasPrefix(u, "http://") {
			continue // an https redirect is a refused tunnel, a failed load
		}
		r, err := h.call(context.Background(), "s1", OpenName, map[string]any{"url": h.page + "/redirect?to=" + u})
		if err != nil || !r.IsError || !strings.Contains(text(r), "redirect to "+u) || !strings.Contains(text(r), "refused") {
			t.Errorf("browser_open through a redirect to %s: %v %s", u, err, text(r))
		}
	}
	for _, u := range urls[:4] {
		_, _ = h.call(context.Background(), "s1", ActName, map[string]any{"page_id": "p1", "actions": []map[string]any{{"action": "navigate", "url": h.page + "/redirect?to=" + u}}})
	}

	time.Sleep(500 * time.Millisecond) // late connections would show up now
	if n := v.accepted.Load(); n != 0 {
		t.Errorf("the victim accepted %d connections (first: %v)", n, v.first.Load())
	}
	for _, d := range h.dials() {
		if d != pageHost+":"+strconv.Itoa(h.port) {
			t.Errorf("the proxy dialed %s", d)
		}
	}
	t.Logf("%d requests refused in the page's read; the proxy dialed only %s", len(o.Blocked), h.page)
}

func jsArray(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = strconv.Quote(x)
	}
	return "[" + strings.Join(q, ",") + "]"
}
