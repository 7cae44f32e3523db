package tools

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	b64 "github.com/segmentio/asm/base64"

	"github.com/brain-tools/suite/pkg/bufpool"
	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/storage/internal/objects"
	"github.com/brain-tools/suite/services/storage/internal/s3test"
)

const benchObjectBytes = 256 << 10

// fastCall makes one call the way brain does: the request body streamed
// with tool.Request.Body (arguments not copied), the result read into a
// recycled buffer sized from Content-Length and decoded with
// tool.DecodeResult, which checks every rule of the contract.
func (h *harness) fastCall(tenant, session, name string, args []byte) *tool.Result {
	req := tool.Request{TenantID: tenant, SessionID: session, CallID: "bench", Arguments: args}
	body, n, err := req.Body()
	if err != nil {
		h.t.Fatal(err)
	}
	hr, _ := http.NewRequest(http.MethodPost, h.url+"/tools/"+name, body)
	hr.ContentLength = n
	hr.GetBody = func() (io.ReadCloser, error) {
		b, _, err := req.Body()
		return io.NopCloser(b), err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json, text/event-stream")
	hr.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	rb := readBuffers.Get()
	buf := bytes.NewBuffer(slices.Grow(*rb, int(max(resp.ContentLength, 0))+bytes.MinRead))
	_, err = buf.ReadFrom(resp.Body)
	data := buf.Bytes()
	if err != nil || resp.StatusCode != http.StatusOK {
		h.t.Fatalf("%s: %s: %v", name, resp.Status, err)
	}
	r, err := tool.DecodeResult(data)
	if err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	readBuffers.Put(rb, data)
	return r
}

// readBuffers are fastCall's, as brain recycles its own (invoke.readAll).
var readBuffers = bufpool.New(maxPooledBytes)

// BenchmarkPutGet256KiB compares one storage_put + storage_get of a
// 256 KiB object through the service (HTTP, JSON, base64, namespace, the
// transfer manager) with the same two calls made straight from
// aws-sdk-go-v2 to the same versitygw. Throughput counts both directions.
// Target: the service keeps at least 70 % of the direct throughput.
//
// direct and service run one after the other; interleaved alternates them
// pair by pair, so both see the same load on a shared machine, and reports
// the ratio as the keep-% metric.
func BenchmarkPutGet256KiB(b *testing.B) {
	data := randomBytes(benchObjectBytes)
	direct := newDirect(b, data)
	b.Run("direct", func(b *testing.B) {
		b.SetBytes(2 * benchObjectBytes)
		for b.Loop() {
			direct()
		}
	})
	service := newServicePair(b, data)
	b.Run("service", func(b *testing.B) {
		b.SetBytes(2 * benchObjectBytes)
		for b.Loop() {
			service()
		}
	})
	b.Run("interleaved", func(b *testing.B) {
		var d, s time.Duration
		b.SetBytes(4 * benchObjectBytes)
		for b.Loop() {
			t0 := time.Now()
			direct()
			t1 := time.Now()
			service()
			d += t1.Sub(t0)
			s += time.Since(t1)
		}
		n := time.Duration(b.N)
		b.ReportMetric(float64(d/n)/1e6, "direct-ms/op")
		b.ReportMetric(float64(s/n)/1e6, "service-ms/op")
		b.ReportMetric(100*float64(d)/float64(s), "keep-%")
		fmt.Fprintf(os.Stdout, "storage put+get 256 KiB, interleaved: direct %v/op (%.1f MB/s), service %v/op (%.1f MB/s): the service keeps %.0f%% of direct throughput (target >= 70%%)\n",
			(d / n).Round(time.Microsecond), mbps(d/n), (s / n).Round(time.Microsecond), mbps(s/n), 100*float64(d)/float64(s))
	})
}

// newDirect returns one put+get pair made straight with aws-sdk-go-v2.
func newDirect(b *testing.B, data []byte) func() {
	store, err := objects.New(context.Background(), s3Config(), nil)
	if err != nil {
		b.Fatal(err)
	}
	return directPair(b, store.Client(), data, directKey("bench.bin"))
}

// directKey is key at the depth the service stores it (key root, tenant,
// key), so that both sides make the same calls: versitygw's posix backend
// spends about 0.3 ms more on a put two directories down than on one at
// the bucket's root, which is the backend's cost, not the service's.
func directKey(key string) string {
	return fmt.Sprintf("d%d/bench/%s", time.Now().UnixNano(), key)
}

// directPair is one put+get pair of key straight with client.
func directPair(b *testing.B, client *s3.Client, data []byte, key string) func() {
	ctx := context.Background()
	return func() {
		if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s3test.Bucket), Key: aws.String(key), Body: bytes.NewReader(data), ContentType: aws.String("application/octet-stream")}); err != nil {
			b.Fatal(err)
		}
		out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s3test.Bucket), Key: aws.String(key)})
		if err != nil {
			b.Fatal(err)
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || len(got) != benchObjectBytes {
			b.Fatalf("read %d bytes: %v", len(got), err)
		}
	}
}

