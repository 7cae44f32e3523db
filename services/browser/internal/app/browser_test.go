package app

import (
	"bytes"
	"encoding/base64"
	"image/png"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestOpenReadsWhatScriptsRendered: the page's text is built by scripts,
// one part at once and one from a fetch() after load; browser_open reads
// both, where a static fetch would read none.
func TestOpenReadsWhatScriptsRendered(t *testing.T) {
	h := newHarness(t, nil)
	h.handle("/app", `<!doctype html><html><head><title>Script app</title></head><body><div id="app"></div>
<script>
document.getElementById("app").innerHTML = "<h1>Rendered by script</h1><p>The first paragraph came from JavaScript.</p>";
fetch("/data").then(r => r.json()).then(d => {
  const p = document.createElement("p"); p.id = "late"; p.textContent = d.text; document.body.appendChild(p);
});
</script></body></html>`)
	h.pages.HandleFunc("/data", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"text":"This sentence arrived by fetch after load."}`))
	})
	r := h.must("s1", OpenName, map[string]any{"url": h.page + "/app"})
	got := text(r)
	for _, want := range []string{"# Rendered by script", "The first paragraph came from JavaScript.", "This sentence arrived by fetch after load."} {
		if !strings.Contains(got, want) {
			t.Errorf("text lacks %q:\n%s", want, got)
		}
	}
	o := pageOut(t, r)
	if o.Title != "Script app" || o.Status != 200 || o.PageID != "p1" || o.URL != h.page+"/app" {
		t.Errorf("structured_content = %+v", o)
	}

	// Paging through the read: the parts join back to the whole text.
	var parts []string
	next := 0
	for i := 0; ; i++ {
		args := map[string]any{"page_id": o.PageID, "start_index": next, "max_length": 20}
		if next == 0 {
			args["url"] = h.page + "/app"
		}
		r := h.must("s1", OpenName, args)
		parts = append(parts, r.Content[0].Text)
		po := pageOut(t, r)
		if po.NextStartIndex == nil {
			break
		}
		next = *po.NextStartIndex
		if i > 100 {
			t.Fatal("pagination does not end")
		}
	}
	whole := h.must("s1", OpenName, map[string]any{"page_id": o.PageID, "max_length": 100000})
	if strings.Join(parts, "") != whole.Content[0].Text {
		t.Errorf("parts join to %q, want %q", strings.Join(parts, ""), whole.Content[0].Text)
	}
}

// TestActFillsAndSubmitsAForm: browser_act types into two fields, picks an
// option and clicks submit; the page server sees exactly those values and
// the result is the page the submit led to.
func TestActFillsAndSubmitsAForm(t *testing.T) {
	h := newHarness(t, nil)
	h.handle("/form", `<!doctype html><title>Sign up</title><form action="/submit" method="post">
<label for="name">Name</label><input id="name" name="name" value="prefilled">
<input name="email" type="email" placeholder="Email">
<select id="plan" name="plan"><option value="free">Free</option><option value="pro">Professional</option></select>
<button type="submit">Send</button></form>`)
	var mu sync.Mutex
	var seen map[string]string
	h.pages.HandleFunc("/submit", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		seen = map[string]string{"method": r.Method, "name": r.PostForm.Get("name"), "email": r.PostForm.Get("email"), "plan": r.PostForm.Get("plan")}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<title>Thanks</title><p>Thank you, ` + r.PostForm.Get("name") + `.</p>`))
	})
	r := h.must("s1", OpenName, map[string]any{"url": h.page + "/form"})
	if els := text(r); !strings.Contains(els, `"#name" input[text] "Name"`) || !strings.Contains(els, `"input[name=\"email\"]"`) {
		t.Errorf("the elements list lacks the fields:\n%s", els)
	}
	r = h.must("s1", ActName, map[string]any{"page_id": "p1", "actions": []map[string]any{
		{"action": "type", "selector": "#name", "text": "Ada Lovelace"},
		{"action": "type", "selector": `input[name="email"]`, "text": "ada@example.test"},
		{"action": "select", "selector": "#plan", "value": "Professional"},
		{"action": "click", "selector": "button[type=submit]"},
	}})
	mu.Lock()
	got := seen
	mu.Unlock()
	want := map[string]string{"method": "POST", "name": "Ada Lovelace", "email": "ada@example.test", "plan": "pro"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("server saw %s=%q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if o := pageOut(t, r); o.Title != "Thanks" || !strings.Contains(r.Content[0].Text, "Thank you, Ada Lovelace.") {
		t.Errorf("after submit: %+v %q", o, r.Content[0].Text)
	}
	// Going back returns to the form.
	r = h.must("s1", ActName, map[string]any{"page_id": "p1", "actions": []map[string]any{{"action": "back"}}})
	if o := pageOut(t, r); o.Title != "Sign up" {
		t.Errorf("after back: %+v", o)
	}
}

