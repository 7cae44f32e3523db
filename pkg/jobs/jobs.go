// Package jobs implements the tool contract's answer for work that can
// outlast a binding's timeout_seconds: a start tool that returns a job ID at
// once, a status tool that tells the job's state and, once it has ended, its
// result, and a cancel tool that stops it.
//
// Job IDs carry 128 random bits from crypto/rand, so they cannot be guessed,
// and every job belongs to the tenant that started it: a status or cancel
// call from another tenant gets ErrNotFound, the same answer as for an ID
// that never existed, so IDs of other tenants cannot even be confirmed.
//
// Manager runs jobs as goroutines in memory. A service whose jobs must
// survive a restart (the approvals of the local service) keeps them in its
// own store and implements Backend; Tools builds the status and cancel tools
// over either.
//
// Source: the contract's "Handle errors, timeouts, and long jobs" section
// (shared/seeds/000_*.txt) and the ToolCall lifecycle of the peer platform
// (shared/seeds/001_*.txt).
package jobs

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"time"

	"github.com/brain-tools/suite/pkg/tool"
)

// State is a job's place in its lifecycle. A job starts running and ends in
// exactly one of the three final states, which never change again.
type State string

// The states of a job.
const (
	// Running: started and not yet ended.
	Running State = "running"
	// Succeeded: ended with a result whose is_error is false.
	Succeeded State = "succeeded"
	// Failed: ended with a result whose is_error is true.
	Failed State = "failed"
	// Cancelled: stopped by a cancel call or by its owner shutting down.
	Cancelled State = "cancelled"
)

// Final reports whether s is one of the ending states.
func (s State) Final() bool { return s == Succeeded || s == Failed || s == Cancelled }

// Status is a job as the status and cancel tools report it. Result is nil
// while the job runs and set once it has ended (also for a cancelled job,
// whose result says so). FinishedAt is the zero time while it runs.
type Status struct {
	ID         string
	State      State
	CreatedAt  time.Time
	FinishedAt time.Time
	Result     *tool.Result
}

// ErrNotFound is the answer for a job ID that does not exist, has been
// forgotten after its retention, or belongs to another tenant. The three
// cases are deliberately indistinguishable.
var ErrNotFound = errors.New("job not found")

// ErrTooManyJobs is returned by Manager.Start when the tenant already has
// the most running jobs its Manager allows.
var ErrTooManyJobs = errors.New("too many running jobs for this tenant")

// Backend is what the status and cancel tools need from a job store. Every
// lookup is scoped to the tenant: an ID of another tenant is ErrNotFound.
type Backend interface {
	// Status returns the job's state. With wait > 0 it first waits up to
	// wait for a running job to end (returning early when ctx ends, which
	// is not an error: the state at that moment is returned).
	Status(ctx context.Context, tenant, id string, wait time.Duration) (Status, error)
	// Cancel stops a running job and returns its state afterwards. Cancelling
	// a job that has already ended changes nothing and is not an error.
	Cancel(ctx context.Context, tenant, id string) (Status, error)
}

// IDBits is the number of random bits in an ID from NewID.
const IDBits = 128

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a new unguessable ID: 128 bits from crypto/rand in
// lower-case base32 without padding (26 characters of a-z and 2-7), safe in
// URLs, file names and HTML without escaping.
func NewID() string {
	var b [IDBits / 8]byte
	// crypto/rand.Read never returns an error since Go 1.24; it crashes the
	// program instead of returning predictable bytes.
	_, _ = rand.Read(b[:])
	return idEncoding.EncodeToString(b[:])
}

// ValidID reports whether s has the shape NewID produces. Callers use it to
// refuse malformed IDs early with a clear message; a well-formed ID that does
// not exist is still ErrNotFound.
func ValidID(s string) bool {
	if len(s) != idEncoding.EncodedLen(IDBits/8) {
		return false
	}
	_, err := idEncoding.DecodeString(s)
	return err == nil
}
