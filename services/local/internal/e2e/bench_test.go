package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/sse"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/local/internal/approval"
)

// benchStreams is how many request_approval streams the benchmark holds
// open at once (env APPROVAL_BENCH_STREAMS, default 1000).
func benchStreams() int {
	if n, err := strconv.Atoi(os.Getenv("APPROVAL_BENCH_STREAMS")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// procStatus reads a field of /proc/<pid>/status in kB.
func procStatus(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return -1
}

// BenchmarkApprovalStreams holds N (1000) request_approval streams open at
// once on one local service process, as brain would (POST with Accept:
// text/event-stream, one connection per call), keeps them open through
// heartbeats, then has an operator decide every one on the page (half
// approve, half deny) and checks that every stream ends with its own
// result. It reports the local process's peak resident memory (VmHWM) and
// the times to open all streams and to decide them all. With
// APPROVAL_BENCH_METRICS=1 it also prints the local process's Go memory
// metrics (from its /metrics) while every stream is open.
//
//	go test -run '^$' -bench BenchmarkApprovalStreams -benchtime 1x ./internal/e2e/
func BenchmarkApprovalStreams(b *testing.B) {
	n := benchStreams()
	for range b.N {
		l := startLocal(b, map[string]string{"SSE_HEARTBEAT": "1s", "LOG_LEVEL": "warn"})
		pid := l.p.Cmd.Process.Pid
		baseKB := procStatus(pid, "VmRSS")

		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}}
		ctx, cancel := context.WithCancel(context.Background())
		ids := make([]string, n)
		opened := make(chan int, n)
		var wg sync.WaitGroup
		var approved, denied, wrong atomic.Int64
		var heartbeatsSeen atomic.Int64

		begin := time.Now()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				args, _ := json.Marshal(map[string]any{"action": fmt.Sprintf("bench action %d", i), "details": "held open by the benchmark", "timeout_seconds": 600})
				body, _ := json.Marshal(tool.Request{TenantID: tenant, SessionID: "bench", CallID: fmt.Sprintf("call-%d", i), Arguments: args})
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.url+"/tools/request_approval", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Authorization", "Bearer "+toolsKey)
				resp, err := client.Do(req)
				if err != nil {
					wrong.Add(1)
					opened <- i
					return
				}
				defer resp.Body.Close()
				counted := false
				// Count raw comment lines too, to see the heartbeats arrive.
				r := &beatCounter{r: resp.Body, seen: &heartbeatsSeen}
				for ev, err := range sse.Read(r, 1<<20) {
					if err != nil {
						break
					}
					switch ev.Name {
					case "progress":
						var p approval.Progress
						json.Unmarshal([]byte(ev.Data), &p)
						ids[i] = p.ApprovalID
						counted = true
						opened <- i
					case "result":
						res, err := tool.DecodeResult([]byte(ev.Data))
						var d approval.Decision
						if err == nil {
							json.Unmarshal(res.StructuredContent, &d)
						}
						switch {
						case d.ApprovalID != ids[i]:
							wrong.Add(1)
						case d.Decision == approval.Approved && !res.IsError && i%2 == 0:
							approved.Add(1)
						case d.Decision == approval.Denied && res.IsError && i%2 == 1:
							denied.Add(1)
						default:
							wrong.Add(1)
						}
						return
					}
				}
				wrong.Add(1)
				if !counted {
					opened <- i
				}
			}()
		}
		for range n {
			<-opened
		}
		openTime := time.Since(begin)
		openKB := procStatus(pid, "VmRSS")

		// Hold them all open across heartbeats.
		time.Sleep(2500 * time.Millisecond)
		heldKB := procStatus(pid, "VmRSS")
		if os.Getenv("APPROVAL_BENCH_METRICS") != "" {
			resp, _ := http.Get(l.url + "/metrics")
			var buf bytes.Buffer
			buf.ReadFrom(resp.Body)
			resp.Body.Close()
			for _, line := range strings.Split(buf.String(), "\n") {
				if strings.HasPrefix(line, "go_memstats_") || strings.HasPrefix(line, "go_goroutines") || strings.HasPrefix(line, "go_gc_gogc") {
					fmt.Println(line)
				}
			}
		}

		o := signIn(b, l.url, "bench-operator")
		decideStart := time.Now()
		work := make(chan int)
		var dwg sync.WaitGroup
		var refused atomic.Int64
		for range 8 {
			dwg.Add(1)
			go func() {
				defer dwg.Done()
				for i := range work {
					decision := "approve"
					if i%2 == 1 {
						decision = "deny"
					}
					if code, err := o.tryDecide(ids[i], decision, "bench"); err != nil || code != http.StatusOK {
						refused.Add(1)
					}
				}
			}()
		}
		for i := range n {
			if ids[i] != "" {
				work <- i
			}
		}
		close(work)
		dwg.Wait()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			b.Errorf("streams still open 60 s after every decision")
		}
		decideTime := time.Since(decideStart)
		cancel()
		peakKB := procStatus(pid, "VmHWM")
		l.p.Stop()

		ended := approved.Load() + denied.Load()
		b.ReportMetric(float64(peakKB)/1024, "peak_MB")
		b.ReportMetric(openTime.Seconds(), "open_s")
		b.ReportMetric(decideTime.Seconds(), "decide_s")
		b.ReportMetric(float64(ended), "results")
		fmt.Printf("approval streams: %d held open at once on one local service; opened in %s; RSS %.1f MB at start, %.1f MB with all open, %.1f MB after %d heartbeat comments; peak (VmHWM) %.1f MB (target < 60 MB; regression bound 100 MB); decided in %s; results: %d approved + %d denied = %d/%d, %d wrong, %d decisions refused\n",
			n, openTime.Round(time.Millisecond), float64(baseKB)/1024, float64(openKB)/1024, float64(heldKB)/1024, heartbeatsSeen.Load(),
			float64(peakKB)/1024, decideTime.Round(time.Millisecond), approved.Load(), denied.Load(), ended, n, wrong.Load(), refused.Load())
		if ended != int64(n) || wrong.Load() != 0 || refused.Load() != 0 {
			b.Fatalf("%d of %d streams ended with their result (%d wrong, %d refused)", ended, n, wrong.Load(), refused.Load())
		}
		if peakKB/1024 >= 100 {
			b.Errorf("peak memory %.1f MB is over the 100 MB target", float64(peakKB)/1024)
		}
	}
}

// beatCounter passes a stream through and counts its heartbeat comments.
type beatCounter struct {
	r    interface{ Read([]byte) (int, error) }
	seen *atomic.Int64
}

func (c *beatCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.seen.Add(int64(bytes.Count(p[:n], []byte(": heartbeat"))))
	}
	return n, err
}
