package sqlite

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brain-tools/suite/services/brain/internal/store"
)

// BenchmarkCallWrites measures the two writes of one tool call (CreateCall
// and FinishCall, each with its event) and the session read before them.
func BenchmarkCallWrites(b *testing.B) {
	ctx := context.Background()
	db, err := Open(filepath.Join(b.TempDir(), "brain.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	s, ev := newSession("ses_b", "t1")
	if err := db.CreateSession(ctx, s, ev); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if _, err := db.Session(ctx, "t1", "ses_b"); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		c, cev := newCall(fmt.Sprint("call_", i), "ses_b", "t1")
		if err := db.CreateCall(ctx, c, cev); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		c.Status, c.FinishedAt = store.CallSucceeded, time.Now()
		if err := db.FinishCall(ctx, c, &store.Event{Type: store.EventToolResult, SessionID: "ses_b", CallID: c.ID, Time: t0, Data: cev.Data}); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		if i == b.N-1 {
			b.ReportMetric(float64(t1.Sub(t0).Microseconds()), "read-µs")
			b.ReportMetric(float64(t2.Sub(t1).Microseconds()), "create-µs")
			b.ReportMetric(float64(t3.Sub(t2).Microseconds()), "finish-µs")
		}
	}
}

// BenchmarkCallWritesParallel is BenchmarkCallWrites from 32 goroutines:
// group commit shares transactions between them. Call IDs are random (as
// brain made them before) or time-ordered (as brain makes them now): the
// difference is the pages each commit writes.
func BenchmarkCallWritesParallel(b *testing.B) {
	for _, ids := range []struct {
		name string
		id   func(n int64) string
	}{
		{"random-ids", func(int64) string { return "call_" + rand.Text() }},
		{"ordered-ids", func(n int64) string { return fmt.Sprintf("call_%016x%s", time.Now().UnixMilli(), rand.Text()[:16]) }},
	} {
		b.Run(ids.name, func(b *testing.B) {
			ctx := context.Background()
			db, err := Open(filepath.Join(b.TempDir(), "brain.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			s, ev := newSession("ses_b", "t1")
			if err := db.CreateSession(ctx, s, ev); err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c, cev := newCall(ids.id(n.Add(1)), "ses_b", "t1")
					if err := db.CreateCall(ctx, c, cev); err != nil {
						b.Fatal(err)
					}
					c.Status, c.FinishedAt = store.CallSucceeded, time.Now()
					if err := db.FinishCall(ctx, c, &store.Event{Type: store.EventToolResult, SessionID: "ses_b", CallID: c.ID, Time: c.FinishedAt, Data: cev.Data}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(db.ops64.Load())/float64(db.batches.Load()), "writes/commit")
		})
	}
}
