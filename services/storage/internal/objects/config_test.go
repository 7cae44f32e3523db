package objects

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/storage/internal/keys"
)

func TestResolve(t *testing.T) {
	base := Config{Bucket: "b", AccessKeyID: "k", SecretAccessKey: "s", PathStyle: "auto", RequestTimeout: time.Second}
	with := func(f func(*Config)) Config { c := base; f(&c); return c }
	tests := []struct {
		name             string
		cfg              Config
		endpoint, region string
		pathStyle, isAWS bool
		problem          string
	}{
		{"aws default", with(func(c *Config) { c.Provider = ProviderS3 }), "", "us-east-1", false, true, ""},
		{"aws regional endpoint", with(func(c *Config) {
			c.Provider = ProviderS3
			c.Endpoint = "https://s3.eu-west-1.amazonaws.com"
			c.Region = "eu-west-1"
		}), "https://s3.eu-west-1.amazonaws.com", "eu-west-1", false, true, ""},
		{"s3 provider pointed elsewhere is not aws", with(func(c *Config) { c.Provider = ProviderS3; c.Endpoint = "http://127.0.0.1:7070" }), "http://127.0.0.1:7070", "us-east-1", true, false, ""},
		{"r2 from account", with(func(c *Config) { c.Provider = ProviderR2; c.R2AccountID = "acc123" }), "https://acc123.r2.cloudflarestorage.com", "auto", true, false, ""},
		{"r2 explicit endpoint", with(func(c *Config) { c.Provider = ProviderR2; c.Endpoint = "https://x.example" }), "https://x.example", "auto", true, false, ""},
		{"compatible", with(func(c *Config) { c.Provider = ProviderCompatible; c.Endpoint = "http://127.0.0.1:7070" }), "http://127.0.0.1:7070", "us-east-1", true, false, ""},
		{"path style forced off", with(func(c *Config) { c.Provider = ProviderCompatible; c.Endpoint = "http://h"; c.PathStyle = "false" }), "http://h", "us-east-1", false, false, ""},
		{"compatible without endpoint", with(func(c *Config) { c.Provider = ProviderCompatible }), "", "", false, false, "STORAGE_ENDPOINT is required"},
		{"r2 without account", with(func(c *Config) { c.Provider = ProviderR2 }), "", "", false, false, "STORAGE_R2_ACCOUNT_ID"},
		{"unknown provider", with(func(c *Config) { c.Provider = "gcs" }), "", "", false, false, "STORAGE_PROVIDER"},
		{"no bucket", with(func(c *Config) { c.Provider = ProviderS3; c.Bucket = "" }), "", "", false, false, "STORAGE_BUCKET"},
		{"half credentials", with(func(c *Config) { c.Provider = ProviderS3; c.SecretAccessKey = "" }), "", "", false, false, "set together"},
		{"compatible needs keys", with(func(c *Config) {
			c.Provider = ProviderCompatible
			c.Endpoint = "http://h"
			c.AccessKeyID = ""
			c.SecretAccessKey = ""
		}), "", "", false, false, "required for provider s3-compatible"},
		{"endpoint with credentials", with(func(c *Config) { c.Provider = ProviderCompatible; c.Endpoint = "http://u:p@h" }), "", "", false, false, "without credentials"},
		{"endpoint not http", with(func(c *Config) { c.Provider = ProviderCompatible; c.Endpoint = "ftp://h" }), "", "", false, false, "STORAGE_ENDPOINT"},
		{"bad path style", with(func(c *Config) { c.Provider = ProviderS3; c.PathStyle = "yes" }), "", "", false, false, "STORAGE_PATH_STYLE"},
		{"bad timeout", with(func(c *Config) { c.Provider = ProviderS3; c.RequestTimeout = 0 }), "", "", false, false, "STORAGE_REQUEST_TIMEOUT"},
		{"negative health timeout", with(func(c *Config) { c.Provider = ProviderS3; c.HealthTimeout = -time.Nanosecond }), "", "", false, false, "STORAGE_HEALTH_TIMEOUT must be positive, got -1ns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.cfg.resolve()
			if tt.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tt.problem) {
					t.Fatalf("resolve() error = %v, want %q", err, tt.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Endpoint != tt.endpoint || r.Region != tt.region || r.pathStyle != tt.pathStyle || r.aws != tt.isAWS {
				t.Fatalf("resolved endpoint=%q region=%q pathStyle=%v aws=%v", r.Endpoint, r.Region, r.pathStyle, r.aws)
			}
			if r.HealthTimeout != DefaultHealthTimeout {
				t.Fatalf("unset health timeout resolved to %s, want %s", r.HealthTimeout, DefaultHealthTimeout)
			}
		})
	}
}