// TestScreenshotIsAPNGOfTheRequestedSize: the viewport capture has exactly
// the size asked for; a full-page capture is as tall as the page.
func TestScreenshotIsAPNGOfTheRequestedSize(t *testing.T) {
	h := newHarness(t, nil)
	h.handle("/tall", `<!doctype html><style>body{margin:0}div{height:2400px;background:linear-gradient(#08f,#f80)}</style><div>tall</div>`)
	h.must("s1", OpenName, map[string]any{"url": h.page + "/tall"})
	tests := []struct {
		name string
		args map[string]any
		w, h int
	}{
		{"viewport 640x480", map[string]any{"page_id": "p1", "width": 640, "height": 480}, 640, 480},
		{"default viewport", map[string]any{"page_id": "p1"}, 1280, 800},
		{"full page", map[string]any{"page_id": "p1", "width": 800, "height": 600, "full_page": true}, 800, 2400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.must("s1", ScreenshotName, tc.args)
			if len(r.Content) == 0 || r.Content[0].Type != "image" || r.Content[0].MIMEType != "image/png" {
				t.Fatalf("content = %+v", r.Content)
			}
			data, err := base64.StdEncoding.DecodeString(r.Content[0].Data)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("not a PNG: %v", err)
			}
			if b := img.Bounds(); b.Dx() != tc.w || b.Dy() != tc.h {
				t.Errorf("PNG is %dx%d, want %dx%d", b.Dx(), b.Dy(), tc.w, tc.h)
			}
		})
	}
}

// TestSessionsDoNotShareCookies: a cookie one session's page sets is sent
// by that session only; another session of the same tenant starts empty.
func TestSessionsDoNotShareCookies(t *testing.T) {
	h := newHarness(t, nil)
	h.pages.HandleFunc("/set", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "who", Value: r.URL.Query().Get("v"), Path: "/"})
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<title>set</title><p>set</p><script>localStorage.setItem("k", "` + r.URL.Query().Get("v") + `")</script>`))
	})
	h.pages.HandleFunc("/show", func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie("who")
		v := "none"
		if err == nil {
			v = c.Value
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<title>show</title><p>cookie=` + v + `</p><p id="ls"></p><script>document.getElementById("ls").textContent = "storage=" + localStorage.getItem("k")</script>`))
	})
	h.must("a", OpenName, map[string]any{"url": h.page + "/set?v=alice"})
	if got := h.must("a", OpenName, map[string]any{"url": h.page + "/show"}).Content[0].Text; !strings.Contains(got, "cookie=alice") || !strings.Contains(got, "storage=alice") {
		t.Errorf("session a does not keep its own cookie and storage: %q", got)
	}
	if got := h.must("b", OpenName, map[string]any{"url": h.page + "/show"}).Content[0].Text; !strings.Contains(got, "cookie=none") || !strings.Contains(got, "storage=null") {
		t.Errorf("session b sees session a's cookie or storage: %q", got)
	}
	// close_all ends the session: a new one starts without the cookie.
	h.must("a", PagesName, map[string]any{"action": "close_all"})
	if got := h.must("a", OpenName, map[string]any{"url": h.page + "/show"}).Content[0].Text; !strings.Contains(got, "cookie=none") {
		t.Errorf("after close_all the cookie is still there: %q", got)
	}
}
