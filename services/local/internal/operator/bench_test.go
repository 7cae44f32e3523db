package operator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/local/internal/approval"
)

// BenchmarkQueuePage1000 renders the queue's first page with 1,000 pending
// approvals, as an operator's browser asks for it, and reports its size:
// the page lists DefaultPageSize of them whatever the number waiting.
//
//	go test -run '^$' -bench BenchmarkQueuePage1000 ./internal/operator/
func BenchmarkQueuePage1000(b *testing.B) {
	s := newStack(b, Config{})
	ctx := context.Background()
	for i := range 1000 {
		if _, _, err := s.svc.Request(ctx, approval.NewApproval{TenantID: []string{"acme", "globex"}[i%2], SessionID: fmt.Sprint("s", i%9), CallID: fmt.Sprint("c", i),
			Origin: approval.OriginJob, Action: fmt.Sprintf("Deploy build %d to production", i), Details: "ticket", Timeout: time.Duration(10+i) * time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
	c := s.client()
	c.signIn("bench", operatorToken)
	var size int
	b.ResetTimer()
	for b.Loop() {
		resp, err := c.http.Get(s.url + "/approvals")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
		size = int(n)
	}
	b.ReportMetric(float64(size)/1024, "page-KiB")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/page")
}
