package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/servicetest"
	"github.com/brain-tools/suite/pkg/tool"
)

// sleepArgs are the arguments of the test's start tool.
type sleepArgs struct {
	Millis int `json:"millis"`
}

func newSleepTools(t *testing.T) []service.Tool {
	t.Helper()
	m := NewManager(Options{})
	t.Cleanup(func() { m.Close(context.Background()) })
	return newSleepToolsOn(m)
}

// newSleepToolsOn builds the test's job tools over m.
func newSleepToolsOn(m *Manager) []service.Tool {
	spec := Spec{Prefix: "sleep", Noun: "nap", Backend: m}
	spec.Start = TypedStart(m, spec, tool.Binding{Description: "Sleep, then say so."}, func(ctx context.Context, call *service.Call, a sleepArgs) (Func, error) {
		if a.Millis < 0 {
			return nil, errors.New("invalid arguments: millis: must not be negative")
		}
		return func(ctx context.Context) *tool.Result {
			select {
			case <-time.After(time.Duration(a.Millis) * time.Millisecond):
				return tool.TextResult("slept %d ms", a.Millis)
			case <-ctx.Done():
				return tool.Errorf("woken early")
			}
		}, nil
	})
	return Tools(spec)
}

// harness serves tools over HTTP with the real service runtime, as brain
// would reach them (servicetest).
type harness struct {
	t   *testing.T
	srv *servicetest.Server
}

func newHarness(t *testing.T, tools []service.Tool) *harness {
	return &harness{t: t, srv: servicetest.Start(t, tools...)}
}

// call calls name as tenant and returns its result and structured
// content; a refusal fails the test.
func (h *harness) call(tenant, name string, args any) (*tool.Result, map[string]any) {
	h.t.Helper()
	return h.callIn(tenant, "s1", name, args)
}

// callIn is call from the session session.
func (h *harness) callIn(tenant, session, name string, args any) (*tool.Result, map[string]any) {
	h.t.Helper()
	r := h.srv.CallAs(h.t, tenant, session, name, args)
	if r.Result == nil {
		h.t.Fatalf("%s: status %d: %s", name, r.Status, r.Error)
	}
	var sc map[string]any
	if r.Result.HasStructured() {
		if err := json.Unmarshal(r.Result.StructuredContent, &sc); err != nil {
			h.t.Fatal(err)
		}
	}
	return r.Result, sc
}

func TestToolsNamesAndSchemas(t *testing.T) {
	tools := newSleepTools(t)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Binding.Name)
		b := tl.Binding
		b.URL, b.Tenants = "http://127.0.0.1/x", []string{"t"}
		if err := b.Validate(); err != nil {
			t.Errorf("binding %s: %v", tl.Binding.Name, err)
		}
	}
	if got := strings.Join(names, ","); got != "sleep_start,sleep_status,sleep_cancel" {
		t.Fatalf("names = %s", got)
	}
	var in map[string]any
	_ = json.Unmarshal(tools[1].Binding.InputSchema, &in)
	wait := in["properties"].(map[string]any)["wait_seconds"].(map[string]any)
	if wait["maximum"] != float64(20) {
		t.Fatalf("wait_seconds maximum = %v, want 20", wait["maximum"])
	}
}

