package tools

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/storage/internal/objects"
)

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func pngBytes(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{255, 0, 0, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// payload returns the bytes a storage_get result carries.
func payload(t *testing.T, r *tool.Result) []byte {
	t.Helper()
	g := ok[getResult](t, r)
	if g.Length == 0 {
		if len(r.Content) != 1 {
			t.Fatalf("empty read with %d blocks", len(r.Content))
		}
		return []byte{}
	}
	if len(r.Content) != 2 {
		t.Fatalf("get result has %d blocks, want header + data", len(r.Content))
	}
	c := r.Content[1]
	switch g.Encoding {
	case "text":
		return []byte(c.Text)
	case "base64":
		b, err := base64.StdEncoding.DecodeString(c.Text)
		if err != nil {
			t.Fatal(err)
		}
		return b
	case "image":
		b, err := base64.StdEncoding.DecodeString(c.Data)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("encoding %q", g.Encoding)
	return nil
}

func TestRoundTrip(t *testing.T) {
	h := newHarness(t, toolsConfig())
	const tenant, session = "acme", "s1"
	pngData := pngBytes(t)
	tests := []struct {
		name, key, contentType string
		text                   *string
		data                   []byte
		wantType, wantEncoding string
	}{
		{name: "text", key: "notes/today.html", text: ptr("<h1>hello</h1>\n<b>&amp;</b> naïve"), wantType: "text/html; charset=utf-8", wantEncoding: "text"},
		{name: "spaces parens", key: "my file (1).txt", text: ptr("spaces"), wantType: "text/plain; charset=utf-8", wantEncoding: "text"},
		{name: "plus equals colon", key: "a+b=c:d", text: ptr("symbols"), wantType: "text/plain; charset=utf-8", wantEncoding: "text"},
		{name: "non-ascii", key: "données/日本語 😀", text: ptr("unicode ✓"), wantType: "text/plain; charset=utf-8", wantEncoding: "text"},
		{name: "empty", key: "empty", data: []byte{}, contentType: "application/octet-stream", wantType: "application/octet-stream", wantEncoding: "text"},
		{name: "binary", key: "blob.bin", data: randomBytes(100 << 10), wantType: "application/octet-stream", wantEncoding: "base64"},
		{name: "png sniffed", key: "pic", data: pngData, wantType: "image/png", wantEncoding: "image"},
		{name: "declared png that is not one", key: "fake.png", data: []byte("héllo, not a picture"), contentType: "image/png", wantType: "image/png", wantEncoding: "base64"},
		// Bytes that are not UTF-8 are never labelled charset=utf-8: not
		// from the extension, not from sniffing.
		{name: "latin-1 under .txt", key: "latin1.txt", data: []byte("caf\xe9 cr\xe8me"), wantType: "text/plain", wantEncoding: "base64"},
		{name: "latin-1 under .html", key: "page.html", data: []byte("<p>caf\xe9</p>"), wantType: "text/html", wantEncoding: "base64"},
		{name: "latin-1 sniffed", key: "noext", data: []byte("caf\xe9 cr\xe8me"), wantType: "text/plain", wantEncoding: "base64"},
		{name: "utf-8 bytes under .txt keep the charset", key: "utf8.txt", data: []byte("café"), wantType: "text/plain; charset=utf-8", wantEncoding: "text"},
		{name: "utf-16 sniffed from its BOM", key: "utf16", data: []byte("\xff\xfeh\x00i\x00"), wantType: "text/plain; charset=utf-16le", wantEncoding: "base64"},
		{name: "json explicit", key: "data.json", text: ptr(`{"a":1}`), contentType: "application/json", wantType: "application/json", wantEncoding: "text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]any{"key": tt.key, "metadata": map[string]string{"origin": "test"}}
			want := tt.data
			if tt.text != nil {
				args["text"] = *tt.text
				want = []byte(*tt.text)
			} else {
				args["data_base64"] = base64.StdEncoding.EncodeToString(tt.data)
			}
			if tt.contentType != "" {
				args["content_type"] = tt.contentType
			}
			put := ok[objects.Object](t, h.call(tenant, session, "storage_put", args))
			if put.Key != tt.key || put.Size != int64(len(want)) || put.ContentType != tt.wantType {
				t.Fatalf("put = %+v", put)
			}
			r := h.call(tenant, session, "storage_get", map[string]any{"key": tt.key})
			g := ok[getResult](t, r)
			if got := payload(t, r); !bytes.Equal(got, want) {
				t.Fatalf("get returned %d bytes, not the %d written", len(got), len(want))
			}
			if g.Encoding != tt.wantEncoding || g.NextOffset != nil || g.Key != tt.key {
				t.Fatalf("get = %+v", g)
			}
			if tt.wantEncoding == "image" && r.Content[1].MIMEType != "image/png" {
				t.Fatalf("image block type %q", r.Content[1].MIMEType)
			}
			head := ok[objects.Object](t, h.call(tenant, session, "storage_head", map[string]any{"key": tt.key}))
			if head.Size != int64(len(want)) || head.ContentType != tt.wantType || head.Metadata["origin"] != "test" || head.ETag != put.ETag {
				t.Fatalf("head = %+v", head)
			}
		})
	}

	l := ok[listResult](t, h.call(tenant, session, "storage_list", map[string]any{}))
	if len(l.Objects) != len(tests) || l.NextCursor != "" {
		t.Fatalf("list = %+v", l)
	}
	listing := text(h.call(tenant, session, "storage_list", map[string]any{}))
	for _, o := range l.Objects {
		if strings.Contains(o.Key, "acme") || !strings.Contains(listing, o.Key) {
			t.Fatalf("listed key %q (prefix shown, or missing from the text)", o.Key)
		}
	}
	if strings.Contains(listing, h.cfg.KeyRoot) || strings.Contains(string(h.call(tenant, session, "storage_list", map[string]any{}).StructuredContent), "acme/") {
		t.Fatal("listing shows the namespace prefix")
	}

	for _, tt := range tests {
		d := ok[deleteResult](t, h.call(tenant, session, "storage_delete", map[string]any{"key": tt.key}))
		if !d.Deleted {
			t.Fatalf("delete %q: %+v", tt.key, d)
		}
		msg := errorText(t, h.call(tenant, session, "storage_get", map[string]any{"key": tt.key}))
		if !strings.Contains(msg, "no such object") || strings.Contains(msg, "acme/") {
			t.Fatalf("get after delete: %s", msg)
		}
	}
	d := ok[deleteResult](t, h.call(tenant, session, "storage_delete", map[string]any{"key": "notes/today.html"}))
	if d.Deleted {
		t.Fatal("second delete says it deleted")
	}
}

func ptr[T any](v T) *T { return &v }

// A presigned PUT then GET works with plain net/http, for a key with
// spaces, parentheses, +, =, : and non-ASCII, and the uploaded bytes are
// what storage_get reads back.
func TestPresignThroughService(t *testing.T) {
	h := newHarness(t, toolsConfig())
	key := "uploads/report (final)+v=2:été 😀.bin"
	body := randomBytes(3 << 20) // over storage_put's 2 MiB: what presign is for
	put := ok[objects.Presigned](t, h.call("acme", "s", "storage_presign", map[string]any{"key": key, "method": "PUT", "content_type": "application/x-report", "expires_seconds": 60}))
	req, _ := http.NewRequest(put.Method, put.URL, bytes.NewReader(body))
	for k, v := range put.Headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("presigned PUT: %s", resp.Status)
	}
	get := ok[objects.Presigned](t, h.call("acme", "s", "storage_presign", map[string]any{"key": key}))
	if get.Method != http.MethodGet {
		t.Fatalf("default method %q", get.Method)
	}
	resp, err = http.Get(get.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
		t.Fatalf("presigned GET: %s, equal=%v", resp.Status, bytes.Equal(got, body))
	}
	head := ok[objects.Object](t, h.call("acme", "s", "storage_head", map[string]any{"key": key}))
	if head.Size != int64(len(body)) || head.ContentType != "application/x-report" {
		t.Fatalf("head = %+v", head)
	}
	// Reading it back through storage_get takes several parts.
	var back []byte
	offset := int64(0)
	for parts := 0; ; parts++ {
		r := h.call("acme", "s", "storage_get", map[string]any{"key": key, "offset": offset})
		back = append(back, payload(t, r)...)
		g := ok[getResult](t, r)
		if g.NextOffset == nil {
			break
		}
		if parts > 10 {
			t.Fatal("too many parts")
		}
		offset = *g.NextOffset
	}
	if !bytes.Equal(back, body) {
		t.Fatalf("parts reassemble to %d bytes, not the %d uploaded", len(back), len(body))
	}
	msg := errorText(t, h.call("acme", "s", "storage_presign", map[string]any{"key": "missing"}))
	if !strings.Contains(msg, "no such object") {
		t.Fatalf("presign GET of a missing object: %s", msg)
	}
}
