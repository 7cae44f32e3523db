package server

import (
	"github.com/brain-tools/suite/pkg/httpapi"

	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestReload: a new host config is the catalog at once, for new sessions
// and new calls; a call in flight keeps the binding it started with, even
// when the new config drops it; a custom tool a reload shadows keeps its
// entry, marked shadowed.
func TestReload(t *testing.T) {
	b := startBrain(t, allowLoopback)
	b.created("/custom_tools", "t1", map[string]any{"name": "later", "description": "mine", "url": b.tools.URL + "/tools/echo",
		"input_schema": map[string]any{"type": "object"}}, &CustomToolJSON{})
	sess := b.session("t1", "slow", "echo")
	_, c := b.call("t1", sess.ID, "slow", nil, 0)
	waitStarted(t, b.tools)
	b.srv.Reload(hostConfigWith(t, b.tools.URL, func(doc map[string]any) {
		tools := doc["tools"].([]any)
		tools[0].(map[string]any)["description"] = "echo, described anew"
		later := map[string]any{"name": "later", "description": "the operator's", "url": b.tools.URL + "/tools/echo",
			"tenants": []string{"t1"}, "input_schema": map[string]any{"type": "object"}}
		doc["tools"] = append([]any{tools[0], later}, tools[2:]...) // slow is gone
	}))
	var cat struct{ Tools []map[string]any }
	b.ok("GET", "/catalog", "t1", nil, &cat)
	var names []string
	for _, e := range cat.Tools {
		names = append(names, e["name"].(string))
		if e["name"] == "echo" && e["description"] != "echo, described anew" {
			t.Errorf("echo after the reload: %v", e)
		}
		if e["name"] == "later" && e["source"] == "custom" && e["shadowed"] != true {
			t.Errorf("custom tool a reload shadowed: %v", e)
		}
	}
	if got := strings.Join(names, ","); got != "echo,later,progress,inspect,later" {
		t.Errorf("catalog after the reload: %s", got)
	}
	b.tools.releaseAll()
	if done := b.waitCall("t1", c.ID); done.Status != "succeeded" {
		t.Fatalf("call in flight across the reload: %+v", done)
	}
	wantRefusal(t, b.do("POST", "/sessions/"+sess.ID+"/tool_calls", "t1", map[string]any{"tool": "slow"}), http.StatusBadRequest, httpapi.CodeInvalidRequest, "slow", "no longer")
	wantRefusal(t, b.do("POST", "/sessions", "t1", map[string]any{"config": map[string]any{"tools": []string{"slow"}}}), http.StatusBadRequest, httpapi.CodeInvalidRequest, "config.tools[0]", "slow")
	if n := testutil.ToFloat64(b.srv.metrics.reloads.WithLabelValues("applied")); n != 1 {
		t.Errorf("config_reloads_total{result=applied} = %v", n)
	}
}

// TestReloadMaxConcurrency: a reload that raises a binding's
// max_concurrency hands the calls waiting queued its new slots at once.
func TestReloadMaxConcurrency(t *testing.T) {
	b, ct := startWaitingBrain(t, false, 300)
	s := b.session("t1", "held")
	for i := range 4 {
		b.call("t1", s.ID, "held", map[string]int{"i": i}, 0)
	}
	arrived := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-ct.arrived:
			case <-time.After(5 * time.Second):
				t.Fatal("a call did not reach the tool")
			}
		}
	}
	arrived(2)
	select {
	case <-ct.arrived:
		t.Fatal("a third call ran under max_concurrency 2")
	case <-time.After(50 * time.Millisecond):
	}
	cfg := waitingConfig(t, ct.URL, false, 300)
	held, _ := cfg.Tool("held")
	held.MaxConcurrency = 4
	b.srv.Reload(cfg)
	arrived(2)
	for range 4 {
		ct.release <- struct{}{}
	}
}
