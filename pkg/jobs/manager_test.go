package jobs

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/brain-tools/suite/pkg/tool"
)

func TestNewIDShapeAndUniqueness(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id := NewID()
		if !ValidID(id) {
			t.Fatalf("NewID() = %q, not a valid ID", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
	}
	// 26 base32 characters carry 130 bits, of which 128 are random.
	if got := len(NewID()); got != 26 {
		t.Fatalf("len(NewID()) = %d, want 26", got)
	}
}

func TestValidID(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close(context.Background())
	job, _ := m.Start(sess("t"), func(context.Context) *tool.Result { return tool.TextResult("x") })
	token := strings.Repeat("a", 26)
	tests := []struct {
		id   string
		want bool
	}{
		{NewID(), true}, // untagged: a token, or a job ID from before run tags
		{job.ID, true},  // a Manager's job ID
		{token + "_" + strings.Repeat("7", 9), true},
		{"", false},
		{strings.Repeat("a", 25), false},
		{strings.Repeat("a", 27), false},
		{strings.Repeat("A", 26), false}, // upper case is not what NewID writes
		{strings.Repeat("1", 26), false}, // 0, 1, 8, 9 are outside the alphabet
		{"../../../../etc/passwd/aaaa", false},
		{token + "_", false},
		{token + "_" + strings.Repeat("a", 8), false},
		{token + "_" + strings.Repeat("a", 10), false},
		{token + "_" + strings.Repeat("A", 9), false},
		{token + "_aaaaaaaa1", false},
		{token + "-" + strings.Repeat("a", 9), false},
		{token + "_" + strings.Repeat("a", 9) + "_" + strings.Repeat("a", 9), false},
		{strings.Repeat("a", 25) + "_" + strings.Repeat("a", 10), false},
		{"_" + strings.Repeat("a", 9), false},
	}
	pattern := regexp.MustCompile(IDPattern)
	for _, tt := range tests {
		if got := ValidID(tt.id); got != tt.want {
			t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.want)
		}
		// The published schema pattern agrees with ValidID.
		if got := pattern.MatchString(tt.id); got != tt.want {
			t.Errorf("IDPattern on %q = %v, want %v", tt.id, got, tt.want)
		}
	}
}

// unknownID returns a well-formed ID that m might have issued but did not.
func unknownID(m *Manager) string { return NewID() + "_" + m.tag }

func TestJobIDShape(t *testing.T) {
	m := NewManager(Options{MaxRunningPerOwner: 1000})
	defer m.Close(context.Background())
	seen := map[string]bool{}
	for range 200 {
		st, err := m.Start(sess("t"), func(context.Context) *tool.Result { return tool.TextResult("x") })
		if err != nil {
			t.Fatal(err)
		}
		token, tag, ok := strings.Cut(st.ID, "_")
		// The random part is a whole NewID token: 128 random bits.
		if len(st.ID) != 36 || !ok || len(token) != 26 || !ValidID(token) || tag != m.tag {
			t.Fatalf("job ID %q: want a 26-character token, _, and the run tag %q", st.ID, m.tag)
		}
		if seen[token] {
			t.Fatalf("job ID token repeated: %q", st.ID)
		}
		seen[token] = true
		issuer, ok := IssuerStart(st.ID)
		if !ok || !issuer.Equal(m.StartedAt()) {
			t.Fatalf("IssuerStart(%q) = %v, %v; want %v", st.ID, issuer, ok, m.StartedAt())
		}
	}
	if d := time.Since(m.StartedAt()); d < -time.Second || d > time.Minute {
		t.Fatalf("StartedAt %v is not about now", m.StartedAt())
	}
}

