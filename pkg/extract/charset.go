package extract

import (
	"bytes"
	"mime"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gogs/chardet"
	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
	xunicode "golang.org/x/text/encoding/unicode"
)

// Charset sources, reported with the decoded text.
const (
	FromBOM    = "bom"
	FromHeader = "header"
	FromMeta   = "meta"
	FromSniff  = "sniffing"
)

// Decoded is a body turned into UTF-8.
type Decoded struct {
	Text string
	// Charset is the WHATWG name of the encoding used ("shift_jis").
	Charset string
	// Source says where the charset came from: bom, header, meta or
	// sniffing.
	Source string
}

// Decode turns body into valid UTF-8. The charset comes from, in order:
// a byte order mark, the Content-Type header's charset, a <meta> charset
// declaration in the first 1024 bytes (HTML only), then sniffing: valid
// UTF-8 is UTF-8, anything else goes to a statistical detector (the ICU
// algorithm in github.com/gogs/chardet), and windows-1252 is the last
// resort. The BOM comes before the header as in the WHATWG encoding
// standard ("decode", step 1): a BOM is in the bytes themselves, while a
// header charset is often a server default. Bytes invalid in the chosen
// encoding become U+FFFD.
func Decode(body []byte, contentType string, isHTML bool) Decoded {
	if name, rest, ok := bomCharset(body); ok {
		return decodeWith(rest, name, FromBOM)
	}
	if _, params, err := mime.ParseMediaType(contentType); err == nil {
		if cs := params["charset"]; cs != "" {
			if e, name := charset.Lookup(cs); e != nil {
				return decodeWith(body, name, FromHeader)
			}
		}
	}
	if isHTML {
		if name := metaCharset(body); name != "" {
			return decodeWith(body, name, FromMeta)
		}
	}
	return decodeWith(body, sniffCharset(body, isHTML), FromSniff)
}

func bomCharset(b []byte) (string, []byte, bool) {
	switch {
	case bytes.HasPrefix(b, bomUTF8):
		return "utf-8", b[3:], true
	case bytes.HasPrefix(b, bomUTF16BE):
		return "utf-16be", b, true
	case bytes.HasPrefix(b, bomUTF16LE):
		return "utf-16le", b, true
	}
	return "", nil, false
}

func decodeWith(body []byte, name, source string) Decoded {
	var e encoding.Encoding
	switch name {
	case "utf-8":
		e = encoding.Nop
	case "utf-16be":
		e = xunicode.UTF16(xunicode.BigEndian, xunicode.ExpectBOM)
	case "utf-16le":
		e = xunicode.UTF16(xunicode.LittleEndian, xunicode.ExpectBOM)
	default:
		e, _ = charset.Lookup(name)
	}
	var s string
	if e == nil || e == encoding.Nop {
		s = string(body)
	} else if out, err := e.NewDecoder().Bytes(body); err == nil {
		s = string(out)
	} else {
		s = string(body)
	}
	s = strings.TrimPrefix(s, "\uFEFF")
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return Decoded{Text: s, Charset: name, Source: source}
}

// metaCharset is the HTML prescan (WHATWG "prescan a byte stream to
// determine its encoding", simplified): the first <meta charset> or
// <meta http-equiv="content-type" content="...charset=..."> within the
// first 1024 bytes. A UTF-16 declaration means UTF-8, as the standard says,
// since a page that could be read as ASCII to find it is not UTF-16.
func metaCharset(body []byte) string {
	if len(body) > 1024 {
		body = body[:1024]
	}
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			if string(name) != "meta" || !hasAttr {
				continue
			}
			var cs, content string
			var pragma bool
			for more := true; more; {
				var k, v []byte
				k, v, more = z.TagAttr()
				switch string(k) {
				case "charset":
					cs = string(v)
				case "content":
					content = string(v)
				case "http-equiv":
					pragma = strings.EqualFold(string(v), "content-type")
				}
			}
			if cs == "" && pragma {
				if _, params, err := mime.ParseMediaType(content); err == nil {
					cs = params["charset"]
				}
			}
			if cs == "" {
				continue
			}
			if _, name := charset.Lookup(cs); name != "" {
				if strings.HasPrefix(name, "utf-16") {
					return "utf-8"
				}
				return name
			}
		}
	}
}

