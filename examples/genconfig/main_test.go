package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesServicesWithoutTools: a service whose GET /tools publishes
// no binding is refused, naming it, instead of a config without tools.
func TestRunRefusesServicesWithoutTools(t *testing.T) {
	for _, body := range []string{`null`, `{}`, `{"tools":null}`, `{"tools":[]}`} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}))
		err := run(io.Discard, "local", "BRAIN_API_KEY", []string{ts.URL}, "tok", nil)
		ts.Close()
		if err == nil || !strings.Contains(err.Error(), "publishes no tools") || !strings.Contains(err.Error(), ts.URL) {
			t.Errorf("%s: err %v, want one naming the service and saying it publishes no tools", body, err)
		}
	}
}

// TestHostFile: the -host file adds the host's own bindings, sets
// require_approval and max_concurrency on published ones and adds the
// approvals object; each mistake in it names what is wrong.
func TestHostFile(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"tools":[{"name":"storage_delete","description":"d","input_schema":{"type":"object"},"url":"http://127.0.0.1:8083/tools/storage_delete","tenants":["local"]}]}`)
	}))
	defer ts.Close()
	host := func(doc string) *hostFile {
		t.Helper()
		path := filepath.Join(t.TempDir(), "host.json")
		os.WriteFile(path, []byte(doc), 0o600)
		h, err := readHost(path)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	var out strings.Builder
	h := host(`{"tools":[{"name":"lookup_order","description":"d","type":"function","input_schema":{"type":"object"},"tenants":["local"]}],
		"bindings":{"storage_delete":{"require_approval":"always","max_concurrency":2}},"approvals":{"tool":"storage_delete","cancel_tool":"storage_delete","timeout_seconds":60}}`)
	if err := run(&out, "local", "BRAIN_API_KEY", []string{ts.URL}, "tok", h); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tools     []map[string]any `json:"tools"`
		Approvals map[string]any   `json:"approvals"`
	}
	json.Unmarshal([]byte(out.String()), &got)
	if len(got.Tools) != 2 || got.Tools[0]["require_approval"] != "always" || got.Tools[0]["max_concurrency"] != float64(2) ||
		got.Tools[1]["type"] != "function" || got.Tools[1]["url"] != nil || got.Approvals["timeout_seconds"] != float64(60) ||
		got.Approvals["cancel_tool"] != "storage_delete" {
		t.Errorf("config %s", out.String())
	}
	for doc, want := range map[string]string{
		`{"bindings":{"nope":{"require_approval":"always"}}}`:                                                         "-host: bindings.nope: no service publishes a tool",
		`{"bindings":{"storage_delete":{"require_approval":"maybe"}}}`:                                                "-host: bindings.storage_delete: require_approval: must be",
		`{"tools":[{"name":"storage_delete","description":"d","type":"function","input_schema":{},"tenants":["x"]}]}`: `-host: tools[0]: "storage_delete" is also published`,
		`{"tools":[{"name":"f","description":"d","input_schema":{},"tenants":["x"]}]}`:                                `-host: tools[0] "f": url: required`,
	} {
		if err := run(io.Discard, "local", "BRAIN_API_KEY", []string{ts.URL}, "tok", host(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", doc, err, want)
		}
	}
	path := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(path, []byte(`{"bindings":{},"extra":1}`), 0o600)
	if _, err := readHost(path); err == nil || !strings.Contains(err.Error(), "extra: unknown field") {
		t.Errorf("unknown field: %v", err)
	}
}
