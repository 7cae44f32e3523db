package tools

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brain-tools/suite/services/storage/internal/s3test"
)

// TestTenantIsolation: tenant A cannot read, list, delete or presign
// tenant B's objects with any key it can craft. The namespace comes from
// the request body's tenant_id only; arguments cannot name a tenant.
func TestTenantIsolation(t *testing.T) {
	h := newHarness(t, toolsConfig())
	root := h.cfg.KeyRoot
	const victim, attacker = "tenant-b", "tenant-a"
	secrets := map[string]string{
		"secret.txt":     "B's secret",
		"dir/secret.txt": "B's nested secret",
	}
	for k, v := range secrets {
		ok[struct{}](t, h.call(victim, "s", "storage_put", map[string]any{"key": k, "text": v}))
	}
	// A has an object too, so "not found" is not the only way to fail.
	ok[struct{}](t, h.call(attacker, "s", "storage_put", map[string]any{"key": "mine.txt", "text": "A's own"}))

	crafted := []string{
		"../tenant-b/secret.txt",
		"../../" + root + "tenant-b/secret.txt",
		"..",
		"./../tenant-b/secret.txt",
		"dir/../../tenant-b/secret.txt",
		"/tenant-b/secret.txt",
		"/" + root + "tenant-b/secret.txt",
		root + "tenant-b/secret.txt",
		"tenant-b/secret.txt",
		"..%2Ftenant-b%2Fsecret.txt",
		"%2e%2e/tenant-b/secret.txt",
		"%2E%2E%2Ftenant-b%2Fsecret.txt",
		"..%5Ctenant-b%5Csecret.txt",
		`..\tenant-b\secret.txt`,
		"..//tenant-b/secret.txt",
		"tenant-a/../tenant-b/secret.txt",
		"secret.txt/../../tenant-b/secret.txt",
		"..\x00/tenant-b/secret.txt",
		"../tenant-b/secret.txt\x00",
		"\u2025/tenant-b/secret.txt", // two-dot leader, not ".."
		"．．/tenant-b/secret.txt",     // fullwidth dots
		"../TENANT-B/secret.txt",
	}
	for _, key := range crafted {
		t.Run(key, func(t *testing.T) {
			for _, tc := range []struct {
				tool string
				args map[string]any
			}{
				{"storage_get", map[string]any{"key": key}},
				{"storage_head", map[string]any{"key": key}},
				{"storage_presign", map[string]any{"key": key}},
				{"storage_presign", map[string]any{"key": key, "method": "PUT"}},
				{"storage_delete", map[string]any{"key": key}},
				{"storage_list", map[string]any{"prefix": key}},
				{"storage_list", map[string]any{"cursor": encodeCursor(key)}},
				{"storage_put", map[string]any{"key": key, "text": "overwritten by A"}},
			} {
				r := h.call(attacker, "s", tc.tool, tc.args)
				out := text(r) + string(r.StructuredContent)
				for _, secret := range secrets {
					if strings.Contains(out, secret) {
						t.Fatalf("%s %v leaked B's data: %s", tc.tool, tc.args, out)
					}
				}
				if tc.tool == "storage_presign" && !r.IsError {
					// A URL necessarily names the full key; for a key that
					// survived validation it lives under A's namespace.
					var p struct{ URL string }
					json.Unmarshal(r.StructuredContent, &p)
					if !strings.HasPrefix(p.URL, gw.Endpoint+"/brain-tools/"+root+attacker+"/") {
						t.Fatalf("presigned URL outside A's namespace: %s", p.URL)
					}
					continue
				}
				if tc.tool == "storage_list" && !r.IsError {
					var l listResult
					json.Unmarshal(r.StructuredContent, &l)
					for _, o := range l.Objects {
						// Only A's own objects: the ones it put itself.
						got := string(payload(t, h.call(attacker, "s", "storage_get", map[string]any{"key": o.Key})))
						if got != "A's own" && got != "overwritten by A" {
							t.Fatalf("list %v shows %q holding %q", tc.args, o.Key, got)
						}
					}
				}
			}
		})
	}

	// Whatever A tried, B's objects are intact and A's list shows only A's.
	for k, v := range secrets {
		r := h.call(victim, "s", "storage_get", map[string]any{"key": k})
		if got := string(payload(t, r)); got != v {
			t.Fatalf("B's %q is now %q", k, got)
		}
	}
	l := ok[listResult](t, h.call(attacker, "s", "storage_list", map[string]any{"limit": 1000}))
	for _, o := range l.Objects {
		got := string(payload(t, h.call(attacker, "s", "storage_get", map[string]any{"key": o.Key})))
		if got != "A's own" && got != "overwritten by A" {
			t.Fatalf("A lists %q holding %q", o.Key, got)
		}
	}
	lb := ok[listResult](t, h.call(victim, "s", "storage_list", map[string]any{}))
	if len(lb.Objects) != len(secrets) {
		t.Fatalf("B lists %+v: A's puts landed in B's namespace", lb.Objects)
	}

	// On versitygw's disk, too, everything A wrote is under A's directory.
	bucketDir := filepath.Join(gw.Root, s3test.Bucket)
	files := 0
	err := filepath.WalkDir(bucketDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(bucketDir, p)
		if !strings.HasPrefix(rel, root) {
			return nil // another test's objects
		}
		rel = strings.TrimPrefix(rel, root)
		files++
		if _, isSecret := secrets[strings.TrimPrefix(rel, victim+"/")]; strings.HasPrefix(rel, victim+"/") && isSecret {
			return nil
		}
		if !strings.HasPrefix(rel, attacker+"/") {
			return fmt.Errorf("file %s outside both namespaces' expected contents", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < len(secrets)+1 {
		t.Fatalf("found %d files on disk; the check looked in the wrong place", files)
	}
}

// Identity comes from the body: an arguments field naming a tenant or
// session is refused as unknown, never obeyed.
func TestIdentityNotFromArguments(t *testing.T) {
	h := newHarness(t, toolsConfig())
	ok[struct{}](t, h.call("tenant-b", "s", "storage_put", map[string]any{"key": "x", "text": "B"}))
	for _, field := range []string{"tenant_id", "session_id", "bucket", "prefix_root"} {
		raw, _ := json.Marshal(map[string]any{"key": "x", field: "tenant-b"})
		msg := errorText(t, h.callRaw("tenant-a", "s", "storage_get", raw))
		if !strings.Contains(msg, field) {
			t.Fatalf("arguments.%s: %s", field, msg)
		}
	}
}

// Tenant IDs that look like paths are escaped into one segment: tenant
// "tenant-a/../tenant-b" is not tenant-b, nor is "tenant-b/x" inside it.
func TestTenantIDsAreOpaque(t *testing.T) {
	h := newHarness(t, toolsConfig())
	ok[struct{}](t, h.call("tenant-b", "s", "storage_put", map[string]any{"key": "secret.txt", "text": "B"}))
	for _, tenant := range []string{"tenant-a/../tenant-b", "tenant-b/", "tenant-b/x", "tenant-b%2F", "./tenant-b", "tenant-b\x00"} {
		r := h.call(tenant, "s", "storage_get", map[string]any{"key": "secret.txt"})
		if !r.IsError {
			t.Fatalf("tenant %q read B's object: %s", tenant, text(r))
		}
		l := ok[listResult](t, h.call(tenant, "s", "storage_list", map[string]any{}))
		if len(l.Objects) != 0 {
			t.Fatalf("tenant %q lists %+v", tenant, l.Objects)
		}
	}
	for _, tenant := range []string{".", ".."} {
		msg := errorText(t, h.call(tenant, "s", "storage_list", map[string]any{}))
		if !strings.Contains(msg, "tenant_id") {
			t.Fatalf("tenant %q: %s", tenant, msg)
		}
	}
}

// In session mode each session of a tenant has its own namespace.
func TestSessionMode(t *testing.T) {
	cfg := toolsConfig()
	cfg.KeyPrefixMode = "session"
	h := newHarness(t, cfg)
	ok[struct{}](t, h.call("acme", "s1", "storage_put", map[string]any{"key": "x.txt", "text": "s1's"}))
	if r := h.call("acme", "s2", "storage_get", map[string]any{"key": "x.txt"}); !r.IsError {
		t.Fatalf("session s2 read s1's object: %s", text(r))
	}
	if r := h.call("acme", "s2", "storage_get", map[string]any{"key": "../s1/x.txt"}); !r.IsError {
		t.Fatalf("session s2 read s1's object by ..: %s", text(r))
	}
	if l := ok[listResult](t, h.call("acme", "s2", "storage_list", map[string]any{})); len(l.Objects) != 0 {
		t.Fatalf("s2 lists %+v", l.Objects)
	}
	if got := string(payload(t, h.call("acme", "s1", "storage_get", map[string]any{"key": "x.txt"}))); got != "s1's" {
		t.Fatalf("s1 reads %q", got)
	}
	_ = http.MethodGet
}
