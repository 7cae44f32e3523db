package extract

import (
	"context"
	"strings"
	"testing"
)

// TestMainContentWithAndWithoutClutter: a page with anything readability
// removes (navigation, a sidebar, a cookie banner, a hidden block) goes
// through readability and loses it; a page without any is its whole body
// (readability is skipped: it would keep everything and costs a third of
// a large page's extraction), headings' ids and classes untouched.
func TestMainContentWithAndWithoutClutter(t *testing.T) {
	article := `<h1 id="top">Guide</h1><h2 id="Comments">Comments</h2><p>` + strings.Repeat("The real text of the article, long enough to be content. ", 10) + `</p>`
	tests := []struct {
		name, body, gone string
	}{
		{"nav", `<nav><a href="/a">Home menu link</a></nav><article>` + article + `</article>`, "Home menu link"},
		{"sidebar", `<div class="sidebar"><p>Sidebar promo text here.</p></div><div>` + article + `</div>`, "Sidebar promo text"},
		{"navigation role", `<div role="navigation"><p>Jump to a section.</p></div><main>` + article + `</main>`, "Jump to a section"},
		{"hidden", `<div style="display:none"><p>Invisible upsell.</p></div><div>` + article + `</div>`, "Invisible upsell"},
		{"clean", `<div>` + article + `<p>A closing paragraph that readability could drop as short.</p></div>`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			page := `<!doctype html><html><head><title>T</title></head><body>` + tc.body + `</body></html>`
			d, err := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/g"), ContentType: "text/html", Body: []byte(page)}, Options{Format: Markdown, MainContent: true})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(d.Text, "The real text of the article") || !strings.Contains(d.Text, "## Comments") {
				t.Fatalf("the article is missing:\n%s", d.Text)
			}
			if tc.gone != "" && strings.Contains(d.Text, tc.gone) {
				t.Errorf("clutter %q kept:\n%s", tc.gone, d.Text)
			}
			if tc.gone == "" && !strings.Contains(d.Text, "A closing paragraph") {
				t.Errorf("a clean page lost text:\n%s", d.Text)
			}
			h, _ := New().Extract(context.Background(), Input{URL: mustURL(t, "http://example.test/g"), ContentType: "text/html", Body: []byte(page)}, Options{Format: HTMLFormat, MainContent: true})
			if !strings.Contains(h.Text, `<h2 id="Comments">`) {
				t.Errorf("heading id lost: %s", h.Text)
			}
		})
	}
}
