package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/jobs"
	"github.com/brain-tools/suite/pkg/service"
	"github.com/brain-tools/suite/pkg/tool"
	"github.com/brain-tools/suite/services/sandbox/internal/backend"
)

// namedBackend is a backend of which the job tools only ask the name; the
// jobs here are run directly on the jobs.Manager, not through the backend.
type namedBackend struct {
	backend.Backend
	name string
}

func (b namedBackend) Name() string { return b.name }

// statusCall runs a sandbox_status or sandbox_cancel call on s.
func statusCall(t *testing.T, s *Service, name, tenant, session string, args map[string]any) *tool.Result {
	t.Helper()
	raw, _ := json.Marshal(args)
	call := service.NewCall(tool.Request{TenantID: tenant, SessionID: session, CallID: "c1", Arguments: raw}, nil, nil)
	for _, tl := range s.Tools() {
		if tl.Binding.Name == name {
			return tl.Handler(context.Background(), call)
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

// TestJobAnswersAfterRestart simulates a restart with a second Service (a
// new jobs.Manager): the first one's job IDs get the restart answer with
// unknown_outcome, worded for the backend, for any session; an unknown ID
// of the running Service gets "no command" with the retention rule.
func TestJobAnswersAfterRestart(t *testing.T) {
	ctx := context.Background()
	for _, be := range []string{"local", "e2b"} {
		t.Run(be, func(t *testing.T) {
			before := New(Limits{Tenants: []string{"t1", "t2"}}, nil, namedBackend{name: be}, nil)
			old, err := before.jobs.Start(jobs.Owner{Tenant: "t1", Session: "s1"}, func(ctx context.Context) *tool.Result {
				<-ctx.Done()
				return tool.Errorf("killed")
			})
			if err != nil {
				t.Fatal(err)
			}
			before.Close(ctx) // the process ends, and the job with it

			s := New(Limits{Tenants: []string{"t1", "t2"}}, nil, namedBackend{name: be}, nil)
			defer s.Close(ctx)
			ifRunning := "it was killed with the service, with every process it started"
			if be != "local" {
				ifRunning = "it may still be running in the session's earlier e2b sandbox, which this service can no longer reach or stop, until e2b removes that sandbox"
			}
			restarted := func(op string) string {
				return fmt.Sprintf("sandbox_%s: command %s was started by an earlier run of the sandbox service (started %s); "+
					"the service restarted at %s, after the command started, and keeps no commands across a restart. "+
					"If it was still running then, %s. Its outcome is unknown: whatever it did may have happened, and no result or output of it was kept.",
					op, old.ID, ms(before.jobs.StartedAt()), ms(s.jobs.StartedAt()), ifRunning)
			}
			untagged := jobs.NewID() // the shape job IDs had before run tags
			untaggedText := fmt.Sprintf("sandbox_status: command %s was started before the sandbox service restarted at %s: its ID has no run tag, so this run did not issue it, "+
				"and the service keeps no commands across a restart. If it was still running then, %s. Its outcome is unknown: whatever it did may have happened, and no result or output of it was kept.",
				untagged, ms(s.jobs.StartedAt()), ifRunning)
			unknown := jobs.NewID() + "_" + runTag(t, s)
			notFound := func(op string) string {
				return fmt.Sprintf("sandbox_%s: no command %s in this session: either it is not this session's, or it ended more than 1 hour ago and was forgotten (a command is kept until 1 hour after it ends)", op, unknown)
			}
			tests := []struct {
				name, tool, tenant, session string
				args                        map[string]any
				want                        string
				unknownOutcome              bool
			}{
				{"status of the earlier run's job", "sandbox_status", "t1", "s1", map[string]any{"job_id": old.ID, "wait_seconds": 1}, restarted("status"), true},
				{"cancel of the earlier run's job", "sandbox_cancel", "t1", "s1", map[string]any{"job_id": old.ID}, restarted("cancel"), true},
				{"another session: the same answer, based on the ID alone", "sandbox_status", "t2", "s9", map[string]any{"job_id": old.ID}, restarted("status"), true},
				{"an untagged ID", "sandbox_status", "t1", "s1", map[string]any{"job_id": untagged}, untaggedText, true},
				{"status of an unknown ID of this run", "sandbox_status", "t1", "s1", map[string]any{"job_id": unknown}, notFound("status"), false},
				{"cancel of an unknown ID of this run", "sandbox_cancel", "t1", "s1", map[string]any{"job_id": unknown}, notFound("cancel"), false},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					res := statusCall(t, s, tt.tool, tt.tenant, tt.session, tt.args)
					if err := res.Validate(); err != nil {
						t.Fatal(err)
					}
					if !res.IsError || res.UnknownOutcome != tt.unknownOutcome || res.HasStructured() || len(res.Content) != 1 || res.Content[0].Text != tt.want {
						t.Fatalf("got %+v\nwant is_error, unknown_outcome %v, text\n%s", res, tt.unknownOutcome, tt.want)
					}
				})
			}
		})
	}
}

// runTag returns the run tag of s's job IDs, from a job started on it.
func runTag(t *testing.T, s *Service) string {
	t.Helper()
	st, err := s.jobs.Start(jobs.Owner{Tenant: "probe", Session: "s"}, func(context.Context) *tool.Result { return tool.TextResult("x") })
	if err != nil {
		t.Fatal(err)
	}
	_, tag, ok := strings.Cut(st.ID, "_")
	if !ok || !jobs.ValidID(st.ID) {
		t.Fatalf("job ID %q has no run tag", st.ID)
	}
	return tag
}

func TestForHumans(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{time.Hour, "1 hour"},
		{2 * time.Hour, "2 hours"},
		{90 * time.Minute, "90 minutes"},
		{time.Minute, "1 minute"},
		{90 * time.Second, "1m30s"},
		{0, "0s"},
	}
	for _, tt := range tests {
		if got := forHumans(tt.d); got != tt.want {
			t.Errorf("forHumans(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// ms writes t as the job answers do: UTC with milliseconds.
func ms(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
