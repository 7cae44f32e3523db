package extract

import (
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// renderText writes n as plain text: inline whitespace collapsed, blocks on
// their own lines with a blank line between paragraphs, <pre> kept exactly,
// list items marked, table cells separated by tabs, links as their text.
func renderText(n *html.Node) string {
	t := &textWriter{}
	t.node(n)
	return strings.TrimSpace(t.b.String())
}

type textWriter struct {
	b strings.Builder
	// pending is the number of newlines owed before the next text.
	pending int
	// space is owed before the next inline text.
	space bool
	// started is set once anything was written.
	started bool
	// endsInSpace is set when the last thing written ends in whitespace.
	endsInSpace bool
	pre         int
}

var textBlocks = map[atom.Atom]int{
	atom.P: 2, atom.H1: 2, atom.H2: 2, atom.H3: 2, atom.H4: 2, atom.H5: 2, atom.H6: 2,
	atom.Pre: 2, atom.Blockquote: 2, atom.Table: 2, atom.Ul: 2, atom.Ol: 2, atom.Dl: 2,
	atom.Figure: 2, atom.Hr: 2, atom.Section: 1, atom.Article: 1, atom.Div: 1, atom.Header: 1,
	atom.Footer: 1, atom.Nav: 1, atom.Aside: 1, atom.Main: 1, atom.Address: 1, atom.Details: 1,
	atom.Summary: 1, atom.Figcaption: 1, atom.Li: 1, atom.Dt: 1, atom.Dd: 1, atom.Tr: 1,
	atom.Caption: 1, atom.Form: 1, atom.Fieldset: 1, atom.Body: 1,
}

var textSkip = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Head: true, atom.Svg: true, atom.Iframe: true, atom.Object: true, atom.Button: true,
	atom.Select: true, atom.Input: true, atom.Textarea: true,
}

func (t *textWriter) breakLines(n int) {
	if n > t.pending {
		t.pending = n
	}
	t.space = false
}

func (t *textWriter) write(s string) {
	if s == "" {
		return
	}
	if t.started {
		if t.pending > 0 {
			t.b.WriteString(strings.Repeat("\n", t.pending))
		} else if t.space && !t.endsInSpace {
			t.b.WriteByte(' ')
		}
	}
	t.pending, t.space = 0, false
	t.b.WriteString(s)
	t.started = true
	t.endsInSpace = isSpace(s[len(s)-1])
}

func (t *textWriter) node(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		if t.pre > 0 {
			t.write(n.Data)
			return
		}
		t.inline(n.Data)
		return
	case html.ElementNode:
	case html.DocumentNode:
		t.children(n)
		return
	default:
		return
	}
	if textSkip[n.DataAtom] {
		return
	}
	switch n.DataAtom {
	case atom.Br:
		if t.pre > 0 {
			// Inside <pre> every <br> is a line break of its own.
			t.write("\n")
			return
		}
		t.breakLines(1)
		t.started = true
		return
	case atom.Td, atom.Th:
		if hasPrevElement(n) {
			t.write("\t")
		}
		t.children(n)
		return
	case atom.Li:
		t.breakLines(1)
		t.write(listMarker(n))
		t.space = false
		t.children(n)
		t.breakLines(1)
		return
	case atom.Pre:
		t.breakLines(2)
		t.pre++
		t.children(n)
		t.pre--
		t.breakLines(2)
		return
	}
	if lines, ok := textBlocks[n.DataAtom]; ok {
		t.breakLines(lines)
		t.children(n)
		t.breakLines(lines)
		return
	}
	t.children(n)
}

func (t *textWriter) children(n *html.Node) {
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		t.node(c)
	}
}

// inline writes text with runs of whitespace collapsed to one space.
func (t *textWriter) inline(s string) {
	if s == "" {
		return
	}
	lead := isSpace(s[0])
	trail := isSpace(s[len(s)-1])
	f := strings.Fields(s)
	if len(f) == 0 {
		if t.started && t.pending == 0 {
			t.space = true
		}
		return
	}
	if lead && t.pending == 0 {
		t.space = true
	}
	t.write(strings.Join(f, " "))
	t.space = trail
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

func hasPrevElement(n *html.Node) bool {
	for p := n.PrevSibling; p != nil; p = p.PrevSibling {
		if p.Type == html.ElementNode {
			return true
		}
	}
	return false
}

// listMarker is "- " in an unordered list and "N. " in an ordered one.
func listMarker(li *html.Node) string {
	if li.Parent == nil || li.Parent.DataAtom != atom.Ol {
		return "- "
	}
	i := 1
	if s, ok := attr(li.Parent, "start"); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
			i = n
		}
	}
	for p := li.PrevSibling; p != nil; p = p.PrevSibling {
		if p.Type == html.ElementNode && p.DataAtom == atom.Li {
			i++
		}
	}
	return strconv.Itoa(i) + ". "
}