// captured is one request as an S3 server received it.
type captured struct {
	method, path string
	header       http.Header
	body         []byte
}

// TestNonAWSWire checks, on the wire, what R2, MinIO and other non-AWS
// servers need: path-style URLs and no default CRC32 checksum headers or
// aws-chunked trailers, from the transfer manager's uploads, plain gets and
// presigned URLs. The recording server answers like S3 so the SDK is happy.
func TestNonAWSWire(t *testing.T) {
	var mu sync.Mutex
	var reqs []captured
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs = append(reqs, captured{r.Method, r.URL.EscapedPath(), r.Header.Clone(), body})
		mu.Unlock()
		w.Header().Set("ETag", `"abc"`)
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Range", "bytes 0-4/5")
			w.Header().Set("Content-Length", "5")
			w.WriteHeader(http.StatusPartialContent)
			io.WriteString(w, "hello")
		}
	}))
	defer srv.Close()

	for _, provider := range []string{ProviderR2, ProviderCompatible} {
		t.Run(provider, func(t *testing.T) {
			mu.Lock()
			reqs = nil
			mu.Unlock()
			cfg := Config{Provider: provider, Endpoint: srv.URL, Bucket: "bkt", AccessKeyID: "k", SecretAccessKey: "s", PathStyle: "auto", RequestTimeout: 5 * time.Second}
			s, err := New(context.Background(), cfg, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			ns, _ := keys.New("", keys.ModeTenant, "t", "")
			if _, err := s.Put(context.Background(), ns, "a b.txt", []byte("hello"), "text/plain", nil); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Get(context.Background(), ns, "a b.txt", 0, 5); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			got := append([]captured(nil), reqs...)
			mu.Unlock()
			if len(got) != 2 {
				t.Fatalf("server saw %d requests, want 2", len(got))
			}
			for _, r := range got {
				if !strings.HasPrefix(r.path, "/bkt/t/a%20b.txt") {
					t.Errorf("%s %s: not a path-style URL", r.method, r.path)
				}
				for name := range r.header {
					l := strings.ToLower(name)
					if strings.HasPrefix(l, "x-amz-checksum") || l == "x-amz-sdk-checksum-algorithm" || l == "x-amz-trailer" || l == "x-amz-decoded-content-length" {
						t.Errorf("%s: sent %s: %s", r.method, name, r.header.Get(name))
					}
				}
				if l := strings.ToLower(r.header.Get("X-Amz-Checksum-Mode")); l != "" {
					t.Errorf("%s: asked for response checksums (%s)", r.method, l)
				}
				if strings.Contains(r.header.Get("Content-Encoding"), "aws-chunked") {
					t.Errorf("%s: aws-chunked body", r.method)
				}
			}
			if string(got[0].body) != "hello" {
				t.Errorf("PUT body %q, want the plain bytes", got[0].body)
			}
			p, err := s.Presign(context.Background(), ns, "a b.txt", http.MethodPut, time.Minute, "")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(p.URL, srv.URL+"/bkt/t/a%20b.txt?") || strings.Contains(strings.ToLower(p.URL), "checksum") {
				t.Errorf("presigned URL %s", p.URL)
			}
		})
	}
}

func TestPresignEndpoint(t *testing.T) {
	cfg := gwConfig()
	cfg.PresignEndpoint = "https://files.example.com"
	s, err := New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := keys.New("", keys.ModeTenant, "t", "")
	p, err := s.Presign(context.Background(), ns, "k", http.MethodGet, time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.URL, "https://files.example.com/"+"brain-tools/t/k?") {
		t.Fatalf("presigned URL %s does not use STORAGE_PRESIGN_ENDPOINT", p.URL)
	}
}