func TestIssuerStart(t *testing.T) {
	token := NewID()
	tests := []struct {
		name   string
		id     string
		want   time.Time
		wantOK bool
	}{
		{"epoch", token + "_aaaaaaaaa", time.UnixMilli(0), true},
		{"one ms", token + "_aaaaaaaab", time.UnixMilli(1), true},
		{"last tag", token + "_777777777", time.UnixMilli(1<<45 - 1), true},
		{"a date", token + "_" + encodeTag(time.Date(2026, 3, 4, 5, 6, 7, 8e6, time.UTC).UnixMilli()), time.Date(2026, 3, 4, 5, 6, 7, 8e6, time.UTC), true},
		{"the example of NewID's doc", "qlc2ckkmk5gh64ngwthcixlysq_bts3t2nms", time.Date(2026, 3, 4, 5, 6, 7, 890e6, time.UTC), true},
		{"untagged", token, time.Time{}, false},
		{"malformed", token + "_aaaa", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := IssuerStart(tt.id)
			if ok != tt.wantOK || !got.Equal(tt.want) {
				t.Fatalf("IssuerStart(%q) = %v, %v; want %v, %v", tt.id, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestRunTagsDistinctWithinAProcess(t *testing.T) {
	// Managers made in one millisecond still get distinct tags, so a test
	// (or a service that remakes its Manager) never mistakes one for another.
	var prev *Manager
	tags := map[string]bool{}
	for range 100 {
		m := NewManager(Options{})
		m.Close(context.Background())
		if tags[m.tag] {
			t.Fatalf("run tag %q repeated", m.tag)
		}
		tags[m.tag] = true
		if prev != nil && !prev.StartedAt().Before(m.StartedAt()) {
			t.Fatalf("StartedAt %v, then %v", prev.StartedAt(), m.StartedAt())
		}
		prev = m
	}
}

// TestStatusAcrossInstances simulates a restart with a second Manager: the
// jobs of the first are answered with an *InstanceError, unknown IDs of its
// own with ErrNotFound.
func TestStatusAcrossInstances(t *testing.T) {
	ctx := context.Background()
	before := NewManager(Options{})
	stopped := make(chan struct{})
	old, err := before.Start(sess("alpha"), func(ctx context.Context) *tool.Result { <-ctx.Done(); close(stopped); return nil })
	if err != nil {
		t.Fatal(err)
	}
	before.Close(ctx) // the process ends, and its jobs with it
	<-stopped
	m := NewManager(Options{})
	defer m.Close(ctx)
	later := NewManager(Options{}) // as if another process started after m
	defer later.Close(ctx)
	mine, _ := m.Start(sess("alpha"), func(context.Context) *tool.Result { return tool.TextResult("x") })
	untagged := NewID()

	tests := []struct {
		name      string
		tenant    string
		id        string
		wantErr   error
		issuer    time.Time // for an *InstanceError
		restarted bool
	}{
		{"job of the previous run", "alpha", old.ID, ErrOtherInstance, before.StartedAt(), true},
		{"job of the previous run, asked by another tenant", "beta", old.ID, ErrOtherInstance, before.StartedAt(), true},
		{"untagged ID: from before run tags", "alpha", untagged, ErrOtherInstance, time.Time{}, true},
		{"tag of a later run", "alpha", unknownID(later), ErrOtherInstance, later.StartedAt(), false},
		{"unknown ID of this run", "alpha", unknownID(m), ErrNotFound, time.Time{}, false},
		{"this run's job, another tenant", "beta", mine.ID, ErrNotFound, time.Time{}, false},
		{"malformed", "alpha", "nope", ErrNotFound, time.Time{}, false},
		// Tags no run issued: before run tags existed, or far ahead.
		{"tag of 1970", "alpha", untagged + "_" + encodeTag(0), ErrNotFound, time.Time{}, false},
		{"tag from before run tags", "alpha", untagged + "_" + encodeTag(firstTagged.UnixMilli()-1), ErrNotFound, time.Time{}, false},
		{"tag of the year 2869", "alpha", untagged + "_zzzzzzzzz", ErrNotFound, time.Time{}, false},
		{"tag two hours ahead", "alpha", untagged + "_" + encodeTag(time.Now().Add(2*time.Hour).UnixMilli()), ErrNotFound, time.Time{}, false},
		{"tag of the first tagged run", "alpha", untagged + "_" + encodeTag(firstTagged.UnixMilli()), ErrOtherInstance, firstTagged, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for op, call := range map[string]func() (Status, error){
				"status": func() (Status, error) { return m.Status(ctx, sess(tt.tenant), tt.id, 0) },
				"cancel": func() (Status, error) { return m.Cancel(ctx, sess(tt.tenant), tt.id) },
			} {
				_, err := call()
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("%s: err = %v, want %v", op, err, tt.wantErr)
				}
				var ie *InstanceError
				if errors.As(err, &ie) != errors.Is(tt.wantErr, ErrOtherInstance) {
					t.Fatalf("%s: err %T, want *InstanceError: %v", op, err, errors.Is(tt.wantErr, ErrOtherInstance))
				}
				if ie == nil {
					continue
				}
				if errors.Is(err, ErrNotFound) {
					t.Fatalf("%s: an *InstanceError is also ErrNotFound", op)
				}
				if ie.ID != tt.id || !ie.IssuerStart.Equal(tt.issuer) || !ie.Start.Equal(m.StartedAt()) || ie.Restarted() != tt.restarted {
					t.Fatalf("%s: %+v (restarted %v); want issuer %v, start %v, restarted %v", op, ie, ie.Restarted(), tt.issuer, m.StartedAt(), tt.restarted)
				}
			}
		})
	}
}

func TestInstanceErrorExplain(t *testing.T) {
	start := time.Date(2026, 3, 4, 5, 6, 7, 890e6, time.UTC)
	tests := []struct {
		name string
		err  InstanceError
		want string
	}{
		{"earlier run", InstanceError{ID: "X", IssuerStart: start.Add(-time.Hour), Start: start},
			"command X was started by an earlier run of the sandbox service (started 2026-03-04T04:06:07.890Z); " +
				"the service restarted at 2026-03-04T05:06:07.890Z, after the command started, and keeps no commands across a restart. " +
				"If it was still running then, it was stopped with the service. " +
				"Its outcome is unknown: whatever it did may have happened, and no result or output of it was kept."},
		{"untagged", InstanceError{ID: "X", Start: start},
			"command X was started before the sandbox service restarted at 2026-03-04T05:06:07.890Z: its ID has no run tag, so this run did not issue it, " +
				"and the service keeps no commands across a restart. If it was still running then, it was stopped with the service. " +
				"Its outcome is unknown: whatever it did may have happened, and no result or output of it was kept."},
		{"later run", InstanceError{ID: "X", IssuerStart: start.Add(time.Second), Start: start},
			"command X was started by another run of the sandbox service (started 2026-03-04T05:06:08.890Z), not by this one (started 2026-03-04T05:06:07.890Z), which cannot see or stop it. " +
				"Its outcome is unknown: whatever it did may have happened, and no result or output of it was kept."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Explain("command", "the sandbox service", "it was stopped with the service"); got != tt.want {
				t.Fatalf("Explain =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestStatusReportsResult(t *testing.T) {
	tests := []struct {
		name  string
		fn    Func
		state State
		text  string
	}{
		{"succeeded", func(context.Context) *tool.Result { return tool.TextResult("done") }, Succeeded, "done"},
		{"failed", func(context.Context) *tool.Result { return tool.Errorf("broke") }, Failed, "broke"},
		{"nil result", func(context.Context) *tool.Result { return nil }, Failed, "ended without a result"},
		{"panic", func(context.Context) *tool.Result { panic("boom") }, Failed, "panicked: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewManager(Options{})
			defer m.Close(context.Background())
			st, err := m.Start(sess("t1"), tt.fn)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != Running || st.Result != nil || !st.FinishedAt.IsZero() {
				t.Fatalf("Start = %+v, want running without result", st)
			}
			got, err := m.Status(context.Background(), sess("t1"), st.ID, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tt.state {
				t.Fatalf("state = %s, want %s", got.State, tt.state)
			}
			if got.Result == nil || !strings.Contains(got.Result.Content[0].Text, tt.text) {
				t.Fatalf("result = %+v, want text containing %q", got.Result, tt.text)
			}
			if got.FinishedAt.IsZero() || got.FinishedAt.Before(got.CreatedAt) {
				t.Fatalf("finished_at %v, created_at %v", got.FinishedAt, got.CreatedAt)
			}
		})
	}
}

// sess is the owner of session "s" of tenant.
func sess(tenant string) Owner { return Owner{Tenant: tenant, Session: "s"} }

// TestOwnerScoping is the rule of the contract's "Authorize with tenant_id
// and session_id": a job is found only by the tenant and session that
// started it; another session of the same tenant, another tenant, IDs that
// differ only in where a NUL byte splits tenant and session, and a handle
// owner all get ErrNotFound, and their cancel does not stop the job.
func TestOwnerScoping(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close(context.Background())
	release := make(chan struct{})
	cancelled := make(chan struct{})
	mine := Owner{Tenant: "alpha", Session: "s1"}
	st, err := m.Start(mine, func(ctx context.Context) *tool.Result {
		select {
		case <-release:
			return tool.TextResult("ok")
		case <-ctx.Done():
			close(cancelled)
			return tool.Errorf("stopped")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, other := range []Owner{
		{Tenant: "alpha", Session: "s2"},
		{Tenant: "beta", Session: "s1"},
		{Tenant: "alpha\x00s1", Session: ""},
		{Tenant: "alpha", Session: "s1\x00"},
		HandleOwner("alpha", "s1"),
	} {
		if _, err := m.Status(ctx, other, st.ID, 0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("status as %+v: err = %v, want ErrNotFound", other, err)
		}
		if _, err := m.Cancel(ctx, other, st.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("cancel as %+v: err = %v, want ErrNotFound", other, err)
		}
	}
	if _, err := m.Status(ctx, mine, unknownID(m), 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown ID: err = %v, want ErrNotFound", err)
	}
	select {
	case <-cancelled:
		t.Fatal("another owner's cancel stopped the job")
	default:
	}
	got, err := m.Status(ctx, mine, st.ID, 0)
	if err != nil || got.State != Running {
		t.Fatalf("owner's status = %+v, %v; want running", got, err)
	}
	close(release)
	got, err = m.Status(ctx, mine, st.ID, 5*time.Second)
	if err != nil || got.State != Succeeded {
		t.Fatalf("owner's status = %+v, %v; want succeeded", got, err)
	}
}

// TestHandleOwner is the deliberate exception: a job started under a
// handle is found by every call of its tenant that presents the handle,
// and by no other tenant.
func TestHandleOwner(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close(context.Background())
	h := NewID()
	st, err := m.Start(HandleOwner("alpha", h), func(ctx context.Context) *tool.Result { <-ctx.Done(); return nil })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.Status(ctx, HandleOwner("beta", h), st.ID, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another tenant with the handle: err = %v, want ErrNotFound", err)
	}
	if _, err := m.Status(ctx, Owner{Tenant: "alpha", Session: h}, st.ID, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a session named like the handle: err = %v, want ErrNotFound", err)
	}
	got, err := m.Cancel(ctx, HandleOwner("alpha", h), st.ID)
	if err != nil || got.State != Cancelled {
		t.Fatalf("cancel with the handle = %+v, %v; want cancelled", got, err)
	}
}

func TestStartRefusesAnOwnerWithoutASession(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close(context.Background())
	fn := func(context.Context) *tool.Result { return tool.TextResult("x") }
	for _, o := range []Owner{{}, {Tenant: "t"}, {Session: "s"}, {Tenant: "t", Session: "s", Handle: "h"}} {
		if _, err := m.Start(o, fn); err == nil {
			t.Fatalf("Start(%+v) succeeded", o)
		}
	}
}

func TestCancelPropagatesContext(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close(context.Background())
	stopped := make(chan error, 1)
	st, err := m.Start(sess("t"), func(ctx context.Context) *tool.Result {
		<-ctx.Done()
		stopped <- ctx.Err()
		return tool.Errorf("killed after 3 of 10 steps")
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Cancel(context.Background(), sess("t"), st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cerr := <-stopped; !errors.Is(cerr, context.Canceled) {
		t.Fatalf("job ctx err = %v, want context.Canceled", cerr)
	}
	if got.State != Cancelled {
		t.Fatalf("state = %s, want cancelled", got.State)
	}
	// The Func returned within CancelWait, so its own account is reported.
	if got.Result == nil || !got.Result.IsError || got.Result.Content[0].Text != "killed after 3 of 10 steps" {
		t.Fatalf("result = %+v, want the job's own is_error result", got.Result)
	}
	// Cancelling again changes nothing.
	again, err := m.Cancel(context.Background(), sess("t"), st.ID)
	if err != nil || again.State != Cancelled || !again.FinishedAt.Equal(got.FinishedAt) {
		t.Fatalf("second cancel = %+v, %v", again, err)
	}
}

func TestCancelDoesNotWaitForeverForAStuckJob(t *testing.T) {
	m := NewManager(Options{CancelWait: 50 * time.Millisecond})
	release := make(chan struct{})
	defer func() { close(release); m.Close(context.Background()) }()
	st, _ := m.Start(sess("t"), func(context.Context) *tool.Result {
		<-release // ignores its context
		return tool.TextResult("late")
	})
	got, err := m.Cancel(context.Background(), sess("t"), st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != Cancelled || got.Result == nil || !got.Result.IsError || !strings.Contains(got.Result.Content[0].Text, "cancelled") {
		t.Fatalf("cancel of a stuck job = %+v", got)
	}
}

func TestCancelEndedJobIsNoop(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close(context.Background())
	st, _ := m.Start(sess("t"), func(context.Context) *tool.Result { return tool.TextResult("fine") })
	if _, err := m.Status(context.Background(), sess("t"), st.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := m.Cancel(context.Background(), sess("t"), st.ID)
	if err != nil || got.State != Succeeded || got.Result.Content[0].Text != "fine" {
		t.Fatalf("cancel after success = %+v, %v", got, err)
	}
}

func TestStatusWaitEndsWithContext(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close(context.Background())
	st, _ := m.Start(sess("t"), func(ctx context.Context) *tool.Result { <-ctx.Done(); return nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := m.Status(ctx, sess("t"), st.ID, time.Hour)
	if err != nil || got.State != Running {
		t.Fatalf("status with a done ctx = %+v, %v; want running at once", got, err)
	}
	// A short wait on a running job returns the running state.
	got, err = m.Status(context.Background(), sess("t"), st.ID, 10*time.Millisecond)
	if err != nil || got.State != Running {
		t.Fatalf("status after a short wait = %+v, %v", got, err)
	}
}

func TestMaxRunningPerOwner(t *testing.T) {
	m := NewManager(Options{MaxRunningPerOwner: 2})
	defer m.Close(context.Background())
	block := func(ctx context.Context) *tool.Result { <-ctx.Done(); return nil }
	a, _ := m.Start(sess("t"), block)
	if _, err := m.Start(sess("t"), block); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(sess("t"), block); !errors.Is(err, ErrTooManyJobs) {
		t.Fatalf("third job: err = %v, want ErrTooManyJobs", err)
	}
	// Other sessions have their own cap.
	if _, err := m.Start(Owner{Tenant: "t", Session: "other"}, block); err != nil {
		t.Fatalf("other session: %v", err)
	}
	// An ended job frees its slot.
	if _, err := m.Cancel(context.Background(), sess("t"), a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(sess("t"), block); err != nil {
		t.Fatalf("after cancel: %v", err)
	}
}

func TestRetentionForgetsEndedJobs(t *testing.T) {
	m := NewManager(Options{Retention: time.Minute})
	defer m.Close(context.Background())
	now := time.Now()
	m.now = func() time.Time { return now }
	st, _ := m.Start(sess("t"), func(context.Context) *tool.Result { return tool.TextResult("x") })
	if _, err := m.Status(context.Background(), sess("t"), st.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	now = now.Add(2 * time.Minute)
	m.mu.Unlock()
	if _, err := m.Status(context.Background(), sess("t"), st.ID, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after retention: err = %v, want ErrNotFound", err)
	}
}

func TestCloseCancelsRunningJobs(t *testing.T) {
	m := NewManager(Options{})
	st, _ := m.Start(sess("t"), func(ctx context.Context) *tool.Result { <-ctx.Done(); return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := m.Status(context.Background(), sess("t"), st.ID, 0)
	if err != nil || got.State != Cancelled {
		t.Fatalf("after close = %+v, %v; want cancelled", got, err)
	}
	if _, err := m.Start(sess("t"), func(context.Context) *tool.Result { return nil }); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}