// newServicePair returns one storage_put + storage_get pair through the
// service over loopback HTTP, decoding the bytes back as a client must.
func newServicePair(b *testing.B, data []byte) func() {
	return servicePair(b, newHarness(b, toolsConfig()), data, "bench.bin")
}

// servicePair is one storage_put + storage_get pair of key through h.
func servicePair(b *testing.B, h *harness, data []byte, key string) func() {
	getArgs := []byte(`{"key":"` + key + `"}`)
	var putArgs []byte
	return func() {
		// Encoding the arguments is the caller's work: it counts.
		putArgs = append(putArgs[:0], `{"key":"`+key+`","content_type":"application/octet-stream","data_base64":"`...)
		n := len(putArgs)
		putArgs = slices.Grow(putArgs, b64.StdEncoding.EncodedLen(len(data))+2)[:n+b64.StdEncoding.EncodedLen(len(data))]
		b64.StdEncoding.Encode(putArgs[n:], data)
		putArgs = append(putArgs, `"}`...)
		if r := h.fastCall("bench", "s", "storage_put", putArgs); r.IsError {
			b.Fatalf("put: %+v", r)
		}
		r := h.fastCall("bench", "s", "storage_get", getArgs)
		if r.IsError || len(r.Content) != 2 {
			b.Fatalf("get: %+v", r)
		}
		got, err := b64.StdEncoding.DecodeString(r.Content[1].Text)
		if err != nil || len(got) != benchObjectBytes {
			b.Fatalf("read %d bytes: %v", len(got), err)
		}
	}
}

// BenchmarkPutGet256KiBParallel is BenchmarkPutGet256KiB with 4 callers
// at once, each on its own key: throughput when the service and versitygw
// are both busy.
func BenchmarkPutGet256KiBParallel(b *testing.B) {
	data := randomBytes(benchObjectBytes)
	store, err := objects.New(context.Background(), s3Config(), nil)
	if err != nil {
		b.Fatal(err)
	}
	h := newHarness(b, toolsConfig())
	var workers atomic.Int64
	rates := map[string]float64{}
	for _, path := range []string{"direct", "service"} {
		b.Run(path, func(b *testing.B) {
			b.SetBytes(2 * benchObjectBytes)
			b.SetParallelism(2)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprintf("par-%s-%d", path, workers.Add(1))
				pair := directPair(b, store.Client(), data, directKey(key))
				if path == "service" {
					pair = servicePair(b, h, data, key)
				}
				for pb.Next() {
					pair()
				}
			})
			rates[path] = float64(b.N) / time.Since(start).Seconds()
			b.ReportMetric(rates[path], "pairs/s")
		})
	}
	if rates["direct"] > 0 && rates["service"] > 0 {
		fmt.Fprintf(os.Stdout, "storage put+get 256 KiB, 4 callers: direct %.0f pairs/s, service %.0f pairs/s: the service keeps %.0f%%\n",
			rates["direct"], rates["service"], 100*rates["service"]/rates["direct"])
	}
}

func mbps(d time.Duration) float64 { return 2 * benchObjectBytes / d.Seconds() / 1e6 }