func TestToolsOverHTTP(t *testing.T) {
	m := NewManager(Options{})
	t.Cleanup(func() { m.Close(context.Background()) })
	h := newHarness(t, newSleepToolsOn(m))

	res, sc := h.call("alpha", "sleep_start", sleepArgs{Millis: 200})
	if res.IsError || sc["state"] != "running" {
		t.Fatalf("start = %+v %v", res, sc)
	}
	id := sc["job_id"].(string)
	if !ValidID(id) || !strings.Contains(res.Content[0].Text, "sleep_status") {
		t.Fatalf("start answer: id %q, text %q", id, res.Content[0].Text)
	}

	// Another session of the same tenant, and another tenant, learn
	// nothing, not even that the ID exists (Must show 3 of issue 14).
	for _, other := range []struct{ tenant, session string }{{"alpha", "s2"}, {"beta", "s1"}} {
		otherID := unknownID(m)
		res, _ := h.callIn(other.tenant, other.session, "sleep_status", map[string]any{"job_id": id})
		unknown, _ := h.callIn(other.tenant, other.session, "sleep_status", map[string]any{"job_id": otherID})
		if !res.IsError || !unknown.IsError {
			t.Fatalf("%v: status of the job: %+v", other, res)
		}
		if a, b := strings.ReplaceAll(res.Content[0].Text, id, "X"), strings.ReplaceAll(unknown.Content[0].Text, otherID, "X"); a != b || !strings.Contains(a, "no nap with this ID in this session") {
			t.Fatalf("%v: the job and an unknown ID answer %q and %q, want the same not-found", other, a, b)
		}
		if res, _ := h.callIn(other.tenant, other.session, "sleep_cancel", map[string]any{"job_id": id}); !res.IsError {
			t.Fatalf("%v: cancel succeeded: %+v", other, res)
		}
	}

	res, sc = h.call("alpha", "sleep_status", map[string]any{"job_id": id, "wait_seconds": 5})
	if res.IsError || sc["state"] != "succeeded" {
		t.Fatalf("status after wait = %+v %v", res, sc)
	}
	result := sc["result"].(map[string]any)
	if fmt.Sprint(result["content"]) != "[map[text:slept 200 ms type:text]]" {
		t.Fatalf("result = %v", result)
	}
	if !strings.Contains(res.Content[0].Text, "succeeded") || !strings.Contains(res.Content[0].Text, "slept 200 ms") {
		t.Fatalf("status text = %q", res.Content[0].Text)
	}
	if _, ok := sc["finished_at"]; !ok {
		t.Fatalf("no finished_at in %v", sc)
	}
}

func TestCancelToolStopsJob(t *testing.T) {
	h := newHarness(t, newSleepTools(t))
	_, sc := h.call("alpha", "sleep_start", sleepArgs{Millis: 60_000})
	id := sc["job_id"].(string)
	res, sc := h.call("alpha", "sleep_cancel", map[string]any{"job_id": id})
	if res.IsError || sc["state"] != "cancelled" {
		t.Fatalf("cancel = %+v %v", res, sc)
	}
	if !strings.Contains(res.Content[0].Text, "woken early") {
		t.Fatalf("cancel text = %q, want the job's own account", res.Content[0].Text)
	}
	_, sc = h.call("alpha", "sleep_status", map[string]any{"job_id": id})
	if sc["state"] != "cancelled" {
		t.Fatalf("status after cancel = %v", sc)
	}
}

func TestToolArgumentErrors(t *testing.T) {
	h := newHarness(t, newSleepTools(t))
	tests := []struct {
		name string
		tool string
		args any
		want string
	}{
		{"missing id", "sleep_status", map[string]any{}, "invalid arguments: at (root): missing property 'job_id'"},
		{"id not a string", "sleep_status", map[string]any{"job_id": 7}, `invalid arguments: at "/job_id": got number, want string`},
		{"malformed id", "sleep_status", map[string]any{"job_id": "../x"}, `at "/job_id": '../x' does not match pattern '` + IDPattern + `'`},
		{"unknown field", "sleep_status", map[string]any{"job_id": NewID(), "tenant_id": "beta"}, "additional properties 'tenant_id' not allowed"},
		{"wait over the cap", "sleep_status", map[string]any{"job_id": NewID(), "wait_seconds": 21}, `at "/wait_seconds": maximum: got 21, want 20`},
		{"negative wait", "sleep_status", map[string]any{"job_id": NewID(), "wait_seconds": -1}, `at "/wait_seconds": minimum: got -1, want 0`},
		{"wait not an integer", "sleep_status", map[string]any{"job_id": NewID(), "wait_seconds": 1.5}, `at "/wait_seconds": got number, want integer`},
		{"wait 1e1 is 10: over the cap of 20 only past it", "sleep_status", map[string]any{"job_id": NewID(), "wait_seconds": json.RawMessage(`2.1e1`)}, `at "/wait_seconds": maximum: got 21, want 20`},
		{"cancel takes no wait", "sleep_cancel", map[string]any{"job_id": NewID(), "wait_seconds": 1}, "additional properties 'wait_seconds' not allowed"},
		{"start refusal", "sleep_start", sleepArgs{Millis: -1}, "millis: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := h.call("alpha", tt.tool, tt.args)
			if !res.IsError || !strings.Contains(res.Content[0].Text, tt.want) {
				t.Fatalf("got %+v, want is_error containing %q", res, tt.want)
			}
		})
	}
}

