package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/tool"

	"github.com/brain-tools/suite/services/search/internal/bravefake"
	"github.com/brain-tools/suite/services/search/internal/search"
)

var retryRE = regexp.MustCompile(`rate limited, retry after (\d+) s`)

// TestParallelBurstAgainstRateLimit sends 20 web_search calls at once, from
// two tenants, to a service whose Brave enforces 1 request a second with
// Brave's own headers and 429 body. Every call finishes well within the
// binding's timeout, each with results or "rate limited, retry after N s"
// (answered at once, not after queueing past BRAVE_MAX_WAIT); Brave answers
// 429 at most once; the two tenants share the turns. Before, the calls
// queued in the token bucket: 20 took 83 s, 11 past the 60 s timeout.
func TestParallelBurstAgainstRateLimit(t *testing.T) {
	fake := bravefake.New("brave-test-key", 1)
	api := httptest.NewServer(fake)
	defer api.Close()
	// BRAVE_MAX_WAIT half a slot past the fifth: no turn falls at the edge
	// of the wait, where a waiter's timer and its grant race (under load
	// one lost the turn it was admitted for, and the other tenant had it).
	base := serve(t, map[string]string{"BRAVE_API_KEY": "brave-test-key", "BRAVE_BASE_URL": api.URL + "/res/v1", "BRAVE_MAX_WAIT": "4500ms"})

	type outcome struct {
		tenant  string
		took    time.Duration
		results int
		retry   int
		text    string
	}
	out := make(chan outcome, 20)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 20 {
		tenant := []string{"acme", "globex"}[i%2]
		wg.Go(func() {
			r, err := callTool(base, tenant, fmt.Sprintf(`{"query":"burst %d","count":1}`, i))
			o := outcome{tenant: tenant, took: time.Since(start)}
			switch {
			case err != nil:
				o.text = err.Error()
			case !r.IsError:
				o.results = strings.Count(r.Content[0].Text, "https://example.com/")
			default:
				o.text = r.Content[0].Text
				if m := retryRE.FindStringSubmatch(o.text); m != nil {
					o.retry, _ = strconv.Atoi(m[1])
				}
			}
			out <- o
		})
	}
	wg.Wait()
	close(out)
	served := map[string]int{}
	limited := 0
	for o := range out {
		switch {
		case o.took > 10*time.Second:
			t.Errorf("%s: a call took %s (BRAVE_MAX_WAIT 4.5s, timeout %ds)", o.tenant, o.took, search.TimeoutSeconds)
		case o.results == 1:
			served[o.tenant]++
		case o.retry >= 1:
			limited++
		default:
			t.Errorf("%s: neither results nor rate limited with a retry time: %q", o.tenant, o.text)
		}
	}
	t.Logf("served %v, rate limited %d, Brave answered %d and limited %d, in %s", served, limited, len(fake.Accepted()), len(fake.Limited()), time.Since(start).Round(time.Millisecond))
	if n := len(fake.Limited()); n > 1 {
		t.Errorf("Brave answered 429 %d times for one burst", n)
	}
	if total := served["acme"] + served["globex"]; total < 4 || total+limited != 20 {
		t.Errorf("served %v and %d rate limited of 20", served, limited)
	}
	if d := served["acme"] - served["globex"]; d > 1 || d < -1 {
		t.Errorf("turns not shared between tenants: %v", served)
	}
	acc := fake.Accepted()
	for i := 1; i < len(acc); i++ {
		if gap := acc[i].Sub(acc[i-1]); gap < time.Second {
			t.Errorf("requests %d and %d reached Brave %s apart", i-1, i, gap)
		}
	}
}

// callTool posts one web_search call as brain does; safe in goroutines.
func callTool(base, tenant, args string) (*tool.Result, error) {
	body := fmt.Sprintf(`{"tenant_id":%q,"session_id":"s","call_id":"c","arguments":%s}`, tenant, args)
	req, _ := http.NewRequest(http.MethodPost, base+"/tools/web_search", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s: %s", resp.Status, data)
	}
	return tool.DecodeResult(bytes.TrimSpace(data))
}
