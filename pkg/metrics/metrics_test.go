package metrics

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

var metricName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func TestDefs(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range All {
		switch {
		case !metricName.MatchString(d.Name):
			t.Errorf("%q: not a metric name", d.Name)
		case seen[d.Name]:
			t.Errorf("%s: listed twice", d.Name)
		case d.Type != Counter && d.Type != Gauge && d.Type != Histogram:
			t.Errorf("%s: type %q", d.Name, d.Type)
		case d.Type == Counter && !strings.HasSuffix(d.Name, "_total"):
			t.Errorf("%s: a counter's name ends in _total", d.Name)
		case d.Help == "" || d.ServedBy == "":
			t.Errorf("%s: no help or served-by", d.Name)
		}
		seen[d.Name] = true
		for _, l := range d.Labels {
			if l == "service" {
				t.Errorf("%s: service is the const label of every metric, not one of its labels", d.Name)
			}
			if !strings.Contains(Markdown(), "| `"+l+"` |") {
				t.Errorf("%s: label %s has no row in the label table", d.Name, l)
			}
		}
		if got, ok := Lookup(d.Name); !ok || got.Name != d.Name {
			t.Errorf("Lookup(%s) = %v, %v", d.Name, got, ok)
		}
	}
}

func TestServed(t *testing.T) {
	for _, tc := range []struct {
		d       Def
		service string
		tool    bool
		want    bool
	}{
		{HTTPRequests, "brain", false, true},
		{MCPSessions, "brain", false, false},
		{MCPSessions, "storage", true, true},
		{Jobs, "customtool", true, true},
		{Jobs, "sandbox", true, true},
		{Jobs, "storage", true, false},
		{Sessions, "brain", false, true},
	} {
		if got := tc.d.Served(tc.service, tc.tool); got != tc.want {
			t.Errorf("%s served by %s = %v, want %v", tc.d.Name, tc.service, got, tc.want)
		}
	}
}

func TestSet(t *testing.T) {
	s := New("svc")
	s.Tool("echo", TransportMCP).Done(StatusFailed, CodeToolError, 3*time.Millisecond)
	s.GaugeFunc(ApprovalsPending, func() float64 { return 4 })
	s.Gauges(Jobs, func(emit func(float64, ...string)) { emit(2, "running"); emit(1, "finished") })
	got, err := testutil.GatherAndCount(s.Registry, ToolCalls.Name, ApprovalsPending.Name, Jobs.Name, BuildInfo.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got != 6 {
		t.Errorf("%d samples, want 6 (one call and its tool's success series at 0, one gauge, two job states, build_info)", got)
	}
	if v := testutil.ToFloat64(s.ToolCalls.WithLabelValues("echo", TransportMCP, StatusFailed, CodeToolError)); v != 1 {
		t.Errorf("tool_calls_total = %v", v)
	}
	for _, bad := range []func(){
		func() { s.GaugeFunc(ToolCalls, func() float64 { return 0 }) },
		func() { s.GaugeFunc(Jobs, func() float64 { return 0 }) },
		func() { s.CounterVec(Jobs) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("a Def of the wrong type or shape was registered")
				}
			}()
			bad()
		}()
	}
}

func TestMarkdown(t *testing.T) {
	md := Markdown()
	for _, d := range All {
		if !strings.Contains(md, "| `"+d.Name+"` | "+d.Type+" |") {
			t.Errorf("table has no row for %s", d.Name)
		}
	}
}

// TestToolMeters: a tool's meters are made once per tool and transport
// (the same series every call), a success counts in the success series and
// any other end in its own status and code, and concurrent first uses make
// one set.
func TestToolMeters(t *testing.T) {
	s := New("svc")
	var wg sync.WaitGroup
	got := make([]*ToolMeters, 16)
	for i := range got {
		wg.Go(func() { got[i] = s.Tool("echo", TransportHTTP) })
	}
	wg.Wait()
	for i, m := range got {
		if m != got[0] {
			t.Fatalf("Tool call %d made a second set of meters", i)
		}
	}
	if s.Tool("echo", TransportMCP) == got[0] || s.Tool("other", TransportHTTP) == got[0] {
		t.Fatal("another tool or transport shares echo over HTTP's meters")
	}
	m := got[0]
	m.InFlight.Inc()
	m.Done(StatusSucceeded, "", time.Millisecond)
	m.Done(StatusSucceeded, "", time.Millisecond)
	m.Done(StatusFailed, CodeToolError, time.Millisecond)
	m.Done(StatusCancelled, CodeCancelled, time.Millisecond)
	for _, tc := range []struct {
		status, code string
		want         float64
	}{
		{StatusSucceeded, "", 2},
		{StatusFailed, CodeToolError, 1},
		{StatusCancelled, CodeCancelled, 1},
		{StatusFailed, CodeCancelled, 0},
	} {
		if v := testutil.ToFloat64(s.ToolCalls.WithLabelValues("echo", TransportHTTP, tc.status, tc.code)); v != tc.want {
			t.Errorf("tool_calls_total{status=%q,error_code=%q} = %v, want %v", tc.status, tc.code, v, tc.want)
		}
	}
	if v := testutil.ToFloat64(s.ToolInFlight.WithLabelValues("echo", TransportHTTP)); v != 1 {
		t.Errorf("tool_calls_in_flight = %v, want 1", v)
	}
	// echo over HTTP: succeeded, failed, cancelled; the two other meters'
	// success series, made with them at 0.
	if n := testutil.CollectAndCount(s.ToolDuration); n != 5 {
		t.Errorf("tool_call_duration_seconds has %d series, want 5", n)
	}
}
