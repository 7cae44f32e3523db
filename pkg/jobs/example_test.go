package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
)

type sumIn struct {
	Numbers []int `json:"numbers" schema:"maxItems=100"`
}

// Typed turns one typed handler into a job trio: sum_start answers a job
// ID at once, sum_status tells the job's state, progress and result, and
// sum_cancel stops it.
func ExampleTyped() {
	m := jobs.NewManager(jobs.Options{})
	defer func() { _ = m.Close(context.Background()) }()
	trio := jobs.Typed(m, jobs.Spec{Prefix: "sum"}, tool.Binding{Description: "Add numbers up, as a job."},
		func(_ context.Context, call *service.Call, in sumIn) (*tool.Result, error) {
			total := 0
			for i, n := range in.Numbers {
				total += n
				_ = call.Progress(service.Progress{Progress: float64(i + 1), Total: float64(len(in.Numbers))})
			}
			return tool.TextResult("the sum is %d", total), nil
		})
	for _, t := range trio {
		fmt.Println(t.Binding.Name)
	}

	srv := httptest.NewServer((&service.Server{Name: "example", Config: service.Config{NoAuth: true, MaxRequestBytes: 1 << 20, StreamAfter: 10e9, Heartbeat: 15e9},
		Tools: trio}).Handler())
	defer srv.Close()
	call := func(name, args string) map[string]any {
		resp, err := http.Post(srv.URL+"/tools/"+name, "application/json",
			strings.NewReader(`{"tenant_id":"local","session_id":"s1","call_id":"c1","arguments":`+args+`}`))
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		var r struct {
			StructuredContent map[string]any `json:"structured_content"`
		}
		body, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(body, &r); err != nil {
			panic(err)
		}
		return r.StructuredContent
	}
	started := call("sum_start", `{"numbers":[1,2,3]}`)
	fmt.Println(started["state"])
	done := call("sum_status", fmt.Sprintf(`{"job_id":%q,"wait_seconds":5}`, started["job_id"]))
	fmt.Println(done["state"], done["progress"], done["result"].(map[string]any)["content"])
	// Output:
	// sum_start
	// sum_status
	// sum_cancel
	// running
	// succeeded map[progress:3 total:3] [map[text:the sum is 6 type:text]]
}
