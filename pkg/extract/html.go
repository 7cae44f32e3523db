package extract

import (
	"bytes"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"codeberg.org/readeck/go-readability/v2"
	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"github.com/microcosm-cc/bluemonday"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// nearlyEmpty is the article size under which readability is judged to
// have missed the page (content hidden until scripts run, unusual markup):
// fewer than this many non-space characters while the page has more than
// twice as many. The whole page is used instead.
const nearlyEmpty = 200

// converters are the Markdown converters: CommonMark, and CommonMark plus
// GFM tables. The table plugin escapes "|" in all text and looks at every
// node, which costs a few percent; a part without <table> uses plain.
type converters struct {
	plain, tables *converter.Converter
}

func newConverters() converters {
	cm := func() converter.Plugin {
		return commonmark.NewCommonmarkPlugin(
			// An anchor without href is its text, not "[text]()"; an empty
			// link is nothing, not "[]()".
			commonmark.WithLinkEmptyHrefBehavior(commonmark.LinkBehaviorSkip),
			commonmark.WithLinkEmptyContentBehavior(commonmark.LinkBehaviorSkip),
		)
	}
	plain := converter.NewConverter(converter.WithPlugins(base.NewBasePlugin(), cm()))
	// Cells are not padded to their column's width: alignment spaces cost
	// the reader's max_length and a model reads the table without them.
	tables := converter.NewConverter(converter.WithPlugins(base.NewBasePlugin(), cm(),
		table.NewTablePlugin(table.WithCellPaddingBehavior(table.CellPaddingBehaviorMinimal))))
	for _, c := range []*converter.Converter{plain, tables} {
		c.Register.RendererFor("a", converter.TagTypeInline, renderLink, converter.PriorityEarly)
	}
	return converters{plain: plain, tables: tables}
}

// linkEscaper percent-encodes what would end a Markdown link destination
// early (CommonMark 6.3); everything else stays as the page wrote it.
var linkEscaper = strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29", "<", "%3C", ">", "%3E", "[", "%5B", "]", "%5D")

// renderLink writes a link with its destination as absolutize left it:
// html-to-markdown's own renderer decodes and re-encodes the query string
// ("q=a+b" became "q=a%20b", "next=/x" became "next=%2Fx"), which changes
// what the link means to some servers. Links without href or without text,
// and links whose text spans lines, are left to the library.
func renderLink(ctx converter.Context, w converter.Writer, n *html.Node) converter.RenderStatus {
	href, ok := attr(n, "href")
	href = strings.TrimSpace(href)
	if !ok || href == "" {
		return converter.RenderTryNext
	}
	var buf bytes.Buffer
	ctx.RenderChildNodes(ctx.WithValue("is_inside_link", true), &buf, n)
	content := buf.Bytes()
	trimmed := bytes.TrimSpace(content)
	if len(trimmed) == 0 || bytes.ContainsAny(trimmed, "\n\r") {
		return converter.RenderTryNext
	}
	at := bytes.Index(content, trimmed)
	var out bytes.Buffer // a bytes.Buffer's writes never fail
	out.Grow(len(content) + len(href) + 8)
	out.Write(content[:at])
	out.WriteByte('[')
	out.Write(trimmed)
	out.WriteString("](")
	out.WriteString(linkEscaper.Replace(href))
	if title, ok := attr(n, "title"); ok && strings.TrimSpace(title) != "" {
		out.WriteString(` "`)
		out.WriteString(strings.ReplaceAll(strings.Join(strings.Fields(title), " "), `"`, `\"`))
		out.WriteByte('"')
	}
	out.WriteByte(')')
	out.Write(content[at+len(trimmed):])
	_, _ = w.Write(out.Bytes())
	return converter.RenderSuccess
}

// htmlResult is an HTML page reduced to what the caller asked for.
type htmlResult struct {
	title string
	root  *html.Node
	// fallback reports that readability found (nearly) nothing and the
	// whole page was used.
	fallback bool
	// hasSentinel reports that the page text holds pipeSentinel.
	hasSentinel bool
}

// selectHTML parses the page, makes every link absolute against its
// <base href> (itself resolved against the final URL), and picks the part
// to render: the selector's matches, readability's article, or the body.
func selectHTML(text string, pageURL *url.URL, mainContent bool, selector string) (*htmlResult, error) {
	doc, err := html.Parse(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	sc := scan(doc, mainContent)
	base := pageURL
	if sc.hasBase {
		base = resolveBase(sc.baseHref, pageURL)
	}
	absolutize(doc, base)
	res := &htmlResult{title: sc.title, hasSentinel: strings.Contains(text, pipeSentinel)}
	body := sc.body
	switch {
	case selector != "":
		matches := topmost(goquery.NewDocumentFromNode(doc).Find(selector).Nodes)
		if len(matches) == 0 {
			return nil, errNoMatch
		}
		root := &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div}
		for _, m := range matches {
			m.Parent.RemoveChild(m)
			root.AppendChild(m)
		}
		res.root = root
	case mainContent:
		// Readability drops headings whose id or class looks like clutter
		// ("comments", "share"); on documentation that loses real section
		// titles (go_spec.html's <h3 id="Comments">). scan hid those
		// attributes from it; the ids come back afterwards.
		bodyLen := sc.bodyLen
		if !sc.clutter && sc.body != doc {
			// Nothing in the body is what readability removes: the body is
			// the main content, and readability's pass (a third of the
			// extraction of a large page) would only cost. The hidden
			// heading attributes come back as after readability.
			restoreHeadings(sc.body)
			res.root = sc.body
			if res.title == "" {
				res.title = sc.h1
			}
			return res, nil
		}
		// ParseAndMutate spares a copy of the document (a large part of the
		// cost on big pages); the rare fallback parses the page again.
		p := readability.NewParser()
		// Classes stay: html-to-markdown reads a code block's language
		// from class="language-go", and it spares readability a pass.
		p.KeepClasses = true
		art, err := p.ParseAndMutate(doc, base)
		if err == nil && art.Node != nil {
			got := restoreHeadings(art.Node)
			if !(got < nearlyEmpty && 2*got < bodyLen) {
				res.root = art.Node
				if res.title == "" {
					res.title = art.Title()
				}
				return res, nil
			}
		}
		doc, err = html.Parse(strings.NewReader(text))
		if err != nil {
			return nil, err
		}
		absolutize(doc, base)
		res.root, res.fallback = findBody(doc), true
	default:
		res.root = body
	}
	return res, nil
}

// htmlPolicy is what format=html keeps of a page: bluemonday's policy for
// user-generated content (structure, text, links, images, tables, code
// with its language class), so that no <script>, <style>, <iframe>, form,
// event handler or javascript: URL reaches a harness that might render the
// HTML. Links keep their rel as the page had it, code blocks their
// language class.
var htmlPolicy = func() *bluemonday.Policy {
	p := bluemonday.UGCPolicy()
	p.AllowAttrs("id").OnElements("h1", "h2", "h3", "h4", "h5", "h6")
	p.AllowAttrs("rel").OnElements("a")
	p.AllowAttrs("class").Matching(codeClassRE).OnElements("code", "pre")
	p.AllowImages()
	p.AllowAttrs("srcset").Matching(srcsetRE).OnElements("img", "source")
	// Last: AllowImages turns rel="nofollow" on.
	p.RequireNoFollowOnLinks(false)
	p.RequireNoFollowOnFullyQualifiedLinks(false)
	return p
}()

// codeClassRE is a code block's language class ("language-go", "lang-sh"),
// which Markdown converters and highlighters read.
var codeClassRE = regexp.MustCompile(`^(language|lang)-[A-Za-z0-9_+#.-]{1,32}$`)

// srcsetRE accepts a srcset of absolute http(s) URLs with their width or
// density descriptors (absolutize has resolved them).
var srcsetRE = regexp.MustCompile(`^\s*https?://[^\s,]+(\s+\d+(\.\d+)?[wx])?(\s*,\s*https?://[^\s,]+(\s+\d+(\.\d+)?[wx])?)*\s*$`)

// render writes the chosen part in format f.
func (r *htmlResult) render(convs converters, f Format) (string, error) {
	switch f {
	case HTMLFormat:
		var b bytes.Buffer
		for c := r.root.FirstChild; c != nil; c = c.NextSibling {
			if err := html.Render(&b, c); err != nil {
				return "", err
			}
		}
		return strings.TrimSpace(htmlPolicy.SanitizeReader(&b).String()), nil
	case TextFormat:
		return renderText(r.root), nil
	}
	conv := convs.plain
	if hasTable(r.root) {
		conv = convs.tables
	}
	guarded := !r.hasSentinel && protectCellPipes(r.root)
	out, err := conv.ConvertNode(r.root)
	if err != nil {
		return "", err
	}
	if guarded {
		out = bytes.ReplaceAll(out, []byte(pipeSentinel), []byte(`\|`))
	}
	return string(out), nil
}

func hasTable(n *html.Node) bool {
	found := false
	walk(n, func(c *html.Node) bool {
		if found {
			return false
		}
		if c.Type == html.ElementNode && c.DataAtom == atom.Table {
			found = true
		}
		return !found
	})
	return found
}

// pipeSentinel stands in for "|" inside code spans of table cells during
// conversion. It is a Unicode noncharacter, never meant for interchange;
// pages that carry it anyway skip the workaround.
const pipeSentinel = "\uFDD0"

// protectCellPipes replaces "|" in code spans inside table cells with
// pipeSentinel, to be written back as "\|". GFM ends a cell at any
// unescaped "|", code span or not, and html-to-markdown escapes pipes in
// cell text but not in cell code. It reports whether it changed anything.
func protectCellPipes(root *html.Node) bool {
	changed := false
	var visit func(n *html.Node, inCell, inCode bool)
	visit = func(n *html.Node, inCell, inCode bool) {
		if n.Type == html.TextNode && inCell && inCode && strings.Contains(n.Data, "|") {
			n.Data = strings.ReplaceAll(n.Data, "|", pipeSentinel)
			changed = true
			return
		}
		if n.Type == html.ElementNode {
			switch n.DataAtom {
			case atom.Td, atom.Th:
				inCell = true
			case atom.Code, atom.Kbd, atom.Samp, atom.Tt:
				inCode = true
			case atom.Pre:
				// Block code renders on its own terms.
				inCell = false
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			visit(c, inCell, inCode)
		}
	}
	visit(root, false, false)
	return changed
}

const (
	hiddenID    = "data-webfetch-id"
	hiddenClass = "data-webfetch-class"
)

// topmost drops matches inside other matches, so nested matches are not
// rendered twice.
func topmost(nodes []*html.Node) []*html.Node {
	in := make(map[*html.Node]bool, len(nodes))
	for _, n := range nodes {
		in[n] = true
	}
	out := nodes[:0]
	for _, n := range nodes {
		inside := false
		for p := n.Parent; p != nil; p = p.Parent {
			if in[p] {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, n)
		}
	}
	return out
}

// scanned is what one pass over a parsed page finds.
type scanned struct {
	// baseHref is the href of the first <base href> (HTML standard,
	// "document base URL"); hasBase tells whether there is one.
	baseHref string
	hasBase  bool
	title    string
	body     *html.Node
	// bodyLen counts the non-space characters of the body's text (scripts
	// and styles left out), with hide set only, up to 2*nearlyEmpty.
	bodyLen int
	// clutter reports, with hide set only, that the body holds something
	// readability exists to remove (see isClutter); a body without any is
	// all main content, and readability is not run on it.
	clutter bool
	// h1 is the text of the first <h1>, the title of a page without
	// <title> whose readability pass is skipped.
	h1 string
}

// clutterTags are elements that are never main content: navigation,
// page furniture, forms and embeds.
var clutterTags = map[atom.Atom]bool{
	atom.Nav: true, atom.Header: true, atom.Footer: true, atom.Aside: true, atom.Form: true, atom.Menu: true,
	atom.Dialog: true, atom.Iframe: true, atom.Button: true, atom.Input: true, atom.Select: true,
	atom.Textarea: true, atom.Object: true, atom.Embed: true,
}

// clutterRE matches the class and id words by which pages mark what is
// not their content (the words readability's own candidate filter looks
// for, and a few more).
var clutterRE = regexp.MustCompile(`(?i)ad-break|agegate|banner|breadcrumb|combx|comment|community|consent|cookie|cover-wrap|disqus|extra|footer|gdpr|header|hidden|legends|masthead|menu|modal|nav|pager|pagination|popup|promo|related|remark|replies|rss|share|shoutbox|sidebar|skyscraper|social|sponsor|subscribe|supplemental|toolbar|widget`)

// clutterRoles are ARIA landmark roles of page furniture.
var clutterRoles = map[string]bool{"navigation": true, "banner": true, "contentinfo": true, "complementary": true, "search": true, "dialog": true, "menu": true, "menubar": true, "alert": true, "toolbar": true}

// isClutter reports an element readability would judge (by its tag, role,
// hidden state, class or id), so that its verdict is needed.
func isClutter(n *html.Node) bool {
	if clutterTags[n.DataAtom] {
		return true
	}
	for _, a := range n.Attr {
		if a.Namespace != "" {
			continue
		}
		switch a.Key {
		case "role":
			if clutterRoles[strings.ToLower(strings.TrimSpace(a.Val))] {
				return true
			}
		case "hidden", "aria-hidden":
			return true
		case "style":
			if strings.Contains(a.Val, "none") || strings.Contains(a.Val, "hidden") {
				return true
			}
		case "id", "class":
			if clutterRE.MatchString(a.Val) {
				return true
			}
		}
	}
	return false
}

// scan walks the page once. With hide, it also hides headings' id and
// class attributes from readability (see selectHTML) and counts the body's
// text.
func scan(doc *html.Node, hide bool) scanned {
	var sc scanned
	var visit func(n *html.Node, inBody, skip bool)
	visit = func(n *html.Node, inBody, skip bool) {
		switch n.Type {
		case html.TextNode:
			// Only "is the article under half the body" is ever asked, and
			// only of an article under nearlyEmpty: past 2*nearlyEmpty the
			// exact count no longer matters.
			if hide && inBody && !skip && sc.bodyLen < 2*nearlyEmpty {
				sc.bodyLen += nonSpace(n.Data)
			}
			return
		case html.ElementNode:
			switch n.DataAtom {
			case atom.Base:
				if h, ok := attr(n, "href"); ok && !sc.hasBase {
					sc.baseHref, sc.hasBase = h, true
				}
			case atom.Title:
				if sc.title == "" && n.Namespace == "" {
					sc.title = strings.Join(strings.Fields(textOf(n)), " ")
				}
				return
			case atom.Body:
				if sc.body == nil {
					sc.body, inBody = n, true
				}
			case atom.Script, atom.Style, atom.Noscript, atom.Template:
				skip = true
			case atom.Svg:
				skip = true
			case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
				if n.DataAtom == atom.H1 && sc.h1 == "" && inBody {
					sc.h1 = strings.Join(strings.Fields(textOf(n)), " ")
				}
				if hide {
					for i := range n.Attr {
						switch {
						case n.Attr[i].Namespace != "":
						case n.Attr[i].Key == "id":
							n.Attr[i].Key = hiddenID
						case n.Attr[i].Key == "class":
							n.Attr[i].Key = hiddenClass
						}
					}
				}
			default:
				if hide && inBody && !skip && !sc.clutter && isClutter(n) {
					sc.clutter = true
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			visit(c, inBody, skip)
		}
	}
	visit(doc, false, false)
	if sc.body == nil {
		sc.body = doc
	}
	return sc
}

// restoreHeadings gives readability's article its heading ids back and
// the atoms of the elements it made, and returns the non-space characters of its text (scripts and styles left
// out), counted up to nearlyEmpty.
func restoreHeadings(n *html.Node) int {
	count := 0
	walk(n, func(c *html.Node) bool {
		switch c.Type {
		case html.TextNode:
			if count < nearlyEmpty { // the caller only compares with nearlyEmpty
				count += nonSpace(c.Data)
			}
		case html.ElementNode:
			if c.DataAtom == 0 {
				// Readability builds the paragraphs it rebuilds (from
				// <br><br>, from <div>s) with a tag name and no atom; the
				// renderers switch on atoms.
				c.DataAtom = atom.Lookup([]byte(c.Data))
			}
			switch c.DataAtom {
			case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Head:
				return false
			case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
				for i := range c.Attr {
					if c.Attr[i].Namespace == "" && c.Attr[i].Key == hiddenID {
						c.Attr[i].Key = "id"
					}
				}
			}
		}
		return true
	})
	return count
}

func nonSpace(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' {
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			n++
		}
		i += size
	}
	return n
}

// resolveBase resolves a <base href> against the page URL; a base that is
// not http(s) or does not parse is ignored.
func resolveBase(href string, pageURL *url.URL) *url.URL {
	if pageURL == nil {
		return nil
	}
	b, err := pageURL.Parse(strings.TrimSpace(href))
	if err != nil || (b.Scheme != "http" && b.Scheme != "https") {
		return pageURL
	}
	return b
}

// linkAttrs are the attributes that hold a URL, by element.
var linkAttrs = map[atom.Atom][]string{
	atom.A:          {"href"},
	atom.Area:       {"href"},
	atom.Img:        {"src", "srcset"},
	atom.Source:     {"src", "srcset"},
	atom.Video:      {"src", "poster"},
	atom.Audio:      {"src"},
	atom.Track:      {"src"},
	atom.Iframe:     {"src"},
	atom.Embed:      {"src"},
	atom.Object:     {"data"},
	atom.Blockquote: {"cite"},
	atom.Q:          {"cite"},
	atom.Del:        {"cite"},
	atom.Ins:        {"cite"},
}

// absolutize rewrites every link and image URL against base.
func absolutize(doc *html.Node, base *url.URL) {
	if base == nil {
		return
	}
	walk(doc, func(n *html.Node) bool {
		if n.Type != html.ElementNode {
			return true
		}
		names, ok := linkAttrs[n.DataAtom]
		if !ok {
			return true
		}
		kept := n.Attr[:0]
		for _, a := range n.Attr {
			if a.Namespace != "" || !slices.Contains(names, a.Key) {
				kept = append(kept, a)
				continue
			}
			switch {
			case isInlineData(a.Val) && a.Key != "href":
				// An inline image is base64 that a reader cannot use and
				// that can fill the whole page budget: keep the image (and
				// its alt text) with an empty data URL (RFC 2397).
				a.Val = "data:,"
			case a.Key == "srcset":
				a.Val = absSrcset(a.Val, base)
			default:
				u, ok := absURL(a.Val, base)
				if !ok {
					continue // a javascript: (or other active) link: the text stays, the link goes
				}
				a.Val = u
			}
			kept = append(kept, a)
		}
		n.Attr = kept
		return true
	})
}

func isInlineData(v string) bool {
	v = strings.TrimSpace(v)
	return len(v) > 5 && strings.EqualFold(v[:5], "data:") && v != "data:,"
}

// urlSpace removes what browsers remove from a URL before parsing it.
var urlSpace = strings.NewReplacer("\t", "", "\n", "", "\r", "")

// absURL resolves raw against base. ok is false for a URL that is not
// http, https, mailto or tel once resolved (javascript:, vbscript:, data:
// …) or that does not parse: such a link must not reach a reader that
// renders the result. Tabs and line breaks are removed first, as browsers
// do (WHATWG URL), so "java\tscript:" is seen for what it is.
func absURL(raw string, base *url.URL) (string, bool) {
	v := strings.TrimSpace(raw)
	if v == "" {
		return raw, true
	}
	if strings.ContainsAny(v, "\t\n\r") {
		v = urlSpace.Replace(v)
	}
	u, err := base.Parse(v)
	if err != nil {
		return "", false
	}
	switch u.Scheme {
	case "http", "https", "mailto", "tel":
		return u.String(), true
	}
	return "", false
}

// absSrcset rewrites each candidate URL of a srcset ("a.png 1x, b.png 2x").
func absSrcset(v string, base *url.URL) string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		f := strings.Fields(p)
		if len(f) == 0 {
			continue
		}
		u, ok := absURL(f[0], base)
		if !ok {
			continue
		}
		f[0] = u
		out = append(out, strings.Join(f, " "))
	}
	return strings.Join(out, ", ")
}

func findBody(doc *html.Node) *html.Node {
	var body *html.Node
	walk(doc, func(n *html.Node) bool {
		if body != nil {
			return false
		}
		if n.Type == html.ElementNode && n.DataAtom == atom.Body {
			body = n
			return false
		}
		return true
	})
	if body == nil {
		return doc
	}
	return body
}

// walk visits n and its descendants in document order; fn returning false
// skips the node's children.
func walk(n *html.Node, fn func(*html.Node) bool) {
	if !fn(n) {
		return
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func textOf(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) bool {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
		return true
	})
	return b.String()
}

// CheckSelector reports whether s is a CSS selector goquery can use (it
// compiles selectors with cascadia, and silently matches nothing on a bad
// one, hence this check up front).
func CheckSelector(s string) error {
	_, err := cascadia.Compile(s)
	return err
}
