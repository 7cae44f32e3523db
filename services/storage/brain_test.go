package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/servicetest"
	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/storage/internal/s3test"
)

// TestPutOverLimitThroughBrain drives storage_put through a real brain
// process: a put over STORAGE_MAX_PUT_BYTES whose request still fits
// MAX_REQUEST_BYTES, and one far over both, each end failed with is_error,
// unknown_outcome false and the argument and the limit named, and leave
// nothing stored. Before, the second was a bare 413, which brain records
// as an unknown outcome.
func TestPutOverLimitThroughBrain(t *testing.T) {
	gw, err := s3test.Start(t.TempDir())
	if err != nil {
		t.Fatal("storage needs versitygw: ", err)
	}
	defer gw.Close()
	brainBin := servicetest.BuildT(t, "../brain")

	environ := map[string]string{
		"BRAIN_TOOLS_KEY":           "tools-key-0123456789",
		"STORAGE_PROVIDER":          "s3-compatible",
		"STORAGE_ENDPOINT":          gw.Endpoint,
		"STORAGE_BUCKET":            s3test.Bucket,
		"STORAGE_ACCESS_KEY_ID":     s3test.AccessKey,
		"STORAGE_SECRET_ACCESS_KEY": s3test.SecretKey,
		"STORAGE_MAX_PUT_BYTES":     "16384",
		"MAX_REQUEST_BYTES":         "65536",
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
	defer func() { cancel(); <-done }()

	b := startBrain(t, brainBin, srv.Bindings("http://"+ln.Addr().String()), environ["BRAIN_TOOLS_KEY"])
	session := b.session("storage_put", "storage_head")
	for _, tc := range []struct {
		name, field string
		args        map[string]any
	}{
		{"over the put limit", "text", map[string]any{"key": "mid.txt", "text": strings.Repeat("t", 20000)}},
		{"over the request limit too", "data_base64", map[string]any{"key": "big.bin", "data_base64": base64.StdEncoding.EncodeToString(make([]byte, 200000))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := b.call(session, "storage_put", tc.args)
			if c.Status != "failed" || c.Result == nil || !c.Result.IsError || c.Result.UnknownOutcome || c.UnknownOutcome {
				t.Fatalf("call: status %s, unknown_outcome %v, result %+v", c.Status, c.UnknownOutcome, c.Result)
			}
			msg := c.Result.Content[0].Text
			if !strings.HasPrefix(msg, "invalid arguments: "+tc.field+": ") || !strings.Contains(msg, "16384 bytes (16 KiB) storage_put takes") || !strings.Contains(msg, "nothing was stored") {
				t.Fatalf("message %q", msg)
			}
			if h := b.call(session, "storage_head", map[string]any{"key": tc.args["key"]}); h.Result == nil || !h.Result.IsError || !strings.Contains(h.Result.Content[0].Text, "no such object") {
				t.Fatalf("head after the refused put: %+v", h.Result)
			}
		})
	}
}

const brainKey = "brain-key-0123456789"

type brain struct {
	t   *testing.T
	url string
}

var listeningRE = regexp.MustCompile(`brain listening on (\S+)`)

// startBrain runs brain on 127.0.0.1:0 with bindings for tenant "local".
func startBrain(t *testing.T, bin string, bindings []tool.Binding, toolsKey string) *brain {
	t.Helper()
	dir := t.TempDir()
	cfg, _ := json.Marshal(map[string]any{"tools": bindings, "api_keys": []map[string]string{{"env": "BRAIN_API_KEY", "tenant": "local"}}})
	path := filepath.Join(dir, "brain.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	p := servicetest.StartProcess(t, "brain", bin, map[string]string{"BRAIN_ADDR": "127.0.0.1:0", "BRAIN_DATA_DIR": filepath.Join(dir, "data"),
		"BRAIN_API_KEY": brainKey, "BRAIN_TOOLS_KEY": toolsKey}, "-config", path)
	return &brain{t: t, url: "http://" + p.Await(t, listeningRE, 20*time.Second)[1]}
}

func (b *brain) do(method, path string, body, into any) {
	b.t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, b.url+path, bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+brainKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		b.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, got)
	}
	if err := json.Unmarshal(got, into); err != nil {
		b.t.Fatalf("%s %s: %v: %s", method, path, err, got)
	}
}

func (b *brain) session(tools ...string) string {
	var s struct{ ID string }
	b.do(http.MethodPost, "/sessions", map[string]any{"config": map[string]any{"tools": tools}}, &s)
	return s.ID
}

// toolCall is the part of brain's ToolCall resource the test reads.
type toolCall struct {
	Status         string       `json:"status"`
	UnknownOutcome bool         `json:"unknown_outcome"`
	Result         *tool.Result `json:"result"`
}

func (b *brain) call(session, name string, args any) toolCall {
	var c toolCall
	b.do(http.MethodPost, fmt.Sprintf("/sessions/%s/tool_calls", session), map[string]any{"tool": name, "arguments": args, "wait_seconds": 30}, &c)
	return c
}