func TestToolsPanicsOnBadSpec(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close(context.Background())
	start := service.Tool{Handler: func(context.Context, *service.Call) *tool.Result { return nil }}
	tests := []struct {
		name string
		spec Spec
	}{
		{"bad prefix", Spec{Prefix: "9x", Backend: m, Start: start}},
		{"no backend", Spec{Prefix: "x", Start: start}},
		{"no start handler", Spec{Prefix: "x", Backend: m}},
		{"wait too long", Spec{Prefix: "x", Backend: m, Start: start, MaxWait: 26 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("Tools did not panic")
				}
			}()
			Tools(tt.spec)
		})
	}
}

// TestToolsAfterRestart runs the tools on one Manager, then on a new one as
// a restarted process would: the earlier run's job IDs get the restart
// answer with unknown_outcome, for status and cancel and whatever the
// tenant; an unknown ID of the new run gets the not-found answer.
func TestToolsAfterRestart(t *testing.T) {
	ctx := context.Background()
	before := NewManager(Options{})
	_, sc := newHarness(t, newSleepToolsOn(before)).call("alpha", "sleep_start", sleepArgs{Millis: 60_000})
	old := sc["job_id"].(string)
	before.Close(ctx) // the process ends; the job's goroutine with it

	m := NewManager(Options{})
	t.Cleanup(func() { m.Close(ctx) })
	h := newHarness(t, newSleepToolsOn(m))
	restarted := fmt.Sprintf("nap %s was started by an earlier run of this service (started %s); the service restarted at %s, after the nap started, "+
		"and keeps no naps across a restart. If it was still running then, it was stopped with the service. "+
		"Its outcome is unknown: whatever it did may have happened, and no result or output of it was kept.",
		old, stamp(before.StartedAt()), stamp(m.StartedAt()))
	unknown := unknownID(m)
	tests := []struct {
		name, tenant, tool string
		args               map[string]any
		want               string
		unknownOutcome     bool
	}{
		{"status of the earlier run's job", "alpha", "sleep_status", map[string]any{"job_id": old, "wait_seconds": 1}, restarted, true},
		{"cancel of the earlier run's job", "alpha", "sleep_cancel", map[string]any{"job_id": old}, restarted, true},
		{"another tenant gets the same: the tag is all it is based on", "beta", "sleep_status", map[string]any{"job_id": old}, restarted, true},
		{"status of an unknown ID of this run", "alpha", "sleep_status", map[string]any{"job_id": unknown},
			"nap " + unknown + ": no nap with this ID in this session (it may have ended and been forgotten)", false},
		{"cancel of an unknown ID of this run", "alpha", "sleep_cancel", map[string]any{"job_id": unknown},
			"nap " + unknown + ": no nap with this ID in this session (it may have ended and been forgotten)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, sc := h.call(tt.tenant, tt.tool, tt.args)
			if !res.IsError || res.UnknownOutcome != tt.unknownOutcome || sc != nil || len(res.Content) != 1 || res.Content[0].Text != tt.want {
				t.Fatalf("got %+v\nwant is_error, unknown_outcome %v, text\n%s", res, tt.unknownOutcome, tt.want)
			}
		})
	}
}
