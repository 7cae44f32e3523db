package tools

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentGetsKeepTheirBytes: storage_get reads objects and encodes
// their base64 into pooled buffers. Calls running at once on objects of
// different sizes and encodings must each get their own bytes, whole;
// a buffer back in the pool before its result was written would show as
// another object's bytes.
func TestConcurrentGetsKeepTheirBytes(t *testing.T) {
	h := newHarness(t, toolsConfig())
	objs := map[string][]byte{}
	for i := range 6 {
		key := fmt.Sprintf("bin-%d.bin", i)
		objs[key] = randomBytes(1000 + i*70_000)
		h.call("acme", "s", "storage_put", map[string]any{"key": key, "data_base64": base64.StdEncoding.EncodeToString(objs[key])})
	}
	objs["text.txt"] = []byte(strings.Repeat("pooled text é\n", 5000))
	h.call("acme", "s", "storage_put", map[string]any{"key": "text.txt", "text": string(objs["text.txt"])})
	objs["pic.png"] = pngBytes(t)
	h.call("acme", "s", "storage_put", map[string]any{"key": "pic.png", "data_base64": base64.StdEncoding.EncodeToString(objs["pic.png"])})

	var wg sync.WaitGroup
	for key, want := range objs {
		for range 3 {
			wg.Go(func() {
				for range 10 {
					if got := payload(t, h.call("acme", "s", "storage_get", map[string]any{"key": key})); !bytes.Equal(got, want) {
						t.Errorf("%s: got %d bytes that differ from the %d written", key, len(got), len(want))
						return
					}
				}
			})
		}
	}
	wg.Wait()
}

// TestConcurrentPutsKeepTheirBytes: storage_put decodes each upload into a
// pooled buffer. Uploads running at once must each store their own bytes.
func TestConcurrentPutsKeepTheirBytes(t *testing.T) {
	h := newHarness(t, toolsConfig())
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 8 {
				key := fmt.Sprintf("up-%d-%d.bin", w, i)
				want := randomBytes(500 + (w*8+i)*9000)
				h.call("acme", "s", "storage_put", map[string]any{"key": key, "data_base64": base64.StdEncoding.EncodeToString(want)})
				if got := payload(t, h.call("acme", "s", "storage_get", map[string]any{"key": key})); !bytes.Equal(got, want) {
					t.Errorf("%s: read %d bytes that differ from the %d written", key, len(got), len(want))
					return
				}
			}
		})
	}
	wg.Wait()
}
