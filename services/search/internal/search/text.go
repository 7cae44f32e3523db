package search

import (
	"net/url"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// PlainText turns a provider's snippet or title, which may carry markup
// such as Brave's <strong> highlights and HTML entities, into plain text
// with whitespace collapsed.
func PlainText(s string) string {
	if !strings.ContainsAny(s, "<&") {
		return strings.Join(strings.Fields(s), " ")
	}
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.Join(strings.Fields(b.String()), " ")
		case html.TextToken:
			b.Write(z.Text())
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			if string(name) == "br" || string(name) == "p" {
				b.WriteByte(' ')
			}
		}
	}
}

// truncate cuts s to at most n characters, ending with "…" when cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n-1])) + "…"
}

// urlKey is the URL's identity for deduplication: host lower case, scheme,
// default port, fragment and a trailing slash dropped (http and https of
// one page are one result). ok is false
// for anything but an absolute http(s) URL.
func urlKey(raw string) (key, host string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "HTTP" && u.Scheme != "HTTPS") || u.Host == "" {
		return "", "", false
	}
	host = strings.ToLower(u.Hostname())
	port := u.Port()
	scheme := strings.ToLower(u.Scheme)
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	hp := host
	if port != "" {
		hp += ":" + port
	}
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	key = hp + path
	if u.RawQuery != "" {
		key += "?" + u.RawQuery
	}
	return key, host, true
}

// matchesAny reports whether host is one of domains or a subdomain of one.
func matchesAny(host string, domains []string) bool {
	host = strings.TrimPrefix(host, "www.")
	for _, d := range domains {
		d = strings.TrimPrefix(d, "www.")
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}
