package objects

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/brain-tools/suite/services/storage/internal/keys"
	"github.com/brain-tools/suite/services/storage/internal/s3test"
)

var gw *s3test.Server

// TestMain starts one versitygw for the whole package.
func TestMain(m *testing.M) { s3test.Main(m, "objects", &gw) }

func gwConfig() Config {
	return Config{
		Provider:        ProviderCompatible,
		Endpoint:        gw.Endpoint,
		Bucket:          s3test.Bucket,
		AccessKeyID:     s3test.AccessKey,
		SecretAccessKey: s3test.SecretKey,
		PathStyle:       "auto",
		RequestTimeout:  30 * time.Second,
	}
}

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := New(context.Background(), gwConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// namespace returns a fresh namespace so tests sharing the server never see
// each other's objects.
func namespace(t testing.TB) keys.Namespace {
	t.Helper()
	ns, err := keys.New("", keys.ModeSession, "tenant-"+t.Name(), fmt.Sprintf("s-%d", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func TestRoundTrip(t *testing.T) {
	s := newStore(t)
	ns := namespace(t)
	ctx := context.Background()
	tests := []struct {
		key, contentType string
		body             []byte
	}{
		{"plain.txt", "text/plain; charset=utf-8", []byte("hello")},
		{"with space (1).txt", "text/plain", []byte("spaces and parens")},
		{"a+b=c:d.txt", "text/plain", []byte("plus equals colon")},
		{"données/日本語 😀.txt", "text/plain", []byte("non-ascii key")},
		{"dir/sub/empty", "application/octet-stream", []byte{}},
		{"bin/random.bin", "application/octet-stream", randomBytes(300 << 10)},
		{"odd%2Fname?x#y&z", "", []byte("url metacharacters")},
		// One byte past PartSize: a multipart upload through the transfer
		// manager (two parts) instead of one PutObject.
		{"big/multipart.bin", "application/octet-stream", randomBytes(PartSize + 1)},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			meta := map[string]string{"purpose": "test"}
			put, err := s.Put(ctx, ns, tt.key, tt.body, tt.contentType, meta)
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			if put.Size != int64(len(tt.body)) || put.ETag == "" {
				t.Fatalf("put = %+v", put)
			}
			// A multipart object's ETag ends in -<parts>; one PutObject's does not.
			if multipart := strings.Contains(put.ETag, "-"); multipart != (len(tt.body) > PartSize) {
				t.Errorf("put of %d bytes: ETag %q, multipart = %v", len(tt.body), put.ETag, multipart)
			}
			obj, data, err := s.Get(ctx, ns, tt.key, 0, max(1<<20, int64(len(tt.body))))
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if !bytes.Equal(data, tt.body) {
				t.Fatalf("get returned %d bytes, want the %d written", len(data), len(tt.body))
			}
			if obj.Size != int64(len(tt.body)) || obj.Key != tt.key {
				t.Fatalf("get object = %+v", obj)
			}
			head, err := s.Head(ctx, ns, tt.key)
			if err != nil {
				t.Fatalf("head: %v", err)
			}
			if head.Size != int64(len(tt.body)) || head.ETag != put.ETag || head.Metadata["purpose"] != "test" {
				t.Fatalf("head = %+v, put etag %s", head, put.ETag)
			}
			if tt.contentType != "" && head.ContentType != tt.contentType {
				t.Fatalf("head content type = %q, want %q", head.ContentType, tt.contentType)
			}
		})
	}

	objs, more, err := s.List(ctx, ns, "", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Key)
	}
	var want []string
	for _, tt := range tests {
		want = append(want, tt.key)
	}
	if diff := cmp.Diff(sorted(want), got); diff != "" || more {
		t.Fatalf("list keys (-want +got), more=%v:\n%s", more, diff)
	}

	for _, tt := range tests {
		existed, err := s.Delete(ctx, ns, tt.key)
		if err != nil || !existed {
			t.Fatalf("delete %q = %v, %v", tt.key, existed, err)
		}
		if _, err := s.Head(ctx, ns, tt.key); kindOfErr(err) != KindNotFound {
			t.Fatalf("head after delete %q: %v", tt.key, err)
		}
	}
	existed, err := s.Delete(ctx, ns, "plain.txt")
	if err != nil || existed {
		t.Fatalf("second delete = %v, %v; want false, nil", existed, err)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func kindOfErr(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

func TestGetRanges(t *testing.T) {
	s := newStore(t)
	ns := namespace(t)
	ctx := context.Background()
	body := []byte("0123456789")
	if _, err := s.Put(ctx, ns, "digits", body, "text/plain", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, ns, "empty", nil, "", nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		key       string
		offset, n int64
		want      string
		size      int64
	}{
		{"digits", 0, 10, "0123456789", 10},
		{"digits", 0, 1, "0", 10},
		{"digits", 3, 4, "3456", 10},
		{"digits", 9, 100, "9", 10},
		{"digits", 10, 5, "", 10},
		{"digits", 1000, 5, "", 10},
		{"empty", 0, 5, "", 0},
		{"empty", 3, 5, "", 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s@%d+%d", tt.key, tt.offset, tt.n), func(t *testing.T) {
			obj, data, err := s.Get(ctx, ns, tt.key, tt.offset, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tt.want || obj.Size != tt.size {
				t.Fatalf("got %q size %d, want %q size %d", data, obj.Size, tt.want, tt.size)
			}
		})
	}
	if _, _, err := s.Get(ctx, ns, "digits", -1, 5); kindOfErr(err) != KindInvalid {
		t.Fatalf("negative offset: %v", err)
	}
	if _, _, err := s.Get(ctx, ns, "digits", 0, 0); kindOfErr(err) != KindInvalid {
		t.Fatalf("zero length: %v", err)
	}
}

func TestNotFoundHidesPrefix(t *testing.T) {
	s := newStore(t)
	ns := namespace(t)
	ctx := context.Background()
	_, _, err := s.Get(ctx, ns, "missing.txt", 0, 10)
	if kindOfErr(err) != KindNotFound {
		t.Fatalf("get missing: %v", err)
	}
	_, err = s.Head(ctx, ns, "missing.txt")
	if kindOfErr(err) != KindNotFound {
		t.Fatalf("head missing: %v", err)
	}
	for _, e := range []error{err} {
		if strings.Contains(e.Error(), ns.Prefix()) {
			t.Fatalf("error shows the namespace prefix: %v", e)
		}
	}
}

func TestListPages(t *testing.T) {
	s := newStore(t)
	ns := namespace(t)
	other := namespace(t)
	ctx := context.Background()
	var want []string
	for i := range 7 {
		k := fmt.Sprintf("logs/%02d.txt", i)
		want = append(want, k)
		if _, err := s.Put(ctx, ns, k, []byte("x"), "text/plain", nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, ns, "other/x.txt", []byte("x"), "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, other, "logs/99.txt", []byte("x"), "", nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	after := ""
	for page := 0; ; page++ {
		objs, more, err := s.List(ctx, ns, "logs/", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			got = append(got, o.Key)
			if o.Size != 1 || o.LastModified == nil {
				t.Fatalf("listed %+v", o)
			}
		}
		if !more {
			break
		}
		if page > 5 {
			t.Fatal("listing does not end")
		}
		after = objs[len(objs)-1].Key
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("pages (-want +got):\n%s", diff)
	}
	for _, limit := range []int{0, 1001} {
		if _, _, err := s.List(ctx, ns, "", "", limit); kindOfErr(err) != KindInvalid {
			t.Fatalf("limit %d: %v", limit, err)
		}
	}
	objs, _, err := s.List(ctx, ns, "", "", 1000)
	if err != nil || len(objs) != 8 {
		t.Fatalf("list all = %d objects, %v", len(objs), err)
	}
}

// A presigned PUT and GET work with nothing but net/http, for keys with
// every character class the SDK must escape.
func TestPresignWithNetHTTP(t *testing.T) {
	s := newStore(t)
	ns := namespace(t)
	ctx := context.Background()
	for _, key := range []string{"plain.bin", "with space (1)+a=b:c.bin", "données/日本語 😀.bin"} {
		t.Run(key, func(t *testing.T) {
			body := randomBytes(64 << 10)
			put, err := s.Presign(ctx, ns, key, http.MethodPut, 5*time.Minute, "application/x-test")
			if err != nil {
				t.Fatal(err)
			}
			if put.Headers["Content-Type"] != "application/x-test" {
				t.Fatalf("PUT must be told to send the signed Content-Type: %+v", put.Headers)
			}
			if strings.Contains(put.URL, "x-amz-checksum") || strings.Contains(put.URL, "x-amz-sdk-checksum") {
				t.Fatalf("presigned URL carries a checksum: %s", put.URL)
			}
			req, _ := http.NewRequest(put.Method, put.URL, bytes.NewReader(body))
			for k, v := range put.Headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("presigned PUT: %s: %s", resp.Status, msg)
			}

			get, err := s.Presign(ctx, ns, key, http.MethodGet, time.Minute, "")
			if err != nil {
				t.Fatal(err)
			}
			resp, err = http.Get(get.URL)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
				t.Fatalf("presigned GET: %s, %d bytes, equal=%v", resp.Status, len(got), bytes.Equal(got, body))
			}
			head, err := s.Head(ctx, ns, key)
			if err != nil || head.ContentType != "application/x-test" {
				t.Fatalf("head after presigned PUT = %+v, %v", head, err)
			}
		})
	}
}

func TestPresignLimits(t *testing.T) {
	s := newStore(t)
	ns := namespace(t)
	ctx := context.Background()
	if _, err := s.Presign(ctx, ns, "k", http.MethodGet, MaxPresignExpiry, ""); err != nil {
		t.Fatalf("7 days: %v", err)
	}
	for _, d := range []time.Duration{0, MaxPresignExpiry + time.Second} {
		if _, err := s.Presign(ctx, ns, "k", http.MethodGet, d, ""); kindOfErr(err) != KindInvalid {
			t.Fatalf("expiry %s: %v", d, err)
		}
	}
	if _, err := s.Presign(ctx, ns, "k", http.MethodDelete, time.Minute, ""); kindOfErr(err) != KindInvalid {
		t.Fatalf("DELETE: %v", err)
	}
	if _, err := s.Presign(ctx, ns, "../x", http.MethodGet, time.Minute, ""); kindOfErr(err) != KindInvalid {
		t.Fatalf("bad key: %v", err)
	}
}

func TestCheck(t *testing.T) {
	s := newStore(t)
	if err := s.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := gwConfig()
	cfg.Bucket = "no-such-bucket"
	bad, err := New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Check(context.Background()); kindOfErr(err) != KindNoBucket && kindOfErr(err) != KindNotFound {
		t.Fatalf("missing bucket: %v", err)
	}
	cfg = gwConfig()
	cfg.SecretAccessKey = "wrong"
	bad, _ = New(context.Background(), cfg, nil)
	if err := bad.Check(context.Background()); kindOfErr(err) != KindDenied {
		t.Fatalf("wrong secret: %v", err)
	}
}

// TestCheckBoundedByHealthTimeout: against a server that accepts the
// connection and never answers, Check gives up after HealthTimeout (not
// the 60 s RequestTimeout, which is what /healthz used to wait) with an
// unavailable error naming the limit.
func TestCheckBoundedByHealthTimeout(t *testing.T) {
	silent, err := s3test.StartSilent()
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	cfg := gwConfig()
	cfg.Endpoint = silent.Endpoint
	cfg.RequestTimeout = 60 * time.Second
	cfg.HealthTimeout = 300 * time.Millisecond
	s, err := New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = s.Check(context.Background())
	took := time.Since(start)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindUnavailable || err.Error() != "head bucket: storage did not answer within 300ms (STORAGE_HEALTH_TIMEOUT)" {
		t.Fatalf("Check = %v, want unavailable naming the 300ms health timeout", err)
	}
	if silent.Accepted() == 0 {
		t.Fatal("the request never reached the silent server")
	}
	// The bound, not a speed goal: it waited for the limit and gave up
	// then, far from RequestTimeout.
	if took < 300*time.Millisecond || took > 10*time.Second {
		t.Fatalf("Check took %s, want 300ms and then some", took)
	}
	// A parent context that ends first is not reported as the health limit.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Check(ctx); err == nil || strings.Contains(err.Error(), "STORAGE_HEALTH_TIMEOUT") {
		t.Fatalf("Check with a shorter caller deadline = %v", err)
	}
}

// Keys that are valid S3 keys but that a file-system backend cannot hold
// come back as clear errors with the prefix hidden.
func TestBackendKeyErrors(t *testing.T) {
	s := newStore(t)
	ns := namespace(t)
	ctx := context.Background()
	_, err := s.Put(ctx, ns, strings.Repeat("s", 256), []byte("x"), "", nil)
	if kindOfErr(err) != KindInvalid || !strings.Contains(err.Error(), "255 bytes") {
		t.Fatalf("256-byte segment: %v", err)
	}
	if _, err := s.Put(ctx, ns, "file", []byte("x"), "", nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.Put(ctx, ns, "file/child", []byte("x"), "", nil)
	if err == nil || strings.Contains(err.Error(), ns.Prefix()) {
		t.Fatalf("object under an object on posix: %v", err)
	}
	t.Logf("object under an object: %v", err)
}
