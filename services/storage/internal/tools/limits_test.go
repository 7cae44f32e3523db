package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/storage/internal/objects"
)

// smallOutput serves results capped at the smallest output limit the
// service accepts, so every cut is exercised with small objects.
func smallOutput() Config {
	cfg := toolsConfig()
	cfg.MaxOutputBytes = minOutputBytes
	return cfg
}

// readAll reads key through storage_get part by part (every response is
// checked against the output limit by the harness) and returns the bytes
// and the encodings used.
func readAll(t *testing.T, h *harness, key string, maxBytes int) ([]byte, []string) {
	t.Helper()
	var out []byte
	var encodings []string
	offset := int64(0)
	for parts := 0; ; parts++ {
		args := map[string]any{"key": key, "offset": offset}
		if maxBytes > 0 {
			args["max_bytes"] = maxBytes
		}
		r := h.call("acme", "s", "storage_get", args)
		g := ok[getResult](t, r)
		if g.Offset != offset {
			t.Fatalf("part at %d says offset %d", offset, g.Offset)
		}
		data := payload(t, r)
		if int64(len(data)) != g.Length {
			t.Fatalf("part carries %d bytes, says %d", len(data), g.Length)
		}
		out = append(out, data...)
		encodings = append(encodings, g.Encoding)
		if g.NextOffset == nil {
			return out, encodings
		}
		if *g.NextOffset <= offset || parts > 1000 {
			t.Fatalf("no progress at offset %d", offset)
		}
		offset = *g.NextOffset
	}
}

func putBytes(t *testing.T, h *harness, key string, data []byte, contentType string) {
	t.Helper()
	ok[objects.Object](t, h.call("acme", "s", "storage_put", map[string]any{"key": key, "data_base64": base64.StdEncoding.EncodeToString(data), "content_type": contentType}))
}

func TestGetStaysUnderOutputLimit(t *testing.T) {
	h := newHarness(t, smallOutput())
	// Text whose JSON escaping is six times its size (< > & and control
	// characters), mixed with multi-byte characters that must not be split.
	var b strings.Builder
	for b.Len() < 200<<10 {
		b.WriteString("<&>\x01é😀 plain text\n")
	}
	escapy := []byte(b.String())
	noisy := make([]byte, 100<<10)
	for i := range noisy {
		noisy[i] = byte(i*7919 + i/13)
	}
	img := image.NewRGBA(image.Rect(0, 0, 200, 200))
	copy(img.Pix, randomBytes(len(img.Pix))) // incompressible
	img.Set(0, 0, color.RGBA{1, 2, 3, 255})
	var bigPNG bytes.Buffer
	png.Encode(&bigPNG, img)

	tests := []struct {
		name, contentType string
		data              []byte
		maxBytes          int
		encodings         string // the encoding every part must use
	}{
		{"escaped text", "text/plain; charset=utf-8", escapy, 0, "text"},
		{"binary", "application/octet-stream", noisy, 0, "base64"},
		{"image too big for one result", "image/png", bigPNG.Bytes(), 0, "base64"},
		{"max_bytes 1", "text/plain", []byte("héllo"), 1, ""},
		{"max_bytes 7", "text/plain", escapy[:100], 7, "text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			putBytes(t, h, tt.name, tt.data, tt.contentType)
			got, encodings := readAll(t, h, tt.name, tt.maxBytes)
			if !bytes.Equal(got, tt.data) {
				t.Fatalf("parts reassemble to %d bytes, want %d", len(got), len(tt.data))
			}
			if len(tt.data) > int(h.cfg.MaxOutputBytes)/2 && len(encodings) < 2 {
				t.Fatalf("%d bytes in one part under a %d-byte limit", len(tt.data), h.cfg.MaxOutputBytes)
			}
			for _, e := range encodings {
				if tt.encodings != "" && e != tt.encodings {
					t.Fatalf("encodings %v, want all %s", encodings, tt.encodings)
				}
			}
		})
	}
	if len(bigPNG.Bytes()) < int(minOutputBytes) {
		t.Fatalf("test image is only %d bytes", bigPNG.Len())
	}
}

