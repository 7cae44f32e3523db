package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/storage/internal/objects"
	"github.com/brain-tools/suite/services/storage/internal/s3test"
)

var gw *s3test.Server

// TestMain starts one versitygw for the package's tests and benchmarks.
func TestMain(m *testing.M) { s3test.Main(m, "storage-tools", &gw) }

const token = "test-token"

func s3Config() objects.Config {
	return objects.Config{
		Provider:        objects.ProviderCompatible,
		Endpoint:        gw.Endpoint,
		Bucket:          s3test.Bucket,
		AccessKeyID:     s3test.AccessKey,
		SecretAccessKey: s3test.SecretKey,
		PathStyle:       "auto",
		RequestTimeout:  30 * time.Second,
	}
}

func toolsConfig() Config {
	return Config{KeyPrefixMode: "tenant", MaxPutBytes: 2 << 20, MaxOutputBytes: tool.DefaultMaxOutputBytes}
}

// harness is the storage service served over real HTTP on 127.0.0.1.
type harness struct {
	t     testing.TB
	url   string
	cfg   Config
	store *objects.Store
	calls atomic.Int64
}

// newHarness serves the tools with cfg; every harness gets its own key root
// so tests sharing the versitygw never see each other's objects.
func newHarness(t testing.TB, cfg Config) *harness {
	t.Helper()
	if cfg.KeyRoot == "" {
		cfg.KeyRoot = fmt.Sprintf("t%d/", time.Now().UnixNano())
	}
	store, err := objects.New(context.Background(), s3Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return newHarnessWith(t, store, cfg)
}

func newHarnessWith(t testing.TB, store *objects.Store, cfg Config) *harness {
	t.Helper()
	ts, err := New(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &service.Server{Name: "storage", Config: service.Config{Token: token, MaxRequestBytes: 4 << 20, Heartbeat: time.Second, StreamAfter: 10 * time.Second}, Tools: ts.List()}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &harness{t: t, url: hs.URL, cfg: cfg, store: store}
}

// call posts one tool call as brain does and decodes the result strictly.
// It fails the test on a non-200 answer or a body over the output limit.
func (h *harness) call(tenant, session, name string, args any) *tool.Result {
	h.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.callRaw(tenant, session, name, raw)
}

func (h *harness) callRaw(tenant, session, name string, args json.RawMessage) *tool.Result {
	h.t.Helper()
	body, _ := json.Marshal(map[string]any{
		"tenant_id": tenant, "session_id": session,
		"call_id":   fmt.Sprintf("call-%d", h.calls.Add(1)),
		"arguments": args,
	})
	req, _ := http.NewRequest(http.MethodPost, h.url+"/tools/"+name, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("%s: HTTP %s: %s", name, resp.Status, data)
	}
	if int64(len(data)) > h.cfg.MaxOutputBytes {
		h.t.Fatalf("%s: %d-byte response over the %d-byte output limit", name, len(data), h.cfg.MaxOutputBytes)
	}
	res, err := tool.DecodeResult(bytes.TrimSpace(data))
	if err != nil {
		h.t.Fatalf("%s: %v: %.300s", name, err, data)
	}
	return res
}

// ok fails unless r is a success, and decodes its structured content.
func ok[T any](t testing.TB, r *tool.Result) T {
	t.Helper()
	var v T
	if r.IsError {
		t.Fatalf("unexpected error result: %s", text(r))
	}
	if err := json.Unmarshal(r.StructuredContent, &v); err != nil {
		t.Fatalf("structured content: %v: %s", err, r.StructuredContent)
	}
	return v
}

func text(r *tool.Result) string {
	var b strings.Builder
	for _, c := range r.Content {
		if c.Type == tool.TypeText {
			b.WriteString(c.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func errorText(t testing.TB, r *tool.Result) string {
	t.Helper()
	if !r.IsError {
		t.Fatalf("want an error result, got %s", text(r))
	}
	return text(r)
}
