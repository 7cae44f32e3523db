package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/storage/internal/s3test"
)

// The service starts from an environment exactly like the demo's, serves
// /healthz (checking the bucket) and /tools, and answers a call.
func TestServiceFromEnvironment(t *testing.T) {
	gw, err := s3test.Start(t.TempDir())
	if err != nil {
		t.Fatal("storage needs versitygw: ", err)
	}
	defer gw.Close()
	environ := map[string]string{
		"BRAIN_TOOLS_KEY":           "secret-token",
		"STORAGE_PROVIDER":          "s3-compatible",
		"STORAGE_ENDPOINT":          gw.Endpoint,
		"STORAGE_BUCKET":            s3test.Bucket,
		"STORAGE_ACCESS_KEY_ID":     s3test.AccessKey,
		"STORAGE_SECRET_ACCESS_KEY": s3test.SecretKey,
		"STORAGE_KEY_PREFIX_MODE":   "session",
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := newServer(ctx, environ, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- service.Serve(ctx, ln, srv) }()
	base := "http://" + ln.Addr().String()

	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), s3test.Bucket) {
		t.Fatalf("healthz: %s %s", resp.Status, body)
	}

	req, _ := http.NewRequest(http.MethodGet, base+"/tools", nil)
	req.Header.Set("Authorization", "Bearer secret-token")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var listed struct{ Tools []tool.Binding }
	json.NewDecoder(resp.Body).Decode(&listed)
	resp.Body.Close()
	var names []string
	for _, b := range listed.Tools {
		if err := b.Validate(); err != nil {
			t.Fatalf("binding %s: %v", b.Name, err)
		}
		names = append(names, b.Name)
	}
	if got := strings.Join(names, " "); got != "storage_put storage_get storage_head storage_list storage_delete storage_presign" {
		t.Fatalf("tools: %s", got)
	}

	call := func(name string, args string) *tool.Result {
		body := fmt.Sprintf(`{"tenant_id":"local","session_id":"s1","call_id":"c1","arguments":%s}`, args)
		req, _ := http.NewRequest(http.MethodPost, base+"/tools/"+name, bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer secret-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		r, err := tool.DecodeResult(bytes.TrimSpace(data))
		if err != nil {
			t.Fatalf("%s: %s: %v", name, data, err)
		}
		return r
	}
	if r := call("storage_put", `{"key":"hello.txt","text":"hi"}`); r.IsError {
		t.Fatal(r.Content)
	}
	if r := call("storage_get", `{"key":"hello.txt"}`); r.IsError || r.Content[1].Text != "hi" {
		t.Fatalf("get: %+v", r)
	}
	// Session mode: the object is on disk under tenant/session.
	if _, err := os.Stat(gw.Root + "/" + s3test.Bucket + "/local/s1/hello.txt"); err != nil {
		t.Fatalf("object not under local/s1/: %v", err)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no shutdown")
	}
}

// /healthz answers 503 naming the health timeout, within it, when the S3
// server accepts connections and never answers (a hung or SIGSTOPped
// versitygw): it used to wait STORAGE_REQUEST_TIMEOUT, 60 s. Unset, the
// limit is 3 s.
func TestHealthzWhenStorageHangs(t *testing.T) {
	silent, err := s3test.StartSilent()
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for _, tc := range []struct{ name, setting, limit string }{{"300ms", "300ms", "300ms"}, {"unset", "", "3s"}} {
		t.Run(tc.name, func(t *testing.T) {
			environ := map[string]string{
				"BRAIN_TOOLS_KEY":           "secret-token",
				"STORAGE_PROVIDER":          "s3-compatible",
				"STORAGE_ENDPOINT":          silent.Endpoint,
				"STORAGE_BUCKET":            s3test.Bucket,
				"STORAGE_ACCESS_KEY_ID":     s3test.AccessKey,
				"STORAGE_SECRET_ACCESS_KEY": s3test.SecretKey,
			}
			if tc.setting != "" {
				environ["STORAGE_HEALTH_TIMEOUT"] = tc.setting
			}
			srv, err := newServer(context.Background(), environ, nil)
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			start := time.Now()
			resp, err := http.Get(ts.URL + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			took := time.Since(start)
			var got struct{ Status, Error, Bucket string }
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("healthz body %s: %v", body, err)
			}
			if resp.StatusCode != http.StatusServiceUnavailable || got.Status != "unavailable" || got.Bucket != s3test.Bucket ||
				got.Error != "head bucket: storage did not answer within "+tc.limit+" (STORAGE_HEALTH_TIMEOUT)" {
				t.Fatalf("healthz: %s %s", resp.Status, body)
			}
			// A bound, not a speed goal: far from the 60 s it used to take.
			if took > 15*time.Second {
				t.Fatalf("healthz took %s with a %s health timeout", took, tc.limit)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"STORAGE_PROVIDER": "s3-compatible", "STORAGE_BUCKET": "b"}, "STORAGE_ENDPOINT"},
		{map[string]string{"STORAGE_PROVIDER": "s3"}, "STORAGE_BUCKET"},
		{map[string]string{"STORAGE_BUCKET": "b", "STORAGE_KEY_PREFIX_MODE": "global", "STORAGE_ACCESS_KEY_ID": "k", "STORAGE_SECRET_ACCESS_KEY": "s"}, "STORAGE_KEY_PREFIX_MODE"},
		{map[string]string{"STORAGE_BUCKET": "b", "STORAGE_MAX_OUTPUT_BYTES": "lots"}, "STORAGE_MAX_OUTPUT_BYTES"},
		{map[string]string{"STORAGE_BUCKET": "b", "STORAGE_ACCESS_KEY_ID": "k", "STORAGE_SECRET_ACCESS_KEY": "s", "STORAGE_HEALTH_TIMEOUT": "-1s"}, "STORAGE_HEALTH_TIMEOUT must be positive, got -1s"},
		{map[string]string{"STORAGE_BUCKET": "b", "STORAGE_HEALTH_TIMEOUT": "soon"}, "STORAGE_HEALTH_TIMEOUT"},
		// A put limit the request cap cannot carry is refused, naming both.
		{map[string]string{"STORAGE_BUCKET": "b", "STORAGE_ACCESS_KEY_ID": "k", "STORAGE_SECRET_ACCESS_KEY": "s", "STORAGE_MAX_PUT_BYTES": "8388608"},
			"STORAGE_MAX_PUT_BYTES 8388608 cannot be carried by MAX_REQUEST_BYTES 4194304"},
		{map[string]string{"STORAGE_BUCKET": "b", "STORAGE_ACCESS_KEY_ID": "k", "STORAGE_SECRET_ACCESS_KEY": "s", "STORAGE_MAX_PUT_BYTES": "1048576", "MAX_REQUEST_BYTES": "1048576"},
			"raise MAX_REQUEST_BYTES to at least 1430872 or lower STORAGE_MAX_PUT_BYTES to at most 761856"},
	} {
		_, err := newServer(context.Background(), tc.env, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("env %v: error %v, want %s", tc.env, err, tc.want)
		}
	}
}