func TestGetEdges(t *testing.T) {
	h := newHarness(t, toolsConfig())
	putBytes(t, h, "u", []byte("aé"), "text/plain; charset=utf-8") // é is 2 bytes: offsets 1-2
	putBytes(t, h, "zero", nil, "application/octet-stream")

	// Starting inside a character: not valid UTF-8, so base64.
	r := h.call("acme", "s", "storage_get", map[string]any{"key": "u", "offset": 2})
	if g := ok[getResult](t, r); g.Encoding != "base64" || !bytes.Equal(payload(t, r), []byte{0xa9}) {
		t.Fatalf("mid-character start: %+v", g)
	}
	// Stopping inside a character: the part ends before it.
	r = h.call("acme", "s", "storage_get", map[string]any{"key": "u", "max_bytes": 2})
	if g := ok[getResult](t, r); g.Encoding != "text" || string(payload(t, r)) != "a" || g.NextOffset == nil || *g.NextOffset != 1 {
		t.Fatalf("mid-character end: %+v %q", g, payload(t, r))
	}
	r = h.call("acme", "s", "storage_get", map[string]any{"key": "u", "offset": 3})
	g := ok[getResult](t, r)
	if g.Length != 0 || g.Size != 3 || g.NextOffset != nil || !strings.Contains(text(r), "past the end") {
		t.Fatalf("offset at end: %+v %s", g, text(r))
	}
	r = h.call("acme", "s", "storage_get", map[string]any{"key": "zero"})
	g = ok[getResult](t, r)
	if g.Length != 0 || g.Size != 0 || !strings.Contains(text(r), "empty") {
		t.Fatalf("0-byte object: %+v %s", g, text(r))
	}
}

func TestListStaysUnderOutputLimit(t *testing.T) {
	h := newHarness(t, smallOutput())
	long := strings.Repeat("x", 200)
	var want []string
	for i := range 150 {
		k := fmt.Sprintf("d/%03d-%s<&>", i, long)
		want = append(want, k)
		ok[objects.Object](t, h.call("acme", "s", "storage_put", map[string]any{"key": k, "text": "x"}))
	}
	var got []string
	cursor := ""
	pages := 0
	for {
		args := map[string]any{"prefix": "d/", "limit": 1000}
		if cursor != "" {
			args["cursor"] = cursor
		}
		l := ok[listResult](t, h.call("acme", "s", "storage_list", args))
		pages++
		for _, o := range l.Objects {
			got = append(got, o.Key)
		}
		if l.NextCursor == "" {
			break
		}
		if pages > 20 {
			t.Fatal("listing does not end")
		}
		cursor = l.NextCursor
	}
	if pages < 2 {
		t.Fatalf("150 long keys fit one %d-byte page", h.cfg.MaxOutputBytes)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("paged listing has %d keys, want %d in order", len(got), len(want))
	}
	// limit smaller than what is there: a cursor, then the rest.
	l := ok[listResult](t, h.call("acme", "s", "storage_list", map[string]any{"prefix": "d/", "limit": 1}))
	if len(l.Objects) != 1 || l.NextCursor == "" {
		t.Fatalf("limit 1: %+v", l)
	}
}

