package main

import (
	"bytes"
	"encoding/json"
	"go/format"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/servicetest"
)

// MaxLines is the most lines of Go main.go may take, counting every line
// but blank ones and comments: the README promises a whole tool service
// (a JSON tool, a streaming tool and a job trio, with MCP) in that much.
const MaxLines = 40

// TestSize holds main.go to MaxLines and to gofmt's layout, so the count
// is of code as gofmt writes it.
func TestSize(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	formatted, err := format.Source(src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, formatted) {
		t.Fatal("main.go is not gofmt'd: run gofmt -w examples/customtool/main.go")
	}
	n := codeLines(string(src))
	t.Logf("main.go: %d lines of Go", n)
	if n > MaxLines {
		t.Errorf("main.go has %d lines of Go, more than the %d the README promises", n, MaxLines)
	}
}

// codeLines counts the lines of src that are neither blank nor only a
// comment (// lines, and the lines of /* */ blocks).
func codeLines(src string) int {
	n, inBlock := 0, false
	for _, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case inBlock:
			inBlock = !strings.Contains(line, "*/")
		case line == "", strings.HasPrefix(line, "//"):
		case strings.HasPrefix(line, "/*"):
			inBlock = !strings.Contains(line, "*/")
		default:
			n++
		}
	}
	return n
}

// TestReadmeShowsIt keeps the README's "Write a tool service" section the
// example as it is: main.go from its package clause on.
func TestReadmeShowsIt(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	code := src[bytes.Index(src, []byte("package main")):]
	if !bytes.Contains(readme, code) {
		t.Error("README.md does not show examples/customtool/main.go as it is: copy it into the \"Write a tool service\" section")
	}
}

func TestCodeLines(t *testing.T) {
	src := "package main\n\n// a comment\n/* a\nblock */\nfunc main() {} // trailing\n\t\n"
	if got := codeLines(src); got != 2 {
		t.Errorf("codeLines = %d, want 2", got)
	}
}

// TestTools calls every tool of the example over HTTP and over MCP.
func TestTools(t *testing.T) {
	srv := servicetest.Start(t, tools...)

	for name, r := range map[string]*servicetest.Reply{
		"HTTP": srv.Call(t, "word_count", map[string]any{"text": "one two  three"}),
		"MCP":  srv.CallMCP(t, "word_count", map[string]any{"text": "one two  three"}),
	} {
		if r.Result == nil || r.Result.IsError || string(r.Result.StructuredContent) != `{"words":3}` {
			t.Errorf("word_count over %s: %+v", name, r.Result)
		}
	}
	if r := srv.Call(t, "word_count", map[string]any{"text": 3}); !r.Result.IsError || !strings.Contains(r.Text(), `"/text"`) {
		t.Errorf("word_count of a number: %+v, want a refusal naming /text", r.Result)
	}

	for name, r := range map[string]*servicetest.Reply{
		"HTTP": srv.Call(t, "countdown", map[string]any{"seconds": 2}),
		"MCP":  srv.CallMCP(t, "countdown", map[string]any{"seconds": 2}),
	} {
		if r.Result == nil || r.Result.IsError || r.Text() != "counted down 2 s" {
			t.Errorf("countdown over %s: %+v", name, r.Result)
		}
		if len(r.Progress) != 2 {
			t.Fatalf("countdown over %s: progress %s, want 2 reports", name, r.Progress)
		}
		var p struct {
			Progress, Total float64
			Message         string
		}
		if err := json.Unmarshal(r.Progress[1], &p); err != nil || p.Progress != 1 || p.Total != 2 || p.Message != "1 s left" {
			t.Errorf("countdown over %s: second progress %s (%v), want 1 of 2, 1 s left", name, r.Progress[1], err)
		}
	}
	if r := srv.Call(t, "countdown", map[string]any{"seconds": 0}); !r.Result.IsError || !strings.Contains(r.Text(), "minimum") {
		t.Errorf("countdown of 0 s: %+v, want a refusal naming the minimum", r.Result)
	}

	// The job trio: a countdown as a job, its progress in timer_status,
	// then its result; and one cancelled while it runs.
	start := srv.Call(t, "timer_start", map[string]any{"seconds": 2})
	var job struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal(start.Result.StructuredContent, &job); err != nil || job.JobID == "" {
		t.Fatalf("timer_start: %+v (%v)", start.Result, err)
	}
	// The job reports its first progress as soon as it runs.
	var running *servicetest.Reply
	for range 50 {
		running = srv.Call(t, "timer_status", map[string]any{"job_id": job.JobID})
		if strings.Contains(string(running.Result.StructuredContent), `"progress":{"progress":`) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(string(running.Result.StructuredContent), `"progress":{"progress":`) || !strings.Contains(string(running.Result.StructuredContent), `"state":"running"`) {
		t.Errorf("timer_status while running: %s, want its progress", running.Result.StructuredContent)
	}
	done := srv.CallMCP(t, "timer_status", map[string]any{"job_id": job.JobID, "wait_seconds": 10})
	var st struct {
		State  string `json:"state"`
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(done.Result.StructuredContent, &st); err != nil || st.State != "succeeded" || len(st.Result.Content) != 1 || st.Result.Content[0].Text != "counted down 2 s" {
		t.Errorf("timer_status at the end: %s (%v)", done.Result.StructuredContent, err)
	}
	long := srv.Call(t, "timer_start", map[string]any{"seconds": 600})
	if err := json.Unmarshal(long.Result.StructuredContent, &job); err != nil {
		t.Fatal(err)
	}
	cancelled := srv.Call(t, "timer_cancel", map[string]any{"job_id": job.JobID})
	if err := json.Unmarshal(cancelled.Result.StructuredContent, &st); err != nil || st.State != "cancelled" {
		t.Errorf("timer_cancel: %s (%v)", cancelled.Result.StructuredContent, err)
	}
}
