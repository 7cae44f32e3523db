package jobs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/tool"
)

// TestReport: progress and partial output a job reports show in its
// status while it runs; the result replaces the partial output at the
// end; outside a job Report does nothing.
func TestReport(t *testing.T) {
	if err := Report(context.Background(), 1); err != nil {
		t.Errorf("Report outside a job: %v", err)
	}
	m := NewManager(Options{})
	defer func() { _ = m.Close(context.Background()) }()
	reported, finish := make(chan struct{}), make(chan struct{})
	st, err := m.Start(sess("t1"), func(ctx context.Context) *tool.Result {
		_ = Report(ctx, map[string]int{"done": 2, "of": 3})
		ReportPartial(ctx, tool.TextResult("first two lines"))
		close(reported)
		<-finish
		return tool.TextResult("all three")
	})
	if err != nil {
		t.Fatal(err)
	}
	<-reported
	running, err := m.Status(context.Background(), sess("t1"), st.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	js := StatusJSON("job_id", running)
	if string(running.Progress) != `{"done":2,"of":3}` || js["partial"] == nil || !strings.Contains(StatusText("job", running), `progress: {"done":2,"of":3}`) {
		t.Errorf("running: %+v %v", running, js)
	}
	close(finish)
	ended, err := m.Status(context.Background(), sess("t1"), st.ID, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	js = StatusJSON("job_id", ended)
	if ended.State != Succeeded || js["partial"] != nil || js["result"] == nil || js["progress"] == nil {
		t.Errorf("ended: %+v %v", ended, js)
	}
	if err := Report(context.Background(), func() {}); err != nil {
		t.Errorf("Report of an unencodable value outside a job: %v", err)
	}
}