func TestArgumentErrors(t *testing.T) {
	cfg := toolsConfig()
	cfg.MaxPutBytes = 1000
	h := newHarness(t, cfg)
	// The longest key the namespace holds, in segments of at most 255
	// bytes: versitygw's posix backend stores each segment as a file name.
	room := 1024 - len(h.cfg.KeyRoot) - len("acme/")
	k1024 := strings.Repeat(strings.Repeat("k", 199)+"/", room/200) + strings.Repeat("k", room%200)
	tests := []struct {
		tool  string
		args  string
		field string // "" = success
	}{
		{"storage_put", `{"key":"a","text":"x","data_base64":"eA=="}`, "text or data_base64"},
		{"storage_put", `{"key":"a"}`, "text or data_base64"},
		{"storage_put", `{"key":"a","data_base64":"not base64!"}`, "data_base64"},
		{"storage_put", `{"key":"a","data_base64":12}`, "data_base64"},
		{"storage_put", `{"key":"a","data_base64":null,"text":"x"}`, "data_base64"},
		{"storage_put", `{"key":"a","data_base64":null}`, "data_base64"},
		{"storage_put", `{"key":"a","data_base64":""}`, ""},
		{"storage_put", `{"key":"a","text":"x","content_type":"not a type"}`, "content_type"},
		{"storage_put", `{"key":"a","text":"x","metadata":{"Upper":"v"}}`, "Upper"},
		{"storage_put", `{"key":"a","text":"x","metadata":{"k":"é"}}`, "metadata.k"},
		{"storage_put", `{"key":"a","text":"x","metadata":{"k":" padded "}}`, "metadata.k"},
		{"storage_put", `{"key":"a","text":"x","metadata":{"k":"` + strings.Repeat("v", 2047) + `"}}`, ""},
		{"storage_put", `{"key":"a","text":"x","metadata":{"k":"` + strings.Repeat("v", 2048) + `"}}`, "metadata"},
		{"storage_put", `{"key":"a","text":"` + strings.Repeat("t", 1000) + `"}`, ""},
		{"storage_put", `{"key":"a","text":"` + strings.Repeat("t", 1001) + `"}`, "text"},
		{"storage_put", `{"key":"a","data_base64":"` + base64.StdEncoding.EncodeToString(make([]byte, 1000)) + `"}`, ""},
		{"storage_put", `{"key":"a","data_base64":"` + base64.StdEncoding.EncodeToString(make([]byte, 1001)) + `"}`, "data_base64"},
		{"storage_put", `{"key":"` + k1024 + `","text":"x"}`, ""},
		{"storage_put", `{"key":"` + k1024 + `k","text":"x"}`, "key"},
		{"storage_put", `{"key":"` + strings.Repeat("k", 1025) + `","text":"x"}`, "key"},
		{"storage_put", `{"key":"","text":"x"}`, "key"},
		{"storage_put", `{"key":"a","text":"x","extra":1}`, "extra"},
		{"storage_put", `{"key":".sgwtmp/a","text":"x"}`, "key"},
		{"storage_list", `{"prefix":"a/.sgwtmp/"}`, "prefix"},
		{"storage_get", `{"key":"a","max_bytes":0}`, "max_bytes"},
		{"storage_get", `{"key":"a","offset":-1}`, "offset"},
		{"storage_get", `{"key":"a","offset":"1"}`, "offset"},
		{"storage_get", `{"key":"a/"}`, "key"},
		{"storage_head", `{"key":"/a"}`, "key"},
		{"storage_delete", `{"key":"a/../b"}`, "key"},
		{"storage_list", `{"limit":0}`, "limit"},
		{"storage_list", `{"limit":1001}`, "limit"},
		{"storage_list", `{"limit":1000}`, ""},
		{"storage_list", `{"prefix":"../"}`, "prefix"},
		{"storage_list", `{"cursor":"!!"}`, "cursor"},
		{"storage_list", `{"cursor":"` + encodeCursor("../x") + `"}`, "cursor"},
		{"storage_presign", `{"key":"a","method":"PUT","expires_seconds":604800}`, ""},
		{"storage_presign", `{"key":"a","method":"PUT","expires_seconds":604801}`, "expires_seconds"},
		{"storage_presign", `{"key":"a","method":"PUT","expires_seconds":0}`, "expires_seconds"},
		{"storage_presign", `{"key":"a","method":"DELETE"}`, "method"},
		{"storage_presign", `{"key":"a","method":"get"}`, "method"},
		{"storage_presign", `{"key":"a","content_type":"text/plain"}`, "content_type"},
	}
	for _, tt := range tests {
		name := tt.tool + " " + tt.args
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			r := h.callRaw("acme", "s", tt.tool, []byte(tt.args))
			if tt.field == "" {
				if r.IsError {
					t.Fatalf("want success, got %s", text(r))
				}
				return
			}
			msg := errorText(t, r)
			// A field is named as the schema check names it (its JSON
			// pointer, 'name' of an extra property) or as Validate does.
			named := false
			for _, form := range []string{tt.field + ":", `"` + tt.field + `"`, `"/` + strings.ReplaceAll(tt.field, ".", "/") + `"`, "'" + tt.field + "'", "one of " + tt.field} {
				named = named || strings.Contains(msg, form)
			}
			if !named {
				t.Fatalf("error does not name %s: %s", tt.field, msg)
			}
			if r.UnknownOutcome {
				t.Fatal("a refused call is not an unknown outcome")
			}
		})
	}
}

// When storage cannot be reached, a put or delete may or may not have
// happened: unknown_outcome. A read is just an error.
func TestStorageUnreachable(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String()
	ln.Close()
	cfg := s3Config()
	cfg.Endpoint = dead
	cfg.RequestTimeout = 5 * time.Second
	store, err := objects.New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, store, toolsConfig())
	for _, tc := range []struct {
		tool    string
		args    map[string]any
		unknown bool
	}{
		{"storage_put", map[string]any{"key": "a", "text": "x"}, true},
		{"storage_get", map[string]any{"key": "a"}, false},
		{"storage_list", map[string]any{}, false},
	} {
		r := h.call("acme", "s", tc.tool, tc.args)
		msg := errorText(t, r)
		if r.UnknownOutcome != tc.unknown || !strings.Contains(msg, "unreachable") {
			t.Fatalf("%s: unknown_outcome=%v: %s", tc.tool, r.UnknownOutcome, msg)
		}
	}
}

// TestTenantReservedByServer: a tenant named like versitygw's staging
// directory is refused before anything is written, not stored where its
// objects would never be listed.
func TestTenantReservedByServer(t *testing.T) {
	h := newHarness(t, toolsConfig())
	r := h.call(".sgwtmp", "s", "storage_put", map[string]any{"key": "a.txt", "text": "x"})
	if msg := errorText(t, r); !strings.Contains(msg, "tenant_id") || !strings.Contains(msg, "reserved by the S3 server") || r.UnknownOutcome {
		t.Fatalf("put as tenant .sgwtmp: %s", msg)
	}
}

