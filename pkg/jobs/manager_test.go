package jobs

import (
	"context"
	"errors"
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
	tests := []struct {
		id   string
		want bool
	}{
		{NewID(), true},
		{"", false},
		{strings.Repeat("a", 25), false},
		{strings.Repeat("a", 27), false},
		{strings.Repeat("A", 26), false}, // upper case is not what NewID writes
		{strings.Repeat("1", 26), false}, // 0, 1, 8, 9 are outside the alphabet
		{"../../../../etc/passwd/aaaa", false},
	}
	for _, tt := range tests {
		if got := ValidID(tt.id); got != tt.want {
			t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.want)
		}
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
			st, err := m.Start("t1", tt.fn)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != Running || st.Result != nil || !st.FinishedAt.IsZero() {
				t.Fatalf("Start = %+v, want running without result", st)
			}
			got, err := m.Status(context.Background(), "t1", st.ID, 5*time.Second)
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

func TestTenantScoping(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close(context.Background())
	release := make(chan struct{})
	cancelled := make(chan struct{})
	st, err := m.Start("alpha", func(ctx context.Context) *tool.Result {
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
	if _, err := m.Status(ctx, "beta", st.ID, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other tenant's status: err = %v, want ErrNotFound", err)
	}
	if _, err := m.Cancel(ctx, "beta", st.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other tenant's cancel: err = %v, want ErrNotFound", err)
	}
	if _, err := m.Status(ctx, "alpha", NewID(), 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown ID: err = %v, want ErrNotFound", err)
	}
	select {
	case <-cancelled:
		t.Fatal("another tenant's cancel stopped the job")
	default:
	}
	got, err := m.Status(ctx, "alpha", st.ID, 0)
	if err != nil || got.State != Running {
		t.Fatalf("owner's status = %+v, %v; want running", got, err)
	}
	close(release)
	got, err = m.Status(ctx, "alpha", st.ID, 5*time.Second)
	if err != nil || got.State != Succeeded {
		t.Fatalf("owner's status = %+v, %v; want succeeded", got, err)
	}
}

func TestCancelPropagatesContext(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close(context.Background())
	stopped := make(chan error, 1)
	st, err := m.Start("t", func(ctx context.Context) *tool.Result {
		<-ctx.Done()
		stopped <- ctx.Err()
		return tool.Errorf("killed after 3 of 10 steps")
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Cancel(context.Background(), "t", st.ID)
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
	again, err := m.Cancel(context.Background(), "t", st.ID)
	if err != nil || again.State != Cancelled || !again.FinishedAt.Equal(got.FinishedAt) {
		t.Fatalf("second cancel = %+v, %v", again, err)
	}
}

func TestCancelDoesNotWaitForeverForAStuckJob(t *testing.T) {
	m := NewManager(Options{CancelWait: 50 * time.Millisecond})
	release := make(chan struct{})
	defer func() { close(release); m.Close(context.Background()) }()
	st, _ := m.Start("t", func(context.Context) *tool.Result {
		<-release // ignores its context
		return tool.TextResult("late")
	})
	got, err := m.Cancel(context.Background(), "t", st.ID)
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
	st, _ := m.Start("t", func(context.Context) *tool.Result { return tool.TextResult("fine") })
	if _, err := m.Status(context.Background(), "t", st.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := m.Cancel(context.Background(), "t", st.ID)
	if err != nil || got.State != Succeeded || got.Result.Content[0].Text != "fine" {
		t.Fatalf("cancel after success = %+v, %v", got, err)
	}
}

func TestStatusWaitEndsWithContext(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close(context.Background())
	st, _ := m.Start("t", func(ctx context.Context) *tool.Result { <-ctx.Done(); return nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := m.Status(ctx, "t", st.ID, time.Hour)
	if err != nil || got.State != Running {
		t.Fatalf("status with a done ctx = %+v, %v; want running at once", got, err)
	}
	// A short wait on a running job returns the running state.
	got, err = m.Status(context.Background(), "t", st.ID, 10*time.Millisecond)
	if err != nil || got.State != Running {
		t.Fatalf("status after a short wait = %+v, %v", got, err)
	}
}

func TestMaxRunningPerTenant(t *testing.T) {
	m := NewManager(Options{MaxRunningPerTenant: 2})
	defer m.Close(context.Background())
	block := func(ctx context.Context) *tool.Result { <-ctx.Done(); return nil }
	a, _ := m.Start("t", block)
	if _, err := m.Start("t", block); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start("t", block); !errors.Is(err, ErrTooManyJobs) {
		t.Fatalf("third job: err = %v, want ErrTooManyJobs", err)
	}
	// Other tenants have their own cap.
	if _, err := m.Start("u", block); err != nil {
		t.Fatalf("other tenant: %v", err)
	}
	// An ended job frees its slot.
	if _, err := m.Cancel(context.Background(), "t", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start("t", block); err != nil {
		t.Fatalf("after cancel: %v", err)
	}
}

func TestRetentionForgetsEndedJobs(t *testing.T) {
	m := NewManager(Options{Retention: time.Minute})
	defer m.Close(context.Background())
	now := time.Now()
	m.now = func() time.Time { return now }
	st, _ := m.Start("t", func(context.Context) *tool.Result { return tool.TextResult("x") })
	if _, err := m.Status(context.Background(), "t", st.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	now = now.Add(2 * time.Minute)
	m.mu.Unlock()
	if _, err := m.Status(context.Background(), "t", st.ID, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after retention: err = %v, want ErrNotFound", err)
	}
}

func TestCloseCancelsRunningJobs(t *testing.T) {
	m := NewManager(Options{})
	st, _ := m.Start("t", func(ctx context.Context) *tool.Result { <-ctx.Done(); return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := m.Status(context.Background(), "t", st.ID, 0)
	if err != nil || got.State != Cancelled {
		t.Fatalf("after close = %+v, %v; want cancelled", got, err)
	}
	if _, err := m.Start("t", func(context.Context) *tool.Result { return nil }); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}
