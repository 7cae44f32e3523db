package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/servicetest"
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

// harness is the storage service served over real HTTP on 127.0.0.1 by
// the test kit, called as brain calls it.
type harness struct {
	t     testing.TB
	url   string
	srv   *servicetest.Server
	cfg   Config
	store *objects.Store
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
	h := &harness{t: t, cfg: cfg, store: store}
	h.serve(map[string]string{"SSE_HEARTBEAT": "1s"})
	return h
}

// serve (re)starts the service with the shared settings in environ (and
// the test token), on a new port.
func (h *harness) serve(environ map[string]string) {
	h.t.Helper()
	ts, err := New(h.store, h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	environ["ADDR"], environ["BRAIN_TOOLS_KEY"] = "127.0.0.1:0", token
	cfg, err := service.ParseEnv[service.Config](environ)
	if err != nil {
		h.t.Fatal(err)
	}
	h.srv = servicetest.StartServer(h.t, &service.Server{Name: "storage", Config: cfg, Tools: ts.List()})
	h.url = h.srv.URL
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
	r := h.srv.CallAs(h.t, tenant, session, name, args)
	if r.Result == nil {
		h.t.Fatalf("%s: HTTP %d: %s", name, r.Status, r.Error)
	}
	if int64(r.Size) > h.cfg.MaxOutputBytes {
		h.t.Fatalf("%s: %d-byte response over the %d-byte output limit", name, r.Size, h.cfg.MaxOutputBytes)
	}
	return r.Result
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