// TestPutOverRequestLimit: a put whose request is larger than
// MAX_REQUEST_BYTES is an is_error result naming the argument and the put
// limit (status 200, known outcome), never the runtime's bare 413, and
// nothing is stored.
func TestPutOverRequestLimit(t *testing.T) {
	cfg := toolsConfig()
	cfg.MaxPutBytes = 16 << 10
	h := newHarness(t, cfg)
	h.serve(map[string]string{"MAX_REQUEST_BYTES": "65536", "SSE_HEARTBEAT": "1s"})
	for _, tc := range []struct {
		name, field string
		args        map[string]any
	}{
		{"data_base64 far over", "data_base64", map[string]any{"key": "big.bin", "data_base64": base64.StdEncoding.EncodeToString(make([]byte, 1<<20))}},
		{"text far over, after other arguments", "text", map[string]any{"key": "big.txt", "content_type": "text/plain", "text": strings.Repeat("é", 100<<10)}},
		{"text over the put limit, within the request limit", "text", map[string]any{"key": "mid.txt", "text": strings.Repeat("t", 20<<10)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.call("acme", "s", "storage_put", tc.args)
			msg := errorText(t, r)
			if !strings.Contains(msg, "invalid arguments: "+tc.field+":") || !strings.Contains(msg, "16384 bytes (16 KiB)") || r.UnknownOutcome {
				t.Fatalf("unknown_outcome %v: %s", r.UnknownOutcome, msg)
			}
			if h := h.call("acme", "s", "storage_head", map[string]any{"key": tc.args["key"]}); !h.IsError {
				t.Fatalf("the refused put stored %s", text(h))
			}
		})
	}
}

func TestBigArgument(t *testing.T) {
	for _, tc := range []struct{ head, want string }{
		{`{"tenant_id":"t","arguments":{"key":"a","data_base64":"AAAA`, "data_base64"},
		{`{"arguments":{"key":"data_base64","text":"abc`, "text"},
		{`{"arguments":{"text":"done","content_type":"text/pl`, "data_base64 or text"},
		{`{"text":"not in the arguments`, "data_base64 or text"},
		{`garbage`, "data_base64 or text"},
	} {
		if got := bigArgument([]byte(tc.head)); got != tc.want {
			t.Errorf("bigArgument(%s) = %q, want %q", tc.head, got, tc.want)
		}
	}
}

func TestCheckCarried(t *testing.T) {
	// 3 MiB of data is 4 MiB of base64: it needs the envelope's room on top.
	if err := CheckCarried(3<<20, 4<<20+PutEnvelopeBytes); err != nil {
		t.Fatalf("at the edge: %v", err)
	}
	err := CheckCarried(3<<20, 4<<20+PutEnvelopeBytes-1)
	if err == nil || !strings.Contains(err.Error(), "STORAGE_MAX_PUT_BYTES 3145728") || !strings.Contains(err.Error(), "MAX_REQUEST_BYTES 4227071") ||
		!strings.Contains(err.Error(), "at most 3145725") {
		t.Fatalf("one byte short: %v", err)
	}
	if err := CheckCarried(2<<20, 4<<20); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
}

// TestDescriptionStatesTheLimit: storage_put tells the model the put limit
// in force, not a default.
func TestDescriptionStatesTheLimit(t *testing.T) {
	for _, tc := range []struct {
		max  int64
		want string
	}{{2 << 20, "at most 2 MiB (2097152 bytes)"}, {1 << 20 * 3 / 2, "at most 1.5 MiB (1572864 bytes)"}, {16 << 10, "at most 16 KiB (16384 bytes)"}, {1000, "at most 1000 bytes (1000 bytes)"}} {
		cfg := toolsConfig()
		cfg.MaxPutBytes = tc.max
		ts, err := New(nil, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if d := ts.List()[0].Binding.Description; !strings.Contains(d, tc.want) || strings.Contains(d, "by default") {
			t.Errorf("limit %d: %s", tc.max, d)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := toolsConfig()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.KeyPrefixMode = "bucket" }, "STORAGE_KEY_PREFIX_MODE"},
		{func(c *Config) { c.KeyRoot = "x" }, "STORAGE_KEY_ROOT"},
		{func(c *Config) { c.MaxPutBytes = 0 }, "STORAGE_MAX_PUT_BYTES"},
		{func(c *Config) { c.MaxOutputBytes = minOutputBytes - 1 }, "STORAGE_MAX_OUTPUT_BYTES"},
		{func(c *Config) { c.MaxOutputBytes = tool.MaxOutputBytesLimit + 1 }, "STORAGE_MAX_OUTPUT_BYTES"},
	} {
		c := good
		tc.mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want %s", err, tc.want)
		}
	}
	c := good
	c.MaxOutputBytes = tool.MaxOutputBytesLimit
	if err := c.Validate(); err != nil {
		t.Errorf("2 MiB output: %v", err)
	}
}