// chardetNames maps the detector's names to WHATWG labels where they
// differ.
var chardetNames = map[string]string{
	"GB-18030":     "gb18030",
	"ISO-8859-8-I": "iso-8859-8-i",
}

// sniffCharset guesses the encoding of bytes that declare none: valid
// UTF-8 is UTF-8; otherwise the detector's best guess, unless its decoding
// reads as garbage (see plausibility) while another candidate reads as
// words: on short pages the detector takes KOI8-R Russian for
// windows-1252 ("ëÏÒÏÔËÉÊ ÔÅËÓÔ" for "Короткий текст").
func sniffCharset(body []byte, isHTML bool) string {
	if isValidUTF8Prefix(body) {
		return "utf-8"
	}
	d := chardet.NewTextDetector()
	if isHTML {
		d = chardet.NewHtmlDetector()
	}
	best := "windows-1252"
	if rs, err := d.DetectAll(body); err == nil {
		best = detected(rs, best)
	}
	sample := body[:min(len(body), 64<<10)]
	score := plausibility(sample, best)
	if score >= 0.9 {
		return best
	}
	for _, c := range singleByteCandidates {
		if c == best {
			continue
		}
		if s := plausibility(sample, c); s > score+0.2 {
			best, score = c, s
		}
	}
	return best
}

// detected is the WHATWG name of the detector's best guess among rs, def
// when it has none with a confidence of 20 or more. The detector runs its
// recognizers concurrently and sorts their results unstably, so results of
// equal confidence come in any order ("caf\xe9" is ISO-8859-1 and
// ISO-8859-2 at 30 each); a tie goes to the charset most used
// (singleByteCandidates' order), then to the first name, so that the same
// bytes always decode the same.
func detected(rs []chardet.Result, def string) string {
	best, bestConf, bestRank := def, 0, 0
	for _, r := range rs {
		if r.Confidence < 20 {
			continue
		}
		label := r.Charset
		if l, ok := chardetNames[label]; ok {
			label = l
		}
		e, name := charset.Lookup(label)
		if e == nil {
			continue
		}
		rank := slices.Index(singleByteCandidates, name)
		if rank < 0 {
			rank = len(singleByteCandidates)
		}
		if r.Confidence > bestConf || r.Confidence == bestConf && (rank < bestRank || rank == bestRank && name < best) {
			best, bestConf, bestRank = name, r.Confidence, rank
		}
	}
	return best
}

// singleByteCandidates are the legacy single-byte encodings tried when the
// detector's guess reads as garbage, most used first.
var singleByteCandidates = []string{"windows-1252", "koi8-r", "windows-1251", "iso-8859-5", "ibm866", "koi8-u", "windows-1250", "iso-8859-2", "windows-1253", "iso-8859-7"}

// plausibility decodes b as the named charset and returns the share of its
// words with non-ASCII letters that look like words: one script, and all
// lower case, all upper case or capitalized. A wrong single-byte decoding
// mixes cases and scripts inside words ("ëÏÒÏÔËÉÊ"). 1 when there are no
// such words.
func plausibility(b []byte, name string) float64 {
	e, _ := charset.Lookup(name)
	if e == nil {
		return 0
	}
	out, err := e.NewDecoder().Bytes(b)
	if err != nil {
		return 0
	}
	words, good := 0, 0
	text := string(out)
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if !unicode.IsLetter(r) {
			i += size
			continue
		}
		j := i
		nonASCII, upper, lower, latin, other := false, 0, 0, false, false
		firstUpper := unicode.IsUpper(r)
		for j < len(text) {
			r, size := utf8.DecodeRuneInString(text[j:])
			if !unicode.IsLetter(r) {
				break
			}
			if r >= utf8.RuneSelf {
				nonASCII = true
			}
			if unicode.Is(unicode.Latin, r) {
				latin = true
			} else {
				other = true
			}
			if unicode.IsUpper(r) {
				upper++
			} else {
				lower++
			}
			j += size
		}
		if nonASCII {
			words++
			cased := upper == 0 || lower == 0 || (firstUpper && upper == 1)
			if cased && !(latin && other) {
				good++
			}
		}
		i = j
	}
	if words == 0 {
		return 1
	}
	return float64(good) / float64(words)
}

// isValidUTF8Prefix reports whether b is UTF-8, allowing the last rune to be
// cut short.
func isValidUTF8Prefix(b []byte) bool {
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return utf8.Valid(b)
}
